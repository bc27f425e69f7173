/*
 * interleaved_impl.h — private to CKernels: offsets inside one group-block of
 * the interleaved layout (ek_interleaved.h) and the per-ISA kernel tables.
 */
#ifndef EK_INTERLEAVED_IMPL_H
#define EK_INTERLEAVED_IMPL_H

#include "ek_interleaved.h"

/* Per-32 formats: d[8] at 0, Q4_1's and Q5_1's m[8] at 16, then the quants: Q4_x and IQ4_NL as 4 registers of
   nibbles, Q5_x as 5 registers of 5-bit values re-coded (interleave.c, encode_q5_values) — GGUF's 22 or 24 bytes
   per row, nothing added. */
#define EK_IL_Q4_0_BYTES 144
#define EK_IL_Q4_1_BYTES 160
#define EK_IL_Q4_0_QUANTS 16
#define EK_IL_Q4_1_MINS 16
#define EK_IL_Q4_1_QUANTS 32
#define EK_IL_Q5_0_BYTES 176
#define EK_IL_Q5_1_BYTES 192
#define EK_IL_IQ4_NL_BYTES 144
#define EK_IL_Q5_0_QUANTS 16
#define EK_IL_Q5_1_MINS 16
#define EK_IL_Q5_1_QUANTS 32
#define EK_IL_IQ4_NL_QUANTS 16

/* Q4_K / Q5_K: d[8] at 0, dmin[8] at 16, scales[s][r] at 32, minimums[p][r][i] at 96, then Q4_K's nibbles (register
   8p + g: sub-blocks 2p and 2p + 1, elements 4g …) or Q5_K's 5-bit values re-coded (interleave.c, encode_q5_k_values:
   five registers per g for the eight sub-blocks' elements 4g …) — GGUF's 144 or 176 bytes per row, nothing added. */
#define EK_IL_K_DMIN 16
#define EK_IL_K_SCALES 32
#define EK_IL_K_MINS 96
#define EK_IL_Q4_K_QUANTS 160
#define EK_IL_Q4_K_BYTES 1184
#define EK_IL_Q5_K_VALUES 160
#define EK_IL_Q5_K_BYTES 1440

/* Q6_K: d[8] at 0, scales[pair p][r][2] (int8, sub-blocks 2p and 2p + 1) at 16, then the quants in GGUF's 192 bytes
   per row re-coded (interleave.c, encode_q6_k_quants): "ql" (32 registers) at 144 holds quarter 0's and 1's 6-bit
   values, "qh" (16 registers) at 1168 quarter 2's, and the top two bits of each byte quarter 3's — the GGUF block's
   210 bytes per row, nothing added. */
#define EK_IL_Q6_K_SCALES 16
#define EK_IL_Q6_K_QUANTS 144
#define EK_IL_Q6_K_HIGH 1168
#define EK_IL_Q6_K_BYTES 1680

/* IQ4_XS: d[8] at 0, scales[s][r] − 32 (int8) at 16, quants at 80. */
#define EK_IL_IQ4_XS_SCALES 16
#define EK_IL_IQ4_XS_QUANTS 80
#define EK_IL_IQ4_XS_BYTES 1104

/* Bytes of one group-block of `format`; 0 when it has no interleaved layout. */
size_t ek_il_group_block_bytes(ek_format format);

/* One ISA's kernel over the interleaved layout; arguments validated, m ≥ 1, rows non-empty. */
typedef void (*ek_il_kernel)(const uint8_t *w, int64_t blocks, const void *act, size_t act_row_bytes, int64_t m,
                             float *y, int64_t ldy, int64_t row_begin, int64_t row_end);

/* What one ISA provides; NULL entries run the oracle. */
typedef struct ek_il_kernels {
    ek_il_kernel gemm[EK_FORMAT_COUNT];
    /* The decode GEMV (one activation row) on AMD cores, where it differs: the AVX-512 build's 256-bit tiles, one
       group of eight rows as one stream, which stream faster there than the 512-bit pairs (x86_interleaved_wide.h). */
    ek_il_kernel gemv_amd[EK_FORMAT_COUNT];
} ek_il_kernels;

/* The ISA's interleaved kernels (NULL entries for the scalar ISA); NULL when this CPU or build cannot run the ISA.
   Private to CKernels and its kernel check. */
const ek_il_kernels *ek_il_kernels_for(ek_isa isa);

#if defined(__x86_64__)
extern const ek_il_kernels ek_il_kernels_avx2;
extern const ek_il_kernels ek_il_kernels_avx512;
extern const ek_il_kernels ek_il_kernels_avx512_novnni;
#endif

#endif /* EK_INTERLEAVED_IMPL_H */
