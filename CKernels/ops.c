/*
 * ops.c — the non-matmul ops of a transformer block (see ek_ops.h): a
 * portable version of each (the oracle), and AVX2 + F16C + FMA versions of
 * the ones where it pays, chosen by the caller (`simd`) or, for the public
 * ek_* functions, by what the CPU has.
 */
#include <math.h>
#include <string.h>
#include "ek_ops.h"
#include "ek_cpu.h"
#include "ek_quant.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include "exp_avx2.h"
#include "attention_avx2.h"
#endif

bool ek_ops_simd_available(void) {
#if defined(__x86_64__)
    static int cached = -1;
    if (cached < 0) {
        ek_cpu_features f = ek_cpu_features_detect();
        cached = ek_isa_supported(EK_ISA_AVX2, &f); /* AVX2 + FMA + F16C, as the quantized kernels need */
    }
    return cached;
#else
    return false;
#endif
}

#if defined(__x86_64__)
static void gelu_avx2(float *x, int64_t n);
static void add_avx2(float *x, const float *y, int64_t n);
static void gelu_avx512(float *x, int64_t n);
static void swiglu_avx512(const float *g, const float *u, float *h, int64_t n);
static void layer_norm_avx2(const float *x, const float *gamma, const float *beta, float *out, int64_t m, int64_t n, float eps);
static void swiglu_avx2(const float *g, const float *u, float *h, int64_t n);
static void silu_avx2(float *x, int64_t n);
static void fp32_to_fp16_avx2(const float *x, uint16_t *y, int64_t n);
static void softmax_avx2(float *row, int64_t n);
static void attention_scores_avx2_f32(const float *q, const void *keys, int64_t stride, int64_t visible, int64_t head_dim,
                                      float scale, float *scores);
static void attention_scores_avx2_f16(const float *q, const void *keys, int64_t stride, int64_t visible, int64_t head_dim,
                                      float scale, float *scores);
static void attention_values_avx2_f32(const float *weights, const void *values, int64_t stride, int64_t visible,
                                      int64_t head_dim, float *out);
static void attention_values_avx2_f16(const float *weights, const void *values, int64_t stride, int64_t visible,
                                      int64_t head_dim, float *out);
#define EK_SIMD(simd) ((simd) && ek_ops_simd_available())

/* Whether the CPU runs the AVX-512 forms (detected once: the ops run per row on hot paths). */
bool ek_ops_avx512_available(void) {
    static int cached = -1;
    if (cached < 0) {
        ek_cpu_features f = ek_cpu_features_detect();
        cached = ek_isa_supported(EK_ISA_AVX512_NOVNNI, &f); /* F/BW/VL: the ops need no VNNI */
    }
    return cached;
}
#else
#define EK_SIMD(simd) false
#endif

/* ---------------------------------------------------------- portable --- */

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

static void layer_norm_portable(const float *x, const float *gamma, const float *beta, float *out, int64_t m, int64_t n,
                                float eps) {
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

void ek_layer_norm_with(bool simd, const float *x, const float *gamma, const float *beta, float *out, int64_t m, int64_t n,
                        float eps) {
#if defined(__x86_64__)
    if (EK_SIMD(simd)) {
        layer_norm_avx2(x, gamma, beta, out, m, n, eps);
        return;
    }
#endif
    layer_norm_portable(x, gamma, beta, out, m, n, eps);
}

void ek_layer_norm(const float *x, const float *gamma, const float *beta, float *out, int64_t m, int64_t n, float eps) {
    ek_layer_norm_with(true, x, gamma, beta, out, m, n, eps);
}

void ek_gelu_with(bool simd, float *x, int64_t n) {
#if defined(__x86_64__)
    if (EK_SIMD(simd)) {
        gelu_avx2(x, n);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++) x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
}

void ek_gelu(float *x, int64_t n) { ek_gelu_with(true, x, n); }

void ek_gelu_for(ek_isa isa, float *x, int64_t n) {
#if defined(__x86_64__)
    if (ek_isa_is_avx512(isa) && ek_ops_avx512_available()) {
        gelu_avx512(x, n);
        return;
    }
#endif
    ek_gelu_with(isa != EK_ISA_SCALAR, x, n);
}

void ek_rope_table(float *table, int64_t pairs, int64_t position, float theta_scale) {
    ek_rope_table_scaled(table, pairs, position, theta_scale, 1.0f, NULL);
}

void ek_rope_table_scaled(float *table, int64_t pairs, int64_t position, float theta_scale, float frequency_scale,
                          const float *factors) {
    float theta = (float)position;
    for (int64_t p = 0; p < pairs; p++) {
        float angle = frequency_scale * (factors != NULL ? theta / factors[p] : theta);
        table[2 * p] = cosf(angle);
        table[2 * p + 1] = sinf(angle);
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

void ek_rope_apply_neox(float *x, int64_t heads, int64_t head_dim, const float *table) {
    int64_t half = head_dim / 2;
    for (int64_t h = 0; h < heads; h++) {
        float *head = x + h * head_dim;
        for (int64_t p = 0; p < half; p++) {
            float c = table[2 * p], s = table[2 * p + 1];
            float a = head[p], b = head[p + half];
            head[p] = a * c - b * s;
            head[p + half] = a * s + b * c;
        }
    }
}

void ek_swiglu_with(bool simd, const float *g, const float *u, float *h, int64_t n) {
#if defined(__x86_64__)
    if (EK_SIMD(simd)) {
        swiglu_avx2(g, u, h, n);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++) h[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

void ek_swiglu(const float *g, const float *u, float *h, int64_t n) { ek_swiglu_with(true, g, u, h, n); }

void ek_swiglu_for(ek_isa isa, const float *g, const float *u, float *h, int64_t n) {
#if defined(__x86_64__)
    if (ek_isa_is_avx512(isa) && ek_ops_avx512_available()) {
        swiglu_avx512(g, u, h, n);
        return;
    }
#endif
    ek_swiglu_with(isa != EK_ISA_SCALAR, g, u, h, n);
}

void ek_silu_with(bool simd, float *x, int64_t n) {
#if defined(__x86_64__)
    if (EK_SIMD(simd)) {
        silu_avx2(x, n);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++) x[i] = x[i] / (1.0f + expf(-x[i]));
}

void ek_add_with(bool simd, float *x, const float *y, int64_t n) {
#if defined(__x86_64__)
    if (EK_SIMD(simd)) {
        add_avx2(x, y, n);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++) x[i] += y[i];
}

void ek_add(float *x, const float *y, int64_t n) { ek_add_with(true, x, y, n); }

void ek_mul(float *x, const float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] *= y[i];
}

void ek_add_bias_rows(float *y, int64_t ldy, const float *bias, const float *residual, int64_t ldr, int64_t m,
                      int64_t column_begin, int64_t column_end) {
    for (int64_t r = 0; r < m; r++) {
        float *row = y + r * ldy;
        if (bias) for (int64_t c = column_begin; c < column_end; c++) row[c] += bias[c];
        if (residual) {
            const float *add = residual + r * ldr;
            for (int64_t c = column_begin; c < column_end; c++) row[c] += add[c];
        }
    }
}

void ek_fp32_to_fp16_row(const float *x, uint16_t *y, int64_t n) {
#if defined(__x86_64__)
    if (ek_ops_simd_available()) {
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

static float round_to_half(float x) { return ek_fp16_to_fp32(ek_fp32_to_fp16(x)); }

static void attention_scores_portable(const float *q, const void *keys, int64_t stride, int64_t visible, int64_t head_dim,
                                      float scale, float *scores, bool half) {
    float qh[512], row[512];
    if (half) {
        for (int64_t i = 0; i < head_dim; i++) qh[i] = round_to_half(q[i]);
        for (int64_t p = 0; p < visible; p++) {
            ek_fp16_to_fp32_row((const uint16_t *)keys + p * stride, row, head_dim);
            scores[p] = dot_lanes(qh, row, head_dim) * scale;
        }
    } else {
        for (int64_t p = 0; p < visible; p++) scores[p] = dot_lanes(q, (const float *)keys + p * stride, head_dim) * scale;
    }
}

static void attention_values_portable(const float *weights, const void *values, int64_t stride, int64_t visible,
                                      int64_t head_dim, float *out, bool half) {
    float row[512];
    memset(out, 0, (size_t)head_dim * sizeof(float));
    for (int64_t p = 0; p < visible; p++) {
        if (half) {
            float weight = round_to_half(weights[p]);
            ek_fp16_to_fp32_row((const uint16_t *)values + p * stride, row, head_dim);
            for (int64_t i = 0; i < head_dim; i++) out[i] += weight * row[i];
        } else {
            const float *v = (const float *)values + p * stride;
            for (int64_t i = 0; i < head_dim; i++) out[i] += weights[p] * v[i];
        }
    }
}

/* ------------------------------------------ the attention parts, either ISA --- */

#if defined(__x86_64__)
/* The AVX2 attention loops take head_dim a multiple of 16; others run the portable code. */
static bool attention_simd(bool simd, int64_t head_dim) { return EK_SIMD(simd) && head_dim % 16 == 0; }
#endif

bool ek_attention_scores_with(bool simd, bool half, const float *q, const void *keys, int64_t stride, int64_t visible,
                              int64_t head_dim, float scale, float *scores) {
    if (head_dim <= 0 || (half && head_dim > 512) || visible < 0) return false;
#if defined(__x86_64__)
    if (attention_simd(simd, head_dim)) {
        if (half) attention_scores_avx2_f16(q, keys, stride, visible, head_dim, scale, scores);
        else attention_scores_avx2_f32(q, keys, stride, visible, head_dim, scale, scores);
        return true;
    }
#endif
    attention_scores_portable(q, keys, stride, visible, head_dim, scale, scores, half);
    return true;
}

void ek_softmax_with(bool simd, float *x, int64_t rows, int64_t n) {
    for (int64_t r = 0; r < rows; r++) {
        float *row = x + r * n;
#if defined(__x86_64__)
        if (EK_SIMD(simd)) {
            softmax_avx2(row, n);
            continue;
        }
#else
        (void)simd;
#endif
        float maximum = -INFINITY;
        for (int64_t p = 0; p < n; p++)
            if (row[p] > maximum) maximum = row[p];
        float total = softmax_in_place(row, n, maximum);
        for (int64_t p = 0; p < n; p++) row[p] = row[p] / total;
    }
}

bool ek_attention_values_with(bool simd, bool half, const float *weights, const void *values, int64_t stride,
                              int64_t visible, int64_t head_dim, float *out) {
    if (head_dim <= 0 || (half && head_dim > 512) || visible < 0) return false;
#if defined(__x86_64__)
    if (attention_simd(simd, head_dim)) {
        if (half) attention_values_avx2_f16(weights, values, stride, visible, head_dim, out);
        else attention_values_avx2_f32(weights, values, stride, visible, head_dim, out);
        return true;
    }
#endif
    attention_values_portable(weights, values, stride, visible, head_dim, out, half);
    return true;
}

/* The fused forms take the SIMD code only where all three parts have it (head_dim a multiple of 16), as before the
   split: then their results equal the parts', bit for bit. */
void ek_attention_head_f32(const float *q, const float *keys, const float *values, int64_t stride, int64_t visible,
                           int64_t head_dim, float scale, float *scores, float *out) {
    bool simd = head_dim % 16 == 0;
    if (!ek_attention_scores_with(simd, false, q, keys, stride, visible, head_dim, scale, scores)) return;
    ek_softmax_with(simd, scores, 1, visible);
    ek_attention_values_with(simd, false, scores, values, stride, visible, head_dim, out);
}

void ek_attention_head_f16(const float *q, const uint16_t *keys, const uint16_t *values, int64_t stride,
                           int64_t visible, int64_t head_dim, float scale, float *scores, float *out) {
    bool simd = head_dim % 16 == 0;
    if (!ek_attention_scores_with(simd, true, q, keys, stride, visible, head_dim, scale, scores)) return;
    ek_softmax_with(simd, scores, 1, visible);
    ek_attention_values_with(simd, true, scores, values, stride, visible, head_dim, out);
}

/* ------------------------------------------------- AVX2 + F16C + FMA --- */

#if defined(__x86_64__)
#define EK_OPS_AVX2 __attribute__((target("avx2,fma,f16c")))

EK_OPS_AVX2 static inline float round_half(float x) {
    return _cvtsh_ss(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT));
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

/* Lanes below `count` (0…8) set: the mask of a row's last, partial vector. */
EK_OPS_AVX2 static inline __m256i lanes_below(int64_t count) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)count), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* As the portable softmax, eight lanes at a time: the maximum, e^(x − max) by exp_negative_ps (within ~2 ulp; the
   double-accurate exp256 here was 5.5 % of an int8 MiniLM batch — only the encoder's attention uses this op), the
   sum in double lanes, then each value divided by it. The last one to seven values go through the same eight-lane
   code, masked (−∞ loaded outside the row, nothing stored there, the exponentials outside it zeroed before the sum):
   one expf call each cost MiniLM's ~20-position rows about a fifth of the op. */
EK_OPS_AVX2 static void softmax_avx2(float *row, int64_t n) {
    const int64_t tail = n % 8, full = n - tail;
    const __m256i mask = lanes_below(tail);
    const __m256 outside = _mm256_set1_ps(-INFINITY);
    __m256 m8 = outside;
    int64_t p = 0;
    for (; p < full; p += 8) m8 = _mm256_max_ps(m8, _mm256_loadu_ps(row + p));
    if (tail) m8 = _mm256_max_ps(m8, _mm256_blendv_ps(outside, _mm256_maskload_ps(row + full, mask), _mm256_castsi256_ps(mask)));
    float lanes_max[8];
    _mm256_storeu_ps(lanes_max, m8);
    float maximum = -INFINITY;
    for (int lane = 0; lane < 8; lane++) maximum = lanes_max[lane] > maximum ? lanes_max[lane] : maximum;
    const __m256 m = _mm256_set1_ps(maximum);
    __m256d sum0 = _mm256_setzero_pd(), sum1 = _mm256_setzero_pd();
    for (p = 0; p < n; p += 8) {
        const bool last = p == full;
        const __m256 x = last ? _mm256_maskload_ps(row + p, mask) : _mm256_loadu_ps(row + p);
        __m256 e = exp_negative_ps(_mm256_sub_ps(x, m));
        if (last) {
            e = _mm256_and_ps(e, _mm256_castsi256_ps(mask));
            _mm256_maskstore_ps(row + p, mask, e);
        } else {
            _mm256_storeu_ps(row + p, e);
        }
        sum0 = _mm256_add_pd(sum0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
        sum1 = _mm256_add_pd(sum1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
    }
    double lanes[4];
    _mm256_storeu_pd(lanes, _mm256_add_pd(sum0, sum1));
    const double sum = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
    const __m256 total = _mm256_set1_ps((float)sum);
    for (p = 0; p < full; p += 8) _mm256_storeu_ps(row + p, _mm256_div_ps(_mm256_loadu_ps(row + p), total));
    if (tail) _mm256_maskstore_ps(row + full, mask, _mm256_div_ps(_mm256_maskload_ps(row + full, mask), total));
}

/*
 * GELU, 0.5·x·(1 + erf(x/√2)), with erf by Abramowitz & Stegun 7.1.26
 * (absolute error below 1.5e-7): erf(z) = 1 − t·P(t)·e^(−z²), t = 1/(1 + p·z).
 */
EK_OPS_AVX2 static void gelu_avx2(float *x, int64_t n) {
    int64_t i = 0;
    const __m256 sign_mask = _mm256_set1_ps(-0.0f), one = _mm256_set1_ps(1.0f), half = _mm256_set1_ps(0.5f);
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        __m256 z = _mm256_mul_ps(v, _mm256_set1_ps(0.70710678118654752f));
        __m256 sign = _mm256_and_ps(z, sign_mask);
        __m256 a = _mm256_andnot_ps(sign_mask, z);
        /* t = 1/d by the reciprocal estimate and one Newton step (relative error ~1e-7, A&S's own is 1.5e-7):
           the division was the loop's slowest instruction */
        __m256 d = _mm256_fmadd_ps(_mm256_set1_ps(0.3275911f), a, one);
        __m256 t = _mm256_rcp_ps(d);
        t = _mm256_mul_ps(t, _mm256_fnmadd_ps(d, t, _mm256_set1_ps(2.0f)));
        __m256 p = _mm256_set1_ps(1.061405429f);
        p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-1.453152027f));
        p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.421413741f));
        p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-0.284496736f));
        p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.254829592f));
        p = _mm256_mul_ps(p, t);
        __m256 erf = _mm256_fnmadd_ps(p, exp_negative_ps(_mm256_sub_ps(_mm256_setzero_ps(), _mm256_mul_ps(a, a))), one);
        erf = _mm256_or_ps(erf, sign);
        _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_mul_ps(half, v), _mm256_add_ps(one, erf)));
    }
    for (; i < n; i++) x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
}

/* The same GELU on 16 lanes (an encoder's 1,536-wide FFN rows: 6 % of an int8 MiniLM batch in 8 lanes). */
#define EK_OPS_AVX512 __attribute__((target("avx512f,avx512dq,avx2,fma")))
EK_OPS_AVX512 static void gelu_avx512(float *x, int64_t n) {
    int64_t i = 0;
    const __m512 one = _mm512_set1_ps(1.0f), half = _mm512_set1_ps(0.5f);
    const __m512i sign_mask = _mm512_set1_epi32((int)0x80000000u);
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_loadu_ps(x + i);
        __m512 z = _mm512_mul_ps(v, _mm512_set1_ps(0.70710678118654752f));
        __m512i sign = _mm512_and_si512(_mm512_castps_si512(z), sign_mask);
        __m512 a = _mm512_castsi512_ps(_mm512_andnot_si512(sign_mask, _mm512_castps_si512(z)));
        __m512 d = _mm512_fmadd_ps(_mm512_set1_ps(0.3275911f), a, one);
        __m512 t = _mm512_rcp14_ps(d);
        t = _mm512_mul_ps(t, _mm512_fnmadd_ps(d, t, _mm512_set1_ps(2.0f)));
        __m512 p = _mm512_set1_ps(1.061405429f);
        p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-1.453152027f));
        p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(1.421413741f));
        p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-0.284496736f));
        p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(0.254829592f));
        p = _mm512_mul_ps(p, t);
        __m512 erf = _mm512_fnmadd_ps(p, exp_negative_ps512(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_mul_ps(a, a))), one);
        erf = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(erf), sign));
        _mm512_storeu_ps(x + i, _mm512_mul_ps(_mm512_mul_ps(half, v), _mm512_add_ps(one, erf)));
    }
    if (i < n) gelu_avx2(x + i, n - i);
}

/* As swiglu_avx2, 16 lanes: e^-g in two halves of eight doubles (half the instructions of four 4-lane halves; SwiGLU
   was 6 % of an int4 prefill). */
EK_OPS_AVX512 static void swiglu_avx512(const float *g, const float *u, float *h, int64_t n) {
    int64_t i = 0;
    const __m512 one = _mm512_set1_ps(1.0f);
    for (; i + 16 <= n; i += 16) {
        __m512 x = _mm512_loadu_ps(g + i);
        __m512 clamped = _mm512_min_ps(_mm512_set1_ps(89.0f), _mm512_max_ps(_mm512_set1_ps(-104.0f), _mm512_sub_ps(_mm512_setzero_ps(), x)));
        __m256 low = _mm512_cvtpd_ps(exp_pd512(_mm512_cvtps_pd(_mm512_castps512_ps256(clamped))));
        __m256 high = _mm512_cvtpd_ps(exp_pd512(_mm512_cvtps_pd(_mm512_extractf32x8_ps(clamped, 1))));
        __m512 e = _mm512_insertf32x8(_mm512_castps256_ps512(low), high, 1);
        __m512 silu = _mm512_div_ps(x, _mm512_add_ps(one, e));
        _mm512_storeu_ps(h + i, _mm512_mul_ps(silu, _mm512_loadu_ps(u + i)));
    }
    if (i < n) swiglu_avx2(g + i, u + i, h + i, n - i);
}

/* As ek_layer_norm, the sums in four double lanes. */
EK_OPS_AVX2 static void layer_norm_avx2(const float *x, const float *gamma, const float *beta, float *out, int64_t m, int64_t n,
                                        float eps) {
    for (int64_t r = 0; r < m; r++) {
        const float *row = x + r * n;
        __m256d sum = _mm256_setzero_pd(), squares = _mm256_setzero_pd();
        int64_t i = 0;
        for (; i + 4 <= n; i += 4) {
            __m256d v = _mm256_cvtps_pd(_mm_loadu_ps(row + i));
            sum = _mm256_add_pd(sum, v);
            squares = _mm256_fmadd_pd(v, v, squares);
        }
        double lanes[4], lanes2[4];
        _mm256_storeu_pd(lanes, sum);
        _mm256_storeu_pd(lanes2, squares);
        double total = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]), total2 = (lanes2[0] + lanes2[1]) + (lanes2[2] + lanes2[3]);
        for (; i < n; i++) {
            total += row[i];
            total2 += (double)row[i] * row[i];
        }
        double mean = total / (double)n;
        double variance = total2 / (double)n - mean * mean;
        if (variance < 0) variance = 0;
        __m256 scale = _mm256_set1_ps((float)(1.0 / sqrt(variance + (double)eps))), shift = _mm256_set1_ps((float)mean);
        float *dst = out + r * n;
        for (i = 0; i + 8 <= n; i += 8) {
            __m256 v = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(row + i), shift), scale);
            _mm256_storeu_ps(dst + i, _mm256_fmadd_ps(v, _mm256_loadu_ps(gamma + i), _mm256_loadu_ps(beta + i)));
        }
        for (; i < n; i++) dst[i] = (row[i] - (float)mean) * _mm256_cvtss_f32(scale) * gamma[i] + beta[i];
    }
}

EK_OPS_AVX2 static void fp32_to_fp16_avx2(const float *x, uint16_t *y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) y[i] = ek_fp32_to_fp16(x[i]);
}



/* Two vectors a step: the residual and bias adds of an encoder row are L1-resident, so the loads, not memory, bound it. */
EK_OPS_AVX2 static void add_avx2(float *x, const float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        _mm256_storeu_ps(x + i, _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
        _mm256_storeu_ps(x + i + 8, _mm256_add_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8)));
    }
    for (; i < n; i++) x[i] += y[i];
}

EK_OPS_AVX2 static void silu_avx2(float *x, int64_t n) {
    int64_t i = 0;
    const __m256 one = _mm256_set1_ps(1.0f);
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        _mm256_storeu_ps(x + i, _mm256_div_ps(v, _mm256_add_ps(one, exp256(_mm256_sub_ps(_mm256_setzero_ps(), v)))));
    }
    for (; i < n; i++) x[i] = x[i] / (1.0f + expf(-x[i]));
}

/* head_dim a multiple of 16, at most 512; keys fp16 when `half` (q rounded to fp16 first), else fp32. Inlined into
   one function per cache type, so the inner loop has no branch on `half`. */
EK_OPS_AVX2 static inline __attribute__((always_inline)) void attention_scores_avx2(
    const float *q, const void *keys, int64_t stride, int64_t visible, int64_t head_dim, float scale, float *scores, bool half) {
    float rounded[512];
    if (half) {
        for (int64_t i = 0; i < head_dim; i += 8)
            _mm256_storeu_ps(rounded + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(q + i), _MM_FROUND_TO_NEAREST_INT)));
        q = rounded;
    }
    const int64_t element = half ? 2 : 4, key_bytes = stride * element;
    int64_t p = 0;
    /* Four keys at a time (MiniLM's 32-wide heads over ~20 positions paid a horizontal sum per key), the rest alone */
    for (; p + 4 <= visible; p += 4) scores4(half, q, (const char *)keys + p * key_bytes, key_bytes, head_dim, scale, scores + p);
    for (; p < visible; p++) {
        const char *k = (const char *)keys + p * key_bytes;
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
        for (int64_t i = 0; i < head_dim; i += 16) {
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), load8(k, i, half), a0);
            a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8), load8(k, i + 8, half), a1);
        }
        scores[p] = hsum8(_mm256_add_ps(a0, a1)) * scale;
    }
}

/* out = Σ weights[p]·V[p]; with `half`, fp16 values and each weight rounded to fp16 first (inlined per cache type). */
EK_OPS_AVX2 static inline __attribute__((always_inline)) void attention_values_avx2(
    const float *weights, const void *values, int64_t stride, int64_t visible, int64_t head_dim, float *out, bool half) {
    const int64_t element = half ? 2 : 4;
    /* 32 columns at a time in registers (16 for the last of a head width ≡ 16 mod 32): accumulating in `out`
       chained every position through a store and a reload (MiniLM's 32-wide heads: 9 % of an int8 batch).
       The same FMAs in the same order as that loop, so the same sums. */
    for (int64_t i0 = 0; i0 < head_dim; i0 += 32) {
        __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
        if (head_dim - i0 >= 32) {
            for (int64_t p = 0; p < visible; p++) {
                __m256 weight = _mm256_set1_ps(half ? round_half(weights[p]) : weights[p]);
                const char *v = (const char *)values + p * stride * element;
                for (int j = 0; j < 4; j++) acc[j] = _mm256_fmadd_ps(weight, load8(v, i0 + 8 * j, half), acc[j]);
            }
            for (int j = 0; j < 4; j++) _mm256_storeu_ps(out + i0 + 8 * j, acc[j]);
        } else {
            for (int64_t p = 0; p < visible; p++) {
                __m256 weight = _mm256_set1_ps(half ? round_half(weights[p]) : weights[p]);
                const char *v = (const char *)values + p * stride * element;
                for (int j = 0; j < 2; j++) acc[j] = _mm256_fmadd_ps(weight, load8(v, i0 + 8 * j, half), acc[j]);
            }
            for (int j = 0; j < 2; j++) _mm256_storeu_ps(out + i0 + 8 * j, acc[j]);
        }
    }
}

EK_OPS_AVX2 static void attention_scores_avx2_f32(const float *q, const void *keys, int64_t stride, int64_t visible, int64_t head_dim,
                                                  float scale, float *scores) {
    attention_scores_avx2(q, keys, stride, visible, head_dim, scale, scores, false);
}

EK_OPS_AVX2 static void attention_scores_avx2_f16(const float *q, const void *keys, int64_t stride, int64_t visible, int64_t head_dim,
                                                  float scale, float *scores) {
    attention_scores_avx2(q, keys, stride, visible, head_dim, scale, scores, true);
}

EK_OPS_AVX2 static void attention_values_avx2_f32(const float *weights, const void *values, int64_t stride, int64_t visible,
                                                  int64_t head_dim, float *out) {
    attention_values_avx2(weights, values, stride, visible, head_dim, out, false);
}

EK_OPS_AVX2 static void attention_values_avx2_f16(const float *weights, const void *values, int64_t stride, int64_t visible,
                                                  int64_t head_dim, float *out) {
    attention_values_avx2(weights, values, stride, visible, head_dim, out, true);
}
#endif
