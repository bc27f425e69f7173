/*
 * rows_impl.h — private to CKernels: the decoded form of a weight block the
 * row oracle works on, and the per-ISA row-kernel tables rows_dispatch.c
 * chooses between.
 */
#ifndef EK_ROWS_IMPL_H
#define EK_ROWS_IMPL_H

#include "ek_rows.h"

/* A block as small integers: value e = d·scale[s]·q[e] − dmin·min[s] (+ offset_m for Q4_1/Q5_1),
   s = e / sub_size. */
typedef struct ek_decoded_block {
    float d, dmin, offset_m;
    int sub_size;        /* 16 or 32 */
    int32_t scale[16];
    int32_t min[16];
    int8_t q[EK_SUPER_BLOCK];
} ek_decoded_block;

void ek_decode_block(ek_format format, const void *block, ek_decoded_block *out);
float ek_row_dot_ref(ek_format format, const uint8_t *w, int64_t blocks, const void *act);
void ek_quantize_act_q8_k_scalar(const float *x, int64_t blocks, ek_block_q8_k *act);
void ek_gemm_rows_scalar(ek_format format, const uint8_t *w, size_t row_bytes, int64_t blocks, const void *act,
                         size_t act_row_bytes, int64_t m, float *y, int64_t ldy, int64_t row_begin, int64_t row_end);
void ek_gemm_half_scalar(bool bf16, const uint16_t *w, int64_t k, const float *x, int64_t m, float *y, int64_t ldy,
                         int64_t row_begin, int64_t row_end);
void ek_gemm_f32_scalar(const float *w, int64_t k, const float *x, int64_t m, float *y, int64_t ldy, int64_t row_begin,
                        int64_t row_end);

/* One ISA's row kernel for one format; arguments validated, m ≥ 1, rows non-empty. */
typedef void (*ek_row_kernel)(const uint8_t *w, size_t row_bytes, int64_t blocks, const void *act, size_t act_row_bytes,
                              int64_t m, float *y, int64_t ldy, int64_t row_begin, int64_t row_end);
typedef void (*ek_half_kernel)(bool bf16, const uint16_t *w, int64_t k, const float *x, int64_t m, float *y, int64_t ldy,
                               int64_t row_begin, int64_t row_end);
typedef void (*ek_f32_kernel)(const float *w, int64_t k, const float *x, int64_t m, float *y, int64_t ldy,
                              int64_t row_begin, int64_t row_end);

/* Up to this many activation rows a product is a decode step's: the row kernels prefetch the weights ahead of
   themselves (x86_rows_body.h), and AMD cores take `decode_amd`. */
#define EK_ROWS_DECODE_ROWS 16

/* What one ISA provides; NULL entries run the scalar oracle. */
typedef struct ek_row_kernels {
    ek_row_kernel gemm[EK_FORMAT_COUNT];
    void (*quantize_q8_k)(const float *x, int64_t blocks, ek_block_q8_k *act);
    ek_half_kernel half;
    /* fp16/bf16 on AMD cores where it differs (a single activation row one weight row at a time for rows up to
       3 KB, as f32_one_row); NULL where half serves every vendor. */
    ek_half_kernel half_amd;
    ek_f32_kernel f32;
    /* The same product with a single activation row read one weight row at a time, front to back (every row on the
       AVX2 build, rows up to 8 KB on AVX-512): what AMD cores stream fastest (ek_gemm_f32 takes it there); f32 reads
       four rows side by side, what Intel's stream fastest. */
    ek_f32_kernel f32_one_row;
    /* A decode step's product (at most EK_ROWS_DECODE_ROWS activation rows) on AMD cores, where it differs: each
       block's lines asked for as its turn comes rather than a whole row two rows ahead (x86_rows_body.h); NULL
       entries take gemm. */
    ek_row_kernel decode_amd[EK_FORMAT_COUNT];
} ek_row_kernels;

/* The ISA's row kernels (NULL entries everywhere for the scalar ISA); NULL when this CPU or build cannot run the ISA.
   Private to CKernels and its kernel check, which also calls the vendor-specific entries the entry points choose. */
const ek_row_kernels *ek_row_kernels_for(ek_isa isa);

#if defined(__x86_64__)
extern const ek_row_kernels ek_row_kernels_avx2;
extern const ek_row_kernels ek_row_kernels_avx512;
#endif
#if defined(__aarch64__)
extern const ek_row_kernels ek_row_kernels_neon;
#endif

#endif /* EK_ROWS_IMPL_H */
