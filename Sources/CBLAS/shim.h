/*
 * CBLAS shim: OpenBLAS's CBLAS interface and LAPACKE, as Debian ships them.
 * Debian's OpenBLAS is built without LAPACKE (its config says NO_LAPACKE),
 * so LAPACKE_* comes from liblapacke, linked next to openblas in the module map.
 */
#include <cblas.h>
#include <lapacke.h>

/*
 * OpenBLAS's own exported function (not in cblas.h) that stops its thread
 * pool; a later multi-threaded call starts it again. Ember runs OpenBLAS on
 * one thread per call, and OpenBLAS's idle pool threads otherwise spin on
 * sched_yield for a while after start-up, taking a core from Ember's work.
 */
int blas_thread_shutdown_(void);
