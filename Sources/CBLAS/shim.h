/*
 * CBLAS shim: OpenBLAS's CBLAS interface and LAPACKE, as Debian ships them.
 * Debian's OpenBLAS is built without LAPACKE (its config says NO_LAPACKE),
 * so LAPACKE_* comes from liblapacke, linked next to openblas in the module map.
 */
#include <cblas.h>
#include <lapacke.h>
