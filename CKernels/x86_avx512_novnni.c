/* x86_avx512_novnni.c — the AVX-512 kernels of the packed layout for CPUs without AVX-512 VNNI (see
   x86_avx512_body.h): int8 products by VPMADDUBSW + VPMADDWD. */
#if defined(__x86_64__)
#define EK_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,f16c,fma")))
#define EK_AVX512_VNNI 0
#include "x86_avx512_body.h"
#endif
