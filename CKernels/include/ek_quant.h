/*
 * ek_quant.h — GGUF-compatible quantized block formats and the int8/int4
 * matrix kernels over them.
 *
 * On disk and in the `_ref` oracles the weights are plain GGUF blocks, so a
 * GGUF file's tensor data is used as it is. The SIMD kernels read a *packed*
 * copy made once at load (`ek_pack_weights`): rows interleaved sixteen at a
 * time so one activation load feeds sixteen rows, the sixteen scales of a
 * block stored together, and Q8_0 weights stored offset by +128 so every ISA
 * can use its unsigned×signed byte dot product. Packed bytes equal GGUF bytes
 * in number: the layout changes, the size does not.
 *
 * Every entry point returns an ek_status; none aborts on bad input.
 */
#ifndef EK_QUANT_H
#define EK_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "ek_cpu.h"
#include "ek_status.h"

#define EK_BLOCK 32           /* elements per block, every format            */
#define EK_PACK_ROWS 16       /* rows interleaved in the packed layout        */

/* IEEE 754 binary16, stored as its bits. */
typedef uint16_t ek_fp16;

/* Q8_0: value = d·q. 34 bytes. */
typedef struct ek_block_q8_0 {
    ek_fp16 d;
    int8_t qs[EK_BLOCK];
} ek_block_q8_0;

/* Q4_0: value = (q − 8)·d; qs[j] holds element j (low nibble) and j+16 (high). 18 bytes. */
typedef struct ek_block_q4_0 {
    ek_fp16 d;
    uint8_t qs[EK_BLOCK / 2];
} ek_block_q4_0;

/* Q4_1: value = q·d + m; nibbles as in Q4_0. 20 bytes. */
typedef struct ek_block_q4_1 {
    ek_fp16 d;
    ek_fp16 m;
    uint8_t qs[EK_BLOCK / 2];
} ek_block_q4_1;

/* Q8_1 (activations for Q4_1 weights): value = d·q, and s = d·Σq. 36 bytes. */
typedef struct ek_block_q8_1 {
    ek_fp16 d;
    ek_fp16 s;
    int8_t qs[EK_BLOCK];
} ek_block_q8_1;

/*
 * GGUF block formats Ember reads. The first three also have the packed
 * layout below (`ek_format_packable`); every one has the row kernels of
 * ek_rows.h, which read GGUF blocks where they lie. Block layouts: ek_rows.h.
 */
typedef enum ek_format {
    EK_FORMAT_Q8_0 = 0,
    EK_FORMAT_Q4_0 = 1,
    EK_FORMAT_Q4_1 = 2,
    EK_FORMAT_Q5_0 = 3,
    EK_FORMAT_Q5_1 = 4,
    EK_FORMAT_IQ4_NL = 5,
    EK_FORMAT_Q2_K = 6,
    EK_FORMAT_Q3_K = 7,
    EK_FORMAT_Q4_K = 8,
    EK_FORMAT_Q5_K = 9,
    EK_FORMAT_Q6_K = 10,
    EK_FORMAT_IQ4_XS = 11,
    EK_FORMAT_COUNT = 12,
} ek_format;

/* Bytes of one GGUF block of `format`; 0 for an unknown format. */
size_t ek_format_block_bytes(ek_format format);
/* Elements of one block: 32, or 256 for the K-quants and IQ4_XS; 0 for an unknown format. */
int64_t ek_format_block_elements(ek_format format);
/* Whether `format` has the packed layout and kernels (Q8_0, Q4_0, Q4_1). */
bool ek_format_packable(ek_format format);
/* The block format of GGUF tensor type `type` (0 F32 … 30 BF16); false when it is not a block format Ember reads. */
bool ek_format_from_gguf(uint32_t type, ek_format *out);
/* "q8_0", "q4_k", …, or "unknown". */
const char *ek_format_name(ek_format format);

/* fp16 ⇄ fp32, round to nearest even, subnormals, infinities and NaN kept. */
ek_fp16 ek_fp32_to_fp16(float value);
float ek_fp16_to_fp32(ek_fp16 value);

/* ---------------------------------------------------------------- rows --
 * quantize_row: k fp32 values (k a multiple of 32) into k/32 blocks.
 * dequantize_row: k/32 blocks into k fp32 values.
 * `_ref` is the portable oracle; the `isa` forms run the given ISA's code
 * (EK_ERR_ISA_UNSUPPORTED if this CPU or build cannot) and equal the oracle
 * bit for bit.
 */
ek_status ek_quantize_row_q8_0_ref(const float *x, ek_block_q8_0 *y, int64_t k);
ek_status ek_quantize_row_q8_1_ref(const float *x, ek_block_q8_1 *y, int64_t k);
ek_status ek_quantize_row_q4_0_ref(const float *x, ek_block_q4_0 *y, int64_t k);
ek_status ek_quantize_row_q4_1_ref(const float *x, ek_block_q4_1 *y, int64_t k);
ek_status ek_dequantize_row_q8_0_ref(const ek_block_q8_0 *x, float *y, int64_t k);
ek_status ek_dequantize_row_q4_0_ref(const ek_block_q4_0 *x, float *y, int64_t k);
ek_status ek_dequantize_row_q4_1_ref(const ek_block_q4_1 *x, float *y, int64_t k);

/* Quantize one row to `format` (Q8_0, Q4_0, Q4_1; EK_ERR_FORMAT for the others) or, with `q8_1`, to Q8_1. */
ek_status ek_quantize_row(ek_isa isa, ek_format format, const float *x, void *blocks, int64_t k);
ek_status ek_quantize_row_q8_1(ek_isa isa, const float *x, ek_block_q8_1 *y, int64_t k);
/* Dequantize one row of any format; k a multiple of ek_format_block_elements(format). */
ek_status ek_dequantize_row(ek_isa isa, ek_format format, const void *blocks, float *y, int64_t k);

/* ------------------------------------------------------- reference GEMM --
 * Y[m×n] = X[m×k]·Wᵀ with W the n×k matrix of GGUF blocks (row r is k/32
 * consecutive blocks). Only columns [row_begin, row_end) of Y are written:
 * the caller's threads split the weight rows. X is quantized per 32-block
 * to Q8_0 (Q8_0 and Q4_0 weights) or Q8_1 (Q4_1 weights) first. m = 1 is
 * the GEMV y[n] = W·x. The oracle: blocks in order, one row at a time.
 */
ek_status ek_gemm_ref(ek_format format, const void *w, const float *x, float *y,
                      int64_t m, int64_t n, int64_t k, int64_t row_begin, int64_t row_end);

/* ---------------------------------------------------- packed weights --- */

/* Bytes of the packed copy of an n×k matrix (n rounded up to EK_PACK_ROWS); 0 on bad arguments. */
size_t ek_packed_size(ek_format format, int64_t n, int64_t k);

/* Packs n×k GGUF blocks `gguf` into `packed` (ek_packed_size bytes). */
ek_status ek_pack_weights(ek_format format, const void *gguf, int64_t n, int64_t k, void *packed, size_t packed_bytes);

/* A packed weight matrix as the kernels see it. */
typedef struct ek_packed_matrix {
    ek_format format;
    int64_t n;              /* rows (outputs)                  */
    int64_t k;              /* columns (inputs), multiple of 32 */
    const void *data;       /* ek_packed_size(format, n, k) bytes */
    uint32_t flags;         /* EK_PACKED_*: what the values are known to satisfy (0: nothing) */
} ek_packed_matrix;

/* Every Q8_0 value lies in [−64, 63] (ek_q8_0_within_seven_bits): AVX2 without VNNI multiplies such weights in two
   instructions a register fewer. Kernels without a faster path ignore the flag; the results are the same. */
#define EK_PACKED_Q8_SEVEN_BITS 1u

/* Whether every value of `count` Q8_0 blocks lies in [−64, 63]. */
bool ek_q8_0_within_seven_bits(const ek_block_q8_0 *blocks, int64_t count);

/* As ek_quantize_row_q8_0_ref with the values limited to [−limit, limit] (1 ≤ limit ≤ 127): d = max|x| / limit,
   rounded to fp16, q = round(x / d) clamped. limit 63 makes blocks that ek_q8_0_within_seven_bits accepts. */
ek_status ek_quantize_row_q8_0_limited(const float *x, ek_block_q8_0 *y, int64_t k, int limit);

/* Every row's Q8_0 blocks share one scale (ek_q8_0_rows_share_scales): the kernels may sum a row's integer products over
   all of K and scale once, where activations whose blocks share one scale per row come with it
   (ek_quantize_activations_row_scaled). Other activations take the per-block path; the results agree to rounding. */
#define EK_PACKED_Q8_ROW_SCALES 2u

/* Whether every one of `rows` rows of `blocks_per_row` Q8_0 blocks has one scale throughout. */
bool ek_q8_0_rows_share_scales(const ek_block_q8_0 *blocks, int64_t rows, int64_t blocks_per_row);

/* One row of k values as Q8_0 blocks that all share one scale: d = max|x| / limit (1 ≤ limit ≤ 127), rounded to
   fp16, q = round(x / d) clamped to [−limit, limit] — per-channel int8, in Q8_0's layout. */
ek_status ek_quantize_row_q8_0_row_scaled(const float *x, ek_block_q8_0 *y, int64_t k, int limit);

/* Activations quantized for the packed kernels: one of these per 32 inputs. */
typedef struct ek_block_q8_act {
    float d;        /* the fp16-rounded scale, as fp32                         */
    float s;        /* the fp16-rounded d·Σq, as fp32 (used with Q4_1 weights) */
    int32_t sum;    /* Σq, exact                                               */
    int32_t row_sum; /* Σq over the whole row, in every block of a row-scaled row; 0 otherwise */
    int8_t qs[EK_BLOCK];
} ek_block_q8_act;

/* Bytes of the activation buffer for m rows of k inputs. */
size_t ek_activation_size(int64_t m, int64_t k);

/*
 * Quantizes m rows of k fp32 activations (row stride k) for weights of
 * `format`: scales and quants equal ek_quantize_row_q8_0_ref (Q8_0, Q4_0
 * weights) or ek_quantize_row_q8_1_ref (Q4_1 weights) exactly.
 */
ek_status ek_quantize_activations(ek_isa isa, ek_format format, const float *x, int64_t m, int64_t k,
                                  ek_block_q8_act *act, size_t act_bytes);

/*
 * As ek_quantize_activations for Q8_0 weights, but one scale per row: each value first multiplied by its column's
 * scale when `column_scales` (k values) is not NULL — smoothing: weights made with their columns divided by the same
 * scales give the same product with the activations' outlying columns tamed — then d = max|x| / 127 over the whole
 * row (fp32, not rounded to fp16), the same d in each of the row's blocks, q = round(x / d) ties to even. With weights
 * flagged EK_PACKED_Q8_ROW_SCALES, ek_gemm_packed then sums each output's integer products over all of K and scales
 * once. Every ISA's result equals the portable one bit for bit.
 */
ek_status ek_quantize_activations_row_scaled(ek_isa isa, const float *x, int64_t m, int64_t k, const float *column_scales,
                                             ek_block_q8_act *act, size_t act_bytes);

/*
 * Y[m×n] (row stride ldy ≥ n) = A·Wᵀ over weight rows [row_begin, row_end),
 * A the quantized activations of m rows. m = 1 runs the GEMV kernel.
 */
ek_status ek_gemm_packed(ek_isa isa, const ek_packed_matrix *w, const ek_block_q8_act *act, int64_t m,
                         float *y, int64_t ldy, int64_t row_begin, int64_t row_end);

/* --------------------------------------------------------- bandwidth --- */

/* Reads `bytes` at `data` once with the widest loads the ISA has; returns a checksum so the reads happen. */
uint64_t ek_read_stream(ek_isa isa, const void *data, size_t bytes);

#endif /* EK_QUANT_H */
