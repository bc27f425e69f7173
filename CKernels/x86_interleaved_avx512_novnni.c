/* x86_interleaved_avx512_novnni.c — the 512-bit interleaved-layout kernels for AVX-512 without VNNI: VPMADDUBSW +
   VPMADDWD for VPDPBUSD (wide_dot), and the AVX2 forms of the 256-bit tiles (x86_interleaved_body.h). */
#if defined(__x86_64__)
#define EK_IL_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))
#define EK_IL_NAME(x) il_avx512nv_##x
#define EK_IL_TILE 8
#define EK_IL_TABLE ek_il_kernels_avx512_novnni
#define EK_IL_WIDE 1
#include "x86_interleaved_body.h"
#endif
