/*
 * transpose_avx2.h — an 8 × 8 fp32 transpose through AVX registers, shared by the fp32 GEMM's panel packing
 * (x86_outer_body.h) and the encoder's attention (sequence_attention.c). Include after <immintrin.h> on x86-64.
 */
#ifndef EK_TRANSPOSE_AVX2_H
#define EK_TRANSPOSE_AVX2_H

#include <stdint.h>

/* Eight rows of eight floats (row stride `ld`) transposed into out[c * ldo + q], q the row, c the column. */
__attribute__((target("avx2"))) static inline __attribute__((always_inline)) void ek_transpose8_ps(const float *in, int64_t ld,
                                                                                                  float *out, int64_t ldo) {
    __m256 r[8], t[8];
    for (int q = 0; q < 8; q++) r[q] = _mm256_loadu_ps(in + q * ld);
    for (int q = 0; q < 8; q += 2) {
        t[q] = _mm256_unpacklo_ps(r[q], r[q + 1]);
        t[q + 1] = _mm256_unpackhi_ps(r[q], r[q + 1]);
    }
    for (int q = 0; q < 8; q += 4) {
        r[q] = _mm256_shuffle_ps(t[q], t[q + 2], _MM_SHUFFLE(1, 0, 1, 0));
        r[q + 1] = _mm256_shuffle_ps(t[q], t[q + 2], _MM_SHUFFLE(3, 2, 3, 2));
        r[q + 2] = _mm256_shuffle_ps(t[q + 1], t[q + 3], _MM_SHUFFLE(1, 0, 1, 0));
        r[q + 3] = _mm256_shuffle_ps(t[q + 1], t[q + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int q = 0; q < 4; q++) {
        _mm256_storeu_ps(out + q * ldo, _mm256_permute2f128_ps(r[q], r[q + 4], 0x20));
        _mm256_storeu_ps(out + (q + 4) * ldo, _mm256_permute2f128_ps(r[q], r[q + 4], 0x31));
    }
}

#endif
