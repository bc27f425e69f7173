/*
 * attention_avx2.h — the attention loops both attention forms share on AVX2 + FMA + F16C: the one-pass op
 * (attention.c) and the encoder's scores op (ops.c). Included inside an `#if defined(__x86_64__)` after
 * <immintrin.h>.
 */
#ifndef EK_ATTENTION_AVX2_H
#define EK_ATTENTION_AVX2_H

#define EK_ATTENTION_PARTS __attribute__((target("avx2,fma,f16c"))) static inline __attribute__((always_inline))

/* Eight values from element i of a row of fp16 (`half`) or fp32 values, widened to fp32. */
EK_ATTENTION_PARTS __m256 load8(const void *base, int64_t i, bool half) {
    return half ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)base + i)))
                : _mm256_loadu_ps((const float *)base + i);
}

/* The sum of a register's eight lanes. */
EK_ATTENTION_PARTS float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Four keys' scores at once (eight FMA chains instead of two: one key at a time waited on the FMA latency and paid a
   whole horizontal sum per key), the four horizontal sums folded by two VHADDPS; head_dim a multiple of 16. */
EK_ATTENTION_PARTS void scores4(bool half_cache, const float *q, const char *key, int64_t key_bytes, int64_t head_dim,
                                float scale, float *scores) {
    __m256 a[4], b[4];
    for (int j = 0; j < 4; j++) a[j] = b[j] = _mm256_setzero_ps();
    for (int64_t i = 0; i < head_dim; i += 16) {
        const __m256 q0 = _mm256_loadu_ps(q + i), q1 = _mm256_loadu_ps(q + i + 8);
        for (int j = 0; j < 4; j++) {
            a[j] = _mm256_fmadd_ps(q0, load8(key + j * key_bytes, i, half_cache), a[j]);
            b[j] = _mm256_fmadd_ps(q1, load8(key + j * key_bytes, i + 8, half_cache), b[j]);
        }
    }
    const __m256 s = _mm256_hadd_ps(_mm256_hadd_ps(_mm256_add_ps(a[0], b[0]), _mm256_add_ps(a[1], b[1])),
                                    _mm256_hadd_ps(_mm256_add_ps(a[2], b[2]), _mm256_add_ps(a[3], b[3])));
    const __m128 sums = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    _mm_storeu_ps(scores, _mm_mul_ps(sums, _mm_set1_ps(scale)));
}

#endif
