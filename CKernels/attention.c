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

#define EK_ATTENTION_MAX_HEAD 512

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
#define EK_ATTENTION_AVX2 __attribute__((target("avx2,fma,f16c")))

/* Positions in blocks: the block's scores first (independent dot products the core overlaps), the running maximum
 * and sum updated once per block, then the block's values weighted in. The same online softmax as the oracle, with
 * one rescale per block instead of per position: no serial chain of dot → exp → rescale per position.
 * head_dim a multiple of 16; inlined per cache type so the inner loops have no branches. */
#define EK_ATTENTION_BLOCK 32

/* accumulator[0..<64] += Σ_j weights[j] · value_j[offset..<offset+64], value_j at base + j·row_bytes. */
EK_ATTENTION_AVX2 static inline __attribute__((always_inline)) void accumulate_slice64(
    bool half_cache, const char *base, int64_t row_bytes, const float *weights, int64_t count, float *accumulator, int64_t offset) {
    __m256 a0 = _mm256_loadu_ps(accumulator), a1 = _mm256_loadu_ps(accumulator + 8), a2 = _mm256_loadu_ps(accumulator + 16),
           a3 = _mm256_loadu_ps(accumulator + 24), a4 = _mm256_loadu_ps(accumulator + 32), a5 = _mm256_loadu_ps(accumulator + 40),
           a6 = _mm256_loadu_ps(accumulator + 48), a7 = _mm256_loadu_ps(accumulator + 56);
    for (int64_t j = 0; j < count; j++) {
        const char *value = base + j * row_bytes;
        const __m256 w = _mm256_set1_ps(weights[j]);
        a0 = _mm256_fmadd_ps(load8(value, offset, half_cache), w, a0);
        a1 = _mm256_fmadd_ps(load8(value, offset + 8, half_cache), w, a1);
        a2 = _mm256_fmadd_ps(load8(value, offset + 16, half_cache), w, a2);
        a3 = _mm256_fmadd_ps(load8(value, offset + 24, half_cache), w, a3);
        a4 = _mm256_fmadd_ps(load8(value, offset + 32, half_cache), w, a4);
        a5 = _mm256_fmadd_ps(load8(value, offset + 40, half_cache), w, a5);
        a6 = _mm256_fmadd_ps(load8(value, offset + 48, half_cache), w, a6);
        a7 = _mm256_fmadd_ps(load8(value, offset + 56, half_cache), w, a7);
    }
    _mm256_storeu_ps(accumulator, a0); _mm256_storeu_ps(accumulator + 8, a1); _mm256_storeu_ps(accumulator + 16, a2);
    _mm256_storeu_ps(accumulator + 24, a3); _mm256_storeu_ps(accumulator + 32, a4); _mm256_storeu_ps(accumulator + 40, a5);
    _mm256_storeu_ps(accumulator + 48, a6); _mm256_storeu_ps(accumulator + 56, a7);
}

/* The same for a slice of 16 (heads whose width is not a multiple of 64). */
EK_ATTENTION_AVX2 static inline __attribute__((always_inline)) void accumulate_slice16(
    bool half_cache, const char *base, int64_t row_bytes, const float *weights, int64_t count, float *accumulator, int64_t offset) {
    __m256 a0 = _mm256_loadu_ps(accumulator), a1 = _mm256_loadu_ps(accumulator + 8);
    for (int64_t j = 0; j < count; j++) {
        const char *value = base + j * row_bytes;
        const __m256 w = _mm256_set1_ps(weights[j]);
        a0 = _mm256_fmadd_ps(load8(value, offset, half_cache), w, a0);
        a1 = _mm256_fmadd_ps(load8(value, offset + 8, half_cache), w, a1);
    }
    _mm256_storeu_ps(accumulator, a0);
    _mm256_storeu_ps(accumulator + 8, a1);
}

EK_ATTENTION_AVX2 static inline __attribute__((always_inline)) void attention_avx2(
    bool half_cache, const float *q, const void *keys, const void *values, int64_t stride, int64_t visible, int64_t head_dim,
    float scale, float *out) {
    float accumulator[EK_ATTENTION_MAX_HEAD], scores[EK_ATTENTION_BLOCK];
    const int64_t element = half_cache ? 2 : 4;
    memset(accumulator, 0, (size_t)head_dim * sizeof(float));
    float maximum = -INFINITY, sum = 0.0f;
    for (int64_t first = 0; first < visible; first += EK_ATTENTION_BLOCK) {
        const int64_t count = visible - first < EK_ATTENTION_BLOCK ? visible - first : EK_ATTENTION_BLOCK;
        const char *block_keys = (const char *)keys + first * stride * element;
        const int64_t key_bytes = stride * element;
        int64_t j = 0;
        for (; j + 4 <= count; j += 4) scores4(half_cache, q, block_keys + j * key_bytes, key_bytes, head_dim, scale, scores + j);
        for (; j < count; j++) {
            const char *key = block_keys + j * key_bytes;
            __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
            for (int64_t i = 0; i < head_dim; i += 16) {
                a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), load8(key, i, half_cache), a0);
                a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8), load8(key, i + 8, half_cache), a1);
            }
            scores[j] = hsum8(_mm256_add_ps(a0, a1)) * scale;
        }
        float block_maximum = -INFINITY;
        for (j = 0; j < count; j++) block_maximum = scores[j] > block_maximum ? scores[j] : block_maximum;
        if (block_maximum > maximum) {
            const float rescale = expf(maximum - block_maximum); /* 0 the first time: nothing accumulated yet */
            maximum = block_maximum;
            sum *= rescale;
            __m256 factor = _mm256_set1_ps(rescale);
            for (int64_t i = 0; i < head_dim; i += 8)
                _mm256_storeu_ps(accumulator + i, _mm256_mul_ps(_mm256_loadu_ps(accumulator + i), factor));
        }
        const __m256 shift = _mm256_set1_ps(maximum);
        for (j = 0; j + 8 <= count; j += 8) _mm256_storeu_ps(scores + j, exp256(_mm256_sub_ps(_mm256_loadu_ps(scores + j), shift)));
        for (; j < count; j++) scores[j] = expf(scores[j] - maximum);
        for (j = 0; j < count; j++) sum += scores[j];
        /* Values in slices of 64 of the head: the slice's accumulators stay in registers over the block. */
        const char *block_values = (const char *)values + first * stride * element;
        int64_t c = 0;
        for (; c + 64 <= head_dim; c += 64) accumulate_slice64(half_cache, block_values, stride * element, scores, count, accumulator + c, c);
        for (; c < head_dim; c += 16) accumulate_slice16(half_cache, block_values, stride * element, scores, count, accumulator + c, c);
    }
    __m256 inverse = _mm256_set1_ps(sum == 0.0f ? 0.0f : 1.0f / sum);
    for (int64_t i = 0; i < head_dim; i += 8) _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_loadu_ps(accumulator + i), inverse));
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
