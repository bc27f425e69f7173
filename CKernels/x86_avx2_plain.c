/* x86_avx2_plain.c — the AVX2 kernels for CPUs without AVX-VNNI (see x86_avx2_body.h). */
#if defined(__x86_64__)
#define EK_AVX2_TARGET __attribute__((target("avx2,fma,f16c")))
#define EK_AVX2_VNNI 0
#define EK_AVX2_NAME(x) avx2plain_##x
#define EK_AVX2_TABLE ek_kernels_avx2_plain
#include "x86_avx2_body.h"
#endif
