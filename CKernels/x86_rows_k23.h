/*
 * x86_rows_k23.h — the row kernels of the 2- and 3-bit K-quants (Q2_K, Q3_K), part of x86_rows_body.h (included
 * by it after its helpers, with its macros; not on its own).
 *
 * Both keep 256 values as four 2-bit planes of 32 bytes per half (element 128h + 32s + l is bits 2s…2s+1 of
 * qs[32h + l]) and a scale per 16: the 32-byte register of (h, s) is one shift and mask of its half's bytes, and
 * its low and high 128-bit lanes take sub-blocks 8h + 2s and 8h + 2s + 1 — the same pairing as Q6_K's chunks, so
 * the scales come by the same byte shuffle (sub16_scales). VPMADDUBSW multiplies the unsigned values with
 * the signed activations (pairs at most 2·7·127), VPMADDWD applies the int16 scale and sums pairs to int32.
 *   Q2_K: value d·scale·q − dmin·min, q 0…3: the minimums come off once per block as Σ min·bsum (the
 *         activations' sums of 16 against the sixteen minimums, bsum_dot).
 *   Q3_K: q = u − 4 with u = low two bits + 4·(bit 4h + s of hmask[l]) (0…7), signed 6-bit scales − 32:
 *         Σ scale·(u − 4)·a = Σ scale·u·a − 4·Σ scale·bsum.
 */

/* The sixteen 4-bit scales (int16, slot j = sub-block j) and minimums of a Q2_K block. */
EK_ROWS_TARGET EK_ROWS_INLINE void EK_ROWS_NAME(q2_k_scales)(const ek_block_q2_k *block, __m256i *scales, __m256i *mins) {
    const __m128i packed = _mm_loadu_si128((const __m128i *)block->scales), low = _mm_set1_epi8(0x0f);
    *scales = _mm256_cvtepu8_epi16(_mm_and_si128(packed, low));
    *mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), low));
}

/* The sixteen signed scales (6 bits − 32, int16, slot j = sub-block j) of a Q3_K block: low four bits from the
   nibbles of bytes 0–7 (sub-blocks 0–7 low, 8–15 high), top two from bits 2·(j / 4) of byte 8 + j mod 4 —
   one shift per dword (j / 4 is the dword). The twelve bytes are read as 8 + 4: a 16-byte load would pass the
   block's end (110 bytes) into the next row or past the matrix. */
EK_ROWS_TARGET EK_ROWS_INLINE __m256i EK_ROWS_NAME(q3_k_scales)(const ek_block_q3_k *block) {
    const __m128i low = _mm_set1_epi8(0x0f), two = _mm_set1_epi8(0x03);
    uint32_t top;
    memcpy(&top, block->scales + 8, sizeof top);
    __m128i nibbles = _mm_loadl_epi64((const __m128i *)block->scales);
    __m128i low_bits = _mm_unpacklo_epi64(_mm_and_si128(nibbles, low), _mm_and_si128(_mm_srli_epi16(nibbles, 4), low));
    __m128i high = _mm_srlv_epi32(_mm_set1_epi32((int32_t)top), _mm_setr_epi32(0, 2, 4, 6));
    high = _mm_and_si128(high, two);
    __m128i six = _mm_or_si128(low_bits, _mm_slli_epi16(high, 4));
    return _mm256_sub_epi16(_mm256_cvtepu8_epi16(six), _mm256_set1_epi16(32));
}

/* Bit `bit` (0…7) of every byte moved to bit 2 (the value 4); epi16 shifts, masked within the byte. */
EK_ROWS_TARGET EK_ROWS_INLINE __m256i EK_ROWS_NAME(bit_to_4)(__m256i bytes, const int bit) {
    const __m256i four = _mm256_set1_epi8(0x04);
    if (bit >= 2) return _mm256_and_si256(_mm256_srli_epi16(bytes, bit - 2), four);
    return _mm256_and_si256(_mm256_slli_epi16(bytes, 2 - bit), four);
}

/* One K-quant block of 2-bit planes against the tile's activation rows: sums[t] = Σ scale·u·a (int32 lanes); with
   `three` (a constant) each value gains its third bit from `hmask`, the block's 32 bytes of them. */
#define EK_ROWS_K23_BODY(wb, three, hmask)                                                                          \
    __m256i sums[EK_ROWS_TILE];                                                                                    \
    for (int t = 0; t < tile; t++) sums[t] = _mm256_setzero_si256();                                               \
    for (int h = 0; h < 2; h++) {                                                                                  \
        __m256i q = _mm256_loadu_si256((const __m256i *)((wb)->qs + 32 * h));                                      \
        for (int s = 0; s < 4; s++) {                                                                              \
            __m256i u = _mm256_and_si256(_mm256_srli_epi16(q, 2 * s), _mm256_set1_epi8(0x03));                     \
            if (three) u = _mm256_or_si256(u, EK_ROWS_NAME(bit_to_4)(hmask, 4 * h + s));                            \
            __m256i sub_scales = EK_ROWS_NAME(sub16_scales)(scales, h, s);                                          \
            for (int t = 0; t < tile; t++) {                                                                       \
                __m256i a = _mm256_loadu_si256((const __m256i *)(ab[t]->qs + 128 * h + 32 * s));                   \
                sums[t] = _mm256_add_epi32(sums[t], EK_ROWS_NAME(dot_scaled)(u, a, sub_scales));                   \
            }                                                                                                      \
        }                                                                                                          \
    }
EK_ROWS_SUPER_TILE_BEGIN(gemm_q2_k, ek_block_q2_k)
    __m256i scales, mins;
    EK_ROWS_NAME(q2_k_scales)(wb, &scales, &mins);
    const float d = EK_ROWS_NAME(load_f16)(&wb->d), dmin = EK_ROWS_NAME(load_f16)(&wb->dmin);
    EK_ROWS_K23_BODY(wb, 0, _mm256_setzero_si256())
    for (int t = 0; t < tile; t++) {
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums[t]), _mm256_set1_ps(d * ab[t]->d), acc[t]);
        acc[t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(EK_ROWS_NAME(bsum_dot)(ab[t], mins)), _mm256_set1_ps(dmin * ab[t]->d),
                                  acc[t]);
    }
EK_ROWS_SUPER_TILE_END(gemm_q2_k, ek_block_q2_k)

EK_ROWS_SUPER_TILE_BEGIN(gemm_q3_k, ek_block_q3_k)
    const __m256i scales = EK_ROWS_NAME(q3_k_scales)(wb);
    const __m256i hmask = _mm256_loadu_si256((const __m256i *)wb->hmask);
    const float d = EK_ROWS_NAME(load_f16)(&wb->d);
    EK_ROWS_K23_BODY(wb, 1, hmask)
    for (int t = 0; t < tile; t++) {
        __m256i total = _mm256_sub_epi32(sums[t], _mm256_slli_epi32(EK_ROWS_NAME(bsum_dot)(ab[t], scales), 2));
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(total), _mm256_set1_ps(d * ab[t]->d), acc[t]);
    }
EK_ROWS_SUPER_TILE_END(gemm_q3_k, ek_block_q3_k)

#undef EK_ROWS_K23_BODY
