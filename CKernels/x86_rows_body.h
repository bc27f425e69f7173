/*
 * x86_rows_body.h — the x86 row kernels (ek_rows.h) on 256-bit registers,
 * included by x86_rows.c twice: for AVX2 + FMA + F16C, and for AVX-512
 * machines (the same code compiled with their features, with EK_ROWS_512
 * defined: Q6_K then has a 512-bit version; Q4_K and Q5_K in 512 bits
 * measured no faster, their GEMV already at the driver's streaming rate).
 * Before including, define
 *   EK_ROWS_TARGET  the function attribute (target features),
 *   EK_ROWS_NAME(x) how to name this variant's functions,
 *   EK_ROWS_TABLE   the ek_row_kernels table to define.
 *
 * Shape of every kernel: for each weight row, for up to four activation
 * rows at a time, each weight block is decoded once into 32-byte vectors of
 * small integers and multiplied with every activation row of the tile
 * (VPMADDUBSW: unsigned weight × signed activation, or |w| × sign-moved
 * activation for signed weights; VPMADDWD applies the integer sub-block
 * scale), then scaled in fp32 once per block. Every product pair fits int16:
 * unsigned weights are at most 63, |signed| at most 127, |activations| 127.
 */
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>
#include "quant_impl.h"
#include "x86_prefetch.h"
#include "rows_impl.h"

#ifndef EK_ROWS_INLINE
#define EK_ROWS_INLINE static inline __attribute__((always_inline))
#endif
#ifndef EK_ROWS_TILE
#define EK_ROWS_TILE 4
#endif

EK_ROWS_TARGET EK_ROWS_INLINE float EK_ROWS_NAME(hsum_ps)(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

EK_ROWS_TARGET EK_ROWS_INLINE float EK_ROWS_NAME(load_f16)(const void *p) {
    ek_fp16 h;
    memcpy(&h, p, sizeof h);
    return _cvtsh_ss(h);
}

/* Unsigned bytes u × signed bytes s, pairs summed to int16, then × the int16 scales and pairs summed to int32. */
EK_ROWS_TARGET EK_ROWS_INLINE __m256i EK_ROWS_NAME(dot_scaled)(__m256i u, __m256i s, __m256i scales) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), scales);
}

/* 16 bytes of nibbles → 32 bytes: low nibbles (elements 0–15), then high nibbles (16–31). */
EK_ROWS_TARGET EK_ROWS_INLINE __m256i EK_ROWS_NAME(nibbles32)(const uint8_t *qs) {
    __m128i q = _mm_loadu_si128((const __m128i *)qs);
    __m128i mask = _mm_set1_epi8(0x0f);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), mask), _mm_and_si128(q, mask));
}

/* 32 bits → 32 bytes, byte j = 0x10 where bit j is set. */
EK_ROWS_TARGET EK_ROWS_INLINE __m256i EK_ROWS_NAME(bit4_bytes)(uint32_t bits) {
    const __m256i spread = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
    const __m256i select = _mm256_set1_epi64x((int64_t)0x8040201008040201);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int32_t)bits), spread);
    v = _mm256_cmpeq_epi8(_mm256_and_si256(v, select), select);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

/* --------------------------------------------------- activations (Q8_K) -- */

EK_ROWS_TARGET static void EK_ROWS_NAME(quantize_q8_k)(const float *x, int64_t blocks, ek_block_q8_k *act) {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int64_t b = 0; b < blocks; b++) {
        const float *v = x + b * EK_SUPER_BLOCK;
        ek_block_q8_k *out = &act[b];
        __m256 amax = _mm256_setzero_ps();
        for (int j = 0; j < EK_SUPER_BLOCK; j += 8) amax = _mm256_max_ps(amax, _mm256_and_ps(_mm256_loadu_ps(v + j), abs_mask));
        __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
        m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        m = _mm_max_ss(m, _mm_movehdup_ps(m));
        float max_value = _mm_cvtss_f32(m);
        out->reserved = 0;
        if (max_value == 0.0f) {
            out->d = 0.0f;
            memset(out->qs, 0, sizeof out->qs);
            memset(out->bsums, 0, sizeof out->bsums);
            continue;
        }
        float inverse = 127.0f / max_value;
        __m256 scale = _mm256_set1_ps(inverse);
        for (int j = 0; j < EK_SUPER_BLOCK; j += 32) {
            __m256i q0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(v + j), scale));
            __m256i q1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(v + j + 8), scale));
            __m256i q2 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(v + j + 16), scale));
            __m256i q3 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(v + j + 24), scale));
            __m256i w01 = _mm256_packs_epi32(q0, q1), w23 = _mm256_packs_epi32(q2, q3);
            __m256i bytes = _mm256_packs_epi16(w01, w23);
            /* The packs interleave 128-bit lanes: put the dwords back in element order. */
            bytes = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
            bytes = _mm256_max_epi8(bytes, _mm256_set1_epi8(-127));
            _mm256_storeu_si256((__m256i *)(out->qs + j), bytes);
            /* Sums of 16: bytes → int16 pairs (× 1) → two int32 per 16 → per half. */
            __m256i pairs = _mm256_maddubs_epi16(_mm256_set1_epi8(1), bytes);
            __m256i quads = _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
            __m128i lo = _mm256_castsi256_si128(quads), hi = _mm256_extracti128_si256(quads, 1);
            __m128i s = _mm_hadd_epi32(lo, hi);         /* [a0+a1, a2+a3, b0+b1, b2+b3] */
            s = _mm_hadd_epi32(s, s);                   /* [Σa, Σb, …] */
            out->bsums[j / 16] = (int16_t)_mm_cvtsi128_si32(s);
            out->bsums[j / 16 + 1] = (int16_t)_mm_extract_epi32(s, 1);
        }
        out->d = 1.0f / inverse;
    }
}

/* How a decode GEMV (at most 16 activation rows) asks for the weights ahead of the kernel. AVX2: each block's lines
   EK_PREFETCH_AHEAD bytes (x86_prefetch.h) ahead as its turn comes (the rows lie one after another, so that is the stream's future).
   AVX-512: a whole row two rows ahead, at the row's start. On a Zen 3 core (AVX2, 16384×8192 out of memory, medians
   of 5 calls, alternating builds) the burst of a whole row's lines read 7.8-9.6 GB/s of Q6_K, 6.8-7.9 of Q3_K;
   per block 4 KB ahead 12.9-13.9 and 8.5-9.1 (no software prefetch at all, Q6_K: 10.5-12.6). AVX2 runs only Q2_K and
   Q3_K here (the others have interleaved kernels): two threads, `ember bench kernels`, 0.49-0.51 → 0.59-0.72 of the
   read bandwidth for Q3_K, 0.50-0.53 → 0.57-0.58 for Q2_K, whose kernels are near a core's compute rate. The
   AVX-512 builds keep the burst on other vendors, measured at the streaming rate on an Emerald Rapids; on AMD cores
   they take the per-block prefetch too (the `decode_amd` entries): one Zen 4, two threads, `ember bench kernels`, 3
   alternating rounds, burst → per block, GB/s: Q2_K 11.4 → 16.0 at 576×1536, 19.2 → 19.8 at 16384×8192; Q3_K
   9.9 → 18.7 and 19.8 → 22.4 (a second run of the final build: Q2_K 13.4 → 11.5 and 20.4 → 26.4, Q3_K 14.3 → 16.5
   and 25.1 → 27.5). */
/* Every quantized kernel is a *tile* function — one weight row against `tile` activation rows, `tile` a
   constant 1…4 after inlining so the accumulators live in registers — and a driver over rows and tiles. */
#define EK_ROWS_DRIVER_AS(function, name, block_type, smooth)                                                         \
    EK_ROWS_TARGET static void function(const uint8_t *w, size_t row_bytes, int64_t blocks, const void *act,         \
                                        size_t act_row_bytes, int64_t m, float *y, int64_t ldy, int64_t row_begin,  \
                                        int64_t row_end) {                                                           \
        for (int64_t r = row_begin; r < row_end; r++) {                                                              \
            const block_type *row = (const block_type *)(w + (size_t)r * row_bytes);                                \
            if (!(smooth) && m <= EK_ROWS_DECODE_ROWS && r + 2 < row_end) { /* decode: two rows ahead */            \
                const char *ahead = (const char *)w + (size_t)(r + 2) * row_bytes;                                  \
                for (size_t line = 0; line < row_bytes; line += 64) _mm_prefetch(ahead + line, EK_PREFETCH_HINT);       \
            }                                                                                                        \
            for (int64_t i0 = 0; i0 < m; i0 += EK_ROWS_TILE) {                                                       \
                const uint8_t *a = (const uint8_t *)act + (size_t)i0 * act_row_bytes;                               \
                float out[EK_ROWS_TILE];                                                                             \
                int tile = (int)(m - i0 < EK_ROWS_TILE ? m - i0 : EK_ROWS_TILE);                                     \
                const bool ahead = (smooth) && m <= EK_ROWS_DECODE_ROWS && i0 == 0;                                  \
                switch (tile) {                                                                                      \
                case 4: EK_ROWS_NAME(name##_tile)(row, blocks, a, act_row_bytes, 4, ahead, out); break;              \
                case 3: EK_ROWS_NAME(name##_tile)(row, blocks, a, act_row_bytes, 3, ahead, out); break;              \
                case 2: EK_ROWS_NAME(name##_tile)(row, blocks, a, act_row_bytes, 2, ahead, out); break;              \
                default: EK_ROWS_NAME(name##_tile)(row, blocks, a, act_row_bytes, 1, ahead, out); break;             \
                }                                                                                                    \
                for (int t = 0; t < tile; t++) y[(i0 + t) * ldy + r] = out[t];                                       \
            }                                                                                                        \
        }                                                                                                            \
    }

/* Each format's driver: AVX2 prefetches per block; AVX-512 by whole rows, and per block in its `_amd` twin. */
#undef EK_ROWS_DRIVER /* this file is included once per ISA */
#if defined(EK_ROWS_512)
#define EK_ROWS_DRIVER(name, block_type)                                                                              \
    EK_ROWS_DRIVER_AS(EK_ROWS_NAME(name), name, block_type, 0)                                                      \
    EK_ROWS_DRIVER_AS(EK_ROWS_NAME(name##_amd), name, block_type, 1)
#else
#define EK_ROWS_DRIVER(name, block_type) EK_ROWS_DRIVER_AS(EK_ROWS_NAME(name), name, block_type, 1)
#endif

#define EK_ROWS_TILE_ARGS const uint8_t *act, size_t act_row_bytes, const int tile, const bool ahead, float *out

/* ------------------------------------------------------ per-32 formats -- */

/* Q5_0 and Q5_1: unsigned 5-bit u; Q5_0 is (u − 16)·d: the pairs of 16·a are taken off the pairs of u·a (both fit int16). */
#define EK_ROWS_Q5(name, block_type, is_q5_1)                                                                        \
    EK_ROWS_TARGET EK_ROWS_INLINE void EK_ROWS_NAME(name##_tile)(const block_type *row, int64_t blocks,              \
                                                                 EK_ROWS_TILE_ARGS) {                                \
        const __m256i ones = _mm256_set1_epi16(1), sixteen = _mm256_set1_epi8(16);                                   \
        __m256 acc[EK_ROWS_TILE];                                                                                    \
        float offset[EK_ROWS_TILE];                                                                                  \
        for (int t = 0; t < tile; t++) {                                                                             \
            acc[t] = _mm256_setzero_ps();                                                                            \
            offset[t] = 0.0f;                                                                                        \
        }                                                                                                            \
        for (int64_t b = 0; b < blocks; b++) {                                                                       \
            if (ahead) ek_prefetch_ahead(&row[b], sizeof(block_type));                                    \
            uint32_t high;                                                                                           \
            memcpy(&high, row[b].qh, 4);                                                                             \
            __m256i u = _mm256_or_si256(EK_ROWS_NAME(nibbles32)(row[b].qs), EK_ROWS_NAME(bit4_bytes)(high));         \
            float d = EK_ROWS_NAME(load_f16)(&row[b].d);                                                             \
            float extra = is_q5_1 ? EK_ROWS_NAME(load_f16)((const uint8_t *)&row[b] + 2) : 0.0f;                     \
            for (int t = 0; t < tile; t++) {                                                                         \
                const ek_block_q8_act *ab = (const ek_block_q8_act *)(act + (size_t)t * act_row_bytes) + b;          \
                __m256i qa = _mm256_loadu_si256((const __m256i *)ab->qs);                                            \
                __m256i pairs = _mm256_maddubs_epi16(u, qa);                                                         \
                if (!is_q5_1) pairs = _mm256_sub_epi16(pairs, _mm256_maddubs_epi16(sixteen, qa));                    \
                __m256i dot = _mm256_madd_epi16(pairs, ones);                                                        \
                acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(d * ab->d), acc[t]);                \
                if (is_q5_1) offset[t] += extra * ab->s;                                                             \
            }                                                                                                        \
        }                                                                                                            \
        for (int t = 0; t < tile; t++) out[t] = EK_ROWS_NAME(hsum_ps)(acc[t]) + offset[t];                           \
    }                                                                                                                \
    EK_ROWS_DRIVER(name, block_type)
EK_ROWS_Q5(gemm_q5_0, ek_block_q5_0, 0)
EK_ROWS_Q5(gemm_q5_1, ek_block_q5_1, 1)

/* IQ4_NL: signed table values, |w| × sign-moved activations. */
EK_ROWS_TARGET EK_ROWS_INLINE void EK_ROWS_NAME(gemm_iq4_nl_tile)(const ek_block_iq4_nl *row, int64_t blocks, EK_ROWS_TILE_ARGS) {
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)ek_iq4_values));
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[EK_ROWS_TILE];
    for (int t = 0; t < tile; t++) acc[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < blocks; b++) {
        if (ahead) ek_prefetch_ahead(&row[b], sizeof(ek_block_iq4_nl));
        __m256i v = _mm256_shuffle_epi8(table, EK_ROWS_NAME(nibbles32)(row[b].qs));
        __m256i magnitude = _mm256_sign_epi8(v, v);
        float d = EK_ROWS_NAME(load_f16)(&row[b].d);
        for (int t = 0; t < tile; t++) {
            const ek_block_q8_act *ab = (const ek_block_q8_act *)(act + (size_t)t * act_row_bytes) + b;
            __m256i s = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)ab->qs), v);
            __m256i dot = EK_ROWS_NAME(dot_scaled)(magnitude, s, ones);
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(d * ab->d), acc[t]);
        }
    }
    for (int t = 0; t < tile; t++) out[t] = EK_ROWS_NAME(hsum_ps)(acc[t]);
}
EK_ROWS_DRIVER(gemm_iq4_nl, ek_block_iq4_nl)

/* -------------------------------------------------- per-256 formats --- */

/* The super-block tile functions: accumulators per activation row, a loop over the weight row's blocks. */
#define EK_ROWS_SUPER_TILE_BEGIN(name, block_type)                                                               \
    EK_ROWS_TARGET EK_ROWS_INLINE void EK_ROWS_NAME(name##_tile)(const block_type *row, int64_t blocks,          \
                                                                 EK_ROWS_TILE_ARGS) {                            \
        __m256 acc[EK_ROWS_TILE];                                                                                \
        for (int t = 0; t < tile; t++) acc[t] = _mm256_setzero_ps();                                             \
        for (int64_t b = 0; b < blocks; b++) {                                                                   \
            const block_type *wb = &row[b];                                                                      \
            if (ahead) ek_prefetch_ahead(wb, sizeof(block_type));                                     \
            const ek_block_q8_k *ab[EK_ROWS_TILE];                                                               \
            for (int t = 0; t < tile; t++) ab[t] = (const ek_block_q8_k *)(act + (size_t)t * act_row_bytes) + b;
#define EK_ROWS_SUPER_TILE_END(name, block_type)                                                                 \
        }                                                                                                        \
        for (int t = 0; t < tile; t++) out[t] = EK_ROWS_NAME(hsum_ps)(acc[t]);                                    \
    }                                                                                                            \
    EK_ROWS_DRIVER(name, block_type)

/* Σ weight[j]·bsums[j] over the sixteen sums of 16 of an activation block, as eight int32 lanes (pairs summed):
   the minimums of Q2_K (one per 16), of Q4_K/Q5_K (each twice: one per 32), or the scales that take Q6_K's and
   Q3_K's value offsets off. `weights` holds sixteen int16. */
EK_ROWS_TARGET EK_ROWS_INLINE __m256i EK_ROWS_NAME(bsum_dot)(const ek_block_q8_k *a, __m256i weights) {
    return _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)a->bsums), weights);
}

/* Q4_K and Q5_K: unsigned 4/5-bit values, a scale and a minimum per 32. */
#define EK_ROWS_K45(name, block_type, five)                                                                       \
    EK_ROWS_SUPER_TILE_BEGIN(name, block_type)                                                                   \
    const __m256i low_mask = _mm256_set1_epi8(0x0f), bit = _mm256_set1_epi8(0x01);                               \
    uint8_t scale[8], min[8];                                                                                    \
    for (int s = 0; s < 8; s++) ek_k4_scale_min(wb->scales, s, &scale[s], &min[s]);                              \
    __m256i mins = _mm256_setr_epi16(min[0], min[0], min[1], min[1], min[2], min[2], min[3], min[3],              \
                                     min[4], min[4], min[5], min[5], min[6], min[6], min[7], min[7]);            \
    float d = EK_ROWS_NAME(load_f16)(&wb->d), dmin = EK_ROWS_NAME(load_f16)(&wb->dmin);                          \
    __m256i sums[EK_ROWS_TILE];                                                                                  \
    for (int t = 0; t < tile; t++) sums[t] = _mm256_setzero_si256();                                             \
    __m256i high_bits = five ? _mm256_loadu_si256((const __m256i *)((const ek_block_q5_k *)(const void *)wb)->qh) \
                             : _mm256_setzero_si256();                                                           \
    for (int c = 0; c < 4; c++) {                                                                                \
        __m256i bytes = _mm256_loadu_si256((const __m256i *)(wb->qs + 32 * c));                                  \
        __m256i lo = _mm256_and_si256(bytes, low_mask);                                                          \
        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), low_mask);                                    \
        if (five) {                                                                                              \
            lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(high_bits, 2 * c), bit), 4)); \
            hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(high_bits, 2 * c + 1), bit), 4)); \
        }                                                                                                        \
        __m256i scale_lo = _mm256_set1_epi16(scale[2 * c]), scale_hi = _mm256_set1_epi16(scale[2 * c + 1]);      \
        for (int t = 0; t < tile; t++) {                                                                         \
            __m256i a_lo = _mm256_loadu_si256((const __m256i *)(ab[t]->qs + 64 * c));                            \
            __m256i a_hi = _mm256_loadu_si256((const __m256i *)(ab[t]->qs + 64 * c + 32));                       \
            sums[t] = _mm256_add_epi32(sums[t], EK_ROWS_NAME(dot_scaled)(lo, a_lo, scale_lo));                   \
            sums[t] = _mm256_add_epi32(sums[t], EK_ROWS_NAME(dot_scaled)(hi, a_hi, scale_hi));                   \
        }                                                                                                        \
    }                                                                                                            \
    for (int t = 0; t < tile; t++) {                                                                             \
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums[t]), _mm256_set1_ps(d * ab[t]->d), acc[t]);             \
        acc[t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(EK_ROWS_NAME(bsum_dot)(ab[t], mins)),                       \
                                  _mm256_set1_ps(dmin * ab[t]->d), acc[t]);                                      \
    }                                                                                                            \
    EK_ROWS_SUPER_TILE_END(name, block_type)
EK_ROWS_K45(gemm_q4_k, ek_block_q4_k, 0)
EK_ROWS_K45(gemm_q5_k, ek_block_q5_k, 1)

/* Q6_K: unsigned u = q + 32 (0…63), a signed scale per 16: Σ s·(u − 32)·a = Σ s·u·a − 32·Σ s·bsum. */
#ifndef EK_SUB16_SCALE_PICKS
#define EK_SUB16_SCALE_PICKS
/* Byte shuffles taking int16 scale 2s of a 128-bit lane into every element of the low lane and 2s + 1 of the high
   (Q6_K's chunks, and Q2_K's and Q3_K's 2-bit planes: sub-blocks of 16 in pairs). */
static const uint8_t ek_sub16_scale_picks[4][32] = {
#define EK_PICK(s) {4*s, 4*s+1, 4*s, 4*s+1, 4*s, 4*s+1, 4*s, 4*s+1, 4*s, 4*s+1, 4*s, 4*s+1, 4*s, 4*s+1, 4*s, 4*s+1, \
                    4*s+2, 4*s+3, 4*s+2, 4*s+3, 4*s+2, 4*s+3, 4*s+2, 4*s+3, 4*s+2, 4*s+3, 4*s+2, 4*s+3, 4*s+2, 4*s+3, 4*s+2, 4*s+3}
    EK_PICK(0), EK_PICK(1), EK_PICK(2), EK_PICK(3)
#undef EK_PICK
};
#endif
/* The int16 scales of 32-byte register s (0…3) of half h of a block with sixteen sub-blocks of 16 (`all` = the
   sixteen scales): sub-block 8h + 2s in the low 128-bit lane, 8h + 2s + 1 in the high one. */
EK_ROWS_TARGET EK_ROWS_INLINE __m256i EK_ROWS_NAME(sub16_scales)(__m256i all, const int h, const int s) {
    const __m256i half = h == 0 ? _mm256_permute4x64_epi64(all, 0x44) : _mm256_permute4x64_epi64(all, 0xee);
    return _mm256_shuffle_epi8(half, _mm256_loadu_si256((const __m256i *)ek_sub16_scale_picks[s]));
}
#if defined(EK_ROWS_512)
/* On AVX-512, a half super-block (128 weights) is two 512-bit vectors: [u0 | u1] from the low nibbles of its 64
   ql bytes with qh's bits 0–1 and 2–3, [u2 | u3] from the high nibbles with bits 4–5 and 6–7 — half the unpacking,
   multiplies and adds of the 256-bit code. Each int16 slot k of a vector takes scale 8h + k/8 (+ 4 for [u2 | u3]),
   one VPERMW from the block's 16 scales. */
static const int16_t ek_q6_k_scale_slots[4][32] = {
#define EK_SLOTS(base) {base, base, base, base, base, base, base, base, base + 1, base + 1, base + 1, base + 1, base + 1,   \
                        base + 1, base + 1, base + 1, base + 2, base + 2, base + 2, base + 2, base + 2, base + 2, base + 2, \
                        base + 2, base + 3, base + 3, base + 3, base + 3, base + 3, base + 3, base + 3, base + 3}
    EK_SLOTS(0), EK_SLOTS(4), EK_SLOTS(8), EK_SLOTS(12)
#undef EK_SLOTS
};
EK_ROWS_SUPER_TILE_BEGIN(gemm_q6_k, ek_block_q6_k)
    const __m512i low_mask = _mm512_set1_epi8(0x0f), two_bits = _mm512_set1_epi8(0x03);
    __m256i all_scales = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)wb->scales));
    __m512i scale_table = _mm512_castsi256_si512(all_scales);
    float d = EK_ROWS_NAME(load_f16)(&wb->d);
    __m512i sums[EK_ROWS_TILE];
    for (int t = 0; t < tile; t++) sums[t] = _mm512_setzero_si512();
    for (int h = 0; h < 2; h++) {
        __m512i ql = _mm512_loadu_si512((const void *)(wb->ql + 64 * h));
        __m256i qh = _mm256_loadu_si256((const __m256i *)(wb->qh + 32 * h));
        __m512i qh01 = _mm512_inserti64x4(_mm512_castsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1);
        __m512i qh23 = _mm512_srli_epi16(qh01, 4);
        __m512i u01 = _mm512_or_si512(_mm512_and_si512(ql, low_mask), _mm512_slli_epi16(_mm512_and_si512(qh01, two_bits), 4));
        __m512i u23 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low_mask),
                                      _mm512_slli_epi16(_mm512_and_si512(qh23, two_bits), 4));
        __m512i s01 = _mm512_permutexvar_epi16(_mm512_loadu_si512((const void *)ek_q6_k_scale_slots[2 * h]), scale_table);
        __m512i s23 = _mm512_permutexvar_epi16(_mm512_loadu_si512((const void *)ek_q6_k_scale_slots[2 * h + 1]), scale_table);
        for (int t = 0; t < tile; t++) {
            __m512i a01 = _mm512_loadu_si512((const void *)(ab[t]->qs + 128 * h));
            __m512i a23 = _mm512_loadu_si512((const void *)(ab[t]->qs + 128 * h + 64));
            sums[t] = _mm512_add_epi32(sums[t], _mm512_madd_epi16(_mm512_maddubs_epi16(u01, a01), s01));
            sums[t] = _mm512_add_epi32(sums[t], _mm512_madd_epi16(_mm512_maddubs_epi16(u23, a23), s23));
        }
    }
    for (int t = 0; t < tile; t++) {
        __m256i folded = _mm256_add_epi32(_mm512_castsi512_si256(sums[t]), _mm512_extracti64x4_epi64(sums[t], 1));
        __m256i total = _mm256_sub_epi32(folded, _mm256_slli_epi32(EK_ROWS_NAME(bsum_dot)(ab[t], all_scales), 5));
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(total), _mm256_set1_ps(d * ab[t]->d), acc[t]);
    }
EK_ROWS_SUPER_TILE_END(gemm_q6_k, ek_block_q6_k)
#else
EK_ROWS_SUPER_TILE_BEGIN(gemm_q6_k, ek_block_q6_k)
    const __m256i low_mask = _mm256_set1_epi8(0x0f), two_bits = _mm256_set1_epi8(0x03);
    __m256i all_scales = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)wb->scales));
    float d = EK_ROWS_NAME(load_f16)(&wb->d);
    __m256i sums[EK_ROWS_TILE];
    for (int t = 0; t < tile; t++) sums[t] = _mm256_setzero_si256();
    for (int h = 0; h < 2; h++) {
        __m256i ql0 = _mm256_loadu_si256((const __m256i *)(wb->ql + 64 * h));
        __m256i ql1 = _mm256_loadu_si256((const __m256i *)(wb->ql + 64 * h + 32));
        __m256i qh = _mm256_loadu_si256((const __m256i *)(wb->qh + 32 * h));
        __m256i u[4];
        u[0] = _mm256_or_si256(_mm256_and_si256(ql0, low_mask), _mm256_slli_epi16(_mm256_and_si256(qh, two_bits), 4));
        u[1] = _mm256_or_si256(_mm256_and_si256(ql1, low_mask),
                               _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), two_bits), 4));
        u[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low_mask),
                               _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), two_bits), 4));
        u[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low_mask),
                               _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), two_bits), 4));
        /* chunk s takes its two sub-blocks' scales by one byte shuffle (building them from scalars took five
           instructions a chunk) */
        for (int s = 0; s < 4; s++) {
            __m256i scales = EK_ROWS_NAME(sub16_scales)(all_scales, h, s);
            for (int t = 0; t < tile; t++) {
                __m256i a = _mm256_loadu_si256((const __m256i *)(ab[t]->qs + 128 * h + 32 * s));
                sums[t] = _mm256_add_epi32(sums[t], EK_ROWS_NAME(dot_scaled)(u[s], a, scales));
            }
        }
    }
    for (int t = 0; t < tile; t++) {
        __m256i total = _mm256_sub_epi32(sums[t], _mm256_slli_epi32(EK_ROWS_NAME(bsum_dot)(ab[t], all_scales), 5));
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(total), _mm256_set1_ps(d * ab[t]->d), acc[t]);
    }
EK_ROWS_SUPER_TILE_END(gemm_q6_k, ek_block_q6_k)
#endif

/* IQ4_XS: table values (signed) per 32 with a 6-bit scale − 32. */
EK_ROWS_SUPER_TILE_BEGIN(gemm_iq4_xs, ek_block_iq4_xs)
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)ek_iq4_values));
    float d = EK_ROWS_NAME(load_f16)(&wb->d);
    __m256i sums[EK_ROWS_TILE];
    for (int t = 0; t < tile; t++) sums[t] = _mm256_setzero_si256();
    for (int s = 0; s < 8; s++) {
        __m256i v = _mm256_shuffle_epi8(table, EK_ROWS_NAME(nibbles32)(wb->qs + 16 * s));
        __m256i magnitude = _mm256_sign_epi8(v, v);
        __m256i scale = _mm256_set1_epi16((int16_t)(ek_iq4_xs_scale(wb, s) - 32));
        for (int t = 0; t < tile; t++) {
            __m256i a = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)(ab[t]->qs + 32 * s)), v);
            sums[t] = _mm256_add_epi32(sums[t], EK_ROWS_NAME(dot_scaled)(magnitude, a, scale));
        }
    }
    for (int t = 0; t < tile; t++)
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums[t]), _mm256_set1_ps(d * ab[t]->d), acc[t]);
EK_ROWS_SUPER_TILE_END(gemm_iq4_xs, ek_block_iq4_xs)

#include "x86_rows_k23.h"

/* ------------------------------------------------------- F16 and BF16 -- */

EK_ROWS_TARGET EK_ROWS_INLINE __m256 EK_ROWS_NAME(widen8)(const uint16_t *p, bool bf16) {
    __m128i h = _mm_loadu_si128((const __m128i *)p);
    if (bf16) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    return _mm256_cvtph_ps(h);
}

/* Element j of a row of fp16 or bf16 weights (`bf16` a constant after inlining). */
EK_ROWS_TARGET EK_ROWS_INLINE float EK_ROWS_NAME(w_at)(const uint8_t *row, int64_t j, const bool bf16) {
    uint16_t h;
    memcpy(&h, row + 2 * j, sizeof h);
    if (!bf16) return ek_fp16_to_fp32(h);
    uint32_t bits = (uint32_t)h << 16;
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

/* fp16/bf16 decode of two activation rows (two sequences), and of one on AVX2 for rows over EK_HALF_ONE_ROW_BYTES
   (one row otherwise runs float_stream — on AVX-512, 512-bit: SmolLM2 F16 decode +5 %, BF16 +18 %, 5 alternating
   runs — or float_row on AMD, rows up to EK_HALF_ONE_ROW_BYTES): `rows` (1 or 4) weight rows at a time against `tile` (1 or 2) activation rows, each
   activation load shared by the rows — eight FMA chains, four streams. One row at a time with two chains waited on
   the FMA latency (the fp16 GEMV read 0.35 of the bandwidth); with four (float_row) it streams. */
EK_ROWS_TARGET EK_ROWS_INLINE void EK_ROWS_NAME(half_rows)(const bool bf16, const int rows, const int tile,
                                                            const uint8_t *w, size_t row_bytes, int64_t k,
                                                            const float *x, float *y, int64_t ldy) {
    __m256 acc[4][2];
    for (int q = 0; q < rows; q++) acc[q][0] = acc[q][1] = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 16 <= k; j += 16) {
        __m256 x0[2], x1[2];
        for (int t = 0; t < tile; t++) {
            x0[t] = _mm256_loadu_ps(x + t * k + j);
            x1[t] = _mm256_loadu_ps(x + t * k + j + 8);
        }
        for (int q = 0; q < rows; q++) {
            const uint8_t *row = w + (size_t)q * row_bytes;
            __m256 w0 = EK_ROWS_NAME(widen8)((const uint16_t *)row + j, bf16), w1 = EK_ROWS_NAME(widen8)((const uint16_t *)row + j + 8, bf16);
            if (tile == 1) { /* two chains per row */
                acc[q][0] = _mm256_fmadd_ps(w0, x0[0], acc[q][0]);
                acc[q][1] = _mm256_fmadd_ps(w1, x1[0], acc[q][1]);
            } else {
                for (int t = 0; t < tile; t++) acc[q][t] = _mm256_fmadd_ps(w1, x1[t], _mm256_fmadd_ps(w0, x0[t], acc[q][t]));
            }
        }
    }
    for (; j + 8 <= k; j += 8)
        for (int q = 0; q < rows; q++) {
            __m256 w0 = EK_ROWS_NAME(widen8)((const uint16_t *)(w + (size_t)q * row_bytes) + j, bf16);
            for (int t = 0; t < tile; t++) acc[q][t] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + t * k + j), acc[q][t]);
        }
    for (int q = 0; q < rows; q++)
        for (int t = 0; t < tile; t++) {
            float sum = EK_ROWS_NAME(hsum_ps)(tile == 1 ? _mm256_add_ps(acc[q][0], acc[q][1]) : acc[q][t]);
            for (int64_t jj = j; jj < k; jj++) sum += EK_ROWS_NAME(w_at)(w + (size_t)q * row_bytes, jj, bf16) * x[t * k + jj];
            y[t * ldy + q] = sum;
        }
}

/* --------------------------------------------- F32, F16, BF16 blocks --- */

/* Float weights against a few activation rows or more (prefill, batches): four weight rows × EK_F32_ACTS
   activation rows of accumulators, each weight vector loaded (and widened, for fp16/bf16) once and used by every
   activation row of the tile. fp32 weights are read as they lie; OpenBLAS's sgemm packs the whole weight matrix on
   every call, which was 27 % of a MiniLM sentence's time. 512-bit on AVX-512 (32 registers: 24 accumulators). */
#if defined(EK_ROWS_512)
#define EK_F32_VEC __m512
#define EK_F32_WIDTH 16
#define EK_F32_ACTS 6
#define EK_F32_LOAD _mm512_loadu_ps
#define EK_F32_STORE _mm512_storeu_ps
#define EK_F32_FMA _mm512_fmadd_ps
#define EK_F32_ADD _mm512_add_ps
#define EK_F32_ZERO _mm512_setzero_ps
#define EK_F32_HSUM _mm512_reduce_add_ps
/* The sums of four accumulators' lanes, in order: pairs interleaved and added within each 128-bit lane, then the
   four 128-bit lanes added — 13 instructions for four sums where four separate reductions take 32. */
EK_ROWS_TARGET EK_ROWS_INLINE __m128 EK_ROWS_NAME(hsum4)(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
    const __m512 s01 = _mm512_add_ps(_mm512_unpacklo_ps(a0, a1), _mm512_unpackhi_ps(a0, a1));
    const __m512 s23 = _mm512_add_ps(_mm512_unpacklo_ps(a2, a3), _mm512_unpackhi_ps(a2, a3));
    const __m512 s = _mm512_add_ps(_mm512_shuffle_ps(s01, s23, _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm512_shuffle_ps(s01, s23, _MM_SHUFFLE(3, 2, 3, 2)));
    const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(s), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s), 1)));
    return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}
#else
#define EK_F32_VEC __m256
#define EK_F32_WIDTH 8
#define EK_F32_ACTS 3
#define EK_F32_LOAD _mm256_loadu_ps
#define EK_F32_STORE _mm256_storeu_ps
#define EK_F32_FMA _mm256_fmadd_ps
#define EK_F32_ADD _mm256_add_ps
#define EK_F32_ZERO _mm256_setzero_ps
#define EK_F32_HSUM EK_ROWS_NAME(hsum_ps)
EK_ROWS_TARGET EK_ROWS_INLINE __m128 EK_ROWS_NAME(hsum4)(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
    const __m256 s01 = _mm256_add_ps(_mm256_unpacklo_ps(a0, a1), _mm256_unpackhi_ps(a0, a1));
    const __m256 s23 = _mm256_add_ps(_mm256_unpacklo_ps(a2, a3), _mm256_unpackhi_ps(a2, a3));
    const __m256 s = _mm256_add_ps(_mm256_shuffle_ps(s01, s23, _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm256_shuffle_ps(s01, s23, _MM_SHUFFLE(3, 2, 3, 2)));
    return _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
}
#endif

/* Weight kinds: 0 fp32, 1 fp16, 2 bf16 (a constant after inlining). */
/* Bytes of one weight of `kind` (as load_weights: 0 fp32, 1 fp16, 2 bf16). */
EK_ROWS_TARGET EK_ROWS_INLINE size_t EK_ROWS_NAME(weight_bytes)(const int kind) { return kind == 0 ? 4 : 2; }

EK_ROWS_TARGET EK_ROWS_INLINE EK_F32_VEC EK_ROWS_NAME(load_weights)(const uint8_t *row, int64_t j, const int kind) {
    if (kind == 0) return EK_F32_LOAD((const float *)row + j);
#if defined(EK_ROWS_512)
    __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)row + j));
    if (kind == 2) return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    return _mm512_cvtph_ps(h);
#else
    return EK_ROWS_NAME(widen8)((const uint16_t *)row + j, kind == 2);
#endif
}

EK_ROWS_TARGET EK_ROWS_INLINE float EK_ROWS_NAME(weight_at)(const uint8_t *row, int64_t j, const int kind) {
    if (kind == 0) return ((const float *)row)[j];
    return EK_ROWS_NAME(w_at)(row, j, kind == 2);
}

/* A tile: `rows` weight rows × `acts` activation rows over columns [0, k) of the given pointers (a chunk of the
   full rows, `row_bytes` and `ldx` apart), added to y (`accumulate`) or stored. With `fetch` (a constant after
   inlining, so decode's loop carries no test), `fetch_rows` rows from `next` — this tile's share of weights that
   tiles a few chunks on start on (gemm_float_panel) — are prefetched, once per cache line, while this tile computes:
   otherwise the first tile over new weights waits on memory with four streams in flight, and the rest compute from
   L1. A 19-row MiniLM product with its weights out of cache: 95-105 → 190 GFLOP/s on one Zen 5 core (AVX2: 70 →
   112). Four rows' sums leave their accumulators by hsum4 (a third of the instructions of four reductions; a tile
   of one activation row keeps the four reductions — decode's single row no longer comes here: float_stream). */
EK_ROWS_TARGET EK_ROWS_INLINE void EK_ROWS_NAME(float_block)(const int kind, const int rows, const int acts,
                                                             const uint8_t *w, size_t row_bytes, int64_t k,
                                                             const float *x, int64_t ldx, float *y, int64_t ldy,
                                                             const bool accumulate, const bool fetch, const uint8_t *next,
                                                             const int fetch_rows) {
    const int64_t elem = (int64_t)EK_ROWS_NAME(weight_bytes)(kind);
    EK_F32_VEC acc[4][EK_F32_ACTS];
    for (int q = 0; q < rows; q++)
        for (int t = 0; t < acts; t++) acc[q][t] = EK_F32_ZERO();
    int64_t j = 0;
    for (; j + EK_F32_WIDTH <= k; j += EK_F32_WIDTH) {
        EK_F32_VEC xv[EK_F32_ACTS];
        for (int t = 0; t < acts; t++) xv[t] = EK_F32_LOAD(x + t * ldx + j);
        if (fetch && ((j * elem) & 63) == 0)
            for (int q = 0; q < fetch_rows; q++) _mm_prefetch((const char *)next + q * row_bytes + j * elem, _MM_HINT_T1);
        for (int q = 0; q < rows; q++) {
            EK_F32_VEC wv = EK_ROWS_NAME(load_weights)(w + (size_t)q * row_bytes, j, kind);
            for (int t = 0; t < acts; t++) acc[q][t] = EK_F32_FMA(wv, xv[t], acc[q][t]);
        }
    }
    for (int t = 0; t < acts; t++) {
        float sums[4];
        if (rows == 4 && acts > 1) _mm_storeu_ps(sums, EK_ROWS_NAME(hsum4)(acc[0][t], acc[1][t], acc[2][t], acc[3][t]));
        else for (int q = 0; q < rows; q++) sums[q] = EK_F32_HSUM(acc[q][t]);
        for (int q = 0; q < rows; q++) {
            for (int64_t jj = j; jj < k; jj++) sums[q] += EK_ROWS_NAME(weight_at)(w + (size_t)q * row_bytes, jj, kind) * x[t * ldx + jj];
            y[t * ldy + q] = accumulate ? y[t * ldy + q] + sums[q] : sums[q];
        }
    }
}

#define EK_F32_BLOCK(rows, n)                                                                                       \
    if (next == NULL) EK_ROWS_NAME(float_block)(kind, rows, n, wc, row_bytes, kn, xt, k, yt, ldy, c > 0, false, NULL, 0); \
    else if (fetch_rows == 1) /* a constant row count: a loop over a variable one cost MiniLM's products ~20 % */    \
        EK_ROWS_NAME(float_block)(kind, rows, n, wc, row_bytes, kn, xt, k, yt, ldy, c > 0, true, next, 1);           \
    else EK_ROWS_NAME(float_block)(kind, rows, n, wc, row_bytes, kn, xt, k, yt, ldy, c > 0, true, next, fetch_rows);
#define EK_F32_CASE(rows, n)                                                                                        \
    case n:                                                                                                         \
        if (n <= EK_F32_ACTS) { EK_F32_BLOCK(rows, n <= EK_F32_ACTS ? n : 1) }                                      \
        break;
#define EK_F32_TILES(rows)                                                                                          \
    switch (acts) {                                                                                                 \
        EK_F32_CASE(rows, 6) EK_F32_CASE(rows, 5) EK_F32_CASE(rows, 4) EK_F32_CASE(rows, 3) EK_F32_CASE(rows, 2)    \
    default: EK_F32_BLOCK(rows, 1) break;                                                                           \
    }

/* Rows longer than 1.5 × EK_F32_CHUNK columns are taken in near-equal chunks of about EK_F32_CHUNK (rounded up to
   the vector width): a tile's activation and weight rows, with the next chunk's weights coming in, then fit L1 —
   six 1,536-wide activation rows alone are 36 KB of its 48 (MiniLM's FFN output, 19 rows out of cache: 110 → 137
   GFLOP/s). Each chunk's sums are added to y. Two activation rows (two sequences decoding; one row runs stream_rows:
   float_stream), with no reuse to keep in L1, take whole rows and no prefetching: that loop streams at the memory's rate already, and the extra work slowed
   SmolLM2's fp32 decode by 7-20 %. The weights EK_F32_FETCH_AHEAD chunks on (of these rows, or counting on into
   the groups of four rows after) are asked for a row per tile over the first four tiles (all four rows by fewer
   tiles), one request a line. On Zen 3 the next group's four rows asked for by each of four tiles, two requests a
   line each, had the 19-row products wait on memory: MiniLM's 24 products, 2 threads, weights out of cache,
   alternating medians — 4.8-5.3 ms as that was, 4.0-4.3 a row a tile one group on, 3.2-4.7 four groups on (three
   alike, eight no better); 30 rows 7.1-9.2 → 6.1-6.4 ms; 6 rows, bound by memory, 2.2-2.9 → 2.5. */
#define EK_F32_CHUNK 512
#define EK_F32_FETCH_AHEAD 4

EK_ROWS_TARGET EK_ROWS_INLINE void EK_ROWS_NAME(gemm_float_panel)(const int kind, const void *w, int64_t k, const float *x,
                                                                  int64_t m, float *y, int64_t ldy, int64_t row_begin,
                                                                  int64_t row_end) {
    const size_t elem = EK_ROWS_NAME(weight_bytes)(kind), row_bytes = (size_t)k * elem;
    const bool streaming = m <= 2;
    const int64_t chunks = !streaming && k > EK_F32_CHUNK + EK_F32_CHUNK / 2 ? (k + EK_F32_CHUNK - 1) / EK_F32_CHUNK : 1;
    const int64_t chunk = chunks == 1 ? k : ((k + chunks - 1) / chunks + EK_F32_WIDTH - 1) / EK_F32_WIDTH * EK_F32_WIDTH;
    /* tiles of near-equal size (19 rows: 5, 5, 5, 4 — not 6, 6, 6, 1, whose last tile loads a weight vector
       per FMA) */
    const int64_t tiles = (m + EK_F32_ACTS - 1) / EK_F32_ACTS;
    for (int64_t r = row_begin; r < row_end;) {
        const int rows = row_end - r >= 4 ? 4 : 1;
        const uint8_t *wr = (const uint8_t *)w + (size_t)r * row_bytes;
        for (int64_t c = 0, k0 = 0; k0 < k; c++, k0 += chunk) {
            const int64_t kn = k - k0 < chunk ? k - k0 : chunk;
            const uint8_t *wc = wr + (size_t)k0 * elem;
            /* EK_F32_FETCH_AHEAD chunks on, counting on into the next groups of four rows (while they are whole) */
            const int64_t ahead = c + EK_F32_FETCH_AHEAD, groups_on = ahead / chunks;
            const uint8_t *after = streaming || r + 4 * groups_on + 4 > row_end
                                       ? NULL
                                       : wr + (size_t)(4 * groups_on) * row_bytes + (size_t)(ahead % chunks * chunk) * elem;
            const int64_t fetching_tiles = tiles < 4 ? tiles : 4;
            for (int64_t tile = 0, i0 = 0; tile < tiles; tile++) {
                const int acts = (int)(m / tiles + (tile < m % tiles ? 1 : 0));
                const int64_t first = tile * 4 / fetching_tiles;
                const int fetch_rows = (int)((tile + 1) * 4 / fetching_tiles - first);
                const uint8_t *next = after != NULL && tile < fetching_tiles ? after + (size_t)first * row_bytes : NULL;
                const float *xt = x + i0 * k + k0;
                float *yt = y + i0 * ldy + r;
                if (rows == 4) {
                    EK_F32_TILES(4)
                } else {
                    EK_F32_TILES(1)
                }
                i0 += acts;
            }
        }
        r += rows;
    }
}

/* Activation rows in panels of about EK_F32_PANEL_BYTES (a multiple of the tile), each panel through all the
   weight rows: every group of four weight rows reads all the panel's activation rows, which must then come from L2
   — batch-32 MiniLM's 613 rows of 1,536 (3.7 MB) came from L3 for every group, 48 times per thread per product.
   Weights are read once per panel instead (613 rows × 384 × 1,536, one Zen 5 core: 146 → 182-196 GFLOP/s). Rows
   too long for eight tiles in a panel (k > 2,048 on AVX-512) are not split: weights read again for every few
   activation rows would make the product wait on memory. */
#define EK_F32_PANEL_BYTES (384 * 1024)

EK_ROWS_TARGET EK_ROWS_INLINE void EK_ROWS_NAME(gemm_float_blocks)(const int kind, const void *w, int64_t k, const float *x,
                                                                   int64_t m, float *y, int64_t ldy, int64_t row_begin,
                                                                   int64_t row_end) {
    if (k == 0) { /* empty sums: zeros, as the scalar loop writes (and no division by the row length below) */
        for (int64_t i = 0; i < m; i++)
            for (int64_t r = row_begin; r < row_end; r++) y[i * ldy + r] = 0;
        return;
    }
    const int64_t panel = EK_F32_PANEL_BYTES / (k * (int64_t)sizeof(float)) / EK_F32_ACTS * EK_F32_ACTS;
    const int64_t panels = panel < 8 * EK_F32_ACTS ? 1 : (m + panel - 1) / panel;
    for (int64_t p = 0, i0 = 0; p < panels; p++) { /* near-equal panels: 128 rows as 43, 43, 42, not 60, 60, 8 */
        const int64_t rows = m / panels + (p < m % panels ? 1 : 0);
        EK_ROWS_NAME(gemm_float_panel)(kind, w, k, x + i0 * k, rows, y + i0 * ldy, ldy, row_begin, row_end);
        i0 += rows;
    }
}

#include "x86_outer_body.h"

/* From how many activation rows, and weight rows per call, the packed outer products (x86_outer_body.h) beat the
   dot-product tiles: one core of an Intel Xeon (Emerald Rapids), AVX-512 / AVX2 — 32 rows × 576 × 576: 85 → 72 /
   75 → 64 GFLOP/s (the packing not yet paid for), 40 × 384 × 384: 85 → 106 / 71 → 71, 128 × 576 × 1536: 68 → 134 /
   51 → 54, 450 × 1536 × 384: 79 → 145 / 54 → 58, 128 × 4096 × 4096: 60 → 119 / 51 → 67. Fewer than two panels of
   weight rows leave most of a panel zeros. */
#define EK_F32_OUTER_ROWS 40
#define EK_F32_OUTER_COLS (2 * EK_OUTER_NR)

/* fp32 and fp16/bf16 decode (one activation row) off AMD cores (AMD: float_row, below; `kind` as load_weights; on
   AVX-512 the ymm half_rows measured slower): `rows` (4, or 1 for the last few) weight rows at once, one accumulator each, a
   vector of every row per step. Measured on an Emerald Rapids core (one core, cold weights, alternating, every
   SmolLM2 shape): float_block's decode case — the same instructions, unrolled four steps deep with the activation
   vectors loaded ahead — streamed 10-15 % slower (0.84-0.91 of this loop), and the one-row dot with four
   accumulators the AVX2 path used (it had measured 6.8 % faster than float_block) 20-25 % slower. SmolLM2 fp32
   decode, 2 threads, 6 alternating runs: AVX-512 33.7 → 38.9 tok/s, avx2-novnni 30.5 → 37.3. When the AVX2 build
   took float_row on every vendor (for Zen 3), the same Xeon kind measured it again (2026-12-01, avx2-novnni, SmolLM2,
   2 threads, 4 alternating runs of 5, medians): fp32 31.0-34.4 tok/s against this loop's 35.7-38.5, fp16 48.4-53.3
   against 67.6-77.6 (asking ahead, EK_HALF_AHEAD_ROW_BYTES) — so the AVX2 build follows the vendor too. */
EK_ROWS_TARGET EK_ROWS_INLINE void EK_ROWS_NAME(float_stream)(const int kind, const int rows, const uint8_t *w,
                                                              size_t row_bytes, int64_t k, const float *x, float *y,
                                                              const uint8_t *ahead, size_t ahead_step) {
    EK_F32_VEC acc[4];
    for (int q = 0; q < rows; q++) acc[q] = EK_F32_ZERO();
    int64_t j = 0;
    for (; j + EK_F32_WIDTH <= k; j += EK_F32_WIDTH) {
        const EK_F32_VEC xv = EK_F32_LOAD(x + j);
        for (size_t b = 0; b < ahead_step; b += 64) _mm_prefetch((const char *)ahead + b, _MM_HINT_T0);
        ahead += ahead_step;
        for (int q = 0; q < rows; q++)
            acc[q] = EK_F32_FMA(EK_ROWS_NAME(load_weights)(w + (size_t)q * row_bytes, j, kind), xv, acc[q]);
    }
    for (int q = 0; q < rows; q++) {
        float sum = EK_F32_HSUM(acc[q]);
        for (int64_t jj = j; jj < k; jj++) sum += EK_ROWS_NAME(weight_at)(w + (size_t)q * row_bytes, jj, kind) * x[jj];
        y[q] = sum;
    }
}

/* On AVX-512 builds (AMD Zen 4/5 run float_row) an fp32 row asks for the lines this many bytes ahead into L2 as it
   reads — the next rows of its share, 1.8 of SmolLM2's 2,304-byte rows on. One Zen 4 (2026-12-03), 2 threads: a C
   harness streaming 512 MB of 576-wide rows, medians of 21–31 alternating rounds, 26.3–27.6 GB/s without, 28.4–29.9
   with 2 or 4 KB ahead (27.5–29.5 at 1 KB, 25.7 at 8 KB; the T0 hint 23.4–24.7, as the packed kernels found; a
   plain read loop 30.0–31.3); SmolLM2 fp32 decode, 22 alternating rounds of 5 runs, medians 53.0 → 55.8, 48.9 → 53.4
   and 46.5 → 50.9 tok/s, ahead in 19 of 22 (2 KB level with 4 KB); against llama.cpp on the same F32 file 1.02 →
   1.13×. Not taken where it measured worse: the AVX2 build (Zen 3 earlier: 0.95 → 0.81 of the read loop;
   `EMBER_ISA=avx2` on the Zen 4, 6 rounds, 54.2 → 50.4 tok/s) and fp16/bf16 rows (6 rounds, 106.2 → 103.4). */
#define EK_F32_ROW_AHEAD 4096

/* On AMD cores: fp32 decode on AVX2 builds, and on AVX-512 builds for rows of up to 8 KB (gemm_f32_one_row); fp16/bf16
   decode on both builds for rows up to EK_HALF_ONE_ROW_BYTES (gemm_half_amd; `kind` as load_weights): one weight row at a
   time, read front to back with four accumulators, so a thread's share of a matrix is one sequential stream. AMD
   Zen 3 (AVX2), 2 threads, every SmolLM2 matrix of a token (538 MB) with a barrier after each, cold weights, 9
   alternating rounds against a read loop of the same bytes and barriers: float_stream's four rows side by side (four
   streams 2,304 bytes apart) 0.83-0.84 of the read loop, this loop 0.95 (eight accumulators 0.97, software prefetch
   ahead 0.81). AMD Zen 4 (AVX-512), SmolLM2 fp32 decode, 2 threads, 5 alternating rounds: float_stream 39.8-44.4
   tok/s, this loop on 512-bit registers 48.9-61.5 (median 56.7; the AVX2 build's 256-bit loop 54.6-58.6). The
   Emerald Rapids measurements above went the other way, so other vendors keep float_stream.
   fp16/bf16 on the same Zen 3, the same token's matrices (269 MB), 10 alternating rounds against half_rows' four
   rows side by side: F16 14.8 → 20.0 GB/s, BF16 13.1 → 19.8 (faster in every round; a read loop 21-24). The
   AVX-512 build's fp32 rows also ask for their lines ahead (EK_F32_ROW_AHEAD, above). */
EK_ROWS_TARGET EK_ROWS_INLINE void EK_ROWS_NAME(float_row)(const int kind, const uint8_t *w, int64_t k, const float *x,
                                                           float *y) {
    EK_F32_VEC a0 = EK_F32_ZERO(), a1 = EK_F32_ZERO(), a2 = EK_F32_ZERO(), a3 = EK_F32_ZERO();
    int64_t j = 0;
    for (; j + 4 * EK_F32_WIDTH <= k; j += 4 * EK_F32_WIDTH) {
#if defined(EK_ROWS_512)
        if (kind == 0) /* the lines EK_F32_ROW_AHEAD on, one per line this step reads */
            for (size_t b = 0; b < 4 * EK_F32_WIDTH * sizeof(float); b += 64)
                _mm_prefetch((const char *)w + (size_t)j * sizeof(float) + EK_F32_ROW_AHEAD + b, _MM_HINT_T1);
#endif
        a0 = EK_F32_FMA(EK_ROWS_NAME(load_weights)(w, j, kind), EK_F32_LOAD(x + j), a0);
        a1 = EK_F32_FMA(EK_ROWS_NAME(load_weights)(w, j + EK_F32_WIDTH, kind), EK_F32_LOAD(x + j + EK_F32_WIDTH), a1);
        a2 = EK_F32_FMA(EK_ROWS_NAME(load_weights)(w, j + 2 * EK_F32_WIDTH, kind), EK_F32_LOAD(x + j + 2 * EK_F32_WIDTH), a2);
        a3 = EK_F32_FMA(EK_ROWS_NAME(load_weights)(w, j + 3 * EK_F32_WIDTH, kind), EK_F32_LOAD(x + j + 3 * EK_F32_WIDTH), a3);
    }
    for (; j + EK_F32_WIDTH <= k; j += EK_F32_WIDTH) a0 = EK_F32_FMA(EK_ROWS_NAME(load_weights)(w, j, kind), EK_F32_LOAD(x + j), a0);
    float sum = EK_F32_HSUM(EK_F32_ADD(EK_F32_ADD(a0, a1), EK_F32_ADD(a2, a3)));
    for (; j < k; j++) sum += EK_ROWS_NAME(weight_at)(w, j, kind) * x[j];
    *y = sum;
}

/* One activation row over rows [row_begin, row_end) of weights of `kind`: a row at a time when `one_row` (a
   constant after inlining, or the row length's test in gemm_f32_one_row; float_row), otherwise four rows at a time
   (float_stream) — with `ahead` (a constant after inlining), each group asking for the next group's lines in step
   with its own (EK_HALF_AHEAD_ROW_BYTES). */
EK_ROWS_TARGET EK_ROWS_INLINE void EK_ROWS_NAME(stream_rows)(const int kind, const bool one_row, const bool ahead,
                                                             const void *w, int64_t k, const float *x, float *y,
                                                             int64_t row_begin, int64_t row_end) {
    const size_t row_bytes = (size_t)k * EK_ROWS_NAME(weight_bytes)(kind);
    const uint8_t *base = (const uint8_t *)w;
    int64_t r = row_begin;
    if (one_row) {
        for (; r < row_end; r++) EK_ROWS_NAME(float_row)(kind, base + (size_t)r * row_bytes, k, x, y + r);
        return;
    }
    /* The next group's 4 × row_bytes spread over this group's steps, in whole lines. */
    const size_t steps = k >= EK_F32_WIDTH ? (size_t)(k / EK_F32_WIDTH) : 1;
    const size_t per_step = (4 * row_bytes + steps - 1) / steps;
    const size_t ahead_step = ahead ? (per_step + 63) / 64 * 64 : 0;
    for (; r + 4 <= row_end; r += 4)
        EK_ROWS_NAME(float_stream)(kind, 4, base + (size_t)r * row_bytes, row_bytes, k, x, y + r,
                                   base + (size_t)(r + 4) * row_bytes, ahead_step);
    for (; r < row_end; r++) EK_ROWS_NAME(float_stream)(kind, 1, base + (size_t)r * row_bytes, row_bytes, k, x, y + r, NULL, 0);
}

/* Whether a product takes the packed outer products (x86_outer_body.h): enough activation rows and weight rows. */
EK_ROWS_TARGET EK_ROWS_INLINE bool EK_ROWS_NAME(outer_pays)(int64_t m, int64_t k, int64_t row_begin, int64_t row_end) {
    return m >= EK_F32_OUTER_ROWS && row_end - row_begin >= EK_F32_OUTER_COLS && k > 0;
}

EK_ROWS_TARGET EK_ROWS_INLINE void EK_ROWS_NAME(gemm_f32_rows)(const bool one_row, const float *w, int64_t k,
                                                               const float *x, int64_t m, float *y, int64_t ldy,
                                                               int64_t row_begin, int64_t row_end) {
    if (m == 1) {
        EK_ROWS_NAME(stream_rows)(0, one_row, false, w, k, x, y, row_begin, row_end);
        return;
    }
    if (EK_ROWS_NAME(outer_pays)(m, k, row_begin, row_end) &&
        EK_ROWS_NAME(gemm_float_outer)(0, w, k, x, m, y, ldy, row_begin, row_end))
        return;
    EK_ROWS_NAME(gemm_float_blocks)(0, w, k, x, m, y, ldy, row_begin, row_end);
}

/* Decode's row reads four weight rows side by side (float_stream) off AMD cores on every build, and one row at a time
   on AMD (gemm_f32_one_row, chosen by ek_gemm_f32): the AVX2 build for every row (Zen 3), the AVX-512 build for rows
   up to EK_F32_ONE_ROW_BYTES (Zen 4). */
EK_ROWS_TARGET static void EK_ROWS_NAME(gemm_f32)(const float *w, int64_t k, const float *x, int64_t m, float *y,
                                                  int64_t ldy, int64_t row_begin, int64_t row_end) {
    EK_ROWS_NAME(gemm_f32_rows)(false, w, k, x, m, y, ldy, row_begin, row_end);
}
#if defined(EK_ROWS_512)
/* Rows up to this many bytes run float_row on AMD; longer ones keep float_stream, whose four rows are then four
   streams far apart that the prefetchers fetch side by side. One Zen 4, 2 threads, matrices cycled from memory,
   GB/s over three rounds, float_row vs float_stream: 1536×576 16.6-19.8 vs 12.9-13.9, 576×1536 17.8-22.8 vs
   14.9-18.1, 8192×2048 26.2-29.9 vs 25.0-27.8, 4096×4096 23.2-24.4 vs 25.7-27.5, 16384×8192 21.6-25.5 vs 25.6-28.5. */
#define EK_F32_ONE_ROW_BYTES 8192
EK_ROWS_TARGET static void EK_ROWS_NAME(gemm_f32_one_row)(const float *w, int64_t k, const float *x, int64_t m, float *y,
                                                          int64_t ldy, int64_t row_begin, int64_t row_end) {
    EK_ROWS_NAME(gemm_f32_rows)(k * (int64_t)sizeof(float) <= EK_F32_ONE_ROW_BYTES, w, k, x, m, y, ldy, row_begin, row_end);
}
#else
/* The AVX2 build on AMD (Zen 3): every row one at a time (float_row's measurements). */
EK_ROWS_TARGET static void EK_ROWS_NAME(gemm_f32_one_row)(const float *w, int64_t k, const float *x, int64_t m, float *y,
                                                          int64_t ldy, int64_t row_begin, int64_t row_end) {
    EK_ROWS_NAME(gemm_f32_rows)(true, w, k, x, m, y, ldy, row_begin, row_end);
}
#endif

/* fp16/bf16 decode (m ≤ 2 — one row from here only for the AVX2 build's rows over 3 KB, `bf16` a constant
   after inlining): half_rows over four-row groups and the remainder. */
EK_ROWS_TARGET EK_ROWS_INLINE void EK_ROWS_NAME(half_decode)(const bool bf16, const uint16_t *w, int64_t k, const float *x,
                                                             int64_t m, float *y, int64_t ldy, int64_t row_begin,
                                                             int64_t row_end) {
    const size_t row_bytes = (size_t)k * 2;
    const uint8_t *base = (const uint8_t *)w;
    int64_t r = row_begin;
    for (; r + 4 <= row_end; r += 4) {
        if (m == 1) EK_ROWS_NAME(half_rows)(bf16, 4, 1, base + (size_t)r * row_bytes, row_bytes, k, x, y + r, ldy);
        else EK_ROWS_NAME(half_rows)(bf16, 4, 2, base + (size_t)r * row_bytes, row_bytes, k, x, y + r, ldy);
    }
    for (; r < row_end; r++) {
        if (m == 1) EK_ROWS_NAME(half_rows)(bf16, 1, 1, base + (size_t)r * row_bytes, row_bytes, k, x, y + r, ldy);
        else EK_ROWS_NAME(half_rows)(bf16, 1, 2, base + (size_t)r * row_bytes, row_bytes, k, x, y + r, ldy);
    }
}

/* `rows` rows of fp16/bf16 weights (kind 1/2) widened to fp32 into `out`. */
EK_ROWS_TARGET EK_ROWS_INLINE void EK_ROWS_NAME(widen_rows)(const int kind, const uint8_t *w, int64_t rows, int64_t k,
                                                            float *out) {
    for (int64_t q = 0; q < rows; q++) {
        const uint8_t *row = w + (size_t)q * (size_t)k * 2;
        float *o = out + q * k;
        int64_t j = 0;
        for (; j + EK_F32_WIDTH <= k; j += EK_F32_WIDTH) EK_F32_STORE(o + j, EK_ROWS_NAME(load_weights)(row, j, kind));
        for (; j < k; j++) o[j] = EK_ROWS_NAME(weight_at)(row, j, kind);
    }
}

/* Rows of up to this many bytes of fp16/bf16 decode one at a time on AMD (float_stream elsewhere);
   longer ones keep half_rows' four rows side by side. One Zen 3, 2 threads, a matrix cycled from memory, 8 alternating rounds, one row ÷ four rows:
   F16 49152×576 1.42, 16384×1024 1.32, 16384×1536 1.12, 576×1536 1.05, 12288×2048 0.97, 8192×2048 0.91,
   4096×4096 0.91, 16384×8192 0.86 (BF16 0.85). The AVX-512 build takes it on AMD too: one Zen 4, SmolLM2 F16 decode
   (fp16), 2 threads, 13 alternating rounds of 5 runs, four rows side by side asking ahead 76.7–110.6 tok/s (median
   92.2), one row at a time 81.4–141.5 (median 98.8, ahead in 9 of the 13); BF16, 6 rounds, even (medians 100.1 and
   103.8, ahead in 3). */
#define EK_HALF_ONE_ROW_BYTES 3072

/* Rows of up to this many bytes of fp16/bf16 decode off AMD ask for the next four-row group's lines as
   they go (stream_rows' `ahead`): float_stream's four short rows side by side left the prefetchers behind. One
   Emerald Rapids, 2 threads, F16 matrices cycled from memory, 7 alternating rounds, GB/s medians (a read loop
   22.5-24.2): 49152×576 13.8 → 20.6, 16384×1024 15.2 → 19.7, 8192×1536 15.1 → 19.0; two groups ahead measured the
   same or less; at 4 KB rows and longer it cost (8192×2048 22.7 → 18.2, 4096×4096 25.2 → 19.4), and fp32's rows
   (float_stream, 0.85-1.0 of the read loop already) gained nothing. Outputs bit for bit the same. */
#define EK_HALF_AHEAD_ROW_BYTES 3072

/* fp16/bf16: one activation row by float_stream (asking ahead for rows up to EK_HALF_AHEAD_ROW_BYTES; the AVX2
   build only for rows up to EK_HALF_ONE_ROW_BYTES, longer ones by half_rows), or on AMD cores (either build) by
   float_row for rows up to EK_HALF_ONE_ROW_BYTES (`amd_one_row`, a constant after inlining: gemm_half_amd); two by
   half_rows;
   from EK_F32_OUTER_ROWS activation rows (and two panels of weight rows) fp32's packed outer products, each panel
   widened as it is packed — once per call, then fp32 arithmetic at fp32's rate:
   GEMM 128×16384×8192 on an Emerald Rapids, two alternating runs, AVX-512 0.33-0.45 → 0.87-1.00× SkylakeX sgemm
   (equal to the fp32 kernel's ratio in the same runs), avx2-novnni 0.62-0.70 → 0.81-0.83× Haswell sgemm. Fewer rows
   than that but more than one activation tile on AVX2: every four weight rows widened once into an fp32 buffer and
   run by the fp32 blocks, so the conversions (on the FMA ports) are paid once per GEMM rather than once per tile of
   three rows — GEMM 0.55 → 0.86-0.89× sgemm, SmolLM2's shapes 0.53 → 1.0-1.15×. AVX-512's tiles of six keep
   widening as they go (widened once it measured 1.32 → 1.10×). Without the buffer (allocation failed) the blocks
   widen as they go too. The AVX2 build's single row on an Emerald Rapids (`EMBER_ISA=avx2-novnni`), SmolLM2 fp16
   decode, 2 threads, 4 alternating runs of 5: float_row 48.4-53.3 tok/s, float_stream asking ahead 67.6-77.6. */
EK_ROWS_TARGET EK_ROWS_INLINE void EK_ROWS_NAME(gemm_half_body)(const bool amd_one_row, bool bf16, const uint16_t *w,
                                                                int64_t k, const float *x, int64_t m, float *y,
                                                                int64_t ldy, int64_t row_begin, int64_t row_end) {
    if (m == 1 && amd_one_row && k * 2 <= EK_HALF_ONE_ROW_BYTES) {
        if (bf16) EK_ROWS_NAME(stream_rows)(2, true, false, w, k, x, y, row_begin, row_end);
        else EK_ROWS_NAME(stream_rows)(1, true, false, w, k, x, y, row_begin, row_end);
        return;
    }
#if defined(EK_ROWS_512)
    const bool streams = m == 1;
#else /* longer rows: half_rows' four side by side, as measured on Zen 3 (the four-row stream unmeasured there) */
    const bool streams = m == 1 && k * 2 <= EK_HALF_ONE_ROW_BYTES;
#endif
    if (streams) {
        const bool ahead = k * 2 <= EK_HALF_AHEAD_ROW_BYTES;
        if (bf16) EK_ROWS_NAME(stream_rows)(2, false, ahead, w, k, x, y, row_begin, row_end);
        else EK_ROWS_NAME(stream_rows)(1, false, ahead, w, k, x, y, row_begin, row_end);
        return;
    }
    if (m <= 2) {
        if (bf16) EK_ROWS_NAME(half_decode)(true, w, k, x, m, y, ldy, row_begin, row_end);
        else EK_ROWS_NAME(half_decode)(false, w, k, x, m, y, ldy, row_begin, row_end);
        return;
    }
    if (EK_ROWS_NAME(outer_pays)(m, k, row_begin, row_end) &&
        (bf16 ? EK_ROWS_NAME(gemm_float_outer)(2, w, k, x, m, y, ldy, row_begin, row_end)
              : EK_ROWS_NAME(gemm_float_outer)(1, w, k, x, m, y, ldy, row_begin, row_end)))
        return;
#if defined(EK_ROWS_512)
    float *wide = NULL;
#else
    float *wide = m > EK_F32_ACTS ? malloc((size_t)k * 4 * sizeof(float)) : NULL;
#endif
    if (wide != NULL) {
        for (int64_t r = row_begin; r < row_end; r += 4) {
            const int64_t rows = row_end - r < 4 ? row_end - r : 4;
            const uint8_t *wr = (const uint8_t *)w + (size_t)r * (size_t)k * 2;
            if (bf16) EK_ROWS_NAME(widen_rows)(2, wr, rows, k, wide);
            else EK_ROWS_NAME(widen_rows)(1, wr, rows, k, wide);
            EK_ROWS_NAME(gemm_float_blocks)(0, wide, k, x, m, y + r, ldy, 0, rows);
        }
        free(wide);
    } else {
        if (bf16) EK_ROWS_NAME(gemm_float_blocks)(2, w, k, x, m, y, ldy, row_begin, row_end);
        else EK_ROWS_NAME(gemm_float_blocks)(1, w, k, x, m, y, ldy, row_begin, row_end);
    }
}

EK_ROWS_TARGET static void EK_ROWS_NAME(gemm_half)(bool bf16, const uint16_t *w, int64_t k, const float *x, int64_t m,
                                                   float *y, int64_t ldy, int64_t row_begin, int64_t row_end) {
    EK_ROWS_NAME(gemm_half_body)(false, bf16, w, k, x, m, y, ldy, row_begin, row_end);
}
EK_ROWS_TARGET static void EK_ROWS_NAME(gemm_half_amd)(bool bf16, const uint16_t *w, int64_t k, const float *x,
                                                       int64_t m, float *y, int64_t ldy, int64_t row_begin,
                                                       int64_t row_end) {
    EK_ROWS_NAME(gemm_half_body)(true, bf16, w, k, x, m, y, ldy, row_begin, row_end);
}

#undef EK_F32_TILES
#undef EK_F32_BLOCK
#undef EK_F32_CHUNK
#undef EK_F32_FETCH_AHEAD
#undef EK_HALF_ONE_ROW_BYTES
#undef EK_HALF_AHEAD_ROW_BYTES
#undef EK_F32_PANEL_BYTES
#undef EK_F32_CASE
#undef EK_F32_VEC
#undef EK_F32_WIDTH
#undef EK_F32_ACTS
#undef EK_F32_LOAD
#undef EK_F32_STORE
#undef EK_F32_FMA
#undef EK_F32_ADD
#undef EK_F32_ZERO
#undef EK_F32_HSUM

/* Every quantized format's driver, as [format] = entries, each named by `driver`. */
#define EK_ROWS_FORMAT_ENTRIES(driver)                                                                                \
    [EK_FORMAT_Q5_0] = driver(gemm_q5_0), [EK_FORMAT_Q5_1] = driver(gemm_q5_1),                                       \
    [EK_FORMAT_IQ4_NL] = driver(gemm_iq4_nl), [EK_FORMAT_Q2_K] = driver(gemm_q2_k),                                   \
    [EK_FORMAT_Q3_K] = driver(gemm_q3_k), [EK_FORMAT_Q4_K] = driver(gemm_q4_k),                                       \
    [EK_FORMAT_Q5_K] = driver(gemm_q5_k), [EK_FORMAT_Q6_K] = driver(gemm_q6_k),                                       \
    [EK_FORMAT_IQ4_XS] = driver(gemm_iq4_xs)
#define EK_ROWS_AMD_NAME(x) EK_ROWS_NAME(x##_amd)

const ek_row_kernels EK_ROWS_TABLE = {
    .gemm = {EK_ROWS_FORMAT_ENTRIES(EK_ROWS_NAME)},
    .quantize_q8_k = EK_ROWS_NAME(quantize_q8_k),
    .half = EK_ROWS_NAME(gemm_half),
    .f32 = EK_ROWS_NAME(gemm_f32),
    .f32_one_row = EK_ROWS_NAME(gemm_f32_one_row),
    .half_amd = EK_ROWS_NAME(gemm_half_amd),
#if defined(EK_ROWS_512)
    .decode_amd = {EK_ROWS_FORMAT_ENTRIES(EK_ROWS_AMD_NAME)},
#endif
};
#undef EK_ROWS_FORMAT_ENTRIES
#undef EK_ROWS_AMD_NAME
