/* x86_interleaved.c — the interleaved-layout kernels for AVX2 machines and, compiled with their features, AVX-512
   ones (see x86_interleaved_body.h; on AVX-512 the 512-bit kernels of x86_interleaved_wide.h take pairs of groups). */
#if defined(__x86_64__)
#define EK_IL_TARGET __attribute__((target("avx2,fma,f16c")))
#define EK_IL_NAME(x) il_avx2_##x
#define EK_IL_TABLE ek_il_kernels_avx2
#include "x86_interleaved_body.h"
#undef EK_IL_TARGET
#undef EK_IL_NAME
#undef EK_IL_TABLE
#undef EK_IL_INLINE
#undef EK_IL_TILE
#undef EK_IL_TILE_ARGS
#undef EK_IL_DRIVER
#undef EK_IL_DRIVER_HEAD
#undef EK_IL_DRIVER_SIGNATURE
#undef EK_IL_DRIVER_LOOP
#undef EK_IL_DRIVER_DECODING
#undef EK_IL_RUN_TILES
#undef EK_IL_RUN_TILES_SUMMED
#undef EK_IL_TILE_SWITCH
#undef EK_IL_SUM_ROWS
#undef EK_IL_DECODE_CHUNK
#undef EK_IL_TILE_CASE
#undef EK_IL_Q5
#undef EK_IL_PER32
#undef EK_IL_K45
#undef EK_IL_HAS_VNNI
#undef EK_IL_WIDE_OR_NOT
#define EK_IL_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define EK_IL_VNNI 1 /* the AVX-512 path runs only where AVX-512 VNNI is (isa_select.c) */
#define EK_IL_NAME(x) il_avx512_##x
#define EK_IL_TILE 8 /* 32 registers: eight activation rows share each decoded weight register */
#define EK_IL_TABLE ek_il_kernels_avx512
#define EK_IL_WIDE 1 /* 512-bit registers, two groups at a time (x86_interleaved_wide.h) */
#include "x86_interleaved_body.h"
#endif
