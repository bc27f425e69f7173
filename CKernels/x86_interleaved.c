/* x86_interleaved.c — the interleaved-layout kernels for AVX2 machines (see x86_interleaved_body.h). The AVX-512
   builds of the same body, with and without VNNI, are x86_interleaved_avx512.c and x86_interleaved_avx512_novnni.c:
   one translation unit each, so the three compile side by side (the AVX-512 ones take ~50 s each under ASan at -O0,
   which `make test` runs). */
#if defined(__x86_64__)
#define EK_IL_TARGET __attribute__((target("avx2,fma,f16c")))
#define EK_IL_NAME(x) il_avx2_##x
#define EK_IL_TABLE ek_il_kernels_avx2
#include "x86_interleaved_body.h"
#endif
