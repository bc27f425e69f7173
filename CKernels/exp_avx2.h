/*
 * exp_avx2.h — e^x on AVX2 + FMA lanes to double accuracy, shared by the
 * element-wise ops (softmax, SwiGLU, SiLU) and attention. Included inside
 * an `#if defined(__x86_64__)` after <immintrin.h>.
 */
#ifndef EK_EXP_AVX2_H
#define EK_EXP_AVX2_H

#define EK_EXP_AVX2 __attribute__((target("avx2,fma")))
#define EK_EXP_AVX512 __attribute__((target("avx512f,avx2,fma")))

/* e^r's Taylor coefficients, 1/11! down to 1/0!, for Horner's rule. */
static const double ek_exp_taylor[12] = {
    1.0 / 39916800, 1.0 / 3628800, 1.0 / 362880, 1.0 / 40320, 1.0 / 5040, 1.0 / 720,
    1.0 / 120, 1.0 / 24, 1.0 / 6, 0.5, 1.0, 1.0,
};

/*
 * e^x for 4 double lanes, to double accuracy: x = n·ln2 + r with |r| ≤ ln2/2
 * (ln2 in two parts), e^r by its degree-11 Taylor polynomial (error below
 * 1e-14 relative), 2^n put into the exponent. The caller keeps x in [-104, 89].
 */
EK_EXP_AVX2 static inline __m256d exp_pd(__m256d x) {
    __m256d n = _mm256_round_pd(_mm256_mul_pd(x, _mm256_set1_pd(1.4426950408889634)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256d r = _mm256_fnmadd_pd(n, _mm256_set1_pd(6.93147180369123816490e-01), x);
    r = _mm256_fnmadd_pd(n, _mm256_set1_pd(1.90821492927058770002e-10), r);
    __m256d p = _mm256_set1_pd(ek_exp_taylor[0]);
    for (int i = 1; i < 12; i++) p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(ek_exp_taylor[i]));
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
EK_EXP_AVX2 static inline __m256 exp256(__m256 x) {
    /* max/min return their second operand for NaN: x goes second, so a NaN stays NaN. */
    __m256 clamped = _mm256_min_ps(_mm256_set1_ps(89.0f), _mm256_max_ps(_mm256_set1_ps(-104.0f), x));
    __m256d low = exp_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(clamped)));
    __m256d high = exp_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(clamped, 1)));
    return _mm256_set_m128(_mm256_cvtpd_ps(high), _mm256_cvtpd_ps(low));
}

/*
 * e^x for 8 float lanes (x ≤ 0; for softmax weights and erf, which need no
 * correct rounding): x = n·ln2 + r, e^r by a degree-6 polynomial, 2^n into
 * the exponent; within ~2 ulp; x below −87 gives e^−87.
 */
EK_EXP_AVX2 static inline __m256 exp_negative_ps(__m256 x) {
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.42860682030941723212e-6f), r);
    __m256 p = _mm256_set1_ps(1.0f / 720);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}

/* exp_negative_ps on 16 lanes (GELU's erf on AVX-512). */
EK_EXP_AVX512 static inline __m512 exp_negative_ps512(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860682030941723212e-6f), r);
    __m512 p = _mm512_set1_ps(1.0f / 720);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    __m512i bits = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_mul_ps(p, _mm512_castsi512_ps(bits));
}

/* e^x for 8 double lanes, as exp_pd in 512-bit registers: the same reduction, polynomial and scaling. */
EK_EXP_AVX512 static inline __m512d exp_pd512(__m512d x) {
    __m512d n = _mm512_roundscale_pd(_mm512_mul_pd(x, _mm512_set1_pd(1.4426950408889634)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512d r = _mm512_fnmadd_pd(n, _mm512_set1_pd(6.93147180369123816490e-01), x);
    r = _mm512_fnmadd_pd(n, _mm512_set1_pd(1.90821492927058770002e-10), r);
    __m512d p = _mm512_set1_pd(ek_exp_taylor[0]);
    for (int i = 1; i < 12; i++) p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(ek_exp_taylor[i]));
    __m256i k = _mm512_cvtpd_epi32(n);
    __m512i bits = _mm512_slli_epi64(_mm512_add_epi64(_mm512_cvtepi32_epi64(k), _mm512_set1_epi64(1023)), 52);
    return _mm512_mul_pd(p, _mm512_castsi512_pd(bits));
}

#endif
