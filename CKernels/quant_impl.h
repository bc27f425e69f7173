/*
 * quant_impl.h — private to CKernels: the packed layout and the per-ISA
 * kernel entry points that quant_dispatch.c chooses between.
 *
 * Packed layout. Rows are taken sixteen at a time (a *group*; the last group
 * is padded with zero rows). A group's K/32 *group-blocks* follow each other;
 * one group-block holds block b of its sixteen rows:
 *
 *   d[16]   fp16 scales, row order                         32 bytes
 *   m[16]   fp16 minimums, row order (Q4_1 only)           32 bytes
 *   quants  Q4: 4 chunks of 64 bytes, Q8: 8 chunks of 64 bytes
 *
 * Chunk c, byte 4·r + t (row r, t = 0…3): for Q4 it is the GGUF byte
 * qs[4c + t] of row r — low nibble element 4c + t, high nibble element
 * 16 + 4c + t; for Q8 it is element 4c + t of row r plus 128 (as uint8).
 * So a 32-bit lane r of a 64-byte chunk holds four consecutive elements of
 * row r, and one broadcast of four activation bytes feeds all sixteen rows.
 */
#ifndef EK_QUANT_IMPL_H
#define EK_QUANT_IMPL_H

#include "ek_quant.h"

#define EK_GROUP_SCALE_BYTES(format) ((format) == EK_FORMAT_Q4_1 ? 64 : 32)
#define EK_GROUP_QUANT_BYTES(format) ((format) == EK_FORMAT_Q8_0 ? 512 : 256)
#define EK_GROUP_BLOCK_BYTES(format) (EK_GROUP_SCALE_BYTES(format) + EK_GROUP_QUANT_BYTES(format))

/* One ISA's matrix kernel over packed weights; arguments already validated. */
typedef void (*ek_gemm_kernel)(const uint8_t *packed, int64_t blocks, const ek_block_q8_act *act, int64_t m,
                               float *y, int64_t ldy, int64_t row_begin, int64_t row_end);
/* One ISA's activation quantizer for one row (`q8_1`: fill s for Q4_1 weights). */
typedef void (*ek_quantize_act_kernel)(const float *x, int64_t blocks, ek_block_q8_act *act, bool q8_1);
/* One ISA's activation quantizer for one row at one scale (ek_quantize_activations_row_scaled): each block's qs and
   sum; returns the row's d (the dispatcher fills d, s and row_sum). */
typedef float (*ek_quantize_act_row_scaled_kernel)(const float *x, int64_t blocks, const float *column_scales,
                                                   ek_block_q8_act *act);
/* One ISA's row quantizer / dequantizer for a GGUF format. */
typedef void (*ek_quantize_row_kernel)(const float *x, void *blocks, int64_t nblocks);
typedef void (*ek_dequantize_row_kernel)(const void *blocks, float *y, int64_t nblocks);

/* The mask of packed group g's rows inside the output range [row_begin, row_end): bit r for row g·16 + r. */
static inline uint16_t ek_group_mask(int64_t g, int64_t row_begin, int64_t row_end) {
    const int64_t first = g * EK_PACK_ROWS;
    const int64_t lo = row_begin > first ? row_begin - first : 0;
    const int64_t hi = row_end - first < EK_PACK_ROWS ? row_end - first : EK_PACK_ROWS;
    return (uint16_t)(((1u << hi) - 1u) & ~((1u << lo) - 1u));
}

/* Everything one ISA provides. Entries may be NULL where the ISA falls back to the reference. */
typedef struct ek_isa_kernels {
    ek_gemm_kernel gemm[3];                 /* indexed by ek_format */
    ek_gemm_kernel gemm_q8_0_seven;         /* Q8_0 whose values all lie in [−64, 63], where that is faster; or NULL */
    /* Q8_0 with one scale per weight row and per activation row (EK_PACKED_Q8_ROW_SCALES): integer sums over all of K,
       one scaling per output; [0] any values, [1] seven-bit ones (NULL: [0] takes them). NULL: the per-block kernels. */
    ek_gemm_kernel gemm_q8_0_row_scaled[2];
    ek_quantize_act_kernel quantize_act;
    ek_quantize_act_row_scaled_kernel quantize_act_row_scaled; /* NULL: the portable one */
    ek_quantize_row_kernel quantize_row[3]; /* indexed by ek_format */
    ek_quantize_row_kernel quantize_row_q8_1;
    ek_dequantize_row_kernel dequantize_row[3];
    uint64_t (*read_stream)(const void *data, size_t bytes);
} ek_isa_kernels;

extern const ek_isa_kernels ek_kernels_scalar;
#if defined(__x86_64__)
extern const ek_isa_kernels ek_kernels_avx512;
extern const ek_isa_kernels ek_kernels_avx512_amx;
extern const ek_isa_kernels ek_kernels_avx512_novnni;
/* Packed Q8_0 products on AMX tiles (x86_amx.c), per block and row-scaled: results equal the AVX-512 kernels'. */
void ek_gemm_q8_0_amx(const uint8_t *packed, int64_t blocks, const ek_block_q8_act *act, int64_t m, float *y,
                      int64_t ldy, int64_t row_begin, int64_t row_end);
void ek_gemm_q8_0_row_scaled_amx(const uint8_t *packed, int64_t blocks, const ek_block_q8_act *act, int64_t m,
                                 float *y, int64_t ldy, int64_t row_begin, int64_t row_end);
extern const ek_isa_kernels ek_kernels_avx2;
extern const ek_isa_kernels ek_kernels_avx2_plain;
#endif
#if defined(__aarch64__)
extern const ek_isa_kernels ek_kernels_neon;
#endif

/* Scalar kernels over the packed layout and the reference quantizers per block count. */
void ek_quantize_act_scalar(const float *x, int64_t blocks, ek_block_q8_act *act, bool q8_1);
float ek_quantize_act_row_scaled_scalar(const float *x, int64_t blocks, const float *column_scales, ek_block_q8_act *act);

/* Most blocks a row-scaled product sums in int32: starting from −128·Σa and adding (w + 128)·a, a sum moves at most
   (128 + 255)·127·32 a block, below 2³¹ up to 1,380 blocks; K up to 32,768 takes the row-scaled kernels. */
#define EK_ROW_SCALED_MAX_BLOCKS 1024

/* The reference dequantizer of the formats without a packed layout (dequant_ref.c); arguments validated. */
ek_status ek_dequantize_row_other_ref(ek_format format, const void *blocks, float *y, int64_t k);

#endif /* EK_QUANT_IMPL_H */
