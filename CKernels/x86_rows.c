/* x86_rows.c — the row kernels for AVX2 machines and, compiled with their features, AVX-512 ones (see x86_rows_body.h). */
#if defined(__x86_64__)
#include <immintrin.h>
#include "transpose_avx2.h"
#define EK_ROWS_TARGET __attribute__((target("avx2,fma,f16c")))
#define EK_ROWS_NAME(x) rows_avx2_##x
#define EK_ROWS_TABLE ek_row_kernels_avx2
#include "x86_rows_body.h"
#undef EK_ROWS_TARGET
#undef EK_ROWS_NAME
#undef EK_ROWS_TABLE
#undef EK_ROWS_Q5
#undef EK_ROWS_K45
#undef EK_ROWS_SUPER_TILE_BEGIN
#undef EK_ROWS_SUPER_TILE_END
#undef EK_ROWS_DRIVER
#undef EK_ROWS_TILE_ARGS
#define EK_ROWS_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))
#define EK_ROWS_512 1
#define EK_ROWS_NAME(x) rows_avx512_##x
#define EK_ROWS_TABLE ek_row_kernels_avx512
#include "x86_rows_body.h"
#endif
