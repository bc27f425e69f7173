/* x86_interleaved_avx512.c — the interleaved-layout kernels compiled for AVX-512 with VNNI (x86_interleaved_body.h;
   the 512-bit kernels of x86_interleaved_wide.h take pairs of groups). */
#if defined(__x86_64__)
#define EK_IL_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define EK_IL_VNNI 1 /* the avx512 path runs only where AVX-512 VNNI is (isa_select.c) */
#define EK_IL_NAME(x) il_avx512_##x
#define EK_IL_TILE 8 /* 32 registers: eight activation rows share each decoded weight register */
#define EK_IL_TABLE ek_il_kernels_avx512
#define EK_IL_WIDE 1 /* 512-bit registers, two groups at a time (x86_interleaved_wide.h) */
#include "x86_interleaved_body.h"
#endif
