/*
 * sequence_attention.c — bidirectional attention of one head over one whole
 * sequence (an encoder's self-attention): every query row of the sequence
 * against every key and value row of it, in one call (see ek_ops.h).
 *
 * An encoder pass used to call the attention parts once per token and head —
 * scores, softmax, values — each over ~20 positions of a 32-wide head:
 * MiniLM's 1,400 such calls a sentence took ~190 ns each, 10 % of an int8
 * batch for under 1 % of its arithmetic. Here the keys of the head are
 * transposed once, four queries at a time meet eight keys per register, and
 * the softmax's sum divides the weighted values once.
 *
 * The portable function is the oracle: every sum in double, exp from libm.
 * The AVX2 + FMA one computes in fp32 (exp to about an ulp) and adds in
 * another order.
 */
#include <math.h>
#include <stdlib.h>
#include "ek_ops.h"
#include "ek_quant.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include "exp_avx2.h"
#include "transpose_avx2.h"
#endif

#define EK_SEQUENCE_MAX_HEAD 512

/* ---------------------------------------------------------- portable --- */

static double element_at(const void *rows, bool half, int64_t index) {
    return half ? (double)ek_fp16_to_fp32(((const uint16_t *)rows)[index]) : (double)((const float *)rows)[index];
}

static void sequence_attention_portable(bool half, const float *q, const void *keys, const void *values, int64_t stride,
                                        int64_t rows, int64_t head_dim, float scale, float *out, double *weights) {
    for (int64_t i = 0; i < rows; i++) {
        const float *query = q + i * stride;
        double maximum = -INFINITY;
        for (int64_t p = 0; p < rows; p++) {
            double dot = 0;
            for (int64_t c = 0; c < head_dim; c++) dot += (double)query[c] * element_at(keys, half, p * stride + c);
            weights[p] = dot * (double)scale;
            if (weights[p] > maximum) maximum = weights[p];
        }
        double sum = 0;
        for (int64_t p = 0; p < rows; p++) {
            weights[p] = exp(weights[p] - maximum);
            sum += weights[p];
        }
        for (int64_t c = 0; c < head_dim; c++) {
            double total = 0;
            for (int64_t p = 0; p < rows; p++) total += weights[p] * element_at(values, half, p * stride + c);
            out[i * stride + c] = (float)(total / sum);
        }
    }
}

/* ------------------------------------------------- AVX2 + F16C + FMA --- */

#if defined(__x86_64__)
#define EK_SEQUENCE_AVX2 __attribute__((target("avx2,fma,f16c")))
#define EK_SEQUENCE_QUERIES 4 /* query rows per tile: four rows × two key registers = eight FMA chains */

#define EK_SEQUENCE_INLINE static inline __attribute__((always_inline))

/* Scores of the `tile` (a constant after inlining) query rows at q against every key, scaled, −∞ past the
   sequence: sixteen keys at a time (two registers per row: eight FMA chains with four rows), eight for the last. */
EK_SEQUENCE_AVX2 EK_SEQUENCE_INLINE void scores_tile(const int tile, const float *q, int64_t stride, int64_t rows,
                                                    int64_t head_dim, float scale, const float *kt, int64_t padded,
                                                    float *scores) {
    const __m256 scaling = _mm256_set1_ps(scale), lowest = _mm256_set1_ps(-INFINITY);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (int64_t p0 = 0; p0 < padded; p0 += 16) {
        __m256 a[EK_SEQUENCE_QUERIES][2];
        for (int j = 0; j < tile; j++) a[j][0] = a[j][1] = _mm256_setzero_ps();
        if (p0 + 8 < padded) {
            for (int64_t c = 0; c < head_dim; c++) {
                const __m256 k0 = _mm256_loadu_ps(kt + c * padded + p0), k1 = _mm256_loadu_ps(kt + c * padded + p0 + 8);
                for (int j = 0; j < tile; j++) {
                    const __m256 x = _mm256_broadcast_ss(q + j * stride + c);
                    a[j][0] = _mm256_fmadd_ps(x, k0, a[j][0]);
                    a[j][1] = _mm256_fmadd_ps(x, k1, a[j][1]);
                }
            }
        } else { /* the last eight: two chains a row over even and odd c */
            int64_t c = 0;
            for (; c + 2 <= head_dim; c += 2) {
                const __m256 k0 = _mm256_loadu_ps(kt + c * padded + p0), k1 = _mm256_loadu_ps(kt + (c + 1) * padded + p0);
                for (int j = 0; j < tile; j++) {
                    a[j][0] = _mm256_fmadd_ps(_mm256_broadcast_ss(q + j * stride + c), k0, a[j][0]);
                    a[j][1] = _mm256_fmadd_ps(_mm256_broadcast_ss(q + j * stride + c + 1), k1, a[j][1]);
                }
            }
            for (int j = 0; j < tile; j++) a[j][0] = _mm256_add_ps(a[j][0], a[j][1]);
        }
        for (int b = 0; b < 2 && p0 + 8 * b < padded; b++) {
            /* positions past the sequence get −∞: e^−∞ = 0 */
            const __m256 real = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32((int)(rows - p0 - 8 * b)), lane));
            for (int j = 0; j < tile; j++)
                _mm256_storeu_ps(scores + j * padded + p0 + 8 * b, _mm256_blendv_ps(lowest, _mm256_mul_ps(a[j][b], scaling), real));
        }
    }
}

/* out rows (`tile` of them, a constant) = Σ_p weights[j][p]·V[p] × inverse[j], 32 columns (four registers) at a
   time, or eight for a head width's last ones. */
EK_SEQUENCE_AVX2 EK_SEQUENCE_INLINE void values_tile(const int tile, const float *weights, int64_t padded, const float *inverse,
                                                    const float *values, int64_t stride, int64_t rows, int64_t head_dim,
                                                    float *out) {
    int64_t c0 = 0;
    for (; c0 + 32 <= head_dim; c0 += 32) {
        __m256 a[2][4];
        for (int j = 0; j < tile; j++)
            for (int r = 0; r < 4; r++) a[j][r] = _mm256_setzero_ps();
        for (int64_t p = 0; p < rows; p++) {
            const float *v = values + p * stride + c0;
            const __m256 x0 = _mm256_loadu_ps(v), x1 = _mm256_loadu_ps(v + 8), x2 = _mm256_loadu_ps(v + 16),
                         x3 = _mm256_loadu_ps(v + 24);
            for (int j = 0; j < tile; j++) {
                const __m256 w = _mm256_broadcast_ss(weights + j * padded + p);
                a[j][0] = _mm256_fmadd_ps(w, x0, a[j][0]);
                a[j][1] = _mm256_fmadd_ps(w, x1, a[j][1]);
                a[j][2] = _mm256_fmadd_ps(w, x2, a[j][2]);
                a[j][3] = _mm256_fmadd_ps(w, x3, a[j][3]);
            }
        }
        for (int j = 0; j < tile; j++) {
            const __m256 factor = _mm256_set1_ps(inverse[j]);
            for (int r = 0; r < 4; r++) _mm256_storeu_ps(out + j * stride + c0 + 8 * r, _mm256_mul_ps(a[j][r], factor));
        }
    }
    for (; c0 < head_dim; c0 += 8) {
        __m256 a[2];
        for (int j = 0; j < tile; j++) a[j] = _mm256_setzero_ps();
        for (int64_t p = 0; p < rows; p++) {
            const __m256 x = _mm256_loadu_ps(values + p * stride + c0);
            for (int j = 0; j < tile; j++) a[j] = _mm256_fmadd_ps(_mm256_broadcast_ss(weights + j * padded + p), x, a[j]);
        }
        for (int j = 0; j < tile; j++) _mm256_storeu_ps(out + j * stride + c0, _mm256_mul_ps(a[j], _mm256_set1_ps(inverse[j])));
    }
}

/* e^x of softmax weights (x ≤ 0) to about an ulp, 0 for x = −∞ and below −87 (e^−87 against the row's largest
   weight, 1, is below fp32's resolution): exp256 works in double to be correctly rounded for the decoder's near-tied
   logits, three times the cost, which an encoder's weights do not need. */
EK_SEQUENCE_AVX2 EK_SEQUENCE_INLINE __m256 softmax_exp(__m256 x) {
    return _mm256_and_ps(exp_negative_ps(x), _mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_GE_OQ));
}

/* e^(s − max) of one row of scores in place (−∞ past the sequence gives 0); returns 1 / their sum. */
EK_SEQUENCE_AVX2 EK_SEQUENCE_INLINE float exponentials(float *row, int64_t padded) {
    __m256 m = _mm256_set1_ps(-INFINITY);
    for (int64_t p = 0; p < padded; p += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(row + p));
    m = _mm256_max_ps(m, _mm256_permute2f128_ps(m, m, 1));
    m = _mm256_max_ps(m, _mm256_shuffle_ps(m, m, _MM_SHUFFLE(1, 0, 3, 2)));
    m = _mm256_max_ps(m, _mm256_shuffle_ps(m, m, _MM_SHUFFLE(2, 3, 0, 1)));
    __m256 total = _mm256_setzero_ps();
    for (int64_t p = 0; p < padded; p += 8) {
        const __m256 e = softmax_exp(_mm256_sub_ps(_mm256_loadu_ps(row + p), m));
        _mm256_storeu_ps(row + p, e);
        total = _mm256_add_ps(total, e);
    }
    float lanes[8];
    _mm256_storeu_ps(lanes, total);
    return 1.0f / (((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7])));
}

/*
 * fp32 keys and values, head_dim a multiple of 8. `scratch` holds the transposed keys (head_dim rows of `padded`
 * positions, the padding zero) and then a tile's scores (EK_SEQUENCE_QUERIES rows of `padded`).
 */
EK_SEQUENCE_AVX2 static void sequence_attention_avx2(const float *q, const float *keys, const float *values, int64_t stride,
                                                     int64_t rows, int64_t head_dim, float scale, float *out,
                                                     int64_t padded, float *scratch) {
    float *kt = scratch, *scores = scratch + head_dim * padded;
    for (int64_t c = 0; c < head_dim; c++) {
        float *column = kt + c * padded;
        for (int64_t p = rows; p < padded; p++) column[p] = 0;
    }
    /* eight keys × eight columns at a time through registers (the rest one by one) */
    int64_t p0 = 0;
    for (; p0 + 8 <= rows; p0 += 8)
        for (int64_t c0 = 0; c0 < head_dim; c0 += 8) ek_transpose8_ps(keys + p0 * stride + c0, stride, kt + c0 * padded + p0, padded);
    for (; p0 < rows; p0++)
        for (int64_t c = 0; c < head_dim; c++) kt[c * padded + p0] = keys[p0 * stride + c];
    for (int64_t i0 = 0; i0 < rows; i0 += EK_SEQUENCE_QUERIES) {
        const int tile = (int)(rows - i0 < EK_SEQUENCE_QUERIES ? rows - i0 : EK_SEQUENCE_QUERIES);
        const float *qt = q + i0 * stride;
        switch (tile) { /* each size inlined with its constant: the tile's registers stay registers */
        case 4: scores_tile(4, qt, stride, rows, head_dim, scale, kt, padded, scores); break;
        case 3: scores_tile(3, qt, stride, rows, head_dim, scale, kt, padded, scores); break;
        case 2: scores_tile(2, qt, stride, rows, head_dim, scale, kt, padded, scores); break;
        default: scores_tile(1, qt, stride, rows, head_dim, scale, kt, padded, scores); break;
        }
        float inverse[EK_SEQUENCE_QUERIES];
        for (int j = 0; j < tile; j++) inverse[j] = exponentials(scores + j * padded, padded);
        for (int j0 = 0; j0 < tile; j0 += 2) {
            if (j0 + 1 < tile)
                values_tile(2, scores + j0 * padded, padded, inverse + j0, values, stride, rows, head_dim, out + (i0 + j0) * stride);
            else
                values_tile(1, scores + j0 * padded, padded, inverse + j0, values, stride, rows, head_dim, out + (i0 + j0) * stride);
        }
    }
}
#endif

/* Floats of scratch on the stack; a longer sequence's scratch is allocated. */
#define EK_SEQUENCE_STACK_FLOATS 8192

bool ek_sequence_attention_with(bool simd, bool half, const float *q, const void *keys, const void *values, int64_t stride,
                                int64_t rows, int64_t head_dim, float scale, float *out) {
    if (head_dim < 1 || head_dim > EK_SEQUENCE_MAX_HEAD || rows < 0 || stride < head_dim) return false;
    if (rows == 0) return true;
    if (rows > INT32_MAX / 2 || (uint64_t)rows * (uint64_t)stride > (uint64_t)INT64_MAX / 8) return false;
#if defined(__x86_64__)
    if (simd && !half && head_dim % 8 == 0 && ek_ops_simd_available()) {
        const int64_t padded = (rows + 7) / 8 * 8;
        const int64_t floats = (head_dim + EK_SEQUENCE_QUERIES) * padded;
        float stack[EK_SEQUENCE_STACK_FLOATS] __attribute__((aligned(32)));
        float *scratch = floats <= EK_SEQUENCE_STACK_FLOATS ? stack : malloc((size_t)floats * sizeof(float));
        if (scratch != NULL) {
            sequence_attention_avx2(q, keys, values, stride, rows, head_dim, scale, out, padded, scratch);
            if (scratch != stack) free(scratch);
            return true;
        }
    }
#else
    (void)simd;
#endif
    double stack_weights[1024];
    double *weights = rows <= 1024 ? stack_weights : malloc((size_t)rows * sizeof(double));
    if (weights == NULL) return false;
    sequence_attention_portable(half, q, keys, values, stride, rows, head_dim, scale, out, weights);
    if (weights != stack_weights) free(weights);
    return true;
}
