/* x86_avx512.c — the AVX-512 VNNI kernels of the packed layout, with AMX tiles for Q8_0 where the CPU has them (see
   x86_avx512_body.h and x86_amx.c). */
#if defined(__x86_64__)
#define EK_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,f16c,fma")))
#define EK_AVX512_VNNI 1
#include "x86_avx512_body.h"
#endif
