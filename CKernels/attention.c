/*
 * attention.c — one query head attending over a KV cache in one pass, with
 * the softmax computed online (running maximum and sum, the output rescaled
 * when the maximum grows), as flash attention does (see ek_ops.h).
 *
 * q as given, keys and values widened to fp32 from an fp16 cache, the
 * output accumulated in fp32 (llama.cpp's CPU flash attention accumulates
 * in fp16 for short batches; measured on SmolLM2, following it did not bring
 * greedy tokens closer to llama.cpp's, so Ember keeps the exact form — again
 * on 2026-11-29 with q rounded to fp16 too, its every step's rounding copied:
 * 15 picks against llama.cpp's beyond a near-tie in 967 teacher-forced
 * positions, 9 with this form; scripts/teacher_forced_vs_llamacpp.py).
 *
 * The portable functions are the oracle; the AVX2 + FMA + F16C ones differ
 * in the order of the fp32 additions of each score and in rescaling once per
 * block of positions instead of at every new maximum.
 */
#include <math.h>
#include <string.h>
#include "ek_ops.h"
#include "ek_quant.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include "exp_avx2.h"
#include "attention_avx2.h"
#endif


/* ---------------------------------------------------------- portable --- */

static float dot_portable(const float *q, const void *key, int64_t head_dim, bool half_keys) {
    float lanes[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= head_dim; i += 8)
        for (int j = 0; j < 8; j++) {
            float k = half_keys ? ek_fp16_to_fp32(((const uint16_t *)key)[i + j]) : ((const float *)key)[i + j];
            lanes[j] += q[i + j] * k;
        }
    float sum = 0;
    for (int j = 0; j < 8; j++) sum += lanes[j];
    for (; i < head_dim; i++) sum += q[i] * (half_keys ? ek_fp16_to_fp32(((const uint16_t *)key)[i]) : ((const float *)key)[i]);
    return sum;
}

static void attention_portable(bool half_cache, const float *q, const void *keys, const void *values,
                               int64_t stride, int64_t visible, int64_t head_dim, float scale, float *out) {
    float query[EK_ATTENTION_MAX_HEAD], accumulator[EK_ATTENTION_MAX_HEAD];
    const int64_t element = half_cache ? 2 : 4;
    memcpy(query, q, (size_t)head_dim * sizeof(float));
    memset(accumulator, 0, (size_t)head_dim * sizeof(float));
    float maximum = -INFINITY, sum = 0.0f;
    for (int64_t p = 0; p < visible; p++) {
        const char *key = (const char *)keys + p * stride * element, *value = (const char *)values + p * stride * element;
        float s = dot_portable(query, key, head_dim, half_cache) * scale;
        float rescale = 1.0f, weight = 1.0f;
        if (s > maximum) {
            rescale = expf(maximum - s);
            maximum = s;
            for (int64_t i = 0; i < head_dim; i++) accumulator[i] *= rescale;
        } else {
            weight = expf(s - maximum);
        }
        for (int64_t i = 0; i < head_dim; i++) {
            float v = half_cache ? ek_fp16_to_fp32(((const uint16_t *)value)[i]) : ((const float *)value)[i];
            accumulator[i] = fmaf(v, weight, accumulator[i]);
        }
        sum = sum * rescale + weight;
    }
    float inverse = sum == 0.0f ? 0.0f : 1.0f / sum;
    for (int64_t i = 0; i < head_dim; i++) out[i] = accumulator[i] * inverse;
}

/* ------------------------------------------------- AVX2 + F16C + FMA --- */

#if defined(__x86_64__)
/* Positions in blocks of EK_ATTENTION_BLOCK (attention_avx2.h): the block's scores first (independent dot products
 * the core overlaps), the running maximum and sum updated once per block, then the block's values weighted in. The
 * same online softmax as the oracle, with one rescale per block instead of per position: no serial chain of dot → exp
 * → rescale per position. head_dim a multiple of 16; inlined per cache type so the inner loops have no branches. */
EK_ATTENTION_AVX2 static inline __attribute__((always_inline)) void attention_avx2(
    bool half_cache, const float *q, const void *keys, const void *values, int64_t stride, int64_t visible, int64_t head_dim,
    float scale, float *out) {
    float accumulator[EK_ATTENTION_MAX_HEAD], scores[EK_ATTENTION_BLOCK];
    const int64_t element = half_cache ? 2 : 4, row_bytes = stride * element;
    memset(accumulator, 0, (size_t)head_dim * sizeof(float));
    float maximum = -INFINITY, sum = 0.0f;
    for (int64_t first = 0; first < visible; first += EK_ATTENTION_BLOCK) {
        const int64_t count = visible - first < EK_ATTENTION_BLOCK ? visible - first : EK_ATTENTION_BLOCK;
        score_rows(half_cache, q, (const char *)keys + first * row_bytes, row_bytes, count, head_dim, scale, scores);
        softmax_block(scores, count, head_dim, &maximum, &sum, accumulator);
        accumulate_rows(half_cache, (const char *)values + first * row_bytes, row_bytes, scores, count, head_dim, accumulator);
    }
    scale_out(accumulator, sum, head_dim, out);
}

EK_ATTENTION_AVX2 static void attention_avx2_f32(const float *q, const void *k, const void *v, int64_t stride, int64_t visible,
                                                 int64_t head_dim, float scale, float *out) {
    attention_avx2(false, q, k, v, stride, visible, head_dim, scale, out);
}

EK_ATTENTION_AVX2 static void attention_avx2_f16(const float *q, const void *k, const void *v, int64_t stride, int64_t visible,
                                                 int64_t head_dim, float scale, float *out) {
    attention_avx2(true, q, k, v, stride, visible, head_dim, scale, out);
}
#endif

/* ------------------------------------------------------------ entry --- */

bool ek_attention_online_with(bool simd, bool half_cache, const float *q, const void *keys, const void *values, int64_t stride,
                              int64_t visible, int64_t head_dim, float scale, float *out) {
    if (head_dim <= 0 || head_dim > EK_ATTENTION_MAX_HEAD || visible < 0 || stride < head_dim) return false;
#if defined(__x86_64__)
    if (simd && ek_ops_simd_available() && head_dim % 16 == 0) {
        if (half_cache) attention_avx2_f16(q, keys, values, stride, visible, head_dim, scale, out);
        else attention_avx2_f32(q, keys, values, stride, visible, head_dim, scale, out);
        return true;
    }
#else
    (void)simd;
#endif
    attention_portable(half_cache, q, keys, values, stride, visible, head_dim, scale, out);
    return true;
}
