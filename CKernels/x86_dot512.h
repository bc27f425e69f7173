/*
 * x86_dot512.h — private to CKernels: the int8 dot product of the 512-bit kernels, with or without VNNI. Included
 * (no guard) once per kernel variant after defining
 *   EK_DOT512_TARGET  the function attribute (target features),
 *   EK_DOT512_NAME    the function's name,
 *   EK_DOT512_VNNI    1 or 0;
 * it defines EK_DOT512_NAME(acc, u, a, small) = acc + u·a summed four bytes to a 32-bit lane (u unsigned, a signed):
 * VPDPBUSD, or without VNNI VPMADDUBSW's int16 pairs widened by VPMADDWD. Those pairs saturate past 2¹⁵ − 1, so they
 * are exact for u ≤ 127 only (`small`, a constant after inlining: nibbles, 5- and 6-bit values); a full byte (packed
 * Q8_0's w + 128, the IQ4 tables' v + 128) goes in as its top bit and the other seven, each pair then within
 * [−32768, 32512].
 */
#include <immintrin.h>

EK_DOT512_TARGET static inline __attribute__((always_inline)) __m512i EK_DOT512_NAME(__m512i acc, __m512i u, __m512i a,
                                                                                     const int small) {
#if EK_DOT512_VNNI
    (void)small;
    return _mm512_dpbusd_epi32(acc, u, a);
#else
    const __m512i ones = _mm512_set1_epi16(1);
    if (small) return _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(u, a), ones));
    const __m512i top = _mm512_and_si512(u, _mm512_set1_epi8((char)0x80)), rest = _mm512_xor_si512(u, top);
    acc = _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(rest, a), ones));
    return _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(top, a), ones));
#endif
}

#undef EK_DOT512_TARGET
#undef EK_DOT512_NAME
#undef EK_DOT512_VNNI
