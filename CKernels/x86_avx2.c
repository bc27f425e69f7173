/* x86_avx2.c — the AVX2 kernels with AVX-VNNI dot products (see x86_avx2_body.h). */
#if defined(__x86_64__)
#define EK_AVX2_TARGET __attribute__((target("avx2,fma,f16c,avxvnni")))
#define EK_AVX2_VNNI 1
#define EK_AVX2_NAME(x) avx2vnni_##x
#define EK_AVX2_TABLE ek_kernels_avx2
#include "x86_avx2_body.h"
#endif
