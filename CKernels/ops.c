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

#if defined(__x86_64__)
static bool have_avx2(void) {
    static int cached = -1;
    if (cached < 0) {
        ek_cpu_features f = ek_cpu_features_detect();
        cached = f.avx2 && f.fma && f.f16c;
    }
    return cached;
}
#endif

#if defined(__x86_64__)
static void gelu_avx2(float *x, int64_t n);
static void swiglu_avx2(const float *g, const float *u, float *h, int64_t n);
static void fp32_to_fp16_avx2(const float *x, uint16_t *y, int64_t n);
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

void ek_layer_norm(const float *x, const float *gamma, const float *beta, float *out, int64_t m, int64_t n, float eps) {
    for (int64_t r = 0; r < m; r++) {
        const float *row = x + r * n;
        double sum = 0, squares = 0;
        for (int64_t i = 0; i < n; i++) sum += row[i];
        double mean = sum / (double)n;
        for (int64_t i = 0; i < n; i++) squares += ((double)row[i] - mean) * ((double)row[i] - mean);
        float scale = (float)(1.0 / sqrt(squares / (double)n + (double)eps));
        float shift = (float)mean;
        float *dst = out + r * n;
        for (int64_t i = 0; i < n; i++) dst[i] = (row[i] - shift) * scale * gamma[i] + beta[i];
    }
}

void ek_gelu(float *x, int64_t n) {
#if defined(__x86_64__)
    if (have_avx2()) {
        gelu_avx2(x, n);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++) x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
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
#if defined(__x86_64__)
    if (have_avx2()) {
        swiglu_avx2(g, u, h, n);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++) h[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

void ek_add(float *x, const float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] += y[i];
}

void ek_fp32_to_fp16_row(const float *x, uint16_t *y, int64_t n) {
#if defined(__x86_64__)
    if (have_avx2()) {
        fp32_to_fp16_avx2(x, y, n);
        return;
    }
#endif
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

/*
 * e^x for 4 double lanes, to double accuracy: x = n·ln2 + r with |r| ≤ ln2/2
 * (ln2 in two parts), e^r by its degree-11 Taylor polynomial (error below
 * 1e-14 relative), 2^n put into the exponent. The caller keeps x in [-104, 89].
 */
EK_OPS_AVX2 static inline __m256d exp_pd(__m256d x) {
    __m256d n = _mm256_round_pd(_mm256_mul_pd(x, _mm256_set1_pd(1.4426950408889634)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256d r = _mm256_fnmadd_pd(n, _mm256_set1_pd(6.93147180369123816490e-01), x);
    r = _mm256_fnmadd_pd(n, _mm256_set1_pd(1.90821492927058770002e-10), r);
    static const double inverse_factorials[] = {
        1.0 / 39916800, 1.0 / 3628800, 1.0 / 362880, 1.0 / 40320, 1.0 / 5040, 1.0 / 720,
        1.0 / 120, 1.0 / 24, 1.0 / 6, 0.5, 1.0, 1.0,
    };
    __m256d p = _mm256_set1_pd(inverse_factorials[0]);
    for (int i = 1; i < 12; i++) p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(inverse_factorials[i]));
    __m128i k = _mm256_cvtpd_epi32(n);
    __m256i bits = _mm256_slli_epi64(_mm256_add_epi64(_mm256_cvtepi32_epi64(k), _mm256_set1_epi64x(1023)), 52);
    return _mm256_mul_pd(p, _mm256_castsi256_pd(bits));
}

/*
 * e^x for 8 float lanes, computed in double and rounded once, so it agrees
 * with a correctly rounded expf except in the rarest halfway cases (the
 * model's near-tied logits notice a cruder approximation). Below the float
 * range the result is 0, above it +inf.
 */
EK_OPS_AVX2 static inline __m256 exp256(__m256 x) {
    __m256 clamped = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-104.0f)), _mm256_set1_ps(89.0f));
    __m256d low = exp_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(clamped)));
    __m256d high = exp_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(clamped, 1)));
    return _mm256_set_m128(_mm256_cvtpd_ps(high), _mm256_cvtpd_ps(low));
}

/* As softmax_in_place, eight lanes at a time (the sum in double lanes). */
EK_OPS_AVX2 static float softmax_avx2(float *scores, int64_t visible, float maximum) {
    __m256 m = _mm256_set1_ps(maximum);
    __m256d sum0 = _mm256_setzero_pd(), sum1 = _mm256_setzero_pd();
    int64_t p = 0;
    for (; p + 8 <= visible; p += 8) {
        __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(scores + p), m));
        _mm256_storeu_ps(scores + p, e);
        sum0 = _mm256_add_pd(sum0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
        sum1 = _mm256_add_pd(sum1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
    }
    double lanes[4];
    _mm256_storeu_pd(lanes, _mm256_add_pd(sum0, sum1));
    double sum = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
    for (; p < visible; p++) {
        scores[p] = expf(scores[p] - maximum);
        sum += (double)scores[p];
    }
    return (float)sum;
}

EK_OPS_AVX2 static void swiglu_avx2(const float *g, const float *u, float *h, int64_t n) {
    int64_t i = 0;
    const __m256 one = _mm256_set1_ps(1.0f);
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(g + i);
        __m256 silu = _mm256_div_ps(x, _mm256_add_ps(one, exp256(_mm256_sub_ps(_mm256_setzero_ps(), x))));
        _mm256_storeu_ps(h + i, _mm256_mul_ps(silu, _mm256_loadu_ps(u + i)));
    }
    for (; i < n; i++) h[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

/*
 * GELU with erf in double lanes: erf(z) = 1 − t·e^(−z²+P(t)) (Numerical
 * Recipes' erfc, relative error below 1.2e-7), so the result stays within an
 * ulp or two of 0.5·x·(1 + erff(x/√2)).
 */
EK_OPS_AVX2 static inline __m256d erf_pd(__m256d z) {
    __m256d sign = _mm256_and_pd(z, _mm256_set1_pd(-0.0));
    __m256d a = _mm256_andnot_pd(_mm256_set1_pd(-0.0), z);
    a = _mm256_min_pd(a, _mm256_set1_pd(8.0));
    __m256d t = _mm256_div_pd(_mm256_set1_pd(1.0), _mm256_fmadd_pd(_mm256_set1_pd(0.5), a, _mm256_set1_pd(1.0)));
    static const double c[] = {0.17087277, -0.82215223, 1.48851587, -1.13520398, 0.27886807, -0.18628806,
                               0.09678418, 0.37409196, 1.00002368, -1.26551223};
    __m256d p = _mm256_set1_pd(c[0]);
    for (int i = 1; i < 10; i++) p = _mm256_fmadd_pd(p, t, _mm256_set1_pd(c[i]));
    __m256d exponent = _mm256_sub_pd(p, _mm256_mul_pd(a, a));
    __m256d erfc = _mm256_mul_pd(t, exp_pd(_mm256_max_pd(exponent, _mm256_set1_pd(-700.0))));
    return _mm256_or_pd(_mm256_sub_pd(_mm256_set1_pd(1.0), erfc), sign);
}

EK_OPS_AVX2 static void gelu_avx2(float *x, int64_t n) {
    int64_t i = 0;
    const __m256d half = _mm256_set1_pd(0.5), one = _mm256_set1_pd(1.0), root = _mm256_set1_pd(0.70710678118654752440);
    for (; i + 4 <= n; i += 4) {
        __m256d v = _mm256_cvtps_pd(_mm_loadu_ps(x + i));
        __m256d g = _mm256_mul_pd(_mm256_mul_pd(half, v), _mm256_add_pd(one, erf_pd(_mm256_mul_pd(v, root))));
        _mm_storeu_ps(x + i, _mm256_cvtpd_ps(g));
    }
    for (; i < n; i++) x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
}

EK_OPS_AVX2 static void fp32_to_fp16_avx2(const float *x, uint16_t *y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) y[i] = ek_fp32_to_fp16(x[i]);
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
    float total = softmax_avx2(scores, visible, maximum);
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

#if defined(__x86_64__)
static bool use_avx2(int64_t head_dim) { return have_avx2() && head_dim % 16 == 0 && head_dim <= 512; }
#endif

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
