/*
 * ops.c — the non-matmul ops of a transformer block (see ek_ops.h): a
 * portable version of each, and for attention an AVX2 + F16C + FMA one,
 * chosen at run time.
 */
#include <math.h>
#include <string.h>
#include "ek_ops.h"
#include "ek_cpu.h"
#include "ek_quant.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

void ek_rms_norm(const float *x, const float *w, float *out, int64_t m, int64_t n, float eps) {
    for (int64_t r = 0; r < m; r++) {
        const float *row = x + r * n;
        double sum = 0;
        for (int64_t i = 0; i < n; i++) sum += (double)(row[i] * row[i]);
        float mean = (float)(sum / (double)n);
        float scale = 1.0f / sqrtf(mean + eps);
        float *dst = out + r * n;
        for (int64_t i = 0; i < n; i++) dst[i] = row[i] * scale * w[i];
    }
}

void ek_rope_table(float *table, int64_t pairs, int64_t position, float theta_scale) {
    float theta = (float)position;
    for (int64_t p = 0; p < pairs; p++) {
        table[2 * p] = cosf(theta);
        table[2 * p + 1] = sinf(theta);
        theta *= theta_scale;
    }
}

void ek_rope_apply(float *x, int64_t heads, int64_t head_dim, const float *table) {
    for (int64_t h = 0; h < heads; h++) {
        float *head = x + h * head_dim;
        for (int64_t p = 0; p < head_dim / 2; p++) {
            float c = table[2 * p], s = table[2 * p + 1];
            float a = head[2 * p], b = head[2 * p + 1];
            head[2 * p] = a * c - b * s;
            head[2 * p + 1] = a * s + b * c;
        }
    }
}

void ek_swiglu(const float *g, const float *u, float *h, int64_t n) {
    for (int64_t i = 0; i < n; i++) h[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

void ek_add(float *x, const float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] += y[i];
}

void ek_fp32_to_fp16_row(const float *x, uint16_t *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = ek_fp32_to_fp16(x[i]);
}

void ek_fp16_to_fp32_row(const uint16_t *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = ek_fp16_to_fp32(x[i]);
}

/* Softmax of scores[0..visible) in place (max subtracted, sum in double); returns the sum as fp32. */
static float softmax_in_place(float *scores, int64_t visible, float maximum) {
    double sum = 0;
    for (int64_t p = 0; p < visible; p++) {
        scores[p] = expf(scores[p] - maximum);
        sum += (double)scores[p];
    }
    return (float)sum;
}

/* ---------------------------------------------------------- portable --- */

#define EK_LANES 8

static float dot_lanes(const float *a, const float *b, int64_t n) {
    float acc[EK_LANES] = {0};
    int64_t i = 0;
    for (; i + EK_LANES <= n; i += EK_LANES)
        for (int j = 0; j < EK_LANES; j++) acc[j] += a[i + j] * b[i + j];
    float sum = 0;
    for (int j = 0; j < EK_LANES; j++) sum += acc[j];
    for (; i < n; i++) sum += a[i] * b[i];
    return sum;
}

static void attention_f32_portable(const float *q, const float *keys, const float *values, int64_t stride,
                                   int64_t visible, int64_t head_dim, float scale, float *scores, float *out) {
    float maximum = -INFINITY;
    for (int64_t p = 0; p < visible; p++) {
        scores[p] = dot_lanes(q, keys + p * stride, head_dim) * scale;
        if (scores[p] > maximum) maximum = scores[p];
    }
    float total = softmax_in_place(scores, visible, maximum);
    memset(out, 0, (size_t)head_dim * sizeof(float));
    for (int64_t p = 0; p < visible; p++) {
        float weight = scores[p] / total;
        const float *v = values + p * stride;
        for (int64_t i = 0; i < head_dim; i++) out[i] += weight * v[i];
    }
}

static void attention_f16_portable(const float *q, const uint16_t *keys, const uint16_t *values, int64_t stride,
                                   int64_t visible, int64_t head_dim, float scale, float *scores, float *out) {
    float qh[512], row[512];
    if (head_dim > 512) return; /* the caller checks head_dim */
    for (int64_t i = 0; i < head_dim; i++) qh[i] = ek_fp16_to_fp32(ek_fp32_to_fp16(q[i]));
    float maximum = -INFINITY;
    for (int64_t p = 0; p < visible; p++) {
        ek_fp16_to_fp32_row(keys + p * stride, row, head_dim);
        scores[p] = dot_lanes(qh, row, head_dim) * scale;
        if (scores[p] > maximum) maximum = scores[p];
    }
    float total = softmax_in_place(scores, visible, maximum);
    memset(out, 0, (size_t)head_dim * sizeof(float));
    for (int64_t p = 0; p < visible; p++) {
        float weight = ek_fp16_to_fp32(ek_fp32_to_fp16(scores[p] / total));
        ek_fp16_to_fp32_row(values + p * stride, row, head_dim);
        for (int64_t i = 0; i < head_dim; i++) out[i] += weight * row[i];
    }
}

/* ------------------------------------------------- AVX2 + F16C + FMA --- */

#if defined(__x86_64__)
#define EK_OPS_AVX2 __attribute__((target("avx2,fma,f16c")))

EK_OPS_AVX2 static inline float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

EK_OPS_AVX2 static inline __m256 load_half8(const uint16_t *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

EK_OPS_AVX2 static inline float round_half(float x) {
    return _cvtsh_ss(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT));
}

EK_OPS_AVX2 static inline __attribute__((always_inline)) __m256 load8(const void *base, int64_t i, bool half) {
    return half ? load_half8((const uint16_t *)base + i) : _mm256_loadu_ps((const float *)base + i);
}

/* head_dim a multiple of 16, at most 512; keys and values fp16 when `half`, else fp32. */
EK_OPS_AVX2 static inline __attribute__((always_inline)) void attention_avx2(
    const float *q, const void *keys, const void *values, int64_t stride, int64_t visible, int64_t head_dim,
    float scale, float *scores, float *out, bool half) {
    float rounded[512];
    if (half) {
        for (int64_t i = 0; i < head_dim; i += 8)
            _mm256_storeu_ps(rounded + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(q + i), _MM_FROUND_TO_NEAREST_INT)));
        q = rounded;
    }
    const int64_t element = half ? 2 : 4;
    float maximum = -INFINITY;
    for (int64_t p = 0; p < visible; p++) {
        const char *k = (const char *)keys + p * stride * element;
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
        for (int64_t i = 0; i < head_dim; i += 16) {
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), load8(k, i, half), a0);
            a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8), load8(k, i + 8, half), a1);
        }
        scores[p] = hsum256(_mm256_add_ps(a0, a1)) * scale;
        if (scores[p] > maximum) maximum = scores[p];
    }
    float total = softmax_in_place(scores, visible, maximum);
    for (int64_t i = 0; i < head_dim; i += 8) _mm256_storeu_ps(out + i, _mm256_setzero_ps());
    for (int64_t p = 0; p < visible; p++) {
        float w = scores[p] / total;
        __m256 weight = _mm256_set1_ps(half ? round_half(w) : w);
        const char *v = (const char *)values + p * stride * element;
        for (int64_t i = 0; i < head_dim; i += 8)
            _mm256_storeu_ps(out + i, _mm256_fmadd_ps(weight, load8(v, i, half), _mm256_loadu_ps(out + i)));
    }
}

EK_OPS_AVX2 static void attention_f16_avx2(const float *q, const uint16_t *keys, const uint16_t *values, int64_t stride,
                                           int64_t visible, int64_t head_dim, float scale, float *scores, float *out) {
    attention_avx2(q, keys, values, stride, visible, head_dim, scale, scores, out, true);
}

EK_OPS_AVX2 static void attention_f32_avx2(const float *q, const float *keys, const float *values, int64_t stride,
                                           int64_t visible, int64_t head_dim, float scale, float *scores, float *out) {
    attention_avx2(q, keys, values, stride, visible, head_dim, scale, scores, out, false);
}
#endif

static bool use_avx2(int64_t head_dim) {
#if defined(__x86_64__)
    static int cached = -1;
    if (cached < 0) {
        ek_cpu_features f = ek_cpu_features_detect();
        cached = f.avx2 && f.fma && f.f16c;
    }
    return cached && head_dim % 16 == 0 && head_dim <= 512;
#else
    (void)head_dim;
    return false;
#endif
}

void ek_attention_head_f32(const float *q, const float *keys, const float *values, int64_t stride, int64_t visible,
                           int64_t head_dim, float scale, float *scores, float *out) {
#if defined(__x86_64__)
    if (use_avx2(head_dim)) {
        attention_f32_avx2(q, keys, values, stride, visible, head_dim, scale, scores, out);
        return;
    }
#endif
    attention_f32_portable(q, keys, values, stride, visible, head_dim, scale, scores, out);
}

void ek_attention_head_f16(const float *q, const uint16_t *keys, const uint16_t *values, int64_t stride,
                           int64_t visible, int64_t head_dim, float scale, float *scores, float *out) {
#if defined(__x86_64__)
    if (use_avx2(head_dim)) {
        attention_f16_avx2(q, keys, values, stride, visible, head_dim, scale, scores, out);
        return;
    }
#endif
    attention_f16_portable(q, keys, values, stride, visible, head_dim, scale, scores, out);
}
