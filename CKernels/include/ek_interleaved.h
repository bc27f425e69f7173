/*
 * ek_interleaved.h — row-format weights re-laid once at load so one SIMD
 * register covers eight weight rows: the *interleaved* layout of Q4_0, Q4_1
 * (AVX2 only: AVX-512 runs them packed), Q5_0, Q5_1, IQ4_NL, Q4_K, Q5_K, Q6_K
 * and IQ4_XS.
 *
 * Why: the row kernels of ek_rows.h read one weight row at a time, so every
 * block's scales are decoded and every product summed across a register for
 * that one row. Interleaving rows eight at a time, four bytes each, lets one
 * broadcast of four activation bytes feed eight rows, keeps eight rows'
 * scales side by side (pre-decoded from the K-quants' 6-bit packing) and
 * leaves the horizontal sums to the end of the row. The values are the
 * GGUF file's, bit for bit (ek_deinterleave_weights gives the blocks back);
 * the activations are the row kernels' (ek_quantize_row_activations); the
 * integer products are the same, so results equal the row oracle's up to the
 * order of fp32 additions.
 *
 * Layout: rows are taken eight at a time (a *group*; the last one padded
 * with zero rows); a group's blocks follow each other, one *group-block*
 * per GGUF block of its eight rows. In the quant sections, register q
 * (32 bytes) holds bytes 4q … 4q + 3 of each row's quants in lane r
 * (bytes 4r … 4r + 3), so lane r of a register is row r. Per group-block:
 *
 *   Q4_0    d[8] fp16 · quants 4 × 32                                144 B
 *   Q4_1    d[8] · m[8] fp16 · quants 4 × 32                         160 B
 *   Q5_0    d[8] fp16 · quants 4 × 32 · high bits 32                 176 B
 *   Q5_1    d[8] · m[8] fp16 · quants 4 × 32 · high bits 32          192 B
 *   IQ4_NL  d[8] · quants 4 × 32                                     144 B
 *   Q4_K    d[8] · dmin[8] · scales[8 sub-blocks][8 rows] u8 ·
 *           minimums[4 pairs][8 rows][2] u8 · quants 32 × 32        1184 B
 *   Q5_K    as Q4_K, then qh 8 × 32 (register g: qh bytes 4g…4g+3)
 *           before the quants                                         1440 B
 *   Q6_K    d[8] · scales[8 pairs][8 rows][2] i8 · ql 32 × 32 ·
 *           qh 16 × 32                                               1680 B
 *   IQ4_XS  d[8] · scales[8][8] i8 (the 6-bit scale − 32) ·
 *           quants 32 × 32                                           1104 B
 *
 * Per-32 high bits (Q5_0, Q5_1): byte 4r + t, bit v = the fifth bit of
 * element 4v + t of row r — the element whose nibble sits in byte t of lane
 * r of "vector v" (v < 4: low nibbles of quant register v; v ≥ 4: high
 * nibbles of register v − 4). The sizes are the GGUF blocks' (per-32
 * formats) or up to 3% more (the pre-decoded K-quant scales).
 *
 * Every entry point validates its arguments and returns an ek_status.
 */
#ifndef EK_INTERLEAVED_H
#define EK_INTERLEAVED_H

#include "ek_quant.h"

#define EK_INTERLEAVE_ROWS 8

/* Whether `isa` has SIMD kernels over the interleaved layout of `format` (the scalar ISA runs the row oracle). */
bool ek_interleaved_available(ek_isa isa, ek_format format);

/* Whether `format` has an interleaved layout at all. */
bool ek_format_interleavable(ek_format format);

/* Bytes of the interleaved copy of an n×k matrix of `format` (n rounded up to 8); 0 on bad arguments. */
size_t ek_interleaved_size(ek_format format, int64_t n, int64_t k);

/* Re-lays n×k GGUF blocks `gguf` (row after row) into `out` (ek_interleaved_size bytes). */
ek_status ek_interleave_weights(ek_format format, const void *gguf, int64_t n, int64_t k, void *out, size_t out_bytes);

/* The inverse: the GGUF blocks of the n rows back from an interleaved copy (`gguf` holds n·k/block·block bytes). */
ek_status ek_deinterleave_weights(ek_format format, const void *interleaved, int64_t n, int64_t k, void *gguf,
                                  size_t gguf_bytes);

/*
 * Y[m×n] (row stride ldy ≥ n) = A·Wᵀ over weight rows [row_begin, row_end),
 * W interleaved, A the activations of ek_quantize_row_activations for
 * `format`. The scalar ISA (and any ISA without the kernel) runs the row
 * oracle block by block on the de-interleaved blocks.
 */
ek_status ek_gemm_interleaved(ek_isa isa, ek_format format, const void *w, int64_t n, int64_t k, const void *act,
                              int64_t m, float *y, int64_t ldy, int64_t row_begin, int64_t row_end);

#endif /* EK_INTERLEAVED_H */
