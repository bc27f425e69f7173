/*
 * attention_group_body.h — the grouped attention passes of attention_group.c, compiled once per register file:
 * included with EK_GB_TARGET (the target attribute), EK_GB_NAME(x) (a suffixed name) and EK_GB_SLICE (the value
 * slice, 16 or 32 dimensions) defined. AVX2 has sixteen vector registers: a value slice of 16 keeps three heads'
 * six accumulators, their three weights and the value chunks in them, where 32 spilled an accumulator each
 * position (a store and reload on the FMA chain). With AVX-512VL the same 256-bit code has 32 registers and takes
 * slices of 32 (three heads' twelve accumulators). One Zen 4 core, 3 heads of 64 over an fp16 cache, medians of 21
 * alternating rounds against the one-pass op per head: slice 16 under AVX2 1.44–1.60× (32: 1.30–1.35×), slice 32
 * under AVX-512VL 1.63–1.77×.
 */
#define EK_GB_PARTS EK_GB_TARGET static inline __attribute__((always_inline))

/* scores[h][j] = scale · q_h·key_j for the `count` keys at `key` + j·key_bytes and the G heads q + h·head_dim: four keys
   at a time, each widened once for every head; the heads' sixteen chains (G = 3 + four keys each) keep both FMA pipes
   busy where one head's four waited on the FMA latency. */
EK_GB_PARTS void EK_GB_NAME(group_scores)(bool half_cache, const int G, const float *q, const char *key, int64_t key_bytes,
                                     int64_t count, int64_t head_dim, float scale, float scores[][EK_ATTENTION_BLOCK]) {
    const __m128 factor = _mm_set1_ps(scale);
    int64_t j = 0;
    for (; j + 4 <= count; j += 4) {
        __m256 a[EK_GROUP_HEADS][4];
        for (int h = 0; h < G; h++)
            for (int t = 0; t < 4; t++) a[h][t] = _mm256_setzero_ps();
        const char *row = key + j * key_bytes;
        for (int64_t i = 0; i < head_dim; i += 8) {
            __m256 k[4];
            for (int t = 0; t < 4; t++) k[t] = load8(row + t * key_bytes, i, half_cache);
            for (int h = 0; h < G; h++) {
                const __m256 qv = _mm256_loadu_ps(q + h * head_dim + i);
                for (int t = 0; t < 4; t++) a[h][t] = _mm256_fmadd_ps(qv, k[t], a[h][t]);
            }
        }
        for (int h = 0; h < G; h++) {
            const __m256 s = _mm256_hadd_ps(_mm256_hadd_ps(a[h][0], a[h][1]), _mm256_hadd_ps(a[h][2], a[h][3]));
            const __m128 sums = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
            _mm_storeu_ps(scores[h] + j, _mm_mul_ps(sums, factor));
        }
    }
    for (; j < count; j++) {
        const char *row = key + j * key_bytes;
        __m256 a[EK_GROUP_HEADS];
        for (int h = 0; h < G; h++) a[h] = _mm256_setzero_ps();
        for (int64_t i = 0; i < head_dim; i += 8) {
            const __m256 k = load8(row, i, half_cache);
            for (int h = 0; h < G; h++) a[h] = _mm256_fmadd_ps(_mm256_loadu_ps(q + h * head_dim + i), k, a[h]);
        }
        for (int h = 0; h < G; h++) scores[h][j] = hsum8(a[h]) * scale;
    }
}

/* One block's online-softmax step of one head, in registers: the block maximum, the rescale when it grows, the
   weights exp(score − maximum) (a polynomial within ~2 ulp: weights that are summed need no correct rounding) and
   their sum. */
EK_GB_PARTS void EK_GB_NAME(group_softmax)(float *scores, int64_t count, int64_t head_dim, float *maximum, float *sum,
                                      float *accumulator) {
    __m256 top = _mm256_set1_ps(-INFINITY);
    int64_t j = 0;
    for (; j + 8 <= count; j += 8) top = _mm256_max_ps(top, _mm256_loadu_ps(scores + j));
    __m128 half = _mm_max_ps(_mm256_castps256_ps128(top), _mm256_extractf128_ps(top, 1));
    half = _mm_max_ps(half, _mm_movehl_ps(half, half));
    float block_maximum = _mm_cvtss_f32(_mm_max_ss(half, _mm_movehdup_ps(half)));
    for (; j < count; j++) block_maximum = scores[j] > block_maximum ? scores[j] : block_maximum;
    raise_maximum(block_maximum, head_dim, maximum, sum, accumulator);
    const __m256 shift = _mm256_set1_ps(*maximum);
    __m256 total = _mm256_setzero_ps();
    for (j = 0; j + 8 <= count; j += 8) {
        const __m256 w = exp_negative_ps(_mm256_sub_ps(_mm256_loadu_ps(scores + j), shift));
        _mm256_storeu_ps(scores + j, w);
        total = _mm256_add_ps(total, w);
    }
    float block_sum = hsum8(total);
    for (; j < count; j++) block_sum += scores[j] = expf(scores[j] - *maximum);
    *sum += block_sum;
}

/* accumulator_h += Σ_j weights[h][j] · value_j for the G heads, in slices of 32 dimensions (each value chunk widened
   once for every head), then of 16. */
EK_GB_PARTS void EK_GB_NAME(group_values)(bool half_cache, const int G, const char *value, int64_t row_bytes, int64_t count,
                                     int64_t head_dim, float weights[][EK_ATTENTION_BLOCK], float *accumulator) {
    int64_t c = 0;
    for (; EK_GB_SLICE == 32 && c + 32 <= head_dim; c += 32) {
        __m256 a[EK_GROUP_HEADS][4];
        for (int h = 0; h < G; h++)
            for (int t = 0; t < 4; t++) a[h][t] = _mm256_loadu_ps(accumulator + h * head_dim + c + 8 * t);
        for (int64_t j = 0; j < count; j++) {
            __m256 w[EK_GROUP_HEADS];
            for (int h = 0; h < G; h++) w[h] = _mm256_broadcast_ss(weights[h] + j);
            const char *row = value + j * row_bytes;
            for (int t = 0; t < 4; t++) {
                const __m256 v = load8(row, c + 8 * t, half_cache);
                for (int h = 0; h < G; h++) a[h][t] = _mm256_fmadd_ps(v, w[h], a[h][t]);
            }
        }
        for (int h = 0; h < G; h++)
            for (int t = 0; t < 4; t++) _mm256_storeu_ps(accumulator + h * head_dim + c + 8 * t, a[h][t]);
    }
    for (; c < head_dim; c += 16) {
        __m256 a[EK_GROUP_HEADS][2];
        for (int h = 0; h < G; h++)
            for (int t = 0; t < 2; t++) a[h][t] = _mm256_loadu_ps(accumulator + h * head_dim + c + 8 * t);
        for (int64_t j = 0; j < count; j++) {
            const char *row = value + j * row_bytes;
            for (int h = 0; h < G; h++) {
                const __m256 w = _mm256_broadcast_ss(weights[h] + j);
                for (int t = 0; t < 2; t++) a[h][t] = _mm256_fmadd_ps(load8(row, c + 8 * t, half_cache), w, a[h][t]);
            }
        }
        for (int h = 0; h < G; h++)
            for (int t = 0; t < 2; t++) _mm256_storeu_ps(accumulator + h * head_dim + c + 8 * t, a[h][t]);
    }
}

/* Asks for the `count` rows at `rows` (row_bytes apart, `bytes` each) ahead of their use: the next block's, while
   this one is computed on. (Two to eight blocks ahead, or into L2 instead of L1, measured within the noise of a
   shared host on a 1,024-position cache read cold: 10–19 ns a position and head either way.) */
EK_GB_PARTS void EK_GB_NAME(prefetch_rows)(const char *rows, int64_t row_bytes, int64_t count, int64_t bytes) {
    for (int64_t j = 0; j < count; j++)
        for (int64_t b = 0; b < bytes; b += 64) _mm_prefetch(rows + j * row_bytes + b, _MM_HINT_T0);
}

/* G heads (1 to EK_GROUP_HEADS) of q, head_dim apart, over the same keys and values into out, head_dim apart. */
EK_GB_PARTS void EK_GB_NAME(group_pass)(bool half_cache, const int G, const float *q, const void *keys, const void *values,
                                   int64_t stride, int64_t visible, int64_t head_dim, float scale, float *out) {
    float accumulator[EK_GROUP_HEADS * EK_ATTENTION_MAX_HEAD], scores[EK_GROUP_HEADS][EK_ATTENTION_BLOCK];
    float maximum[EK_GROUP_HEADS], sum[EK_GROUP_HEADS];
    const int64_t element = half_cache ? 2 : 4, row_bytes = stride * element, bytes = head_dim * element;
    memset(accumulator, 0, (size_t)(G * head_dim) * sizeof(float));
    for (int h = 0; h < G; h++) maximum[h] = -INFINITY, sum[h] = 0.0f;
    for (int64_t first = 0; first < visible; first += EK_ATTENTION_BLOCK) {
        const int64_t count = visible - first < EK_ATTENTION_BLOCK ? visible - first : EK_ATTENTION_BLOCK;
        const char *key = (const char *)keys + first * row_bytes, *value = (const char *)values + first * row_bytes;
        const int64_t next = visible - first - count < EK_ATTENTION_BLOCK ? visible - first - count : EK_ATTENTION_BLOCK;
        EK_GB_NAME(prefetch_rows)(key + count * row_bytes, row_bytes, next, bytes);
        EK_GB_NAME(group_scores)(half_cache, G, q, key, row_bytes, count, head_dim, scale, scores);
        EK_GB_NAME(prefetch_rows)(value + count * row_bytes, row_bytes, next, bytes);
        for (int h = 0; h < G; h++) EK_GB_NAME(group_softmax)(scores[h], count, head_dim, &maximum[h], &sum[h], accumulator + h * head_dim);
        EK_GB_NAME(group_values)(half_cache, G, value, row_bytes, count, head_dim, scores, accumulator);
    }
    for (int h = 0; h < G; h++) scale_out(accumulator + h * head_dim, sum[h], head_dim, out + h * head_dim);
}

#define EK_GB_PASS(half, G)                                                                                           \
    EK_GB_TARGET static void EK_GB_NAME(group_pass_##half##_##G)(const float *q, const void *k, const void *v,        \
                                                                 int64_t stride, int64_t visible, int64_t head_dim,   \
                                                                 float scale, float *out) {                           \
        EK_GB_NAME(group_pass)(half, G, q, k, v, stride, visible, head_dim, scale, out);                              \
    }
EK_GB_PASS(true, 1)
EK_GB_PASS(true, 2)
EK_GB_PASS(true, 3)
EK_GB_PASS(false, 1)
EK_GB_PASS(false, 2)
EK_GB_PASS(false, 3)
#undef EK_GB_PASS

/* Every pass of this compilation: [half cache][heads − 1]. */
static const ek_group_pass EK_GB_NAME(group_passes)[2][EK_GROUP_HEADS] = {
    {EK_GB_NAME(group_pass_false_1), EK_GB_NAME(group_pass_false_2), EK_GB_NAME(group_pass_false_3)},
    {EK_GB_NAME(group_pass_true_1), EK_GB_NAME(group_pass_true_2), EK_GB_NAME(group_pass_true_3)},
};

#undef EK_GB_PARTS
