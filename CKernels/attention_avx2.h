/*
 * attention_avx2.h — the attention loops both attention forms share on AVX2 + FMA + F16C: the one-pass op
 * (attention.c) and the encoder's scores op (ops.c). Included inside an `#if defined(__x86_64__)` after
 * <immintrin.h>.
 */
#ifndef EK_ATTENTION_AVX2_H
#define EK_ATTENTION_AVX2_H

#define EK_ATTENTION_AVX2 __attribute__((target("avx2,fma,f16c")))
#define EK_ATTENTION_PARTS EK_ATTENTION_AVX2 static inline __attribute__((always_inline))

/* Positions a block of the one-pass forms: its scores, one update of the running maximum and sum, its values. */
#define EK_ATTENTION_BLOCK 32

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

/* scores[j] = scale · q·key_j for `count` keys at `key` + j·key_bytes: in fours (scores4), the rest one at a time. */
EK_ATTENTION_PARTS void score_rows(bool half_cache, const float *q, const char *key, int64_t key_bytes, int64_t count,
                                   int64_t head_dim, float scale, float *scores) {
    int64_t j = 0;
    for (; j + 4 <= count; j += 4) scores4(half_cache, q, key + j * key_bytes, key_bytes, head_dim, scale, scores + j);
    for (; j < count; j++) {
        const char *row = key + j * key_bytes;
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
        for (int64_t i = 0; i < head_dim; i += 16) {
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), load8(row, i, half_cache), a0);
            a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8), load8(row, i + 8, half_cache), a1);
        }
        scores[j] = hsum8(_mm256_add_ps(a0, a1)) * scale;
    }
}

/* The running maximum raised to a block's maximum when that is greater: the sum and the accumulated values rescaled
   by exp(old − new) (0 the first time: nothing accumulated yet). */
EK_ATTENTION_PARTS void raise_maximum(float block_maximum, int64_t head_dim, float *maximum, float *sum, float *accumulator) {
    if (block_maximum <= *maximum) return;
    const float rescale = expf(*maximum - block_maximum);
    *maximum = block_maximum;
    *sum *= rescale;
    const __m256 factor = _mm256_set1_ps(rescale);
    for (int64_t i = 0; i < head_dim; i += 8)
        _mm256_storeu_ps(accumulator + i, _mm256_mul_ps(_mm256_loadu_ps(accumulator + i), factor));
}

/* One block's step of the online softmax: the running maximum raised to the block's (the accumulator and sum
   rescaled when it grows), the block's scores turned into their weights exp(score − maximum), added to the sum. */
EK_ATTENTION_PARTS void softmax_block(float *scores, int64_t count, int64_t head_dim, float *maximum, float *sum,
                                      float *accumulator) {
    float block_maximum = -INFINITY;
    int64_t j;
    for (j = 0; j < count; j++) block_maximum = scores[j] > block_maximum ? scores[j] : block_maximum;
    raise_maximum(block_maximum, head_dim, maximum, sum, accumulator);
    const __m256 shift = _mm256_set1_ps(*maximum);
    for (j = 0; j + 8 <= count; j += 8) _mm256_storeu_ps(scores + j, exp256(_mm256_sub_ps(_mm256_loadu_ps(scores + j), shift)));
    for (; j < count; j++) scores[j] = expf(scores[j] - *maximum);
    for (j = 0; j < count; j++) *sum += scores[j];
}

/* accumulator[0..<64] += Σ_j weights[j] · value_j[offset..<offset+64], value_j at base + j·row_bytes. */
EK_ATTENTION_PARTS void accumulate_slice64(bool half_cache, const char *base, int64_t row_bytes, const float *weights,
                                           int64_t count, float *accumulator, int64_t offset) {
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
EK_ATTENTION_PARTS void accumulate_slice16(bool half_cache, const char *base, int64_t row_bytes, const float *weights,
                                           int64_t count, float *accumulator, int64_t offset) {
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

/* accumulator += Σ_j weights[j] · value_j over `count` values at `values` + j·row_bytes, in slices of 64 of the head
   (the slice's accumulators stay in registers over the rows), then of 16. */
EK_ATTENTION_PARTS void accumulate_rows(bool half_cache, const char *values, int64_t row_bytes, const float *weights,
                                        int64_t count, int64_t head_dim, float *accumulator) {
    int64_t c = 0;
    for (; c + 64 <= head_dim; c += 64) accumulate_slice64(half_cache, values, row_bytes, weights, count, accumulator + c, c);
    for (; c < head_dim; c += 16) accumulate_slice16(half_cache, values, row_bytes, weights, count, accumulator + c, c);
}

/* out = accumulator / sum (0 for a sum of 0: nothing visible). */
EK_ATTENTION_PARTS void scale_out(const float *accumulator, float sum, int64_t head_dim, float *out) {
    const __m256 inverse = _mm256_set1_ps(sum == 0.0f ? 0.0f : 1.0f / sum);
    for (int64_t i = 0; i < head_dim; i += 8) _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_loadu_ps(accumulator + i), inverse));
}

#endif
