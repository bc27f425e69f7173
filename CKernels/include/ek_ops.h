/*
 * ek_ops.h — the fp32 vector ops of a transformer block that are not
 * matmuls: RMSNorm, LayerNorm, RoPE, SwiGLU/SiLU/GELU, adds and products,
 * softmax, and single-head attention (scores, softmax, weighted values)
 * over a KV cache kept in fp32 or fp16. The caller's threads split rows or
 * heads between them.
 *
 * The `_with(simd, …)` forms run the AVX2 + FMA + F16C code where `simd` is
 * true and the CPU and build have it, else the portable code (the oracle the
 * SIMD code is tested against); the plain forms choose by the CPU.
 */
#ifndef EK_OPS_H
#define EK_OPS_H

#include <stdbool.h>
#include <stdint.h>
#include "ek_cpu.h"

/* out[r] = x[r] / sqrt(mean(x[r]²) + eps) · w for m rows of n; the sum of squares in double. */
void ek_rms_norm(const float *x, const float *w, float *out, int64_t m, int64_t n, float eps);

/* out[r] = (x[r] − mean) / sqrt(var + eps) · gamma + beta for m rows of n; mean and variance in double. */
void ek_layer_norm(const float *x, const float *gamma, const float *beta, float *out, int64_t m, int64_t n, float eps);

/* x = x · Φ(x) = 0.5·x·(1 + erf(x/√2)) in place (GELU, the erf form), n elements. */
void ek_gelu(float *x, int64_t n);

/*
 * The (cos, sin) pairs of one position for RoPE: angle_i = position · scale^i,
 * advanced by repeated multiplication in fp32. `table` holds 2·pairs floats.
 */
void ek_rope_table(float *table, int64_t pairs, int64_t position, float theta_scale);
/* The same with linear scaling and per-pair frequency factors (Llama 3's rope_freqs, NULL for none):
   angle_i = frequency_scale · (position · theta_scale^i / factors[i]). */
void ek_rope_table_scaled(float *table, int64_t pairs, int64_t position, float theta_scale, float frequency_scale,
                          const float *factors);

/* Rotates adjacent pairs (the "normal" mode, not NeoX) of `heads` heads of head_dim by `table`. */
void ek_rope_apply(float *x, int64_t heads, int64_t head_dim, const float *table);
/* Rotates the pairs (i, i + head_dim/2) (the NeoX mode) of `heads` heads of head_dim by `table`. */
void ek_rope_apply_neox(float *x, int64_t heads, int64_t head_dim, const float *table);

/* h = gelu(g) · u, n elements, GELU in its tanh form with g rounded to fp16 and the GELU value rounded to fp16 (a
   table), as llama.cpp's CPU GEGLU; 0 for g ≤ −10, g for g ≥ 10 (geglu.c). */
void ek_geglu(const float *g, const float *u, float *h, int64_t n);
/* GELU, the tanh form, in fp32: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))). */
float ek_gelu_tanh(float x);

/* h = silu(g) · u, n elements. */
void ek_swiglu(const float *g, const float *u, float *h, int64_t n);

/* x += y, n elements. */
void ek_add(float *x, const float *y, int64_t n);
/* x *= y, n elements. */
void ek_mul(float *x, const float *y, int64_t n);

/*
 * y[r][c] += bias[c] (+ residual[r][c] when residual is not NULL) for rows
 * 0..<m and columns [column_begin, column_end), row strides ldy and ldr.
 */
void ek_add_bias_rows(float *y, int64_t ldy, const float *bias, const float *residual, int64_t ldr, int64_t m,
                      int64_t column_begin, int64_t column_end);

/* fp32 ⇄ fp16 rows (round to nearest even, as F16C). */
void ek_fp32_to_fp16_row(const float *x, uint16_t *y, int64_t n);
void ek_fp16_to_fp32_row(const uint16_t *x, float *y, int64_t n);

/*
 * One query head attending over `visible` cached positions:
 * out = softmax(scale · q·Kᵀ) · V, with key and value rows `stride`
 * elements apart. `scores` holds `visible` floats of scratch. The softmax
 * sum is kept in double.
 *
 * The fp16 form reads an fp16 cache; like a half-precision dot product it
 * takes q rounded to fp16 and rounds the softmax weights to fp16 before
 * they meet V. head_dim is at most 512.
 */
void ek_attention_head_f32(const float *q, const float *keys, const float *values, int64_t stride, int64_t visible,
                           int64_t head_dim, float scale, float *scores, float *out);
void ek_attention_head_f16(const float *q, const uint16_t *keys, const uint16_t *values, int64_t stride,
                           int64_t visible, int64_t head_dim, float scale, float *scores, float *out);

/* The widest attention head the attention ops take. */
#define EK_ATTENTION_MAX_HEAD 512

/*
 * One query head over `visible` cached positions in one pass, the softmax
 * online (flash attention): out = softmax(scale · q·Kᵀ) · V, key and value
 * rows `stride` elements apart, fp16 when `half_cache` (widened on load),
 * else fp32; the arithmetic is fp32. false on a head_dim outside 1…512, a
 * negative `visible` or stride < head_dim (attention.c).
 */
bool ek_attention_online_with(bool simd, bool half_cache, const float *q, const void *keys, const void *values, int64_t stride,
                              int64_t visible, int64_t head_dim, float scale, float *out);

/*
 * `heads` query heads that share one key/value head (grouped-query attention), head j at q + j·head_dim, over the
 * same `visible` cached positions, into out + j·head_dim: ek_attention_online_with for each head, to rounding, with
 * each key and value read and widened once for up to three heads (attention_group.c; `isa` picks AVX2 or, on the
 * AVX-512 ISAs, the same code with 32 registers; scalar and NEON run the one-pass op per head). false on heads below
 * 1 or what ek_attention_online_with refuses.
 */
bool ek_attention_group_for(ek_isa isa, bool half_cache, const float *q, int64_t heads, const void *keys, const void *values,
                             int64_t stride, int64_t visible, int64_t head_dim, float scale, float *out);

/*
 * Bidirectional attention of one head over one whole sequence (an encoder's self-attention): for each of the `rows`
 * query rows i, out[i] = softmax(scale · q[i]·Kᵀ)·V over all `rows` key and value rows. q, keys, values and out rows
 * are `stride` elements apart; keys and values fp16 when `half` (widened), else fp32; out must not overlap the
 * inputs. The portable form (every sum in double) is the oracle; `simd` takes the AVX2 form for fp32 and a head
 * width that is a multiple of 8. false on a head_dim outside 1…512, negative rows, stride < head_dim, or a scratch
 * buffer that cannot be allocated (sequence_attention.c).
 */
bool ek_sequence_attention_with(bool simd, bool half, const float *q, const void *keys, const void *values, int64_t stride,
                                int64_t rows, int64_t head_dim, float scale, float *out);

/* Whether this CPU and build run the AVX2 + FMA + F16C forms. */
bool ek_ops_simd_available(void);
/* Whether this CPU and build run the AVX-512 (F/BW/VL) forms; detected once. */
bool ek_ops_avx512_available(void);
void ek_layer_norm_with(bool simd, const float *x, const float *gamma, const float *beta, float *out, int64_t m, int64_t n,
                        float eps);
void ek_gelu_with(bool simd, float *x, int64_t n);
/* GELU with `isa`'s code: 16 lanes on AVX-512, else as ek_gelu_with(isa is not scalar). */
void ek_gelu_for(ek_isa isa, float *x, int64_t n);
void ek_add_with(bool simd, float *x, const float *y, int64_t n);
void ek_swiglu_with(bool simd, const float *g, const float *u, float *h, int64_t n);
/* SwiGLU with `isa`'s code: 16 lanes on AVX-512, else as ek_swiglu_with(isa is not scalar). */
void ek_swiglu_for(ek_isa isa, const float *g, const float *u, float *h, int64_t n);
/* x = x · σ(x) in place (SiLU), n elements. */
void ek_silu_with(bool simd, float *x, int64_t n);
/* Each of `rows` rows of n in place: exp(x − max) / Σ exp(x − max), the sum in double. */
void ek_softmax_with(bool simd, float *x, int64_t rows, int64_t n);
/*
 * The parts of ek_attention_head_*: scores[p] = scale · q·K[p] (with `half`,
 * fp16 keys and q rounded to fp16), and out = Σ weights[p]·V[p] (with `half`,
 * fp16 values and each weight rounded to fp16). false when head_dim is below
 * 1 (or, with `half`, above 512) or visible is negative.
 */
bool ek_attention_scores_with(bool simd, bool half, const float *q, const void *keys, int64_t stride, int64_t visible,
                              int64_t head_dim, float scale, float *scores);
bool ek_attention_values_with(bool simd, bool half, const float *weights, const void *values, int64_t stride,
                              int64_t visible, int64_t head_dim, float *out);

#endif
