/*
 * ek_rows.h — the GGUF block layouts beyond Q8_0/Q4_0/Q4_1, and the *row
 * kernels*: matrix products that read weight rows as GGUF blocks where they
 * lie (memory-mapped from the file, nothing repacked), with activations
 * quantized per 32 (ek_block_q8_act) or per 256 (ek_block_q8_k) as the
 * weight format needs, integer dot products inside each block.
 *
 * Block layouts, as GGUF defines them (d, dmin, m: fp16; little-endian):
 *
 *   Q5_0   22 B / 32:  d, qh[4], qs[16]          (q − 16)·d, q = nibble | high bit << 4
 *   Q5_1   24 B / 32:  d, m, qh[4], qs[16]       q·d + m
 *   IQ4_NL 18 B / 32:  d, qs[16]                 d·T[nibble], T the 16-entry non-linear table
 *   Q2_K   84 B / 256: scales[16], qs[64], d, dmin   per 16: d·(s&15)·q − dmin·(s>>4), q 2 bits
 *   Q3_K  110 B / 256: hmask[32], qs[64], scales[12], d  per 16: d·(s − 32)·(q − 4·!hbit), s 6 bits
 *   Q4_K  144 B / 256: d, dmin, scales[12], qs[128]       per 32: d·s·q − dmin·m, s and m 6 bits
 *   Q5_K  176 B / 256: d, dmin, scales[12], qh[32], qs[128]  as Q4_K with a fifth bit
 *   Q6_K  210 B / 256: ql[128], qh[64], scales[16] (int8), d  per 16: d·s·(q − 32), q 6 bits
 *   IQ4_XS 136 B / 256: d, scales_h (u16), scales_l[4], qs[128]  per 32: d·(s − 32)·T[nibble]
 *
 * In every 32-element group of 16 bytes of nibbles, byte j holds element j
 * (low nibble) and element j + 16 (high nibble); the K-quants' element order
 * within a super-block is spelled out by the reference dequantizers in
 * dequant_ref.c, the oracle every other kernel is checked against.
 *
 * Every entry point validates its arguments and returns an ek_status.
 */
#ifndef EK_ROWS_H
#define EK_ROWS_H

#include "ek_quant.h"

#define EK_SUPER_BLOCK 256

typedef struct ek_block_q5_0 { ek_fp16 d; uint8_t qh[4]; uint8_t qs[16]; } ek_block_q5_0;
typedef struct ek_block_q5_1 { ek_fp16 d; ek_fp16 m; uint8_t qh[4]; uint8_t qs[16]; } ek_block_q5_1;
typedef struct ek_block_iq4_nl { ek_fp16 d; uint8_t qs[16]; } ek_block_iq4_nl;
typedef struct ek_block_q2_k { uint8_t scales[16]; uint8_t qs[64]; ek_fp16 d; ek_fp16 dmin; } ek_block_q2_k;
typedef struct ek_block_q3_k { uint8_t hmask[32]; uint8_t qs[64]; uint8_t scales[12]; ek_fp16 d; } ek_block_q3_k;
typedef struct ek_block_q4_k { ek_fp16 d; ek_fp16 dmin; uint8_t scales[12]; uint8_t qs[128]; } ek_block_q4_k;
typedef struct ek_block_q5_k { ek_fp16 d; ek_fp16 dmin; uint8_t scales[12]; uint8_t qh[32]; uint8_t qs[128]; } ek_block_q5_k;
typedef struct ek_block_q6_k { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; ek_fp16 d; } ek_block_q6_k;
typedef struct ek_block_iq4_xs { ek_fp16 d; uint16_t scales_h; uint8_t scales_l[4]; uint8_t qs[128]; } ek_block_iq4_xs;

/* The sixteen values of IQ4_NL and IQ4_XS nibbles. */
extern const int8_t ek_iq4_values[16];

/*
 * Activations per 256 for the K-quant and IQ4_XS weights: value = d·q,
 * q = nearest(x·127/amax), bsums[i] = Σ of q over elements 16i … 16i + 15.
 */
typedef struct ek_block_q8_k {
    float d;
    int32_t reserved;
    int16_t bsums[16];
    int8_t qs[EK_SUPER_BLOCK];
} ek_block_q8_k;

/* The 6-bit scale and minimum of sub-block j (0…7) of a Q4_K or Q5_K block. Sub-blocks 0–3 keep them in the
   low six bits of bytes j and j + 4; sub-blocks 4–7 keep the low four bits in byte j + 4 (scale: low nibble,
   minimum: high nibble) and the top two in the spare high bits of bytes j − 4 (scale) and j (minimum).
   Inline: every kernel calls these once per sub-block. */
static inline void ek_k4_scale_min(const uint8_t scales[12], int j, uint8_t *scale, uint8_t *min) {
    if (j < 4) {
        *scale = scales[j] & 63;
        *min = scales[j + 4] & 63;
    } else {
        *scale = (uint8_t)((scales[j + 4] & 0x0f) | ((scales[j - 4] >> 6) << 4));
        *min = (uint8_t)((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4));
    }
}

/* The 6-bit scale (0…63, before − 32) of sub-block j (0…15) of a Q3_K block: low four bits in bytes 0–7
   (sub-blocks 0–7 the low nibbles, 8–15 the high ones), top two at bit 2·(j / 4) of byte 8 + j mod 4. */
static inline int ek_q3_k_scale(const uint8_t scales[12], int j) {
    int low = j < 8 ? scales[j] & 0x0f : scales[j - 8] >> 4;
    int high = (scales[8 + j % 4] >> (2 * (j / 4))) & 3;
    return low | (high << 4);
}

/* The 6-bit scale (0…63, before − 32) of sub-block j (0…7) of an IQ4_XS block. */
static inline int ek_iq4_xs_scale(const ek_block_iq4_xs *block, int j) {
    int low = (block->scales_l[j / 2] >> (4 * (j % 2))) & 0x0f;
    int high = (block->scales_h >> (2 * j)) & 3;
    return low | (high << 4);
}

/*
 * Fills `count` blocks of `format` with pseudo-random quants from `seed`, and small positive fp16 scales
 * (and minimums) so products stay finite and sane: weights for tests and benchmarks of any format.
 */
ek_status ek_fill_random_blocks(ek_format format, uint64_t seed, void *blocks, int64_t count);

/* Whether activations for `format` weights are quantized per 256 (ek_block_q8_k) rather than per 32. */
bool ek_format_super_activations(ek_format format);

/* Bytes of quantized activations for m rows of k inputs for weights of `format`; 0 on bad arguments. */
size_t ek_row_activation_size(ek_format format, int64_t m, int64_t k);

/* Quantizes m rows of k fp32 activations (row stride k) as weights of `format` need (per 32 or per 256). */
ek_status ek_quantize_row_activations(ek_isa isa, ek_format format, const float *x, int64_t m, int64_t k,
                                      void *act, size_t act_bytes);

/*
 * Y[m×n] (row stride ldy ≥ n) = A·Wᵀ over weight rows [row_begin, row_end):
 * W the n×k matrix of GGUF blocks of `format` (row r at r·row bytes), A the
 * activations quantized by ek_quantize_row_activations. k must be a whole
 * number of blocks. The scalar ISA runs the oracle; the others their SIMD
 * code where they have it (ek_row_kernel_is_simd), the oracle otherwise.
 */
ek_status ek_gemm_rows(ek_isa isa, ek_format format, const void *w, int64_t n, int64_t k, const void *act, int64_t m,
                       float *y, int64_t ldy, int64_t row_begin, int64_t row_end);

/* Whether `isa` has its own SIMD row kernel for `format` (false: it runs the scalar oracle). */
bool ek_row_kernel_is_simd(ek_isa isa, ek_format format);

/*
 * Y[m×n] (stride ldy) = X[m×k]·Wᵀ with fp16 (bf16 = false) or bfloat16
 * (bf16 = true) weights and fp32 activations, over rows [row_begin, row_end):
 * the weights are widened to fp32 in registers, products summed in fp32.
 */
ek_status ek_gemm_half(ek_isa isa, bool bf16, const uint16_t *w, int64_t n, int64_t k, const float *x, int64_t m,
                       float *y, int64_t ldy, int64_t row_begin, int64_t row_end);

/*
 * The same with fp32 weights, read as they lie (no packing): for the fp32 route's products over a few activation
 * rows, where sgemm's packing of the weights on every call costs more than it saves. The scalar ISA (and any without
 * the kernel) runs the in-order loop; ek_gemm_f32_is_simd says which.
 */
ek_status ek_gemm_f32(ek_isa isa, const float *w, int64_t n, int64_t k, const float *x, int64_t m, float *y, int64_t ldy,
                      int64_t row_begin, int64_t row_end);
bool ek_gemm_f32_is_simd(ek_isa isa);

#endif /* EK_ROWS_H */
