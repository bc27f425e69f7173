/*
 * x86_avx2_body.h — the AVX2 kernels, included twice: by x86_avx2.c with
 * AVX-VNNI (VPDPBUSD on 256-bit registers) and by x86_avx2_plain.c without
 * it (VPMADDUBSW + VPMADDWD). Before including, define
 *   EK_AVX2_TARGET  the function attribute (target features),
 *   EK_AVX2_VNNI    1 or 0,
 *   EK_AVX2_NAME(x) how to name this variant's functions.
 *
 * A 256-bit register holds eight rows: each 64-byte chunk of a packed group
 * is two halves, rows 0–7 then rows 8–15, processed one after the other (a
 * decode GEMV takes both in one pass, and so does the Q8_0 GEMM of more than
 * 16 activation rows without VNNI: group_tile).
 */
#include <immintrin.h>
#include <string.h>
#include "quant_impl.h"
#include "x86_prefetch.h"

#define EK_AVX2_INLINE static inline __attribute__((always_inline))

EK_AVX2_TARGET EK_AVX2_INLINE __m256i EK_AVX2_NAME(broadcast4)(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, sizeof v);
    return _mm256_set1_epi32(v);
}

/* acc + Σ of four unsigned×signed byte products per 32-bit lane (no saturation for the inputs used). */
EK_AVX2_TARGET EK_AVX2_INLINE __m256i EK_AVX2_NAME(dot_u8s8)(__m256i acc, __m256i u, __m256i s) {
#if EK_AVX2_VNNI
    return _mm256_dpbusd_avx_epi32(acc, u, s);
#else
    /* Pairs of products fit in int16: the unsigned inputs here are Q8_0's |w| ≤ 127 (4-bit sums stay int16 longer). */
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
#endif
}

EK_AVX2_TARGET EK_AVX2_INLINE float EK_AVX2_NAME(hmax)(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

EK_AVX2_TARGET EK_AVX2_INLINE int32_t EK_AVX2_NAME(hsum)(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* Eight values at p, times the column scales at c when there are any. */
EK_AVX2_TARGET EK_AVX2_INLINE __m256 EK_AVX2_NAME(load_scaled)(const float *p, const float *c) {
    return c ? _mm256_mul_ps(_mm256_loadu_ps(p), _mm256_loadu_ps(c)) : _mm256_loadu_ps(p);
}

/* One 32-block's quants (times `columns`, its column scales, when not NULL) at a given 1/d: nearest, ties to even,
   whatever MXCSR says; returns Σq. */
EK_AVX2_TARGET EK_AVX2_INLINE int32_t EK_AVX2_NAME(quantize_q8_scaled)(const float *x, const float *columns, float inverse, int8_t *qs) {
    const __m256 scale = _mm256_set1_ps(inverse);
    __m256i q[4];
    for (int j = 0; j < 4; j++) {
        const __m256 v = EK_AVX2_NAME(load_scaled)(x + 8 * j, columns ? columns + 8 * j : NULL);
        q[j] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v, scale), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    packed = _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)qs, packed);
    return EK_AVX2_NAME(hsum)(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
}

/* max|x| (times the column scales when not NULL) over `count` values (a multiple of 8). */
EK_AVX2_TARGET EK_AVX2_INLINE float EK_AVX2_NAME(abs_max)(const float *x, const float *column_scales, int64_t count) {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 amax = _mm256_setzero_ps();
    for (int64_t j = 0; j < count; j += 8) {
        const __m256 v = EK_AVX2_NAME(load_scaled)(x + j, column_scales ? column_scales + j : NULL);
        amax = _mm256_max_ps(amax, _mm256_and_ps(v, abs_mask));
    }
    return EK_AVX2_NAME(hmax)(amax);
}

/* One 32-block to Q8. Returns d before fp16 rounding. */
EK_AVX2_TARGET EK_AVX2_INLINE float EK_AVX2_NAME(quantize_q8_block)(const float *x, int8_t *qs, int32_t *sum) {
    const float amax = EK_AVX2_NAME(abs_max)(x, NULL, EK_BLOCK);
    *sum = EK_AVX2_NAME(quantize_q8_scaled)(x, NULL, amax != 0.0f ? 127.0f / amax : 0.0f, qs); /* as the oracle's q8_scale */
    return amax / 127.0f;
}

/* One row at one scale (ek_quantize_activations_row_scaled): max|x| over the row, then each block at 127 / max. */
EK_AVX2_TARGET static float EK_AVX2_NAME(quantize_act_row_scaled)(const float *x, int64_t blocks, const float *column_scales,
                                                                  ek_block_q8_act *act) {
    const float d = EK_AVX2_NAME(abs_max)(x, column_scales, blocks * EK_BLOCK) / 127.0f, inverse = d != 0.0f ? 1.0f / d : 0.0f;
    for (int64_t b = 0; b < blocks; b++)
        act[b].sum = EK_AVX2_NAME(quantize_q8_scaled)(x + b * EK_BLOCK, column_scales ? column_scales + b * EK_BLOCK : NULL,
                                                      inverse, act[b].qs);
    return d;
}

EK_AVX2_TARGET EK_AVX2_INLINE float EK_AVX2_NAME(fp16_round)(float value) {
    return _cvtsh_ss(_cvtss_sh(value, _MM_FROUND_TO_NEAREST_INT));
}

EK_AVX2_TARGET static void EK_AVX2_NAME(quantize_act)(const float *x, int64_t blocks, ek_block_q8_act *act, bool q8_1) {
    for (int64_t b = 0; b < blocks; b++) {
        int32_t sum;
        float d = EK_AVX2_NAME(quantize_q8_block)(x + b * EK_BLOCK, act[b].qs, &sum);
        act[b].d = EK_AVX2_NAME(fp16_round)(d);
        act[b].s = q8_1 ? EK_AVX2_NAME(fp16_round)(d * (float)sum) : 0.0f;
        act[b].sum = sum;
        act[b].row_sum = 0;
    }
}

EK_AVX2_TARGET static void EK_AVX2_NAME(quantize_row_q8_0)(const float *x, void *out, int64_t blocks) {
    ek_block_q8_0 *y = out;
    for (int64_t b = 0; b < blocks; b++) {
        int32_t sum;
        float d = EK_AVX2_NAME(quantize_q8_block)(x + b * EK_BLOCK, y[b].qs, &sum);
        y[b].d = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
    }
}

EK_AVX2_TARGET static void EK_AVX2_NAME(quantize_row_q8_1)(const float *x, void *out, int64_t blocks) {
    ek_block_q8_1 *y = out;
    for (int64_t b = 0; b < blocks; b++) {
        int32_t sum;
        float d = EK_AVX2_NAME(quantize_q8_block)(x + b * EK_BLOCK, y[b].qs, &sum);
        y[b].d = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
        y[b].s = _cvtss_sh(d * (float)sum, _MM_FROUND_TO_NEAREST_INT);
    }
}

EK_AVX2_TARGET static void EK_AVX2_NAME(dequantize_row_q8_0)(const void *in, float *y, int64_t blocks) {
    const ek_block_q8_0 *x = in;
    for (int64_t b = 0; b < blocks; b++) {
        __m256 d = _mm256_set1_ps(_cvtsh_ss(x[b].d));
        for (int j = 0; j < 4; j++) {
            __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(x[b].qs + 8 * j)));
            _mm256_storeu_ps(y + b * EK_BLOCK + 8 * j, _mm256_mul_ps(_mm256_cvtepi32_ps(q), d));
        }
    }
}

EK_AVX2_TARGET static void EK_AVX2_NAME(dequantize_row_q4)(const uint8_t *qs, float *y, __m256 d, __m256 m, int offset, bool add_min) {
    const __m256i mask = _mm256_set1_epi32(0x0f), bias = _mm256_set1_epi32(offset);
    for (int j = 0; j < 2; j++) {
        __m256i bytes = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(qs + 8 * j)));
        __m256 low = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_and_si256(bytes, mask), bias)), d);
        __m256 high = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(bytes, 4), bias)), d);
        if (add_min) {
            low = _mm256_add_ps(low, m);
            high = _mm256_add_ps(high, m);
        }
        _mm256_storeu_ps(y + 8 * j, low);
        _mm256_storeu_ps(y + 16 + 8 * j, high);
    }
}

EK_AVX2_TARGET static void EK_AVX2_NAME(dequantize_row_q4_0)(const void *in, float *y, int64_t blocks) {
    const ek_block_q4_0 *x = in;
    for (int64_t b = 0; b < blocks; b++) {
        EK_AVX2_NAME(dequantize_row_q4)(x[b].qs, y + b * EK_BLOCK, _mm256_set1_ps(_cvtsh_ss(x[b].d)),
                                        _mm256_setzero_ps(), 8, false);
    }
}

EK_AVX2_TARGET static void EK_AVX2_NAME(dequantize_row_q4_1)(const void *in, float *y, int64_t blocks) {
    const ek_block_q4_1 *x = in;
    for (int64_t b = 0; b < blocks; b++) {
        EK_AVX2_NAME(dequantize_row_q4)(x[b].qs, y + b * EK_BLOCK, _mm256_set1_ps(_cvtsh_ss(x[b].d)),
                                        _mm256_set1_ps(_cvtsh_ss(x[b].m)), 0, true);
    }
}

/*
 * Eight weight rows (half `half` of a group) against `tile` activation rows; with `halves` = 2 (and one activation
 * row) both halves of the group, acc[0] and acc[1].
 */
#define EK_AVX2_TILE 4 /* activation rows per pass over a half-group */

EK_AVX2_TARGET EK_AVX2_INLINE void EK_AVX2_NAME(half_tile)(ek_format format, bool seven, bool rows_scaled, int tile, int halves,
                                                          bool first_pass, const uint8_t *gb, int half, int64_t blocks,
                                                          const ek_block_q8_act *act, __m256 *acc) {
    const size_t group_block = EK_GROUP_BLOCK_BYTES(format), scale_bytes = EK_GROUP_SCALE_BYTES(format);
    const __m256i low_mask = _mm256_set1_epi8(0x0f);
#if EK_AVX2_VNNI
    const int32_t q8_offset = 128;
#else
    /* the sign trick below multiplies the signed weights directly; seven-bit weights go in as w + 64 */
    const int32_t q8_offset = seven ? 64 : 0;
#endif
    const int32_t offset = format == EK_FORMAT_Q4_0 ? 8 : (format == EK_FORMAT_Q8_0 ? q8_offset : 0);
    for (int i = 0; i < tile * halves; i++) acc[i] = _mm256_setzero_ps();
    /* Row-scaled Q8_0 (EK_PACKED_Q8_ROW_SCALES, one half at a time): each row's integer sums run on over all the
       blocks, the offset's offset·Σa taken off once at the start, and are scaled once at the end. */
    const uint8_t *first_block = gb;
    __m256i kept_s[EK_AVX2_TILE], kept_t[EK_AVX2_TILE];
    for (int i = 0; i < tile; i++) {
        kept_s[i] = _mm256_set1_epi32(rows_scaled ? -offset * act[i * blocks].row_sum : 0);
        kept_t[i] = _mm256_setzero_si256();
    }
    for (int64_t b = 0; b < blocks; b++, gb += group_block) {
        for (int h = half; h < half + halves; h++) {
            const uint8_t *quants = gb + scale_bytes + 32 * h;
            if (first_pass && h == half) { /* the weights come from memory once per group: fetch ahead of the prefetcher */
                ek_prefetch_ahead(gb, group_block);
            }
            const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(gb + 16 * h)));
            const __m256 mins = format == EK_FORMAT_Q4_1 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(gb + 32 + 16 * h)))
                                                         : _mm256_setzero_ps();
            __m256 *out = acc + (h - half) * tile;
            /* One weight register at a time against every tile row (c outside, rows inside): 2.20 → 2.7× sgemm for
               Q8_0 with AVX-VNNI against each row running all eight registers in turn. Without VNNI the 4-bit pair
               sums stay int16 (eight of at most 2·15·127 fit) until one VPMADDWD; Q8_0's are widened at once. */
            __m256i s[EK_AVX2_TILE];
            for (int i = 0; i < tile; i++) s[i] = kept_s[i];
#if EK_AVX2_VNNI
            /* With VNNI each row's sum runs in two chains (even and odd registers), as the AVX-512 kernel's do:
               VPDPBUSD's latency over four rows' chains alone kept it from issuing every cycle. */
            __m256i t[EK_AVX2_TILE];
            for (int i = 0; i < tile; i++) t[i] = kept_t[i];
#endif
            for (int c = 0; c < 8; c++) {
                __m256i w;
                if (format == EK_FORMAT_Q8_0) {
                    w = _mm256_loadu_si256((const __m256i *)(quants + 64 * c));
                } else {
                    w = _mm256_loadu_si256((const __m256i *)(quants + 64 * (c % 4)));
                    w = _mm256_and_si256(c < 4 ? w : _mm256_srli_epi16(w, 4), low_mask);
                }
#if !EK_AVX2_VNNI
                if (format == EK_FORMAT_Q8_0 && seven) {
                    /* Weights within [−64, 63] (EK_PACKED_Q8_SEVEN_BITS): w + 64 is at most 127, so VPMADDUBSW takes it
                       as the unsigned operand against the signed activations without the sign trick — no saturation
                       (2·127·127 < 2¹⁵), two instructions a register fewer; 64·Σa comes off at the block's end. */
                    const __m256i u = _mm256_sub_epi8(w, _mm256_set1_epi8(64));
                    for (int i = 0; i < tile; i++)
                        s[i] = EK_AVX2_NAME(dot_u8s8)(s[i], u, EK_AVX2_NAME(broadcast4)((act + i * blocks + b)->qs + 4 * c));
                    continue;
                }
                if (format == EK_FORMAT_Q8_0) { /* signed again; |w| × (x with w's sign): no saturation */
                    w = _mm256_xor_si256(w, _mm256_set1_epi8((char)0x80));
                    const __m256i magnitude = _mm256_abs_epi8(w);
                    for (int i = 0; i < tile; i++) {
                        const __m256i x = _mm256_sign_epi8(EK_AVX2_NAME(broadcast4)((act + i * blocks + b)->qs + 4 * c), w);
                        s[i] = EK_AVX2_NAME(dot_u8s8)(s[i], magnitude, x);
                    }
                    continue;
                }
                for (int i = 0; i < tile; i++)
                    s[i] = _mm256_add_epi16(s[i], _mm256_maddubs_epi16(w, EK_AVX2_NAME(broadcast4)((act + i * blocks + b)->qs + 4 * c)));
#else
                __m256i *chain = c % 2 == 0 ? s : t;
                for (int i = 0; i < tile; i++)
                    chain[i] = EK_AVX2_NAME(dot_u8s8)(chain[i], w, EK_AVX2_NAME(broadcast4)((act + i * blocks + b)->qs + 4 * c));
#endif
            }
            if (rows_scaled) {
                for (int i = 0; i < tile; i++) kept_s[i] = s[i];
#if EK_AVX2_VNNI
                for (int i = 0; i < tile; i++) kept_t[i] = t[i];
#endif
                continue;
            }
            for (int i = 0; i < tile; i++) {
                const ek_block_q8_act *a = act + i * blocks + b;
#if EK_AVX2_VNNI
                s[i] = _mm256_add_epi32(s[i], t[i]);
#else
                if (format != EK_FORMAT_Q8_0) s[i] = _mm256_madd_epi16(s[i], _mm256_set1_epi16(1));
#endif
                /* the offset's offset·Σa in integers (at most 128·32·127) */
                const __m256 dot = _mm256_cvtepi32_ps(_mm256_sub_epi32(s[i], _mm256_set1_epi32(offset * a->sum)));
                out[i] = _mm256_fmadd_ps(dot, _mm256_mul_ps(d, _mm256_set1_ps(a->d)), out[i]);
                if (format == EK_FORMAT_Q4_1) out[i] = _mm256_fmadd_ps(mins, _mm256_set1_ps(a->s), out[i]);
            }
        }
    }
    if (rows_scaled) {
        const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(first_block + 16 * half)));
        for (int i = 0; i < tile; i++) {
            const __m256i sum = EK_AVX2_VNNI ? _mm256_add_epi32(kept_s[i], kept_t[i]) : kept_s[i];
            acc[i] = _mm256_mul_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(d, _mm256_set1_ps(act[i * blocks].d)));
        }
    }
}

/* A decode GEMV reads both halves of a group in one pass. At 16384×8192 on avx2-novnni on an Intel Xeon (groups of
   139 KB for Q8_0, 74 KB for Q4_0, the second half-pass coming from L2) it streamed 0.83 → 0.92-0.97 of the read
   bandwidth for Q8_0 and 0.67-0.87 → 0.91-1.07 for Q4_0, and SmolLM2's 5-26 KB groups (the second pass from L1)
   measured 2-3 % slower over a whole decode there, so small groups took two passes. On the AMD Zen 3 kind, the one
   that runs this build natively, one pass is faster at every SmolLM2 shape too (Q8_0 GEMV, two alternating runs:
   49152×576 0.70-0.74 → 0.79-0.81 of the read bandwidth, 1536×576 0.48-0.60 → 0.72-0.75, 576×1536 0.48-0.58 →
   0.59-0.63) and SmolLM2 int8 decoded 123 → 128 tok/s (5 alternating pairs, 4 faster). */

#if !EK_AVX2_VNNI
/* Q8_0 against `tile` activation rows over a whole group — both halves, sixteen weight rows — for prefill GEMMs:
   each activation broadcast meets two weight registers (eight accumulators), where half_tile reloads it for each
   half. Without VNNI a product register costs two multiplies and an add; the half tile's loop spent another
   broadcast per two multiplies, and one core of a Zen 3 kept ~23 of its 32 int8 products a cycle with seven-bit
   weights (EK_PACKED_Q8_SEVEN_BITS: w + 64 is VPMADDUBSW's unsigned operand). Eight-bit weights (|w| × the
   activation with w's sign, as half_tile) gained as much from the group: GEMM vs sgemm on a Zen 3, `ember bench
   kernels`, three alternating runs, medians: 128×576×576 1.10 → 1.49×, 128×16384×8192 1.39 → 1.53×; SmolLM2 int8
   pp128 578-591 → 655-681 tok/s. Zen 3 issues VPSIGNB, VPABSB, VPMADDUBSW, VPMADDWD and FMA on the same two pipes
   (a loop of any two of them mixed runs two a cycle), so the sign trick's three per 32 products bound it at
   21 products a cycle, 1.33× the FMA peak — against 2× for seven bits. acc[i] are rows 0–7 of activation row i,
   acc[tile + i] rows 8–15. */
EK_AVX2_TARGET EK_AVX2_INLINE void EK_AVX2_NAME(group_tile)(bool seven, bool rows_scaled, int tile, const uint8_t *gb,
                                                          int64_t blocks, const ek_block_q8_act *act, __m256 *acc) {
    const size_t group_block = EK_GROUP_BLOCK_BYTES(EK_FORMAT_Q8_0), scale_bytes = EK_GROUP_SCALE_BYTES(EK_FORMAT_Q8_0);
    const __m256i sixty_four = _mm256_set1_epi8(64), sign_bit = _mm256_set1_epi8((char)0x80);
    const int32_t offset_of = seven ? 64 : 0; /* the seven-bit operand's offset, taken off as offset·Σa */
    __m256i s0[EK_AVX2_TILE], s1[EK_AVX2_TILE];
    for (int i = 0; i < tile; i++) {
        /* row-scaled: the seven-bit offset's 64·Σa of the whole row comes off once, at the start */
        s0[i] = s1[i] = _mm256_set1_epi32(rows_scaled ? -offset_of * act[i * blocks].row_sum : 0);
        acc[i] = acc[tile + i] = _mm256_setzero_ps();
    }
    for (int64_t b = 0; b < blocks; b++) {
        const uint8_t *block = gb + (size_t)b * group_block, *quants = block + scale_bytes;
        for (int c = 0; c < 8; c++) {
            const __m256i stored0 = _mm256_loadu_si256((const __m256i *)(quants + 64 * c));
            const __m256i stored1 = _mm256_loadu_si256((const __m256i *)(quants + 64 * c + 32));
            if (seven) { /* stored w + 128; w + 64 is the unsigned operand (see half_tile) */
                const __m256i w0 = _mm256_sub_epi8(stored0, sixty_four), w1 = _mm256_sub_epi8(stored1, sixty_four);
                for (int i = 0; i < tile; i++) {
                    const __m256i a = EK_AVX2_NAME(broadcast4)((act + i * blocks + b)->qs + 4 * c);
                    s0[i] = EK_AVX2_NAME(dot_u8s8)(s0[i], w0, a);
                    s1[i] = EK_AVX2_NAME(dot_u8s8)(s1[i], w1, a);
                }
            } else { /* signed again; |w| × (a with w's sign) */
                const __m256i w0 = _mm256_xor_si256(stored0, sign_bit), w1 = _mm256_xor_si256(stored1, sign_bit);
                const __m256i m0 = _mm256_abs_epi8(w0), m1 = _mm256_abs_epi8(w1);
                for (int i = 0; i < tile; i++) {
                    const __m256i a = EK_AVX2_NAME(broadcast4)((act + i * blocks + b)->qs + 4 * c);
                    s0[i] = EK_AVX2_NAME(dot_u8s8)(s0[i], m0, _mm256_sign_epi8(a, w0));
                    s1[i] = EK_AVX2_NAME(dot_u8s8)(s1[i], m1, _mm256_sign_epi8(a, w1));
                }
            }
        }
        if (rows_scaled) continue;
        const __m256 d0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)block));
        const __m256 d1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(block + 16)));
        for (int i = 0; i < tile; i++) {
            const ek_block_q8_act *a = act + i * blocks + b;
            const __m256 da = _mm256_set1_ps(a->d);
            __m256i t0 = s0[i], t1 = s1[i];
            if (seven) {
                const __m256i offset = _mm256_set1_epi32(64 * a->sum);
                t0 = _mm256_sub_epi32(t0, offset);
                t1 = _mm256_sub_epi32(t1, offset);
            }
            acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(t0), _mm256_mul_ps(d0, da), acc[i]);
            acc[tile + i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(t1), _mm256_mul_ps(d1, da), acc[tile + i]);
            s0[i] = s1[i] = _mm256_setzero_si256();
        }
    }
    if (rows_scaled) {
        const __m256 d0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)gb));
        const __m256 d1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(gb + 16)));
        for (int i = 0; i < tile; i++) {
            const __m256 da = _mm256_set1_ps(act[i * blocks].d);
            acc[i] = _mm256_mul_ps(_mm256_cvtepi32_ps(s0[i]), _mm256_mul_ps(d0, da));
            acc[tile + i] = _mm256_mul_ps(_mm256_cvtepi32_ps(s1[i]), _mm256_mul_ps(d1, da));
        }
    }
}

/* group_tile for every activation row of a group wholly inside the rows asked for (sixteen outputs each). */
EK_AVX2_TARGET EK_AVX2_INLINE void EK_AVX2_NAME(group)(bool seven, bool rows_scaled, const uint8_t *gb, int64_t blocks,
                                                     const ek_block_q8_act *act, int64_t m, float *y, int64_t ldy) {
    __m256 acc[2 * EK_AVX2_TILE];
    for (int64_t i = 0; i < m; i += EK_AVX2_TILE) {
        const int tile = m - i < EK_AVX2_TILE ? (int)(m - i) : EK_AVX2_TILE;
        switch (tile) { /* each size inlined with its constant */
        case 4: EK_AVX2_NAME(group_tile)(seven, rows_scaled, 4, gb, blocks, act + i * blocks, acc); break;
        case 3: EK_AVX2_NAME(group_tile)(seven, rows_scaled, 3, gb, blocks, act + i * blocks, acc); break;
        case 2: EK_AVX2_NAME(group_tile)(seven, rows_scaled, 2, gb, blocks, act + i * blocks, acc); break;
        default: EK_AVX2_NAME(group_tile)(seven, rows_scaled, 1, gb, blocks, act + i * blocks, acc); break;
        }
        for (int t = 0; t < tile; t++) {
            _mm256_storeu_ps(y + (i + t) * ldy, acc[t]);
            _mm256_storeu_ps(y + (i + t) * ldy + 8, acc[tile + t]);
        }
    }
}
#endif

/* `tile` activation rows against half `half` of one group: their eight outputs each, stored through `mask`. */
EK_AVX2_TARGET EK_AVX2_INLINE void EK_AVX2_NAME(tile_rows)(ek_format format, bool seven, bool rows_scaled, int tile, bool first_pass,
                                                         const uint8_t *gb, int half, int64_t blocks, const ek_block_q8_act *act,
                                                         float *y, int64_t ldy, __m256i mask) {
    __m256 acc[EK_AVX2_TILE];
    EK_AVX2_NAME(half_tile)(format, seven, rows_scaled, tile, 1, first_pass, gb, half, blocks, act, acc);
    for (int t = 0; t < tile; t++) _mm256_maskstore_ps(y + t * ldy, mask, acc[t]);
}

EK_AVX2_TARGET EK_AVX2_INLINE void EK_AVX2_NAME(gemm)(ek_format format, bool seven, bool rows_scaled, const uint8_t *packed, int64_t blocks,
                                                     const ek_block_q8_act *act, int64_t m, float *y, int64_t ldy,
                                                     int64_t row_begin, int64_t row_end) {
    const size_t group_block = EK_GROUP_BLOCK_BYTES(format);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    /* Software prefetch pays for decode and small batches (tg128 on a Zen 5 core under EMBER_ISA=avx2: +25%, eight
     * sequences batched +10%) and costs prompt passes a few percent (pp128 −4%): only up to 16 activation rows. */
    const bool prefetch = m <= 16;
    for (int64_t first = (row_begin / 8) * 8; first < row_end; first += 8) {
        const int64_t g = first / EK_PACK_ROWS;
        const int half = (int)((first / 8) % 2);
        const int64_t lo = row_begin > first ? row_begin - first : 0;
        const int64_t hi = row_end - first < 8 ? row_end - first : 8;
        /* Lanes lo…hi−1 are stored: sign bit set where lo ≤ lane < hi. */
        const __m256i mask = _mm256_and_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32((int)hi), lane),
                                              _mm256_cmpgt_epi32(lane, _mm256_set1_epi32((int)lo - 1)));
        const uint8_t *gb = packed + (size_t)g * (size_t)blocks * group_block;
#if !EK_AVX2_VNNI
        if (format == EK_FORMAT_Q8_0 && !prefetch && half == 0 && first >= row_begin && first + 16 <= row_end) {
            EK_AVX2_NAME(group)(seven, rows_scaled, gb, blocks, act, m, y + first, ldy);
            first += 8;
            continue;
        }
#endif
        if (!rows_scaled && m < EK_AVX2_TILE && half == 0 && first + 8 < row_end) {
            /* Decode: both halves in one pass, so the group's stream is read once in order, not each 64-byte chunk
               half by half in two passes over the group (the second from L2 once the group outgrows L1). */
            const __m256i second = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(row_end - first - 8)), lane);
            for (int64_t i = 0; i < m; i++) {
                __m256 acc[2];
                EK_AVX2_NAME(half_tile)(format, seven, false, 1, 2, prefetch && i == 0, gb, 0, blocks, act + i * blocks, acc);
                _mm256_maskstore_ps(y + i * ldy + first, mask, acc[0]);
                _mm256_maskstore_ps(y + i * ldy + first + 8, second, acc[1]);
            }
            first += 8;
            continue;
        }
        int64_t i = 0;
        for (; i + EK_AVX2_TILE <= m; i += EK_AVX2_TILE)
            EK_AVX2_NAME(tile_rows)(format, seven, rows_scaled, EK_AVX2_TILE, prefetch && i == 0 && half == 0, gb, half, blocks, act + i * blocks,
                                    y + i * ldy + first, ldy, mask);
        /* The last one to three rows as one tile too (each case inlined with its constant size), not one at a time:
           every row alone read the half-group's weights again. */
        const bool ahead = prefetch && i == 0 && half == 0;
        switch (m - i) {
        case 3: EK_AVX2_NAME(tile_rows)(format, seven, rows_scaled, 3, ahead, gb, half, blocks, act + i * blocks, y + i * ldy + first, ldy, mask); break;
        case 2: EK_AVX2_NAME(tile_rows)(format, seven, rows_scaled, 2, ahead, gb, half, blocks, act + i * blocks, y + i * ldy + first, ldy, mask); break;
        case 1: EK_AVX2_NAME(tile_rows)(format, seven, rows_scaled, 1, ahead, gb, half, blocks, act + i * blocks, y + i * ldy + first, ldy, mask); break;
        default: break;
        }
    }
}

#define EK_AVX2_GEMM(suffix, format, seven, rows_scaled)                                                       \
    EK_AVX2_TARGET static void EK_AVX2_NAME(gemm_##suffix)(const uint8_t *packed, int64_t blocks,               \
                                                          const ek_block_q8_act *act, int64_t m, float *y,      \
                                                          int64_t ldy, int64_t row_begin, int64_t row_end) {    \
        EK_AVX2_NAME(gemm)(format, seven, rows_scaled, packed, blocks, act, m, y, ldy, row_begin, row_end);     \
    }
EK_AVX2_GEMM(q8_0, EK_FORMAT_Q8_0, false, false)
EK_AVX2_GEMM(q4_0, EK_FORMAT_Q4_0, false, false)
EK_AVX2_GEMM(q4_1, EK_FORMAT_Q4_1, false, false)
EK_AVX2_GEMM(q8_0_row_scaled, EK_FORMAT_Q8_0, false, true)
#if !EK_AVX2_VNNI
EK_AVX2_GEMM(q8_0_seven, EK_FORMAT_Q8_0, true, false)
EK_AVX2_GEMM(q8_0_seven_row_scaled, EK_FORMAT_Q8_0, true, true)
#endif

/* The bandwidth reference of `ember bench kernels`: four accumulators and, as the AVX-512 read loop and every
   streaming kernel, a prefetch EK_PREFETCH_AHEAD ahead at EK_PREFETCH_HINT (ek_prefetch_ahead, x86_prefetch.h). Without it this loop
   read ~20 % less than the machine gives the kernels, so the AVX2 kernels' shares of it were flattering: one Emerald
   Rapids, two threads, 512 MB, medians of 5 alternating rounds, avx2 22.6 → 27.3 GB/s, avx2-novnni 23.0 → 27.9
   (1.21× in pairs). */
EK_AVX2_TARGET static uint64_t EK_AVX2_NAME(read_stream)(const void *data, size_t bytes) {
    const uint8_t *p = data;
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 128 <= bytes; i += 128) {
        ek_prefetch_ahead(p + i, 128);
        a0 = _mm256_xor_si256(a0, _mm256_loadu_si256((const __m256i *)(p + i)));
        a1 = _mm256_xor_si256(a1, _mm256_loadu_si256((const __m256i *)(p + i + 32)));
        a2 = _mm256_xor_si256(a2, _mm256_loadu_si256((const __m256i *)(p + i + 64)));
        a3 = _mm256_xor_si256(a3, _mm256_loadu_si256((const __m256i *)(p + i + 96)));
    }
    __m256i all = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
    uint64_t lanes[4];
    _mm256_storeu_si256((__m256i *)lanes, all);
    uint64_t sum = lanes[0] ^ lanes[1] ^ lanes[2] ^ lanes[3];
    for (; i + 8 <= bytes; i += 8) {
        uint64_t word;
        memcpy(&word, p + i, sizeof word);
        sum ^= word;
    }
    return sum;
}

const ek_isa_kernels EK_AVX2_TABLE = {
    .gemm = {EK_AVX2_NAME(gemm_q8_0), EK_AVX2_NAME(gemm_q4_0), EK_AVX2_NAME(gemm_q4_1)},
#if !EK_AVX2_VNNI
    .gemm_q8_0_seven = EK_AVX2_NAME(gemm_q8_0_seven),
    .gemm_q8_0_row_scaled = {EK_AVX2_NAME(gemm_q8_0_row_scaled), EK_AVX2_NAME(gemm_q8_0_seven_row_scaled)},
#else
    .gemm_q8_0_row_scaled = {EK_AVX2_NAME(gemm_q8_0_row_scaled), NULL},
#endif
    .quantize_act = EK_AVX2_NAME(quantize_act),
    .quantize_act_row_scaled = EK_AVX2_NAME(quantize_act_row_scaled),
    .quantize_row = {EK_AVX2_NAME(quantize_row_q8_0), NULL, NULL},
    .quantize_row_q8_1 = EK_AVX2_NAME(quantize_row_q8_1),
    .dequantize_row = {EK_AVX2_NAME(dequantize_row_q8_0), EK_AVX2_NAME(dequantize_row_q4_0),
                       EK_AVX2_NAME(dequantize_row_q4_1)},
    .read_stream = EK_AVX2_NAME(read_stream),
};
