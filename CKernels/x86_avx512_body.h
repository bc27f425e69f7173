/*
 * x86_avx512_body.h — the AVX-512 kernels of the packed layout on 512-bit
 * registers, included by x86_avx512.c (with AVX-512 VNNI, and AMX where the
 * CPU has it) and x86_avx512_novnni.c (AVX-512 F/BW/VL without VNNI: Intel's
 * Skylake-SP/X and Cascade Lake's predecessors). Before including, define
 *   EK_AVX512        the function attribute (target features),
 *   EK_AVX512_VNNI   1 or 0.
 *
 * One 32-bit lane per weight row: a 64-byte chunk of the packed layout holds
 * four consecutive quants of each of sixteen rows, so one VPDPBUSD with four
 * activation bytes broadcast does 64 multiply-adds for sixteen rows. VPDPBUSD
 * multiplies unsigned weight bytes by signed activation bytes; the offsets the
 * formats need (−8 for Q4_0, the +128 the packed Q8_0 carries) come off
 * afterwards as offset·Σq, which the activation quantizer computes once per
 * block. Without VNNI the same sums come from VPMADDUBSW and VPMADDWD
 * (dot4). Integer sums are exact, so each block's dot product equals the
 * oracle's; only the fp32 accumulation (FMA here) rounds differently.
 */
#include <immintrin.h>
#include <string.h>
#include "quant_impl.h"
#include "x86_prefetch.h"

#define EK_INLINE static inline __attribute__((always_inline))

EK_AVX512 EK_INLINE __m512i broadcast4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, sizeof v);
    return _mm512_set1_epi32(v);
}

/* dot4(acc, u, a, small): VPDPBUSD, or without VNNI its exact VPMADDUBSW + VPMADDWD form (x86_dot512.h). */
#define EK_DOT512_TARGET EK_AVX512
#define EK_DOT512_NAME dot4
#define EK_DOT512_VNNI EK_AVX512_VNNI
#include "x86_dot512.h"

EK_AVX512 EK_INLINE float fp16_round(float value) {
    return _cvtsh_ss(_cvtss_sh(value, _MM_FROUND_TO_NEAREST_INT));
}

/* ------------------------------------------------------------ activations */

/* 16 values at p, times the column scales at c when there are any. */
EK_AVX512 EK_INLINE __m512 load_scaled(const float *p, const float *c) {
    return c ? _mm512_mul_ps(_mm512_loadu_ps(p), _mm512_loadu_ps(c)) : _mm512_loadu_ps(p);
}

/* One 32-block's quants (times `columns`, the block's column scales, when not NULL) at a given 1/d (nearest, ties to
   even); returns Σq. */
EK_AVX512 EK_INLINE int32_t quantize_q8_scaled(const float *x, const float *columns, float inverse, int8_t *qs) {
    const __m512 scale = _mm512_set1_ps(inverse);
    __m512i q0 = _mm512_cvt_roundps_epi32(_mm512_mul_ps(load_scaled(x, columns), scale), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512i q1 = _mm512_cvt_roundps_epi32(_mm512_mul_ps(load_scaled(x + 16, columns ? columns + 16 : NULL), scale),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128((__m128i *)qs, _mm512_cvtsepi32_epi8(q0));
    _mm_storeu_si128((__m128i *)(qs + 16), _mm512_cvtsepi32_epi8(q1));
    return _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
}

/* One 32-block: scale, quants (nearest, ties to even), Σq. Returns d before fp16 rounding. */
EK_AVX512 EK_INLINE float quantize_q8_block(const float *x, int8_t *qs, int32_t *sum) {
    __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
    float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    *sum = quantize_q8_scaled(x, NULL, amax != 0.0f ? 127.0f / amax : 0.0f, qs); /* as the oracle's q8_scale */
    return amax / 127.0f;
}

/* One row at one scale (ek_quantize_activations_row_scaled): max|x| over the row, then each block at 127 / max. */
EK_AVX512 static float quantize_act_row_scaled_avx512(const float *x, int64_t blocks, const float *column_scales,
                                                     ek_block_q8_act *act) {
    __m512 amax = _mm512_setzero_ps();
    for (int64_t j = 0; j < blocks * EK_BLOCK; j += 16)
        amax = _mm512_max_ps(amax, _mm512_abs_ps(load_scaled(x + j, column_scales ? column_scales + j : NULL)));
    const float d = _mm512_reduce_max_ps(amax) / 127.0f, inverse = d != 0.0f ? 1.0f / d : 0.0f;
    for (int64_t b = 0; b < blocks; b++)
        act[b].sum = quantize_q8_scaled(x + b * EK_BLOCK, column_scales ? column_scales + b * EK_BLOCK : NULL, inverse, act[b].qs);
    return d;
}

EK_AVX512 static void quantize_act_avx512(const float *x, int64_t blocks, ek_block_q8_act *act, bool q8_1) {
    for (int64_t b = 0; b < blocks; b++) {
        int32_t sum;
        float d = quantize_q8_block(x + b * EK_BLOCK, act[b].qs, &sum);
        act[b].d = fp16_round(d);
        act[b].s = q8_1 ? fp16_round(d * (float)sum) : 0.0f;
        act[b].sum = sum;
        act[b].row_sum = 0;
    }
}

EK_AVX512 static void quantize_row_q8_0_avx512(const float *x, void *out, int64_t blocks) {
    ek_block_q8_0 *y = out;
    for (int64_t b = 0; b < blocks; b++) {
        int32_t sum;
        float d = quantize_q8_block(x + b * EK_BLOCK, y[b].qs, &sum);
        y[b].d = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
    }
}

EK_AVX512 static void quantize_row_q8_1_avx512(const float *x, void *out, int64_t blocks) {
    ek_block_q8_1 *y = out;
    for (int64_t b = 0; b < blocks; b++) {
        int32_t sum;
        float d = quantize_q8_block(x + b * EK_BLOCK, y[b].qs, &sum);
        y[b].d = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
        y[b].s = _cvtss_sh(d * (float)sum, _MM_FROUND_TO_NEAREST_INT);
    }
}

/* ------------------------------------------------------- weight rows */

/* Sixteen 4-bit values per register: element j in the low nibble, j + 16 in the high. */
EK_AVX512 EK_INLINE void store_nibbles(__m512i low, __m512i high, uint8_t *qs) {
    __m128i lo = _mm512_cvtepi32_epi8(low), hi = _mm512_cvtepi32_epi8(high);
    _mm_storeu_si128((__m128i *)qs, _mm_or_si128(lo, _mm_slli_epi16(hi, 4)));
}

EK_AVX512 static void quantize_row_q4_0_avx512(const float *x, void *out, int64_t blocks) {
    ek_block_q4_0 *y = out;
    for (int64_t b = 0; b < blocks; b++) {
        const float *v = x + b * EK_BLOCK;
        __m512 v0 = _mm512_loadu_ps(v), v1 = _mm512_loadu_ps(v + 16);
        __m512 a0 = _mm512_abs_ps(v0), a1 = _mm512_abs_ps(v1);
        float amax = _mm512_reduce_max_ps(_mm512_max_ps(a0, a1));
        float extreme = 0.0f;
        if (amax > 0.0f) { /* the first element of largest magnitude, as the oracle picks it */
            __m512 target = _mm512_set1_ps(amax);
            uint32_t hits = (uint32_t)_mm512_cmp_ps_mask(a0, target, _CMP_EQ_OQ)
                | ((uint32_t)_mm512_cmp_ps_mask(a1, target, _CMP_EQ_OQ) << 16);
            extreme = v[__builtin_ctz(hits)];
        }
        float d = extreme / -8.0f;
        float inverse = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
        __m512 scale = _mm512_set1_ps(inverse), half = _mm512_set1_ps(8.5f);
        __m512i fifteen = _mm512_set1_epi32(15);
        __m512i q0 = _mm512_min_epi32(_mm512_cvttps_epi32(_mm512_add_ps(_mm512_mul_ps(v0, scale), half)), fifteen);
        __m512i q1 = _mm512_min_epi32(_mm512_cvttps_epi32(_mm512_add_ps(_mm512_mul_ps(v1, scale), half)), fifteen);
        store_nibbles(q0, q1, y[b].qs);
    }
}

EK_AVX512 static void quantize_row_q4_1_avx512(const float *x, void *out, int64_t blocks) {
    ek_block_q4_1 *y = out;
    for (int64_t b = 0; b < blocks; b++) {
        const float *v = x + b * EK_BLOCK;
        __m512 v0 = _mm512_loadu_ps(v), v1 = _mm512_loadu_ps(v + 16);
        float lo = _mm512_reduce_min_ps(_mm512_min_ps(v0, v1));
        float hi = _mm512_reduce_max_ps(_mm512_max_ps(v0, v1));
        float d = (hi - lo) / 15.0f;
        float inverse = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
        y[b].m = _cvtss_sh(lo, _MM_FROUND_TO_NEAREST_INT);
        __m512 minimum = _mm512_set1_ps(lo), scale = _mm512_set1_ps(inverse), half = _mm512_set1_ps(0.5f);
        __m512i fifteen = _mm512_set1_epi32(15);
        __m512i q0 = _mm512_min_epi32(
            _mm512_cvttps_epi32(_mm512_add_ps(_mm512_mul_ps(_mm512_sub_ps(v0, minimum), scale), half)), fifteen);
        __m512i q1 = _mm512_min_epi32(
            _mm512_cvttps_epi32(_mm512_add_ps(_mm512_mul_ps(_mm512_sub_ps(v1, minimum), scale), half)), fifteen);
        store_nibbles(q0, q1, y[b].qs);
    }
}

EK_AVX512 static void dequantize_row_q8_0_avx512(const void *in, float *y, int64_t blocks) {
    const ek_block_q8_0 *x = in;
    for (int64_t b = 0; b < blocks; b++) {
        __m512 d = _mm512_set1_ps(_cvtsh_ss(x[b].d));
        __m512i q0 = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)x[b].qs));
        __m512i q1 = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(x[b].qs + 16)));
        _mm512_storeu_ps(y + b * EK_BLOCK, _mm512_mul_ps(_mm512_cvtepi32_ps(q0), d));
        _mm512_storeu_ps(y + b * EK_BLOCK + 16, _mm512_mul_ps(_mm512_cvtepi32_ps(q1), d));
    }
}

EK_AVX512 EK_INLINE void unpack_nibbles(const uint8_t *qs, __m512 *low, __m512 *high, int offset) {
    __m512i bytes = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)qs));
    __m512i bias = _mm512_set1_epi32(offset), mask = _mm512_set1_epi32(0x0f);
    *low = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_and_si512(bytes, mask), bias));
    *high = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_srli_epi32(bytes, 4), bias));
}

EK_AVX512 static void dequantize_row_q4_0_avx512(const void *in, float *y, int64_t blocks) {
    const ek_block_q4_0 *x = in;
    for (int64_t b = 0; b < blocks; b++) {
        __m512 d = _mm512_set1_ps(_cvtsh_ss(x[b].d)), low, high;
        unpack_nibbles(x[b].qs, &low, &high, 8);
        _mm512_storeu_ps(y + b * EK_BLOCK, _mm512_mul_ps(low, d));
        _mm512_storeu_ps(y + b * EK_BLOCK + 16, _mm512_mul_ps(high, d));
    }
}

EK_AVX512 static void dequantize_row_q4_1_avx512(const void *in, float *y, int64_t blocks) {
    const ek_block_q4_1 *x = in;
    for (int64_t b = 0; b < blocks; b++) {
        __m512 d = _mm512_set1_ps(_cvtsh_ss(x[b].d)), m = _mm512_set1_ps(_cvtsh_ss(x[b].m)), low, high;
        unpack_nibbles(x[b].qs, &low, &high, 0);
        _mm512_storeu_ps(y + b * EK_BLOCK, _mm512_add_ps(_mm512_mul_ps(low, d), m));
        _mm512_storeu_ps(y + b * EK_BLOCK + 16, _mm512_add_ps(_mm512_mul_ps(high, d), m));
    }
}

/* ------------------------------------------------------------- matmul */

/* Activation rows a tile of Q4_0/Q4_1 (Q8_0 takes four): two groups against six rows are twelve VPDPBUSD chains, where
   four rows' eight left 512-bit VPDPBUSD short of its ~1.9 a cycle on an Emerald Rapids (~1.3 with eight chains in a
   register-only loop). One core, 128×4096×4096, medians of six alternating runs: Q4_0 341 → 386 GOPS, Q4_1 315 →
   363, Q8_0 373 → 381 (noise: it keeps four), avx512-novnni Q4_0 181 → 188. Bit for bit the former results. */
#define EK_TILE 6

/* A 64-byte chunk of Q4 quants: elements 4c…4c+3 of each row (low nibbles) and 16+4c…16+4c+3 (high nibbles). */
EK_AVX512 EK_INLINE void nibbles(__m512i raw, __m512i *low, __m512i *high) {
    const __m512i low_mask = _mm512_set1_epi8(0x0f);
    *low = _mm512_and_si512(raw, low_mask);
    *high = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low_mask);
}

/* acc + one block's integer dot products scaled: by the rows' scales d times the activation block's, plus (Q4_1)
   the rows' minimums times its d·Σq. */
EK_AVX512 EK_INLINE __m512 scaled_block(ek_format format, __m512i dot, __m512 d, __m512 mins, const ek_block_q8_act *a,
                                        __m512 acc) {
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(d, _mm512_set1_ps(a->d)), acc);
    return format == EK_FORMAT_Q4_1 ? _mm512_fmadd_ps(mins, _mm512_set1_ps(a->s), acc) : acc;
}

/* The group-block's row scales d and (Q4_1) minimums. */
EK_AVX512 EK_INLINE void block_scales(ek_format format, const uint8_t *gb, __m512 *d, __m512 *mins) {
    *d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)gb));
    *mins = format == EK_FORMAT_Q4_1 ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(gb + 32))) : _mm512_setzero_ps();
}

/* One scaling per output for row-scaled Q8_0 (EK_PACKED_Q8_ROW_SCALES): the integer sum × the row's d (its first
   block's) × the activation row's d. */
EK_AVX512 EK_INLINE __m512 row_scaled(__m512i dot, const uint8_t *first_block, const ek_block_q8_act *a) {
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)first_block));
    return _mm512_mul_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(d, _mm512_set1_ps(a->d)));
}

/*
 * One group of sixteen weight rows against `tile` activation rows: acc[i]
 * lane r = Σ over all blocks of row r · activation row i. `rows_scaled`
 * (Q8_0 with one scale per row on both sides): the integer sums run over
 * all the blocks and are scaled once.
 */
EK_AVX512 EK_INLINE void group_tile(ek_format format, bool rows_scaled, int tile, bool first_pass, const uint8_t *gb,
                                    int64_t blocks, const ek_block_q8_act *act, __m512 *acc) {
    const size_t group_block = EK_GROUP_BLOCK_BYTES(format), scale_bytes = EK_GROUP_SCALE_BYTES(format);
    const int32_t offset = format == EK_FORMAT_Q4_0 ? 8 : (format == EK_FORMAT_Q8_0 ? 128 : 0);
    const uint8_t *first_block = gb;
    __m512i kept_s[EK_TILE], kept_t[EK_TILE];
    for (int i = 0; i < tile; i++) {
        acc[i] = _mm512_setzero_ps();
        kept_s[i] = _mm512_set1_epi32(rows_scaled ? -offset * act[i * blocks].row_sum : 0);
        kept_t[i] = _mm512_setzero_si512();
    }
    for (int64_t b = 0; b < blocks; b++, gb += group_block) {
        const uint8_t *quants = gb + scale_bytes;
        if (first_pass) { /* the group's first tile streams its weights from memory: fetch ahead of the hardware prefetcher */
            ek_prefetch_ahead(gb, group_block);
        }
        __m512i w[8];
        if (format == EK_FORMAT_Q8_0) {
            for (int c = 0; c < 8; c++) w[c] = _mm512_loadu_si512(quants + 64 * c);
        } else {
            for (int c = 0; c < 4; c++) nibbles(_mm512_loadu_si512(quants + 64 * c), &w[c], &w[4 + c]);
        }
        /* One weight register at a time against every tile row, each row's sum in two chains (even and odd
           registers): VPDPBUSD's latency (5 cycles) over four rows' chains alone kept it from issuing every cycle —
           two chains a row measured +9-17 % at 64 and 512 rows (single core, alternating; six rows a tile no more).
           The offset's offset·Σa (at most 128·32·127) comes off in integers as the even chain's start. */
        __m512i s[EK_TILE], t[EK_TILE];
        for (int i = 0; i < tile; i++) {
            s[i] = rows_scaled ? kept_s[i] : _mm512_set1_epi32(-offset * (act + i * blocks + b)->sum);
            t[i] = kept_t[i];
        }
        for (int c = 0; c < 8; c += 2)
            for (int i = 0; i < tile; i++) {
                const int8_t *x = (act + i * blocks + b)->qs + 4 * c;
                s[i] = dot4(s[i], w[c], broadcast4(x), format != EK_FORMAT_Q8_0);
                t[i] = dot4(t[i], w[c + 1], broadcast4(x + 4), format != EK_FORMAT_Q8_0);
            }
        if (rows_scaled) {
            for (int i = 0; i < tile; i++) kept_s[i] = s[i], kept_t[i] = t[i];
            continue;
        }
        __m512 d, mins;
        block_scales(format, gb, &d, &mins);
        for (int i = 0; i < tile; i++)
            acc[i] = scaled_block(format, _mm512_add_epi32(s[i], t[i]), d, mins, act + i * blocks + b, acc[i]);
    }
    if (rows_scaled)
        for (int i = 0; i < tile; i++) acc[i] = row_scaled(_mm512_add_epi32(kept_s[i], kept_t[i]), first_block, act + i * blocks);
}

/*
 * Two consecutive groups (32 weight rows) against `tile` activation rows: acc[g][i] lane r = Σ over all blocks of
 * row r of group g · activation row i. Each four activation bytes broadcast feed both groups and each weight
 * register every tile row, so a block takes 16 weight and 32 activation loads for 64 VPDPBUSD where group_tile
 * takes 40 for 32: at MiniLM's shapes (64 rows × 192 or 768 outputs × 384 or 1536 inputs, one core, weights in
 * cache) 350 → 370-420 GOPS alone and 225-245 → 290-320 with both cores busy. Eight chains (two groups × four
 * rows) keep VPDPBUSD's latency hidden with one chain each.
 */
EK_AVX512 EK_INLINE void pair_tile(ek_format format, bool rows_scaled, int tile, bool first_pass, bool near,
                                   const uint8_t *gb, size_t group_bytes, int64_t blocks, const ek_block_q8_act *act,
                                   __m512 acc[2][EK_TILE]) {
    const size_t group_block = EK_GROUP_BLOCK_BYTES(format), scale_bytes = EK_GROUP_SCALE_BYTES(format);
    const int32_t offset = format == EK_FORMAT_Q4_0 ? 8 : (format == EK_FORMAT_Q8_0 ? 128 : 0);
    const uint8_t *first_block[2] = {gb, gb + group_bytes};
    __m512i kept[2][EK_TILE];
    for (int i = 0; i < tile; i++) {
        acc[0][i] = acc[1][i] = _mm512_setzero_ps();
        kept[0][i] = kept[1][i] = _mm512_set1_epi32(rows_scaled ? -offset * act[i * blocks].row_sum : 0);
    }
    for (int64_t b = 0; b < blocks; b++, gb += group_block) {
        const uint8_t *block[2] = {gb, gb + group_bytes};
        if (first_pass) { /* `near`: Intel's decode GEMV of the nibble formats (gemm_avx512) */
            for (int g = 0; g < 2; g++) {
                if (near) ek_prefetch_at(block[g], group_block, 1);
                else ek_prefetch_ahead(block[g], group_block);
            }
        }
        __m512i s[2][EK_TILE];
        for (int i = 0; i < tile; i++) {
            if (rows_scaled) s[0][i] = kept[0][i], s[1][i] = kept[1][i];
            else s[0][i] = s[1][i] = _mm512_set1_epi32(-offset * (act + i * blocks + b)->sum);
        }
        if (format == EK_FORMAT_Q8_0) {
            for (int c = 0; c < 8; c++) {
                const __m512i w0 = _mm512_loadu_si512(block[0] + scale_bytes + 64 * c);
                const __m512i w1 = _mm512_loadu_si512(block[1] + scale_bytes + 64 * c);
                for (int i = 0; i < tile; i++) {
                    const __m512i x = broadcast4((act + i * blocks + b)->qs + 4 * c);
                    s[0][i] = dot4(s[0][i], w0, x, false);
                    s[1][i] = dot4(s[1][i], w1, x, false);
                }
            }
        } else {
            for (int c = 0; c < 4; c++) {
                __m512i low[2], high[2];
                for (int g = 0; g < 2; g++) nibbles(_mm512_loadu_si512(block[g] + scale_bytes + 64 * c), &low[g], &high[g]);
                for (int i = 0; i < tile; i++) {
                    const int8_t *x = (act + i * blocks + b)->qs + 4 * c;
                    const __m512i x_low = broadcast4(x), x_high = broadcast4(x + 16);
                    for (int g = 0; g < 2; g++) {
                        s[g][i] = dot4(s[g][i], low[g], x_low, true);
                        s[g][i] = dot4(s[g][i], high[g], x_high, true);
                    }
                }
            }
        }
        if (rows_scaled) {
            for (int i = 0; i < tile; i++) kept[0][i] = s[0][i], kept[1][i] = s[1][i];
            continue;
        }
        for (int g = 0; g < 2; g++) {
            __m512 d, mins;
            block_scales(format, block[g], &d, &mins);
            for (int i = 0; i < tile; i++) acc[g][i] = scaled_block(format, s[g][i], d, mins, act + i * blocks + b, acc[g][i]);
        }
    }
    if (rows_scaled)
        for (int g = 0; g < 2; g++)
            for (int i = 0; i < tile; i++) acc[g][i] = row_scaled(kept[g][i], first_block[g], act + i * blocks);
}

/* `tile` activation rows against one group (`pair`: two, prefetching `near` as pair_tile), their sixteen outputs a
   group stored through the masks. */
EK_AVX512 EK_INLINE void tile_rows(ek_format format, bool rows_scaled, int tile, bool pair, bool near, bool first_pass, const uint8_t *gb,
                                   int64_t blocks, const ek_block_q8_act *act, float *y, int64_t ldy,
                                   const __mmask16 mask[2]) {
    if (pair) {
        __m512 acc[2][EK_TILE];
        pair_tile(format, rows_scaled, tile, first_pass, near, gb, (size_t)blocks * EK_GROUP_BLOCK_BYTES(format), blocks, act, acc);
        for (int t = 0; t < tile; t++) {
            _mm512_mask_storeu_ps(y + t * ldy, mask[0], acc[0][t]);
            _mm512_mask_storeu_ps(y + t * ldy + EK_PACK_ROWS, mask[1], acc[1][t]);
        }
        return;
    }
    __m512 acc[EK_TILE];
    group_tile(format, rows_scaled, tile, first_pass, gb, blocks, act, acc);
    for (int t = 0; t < tile; t++) _mm512_mask_storeu_ps(y + t * ldy, mask[0], acc[t]);
}

EK_AVX512 EK_INLINE void gemm_avx512(ek_format format, bool rows_scaled, const uint8_t *packed, int64_t blocks,
                                     const ek_block_q8_act *act, int64_t m, float *y, int64_t ldy,
                                     int64_t row_begin, int64_t row_end) {
    const size_t group_block = EK_GROUP_BLOCK_BYTES(format);
    /* The decode GEMV (one row) on Intel cores takes long groups two at a time too, as two streams (each block's
       chains are short and independent, so one chain a row does not hold a lone row back). One Emerald Rapids,
       16384×8192 from memory, two threads, medians of 5 rounds against a read loop, alternating builds: Q4_0
       0.80–0.93 → 0.87–0.96 of the loop (six alternations, pairs ahead in five), Q4_1 0.86–0.87 → 0.91–0.94, Q8_0
       0.92–0.94 → 0.97 (two each); at 16384×4096 Q4_0 even (0.82–0.86 both). Short groups stay single: each
       stream asks for the bytes EK_PREFETCH_AHEAD past its own, which in a short group are the other stream's —
       SmolLM2's 49152×576 Q8_0 (9.8 KB groups) read 0.83–0.89 → 0.78–0.84 in pairs. AMD's Zen 4 streamed the
       single groups at 0.96–1.04 of its loop and keeps them (pairs unmeasured there). */
    const bool pair_one_row = m == 1 && (size_t)blocks * group_block >= 4 * (size_t)EK_PREFETCH_AHEAD &&
                              !ek_cpu_features_detect().amd;
    /* Those pairs of Q4_0 and Q4_1 ask for their lines 2 KB ahead into L1 (EK_PREFETCH_NEAR_AHEAD, as the one-row
       interleaved tiles do): the same harness, medians of five alternating rounds against T1 at 8 KB, Q4_0 1.12–1.20×
       (Q8_0 0.92×: it keeps T1). */
    const bool near = pair_one_row && format != EK_FORMAT_Q8_0;
    int64_t g = row_begin / EK_PACK_ROWS;
    while (g * EK_PACK_ROWS < row_end) {
        /* Groups two at a time when there are four activation rows or more (and for one row, above); two or three
           run one group at a time, in two chains a row (a pair's one chain a row would wait on VPDPBUSD's latency).
           Q8_0's tiles stay at four rows (six measured no faster), the nibble formats take EK_TILE. */
        const bool pair = (m >= 4 || pair_one_row) && (g + 1) * EK_PACK_ROWS < row_end;
        const __mmask16 mask[2] = {ek_group_mask(g, row_begin, row_end), pair ? ek_group_mask(g + 1, row_begin, row_end) : 0};
        const int64_t first = g * EK_PACK_ROWS;
        const uint8_t *gb = packed + (size_t)g * (size_t)blocks * group_block;
        int64_t i = 0;
        if (format == EK_FORMAT_Q8_0) {
            for (; i + 4 <= m; i += 4)
                tile_rows(format, rows_scaled, 4, pair, near, i == 0, gb, blocks, act + i * blocks, y + i * ldy + first, ldy, mask);
        } else {
            for (; i + EK_TILE <= m; i += EK_TILE)
                tile_rows(format, rows_scaled, EK_TILE, pair, near, i == 0, gb, blocks, act + i * blocks, y + i * ldy + first, ldy, mask);
        }
        /* The last one to five rows as one tile too (each case inlined with its constant size), not one at a time:
           every row alone streamed the group's weights again through a pass of half the chains. */
        switch (m - i) {
        case 5: tile_rows(format, rows_scaled, 5, pair, near, i == 0, gb, blocks, act + i * blocks, y + i * ldy + first, ldy, mask); break;
        case 4: tile_rows(format, rows_scaled, 4, pair, near, i == 0, gb, blocks, act + i * blocks, y + i * ldy + first, ldy, mask); break;
        case 3: tile_rows(format, rows_scaled, 3, pair, near, i == 0, gb, blocks, act + i * blocks, y + i * ldy + first, ldy, mask); break;
        case 2: tile_rows(format, rows_scaled, 2, pair, near, i == 0, gb, blocks, act + i * blocks, y + i * ldy + first, ldy, mask); break;
        case 1: tile_rows(format, rows_scaled, 1, pair, near, i == 0, gb, blocks, act + i * blocks, y + i * ldy + first, ldy, mask); break;
        default: break;
        }
        g += pair ? 2 : 1;
    }
}

#define EK_AVX512_GEMM(name, format, rows_scaled)                                                          \
    EK_AVX512 static void name(const uint8_t *packed, int64_t blocks, const ek_block_q8_act *act, int64_t m, \
                               float *y, int64_t ldy, int64_t row_begin, int64_t row_end) {                \
        gemm_avx512(format, rows_scaled, packed, blocks, act, m, y, ldy, row_begin, row_end);              \
    }
EK_AVX512_GEMM(gemm_q8_0_avx512, EK_FORMAT_Q8_0, false)
EK_AVX512_GEMM(gemm_q4_0_avx512, EK_FORMAT_Q4_0, false)
EK_AVX512_GEMM(gemm_q4_1_avx512, EK_FORMAT_Q4_1, false)
EK_AVX512_GEMM(gemm_q8_0_row_scaled_avx512, EK_FORMAT_Q8_0, true)

/* Eight independent accumulators and a prefetch as far ahead as the kernels' (EK_PREFETCH_AHEAD), at their level (x86_prefetch.h): the fastest plain
   read loop found here (on a Zen 4, two threads: T1 24–42 GB/s where T0 made 23–31 and none 26–34, three rounds). */
EK_AVX512 static uint64_t read_stream_avx512(const void *data, size_t bytes) {
    const uint8_t *p = data;
    __m512i acc[8];
    for (int j = 0; j < 8; j++) acc[j] = _mm512_setzero_si512();
    size_t i = 0;
    for (; i + 512 <= bytes; i += 512) {
        for (int j = 0; j < 8; j++) {
            ek_prefetch_ahead(p + i + 64 * j, 64);
            acc[j] = _mm512_xor_si512(acc[j], _mm512_loadu_si512(p + i + 64 * j));
        }
    }
    for (int j = 1; j < 8; j++) acc[0] = _mm512_xor_si512(acc[0], acc[j]);
    uint64_t lanes[8];
    _mm512_storeu_si512(lanes, acc[0]);
    uint64_t sum = 0;
    for (int j = 0; j < 8; j++) sum ^= lanes[j];
    for (; i + 8 <= bytes; i += 8) {
        uint64_t word;
        memcpy(&word, p + i, sizeof word);
        sum ^= word;
    }
    return sum;
}

/* Everything but the Q8_0 products, which both AVX-512 tables share. */
#define EK_AVX512_QUANTIZERS_AND_STREAM                                                                     \
    .quantize_act = quantize_act_avx512, .quantize_act_row_scaled = quantize_act_row_scaled_avx512,        \
    .quantize_row = {quantize_row_q8_0_avx512, quantize_row_q4_0_avx512, quantize_row_q4_1_avx512},        \
    .quantize_row_q8_1 = quantize_row_q8_1_avx512,                                                          \
    .dequantize_row = {dequantize_row_q8_0_avx512, dequantize_row_q4_0_avx512, dequantize_row_q4_1_avx512}, \
    .read_stream = read_stream_avx512

#if EK_AVX512_VNNI
/* The AMX kernels (x86_amx.c) take Q8_0 products of EK_AMX_MIN_ROWS activation rows and more; fewer run here. */
#define EK_AMX_MIN_ROWS 16

EK_AVX512 static void gemm_q8_0_amx_or_vnni(const uint8_t *packed, int64_t blocks, const ek_block_q8_act *act, int64_t m,
                                            float *y, int64_t ldy, int64_t row_begin, int64_t row_end) {
    if (m >= EK_AMX_MIN_ROWS) ek_gemm_q8_0_amx(packed, blocks, act, m, y, ldy, row_begin, row_end);
    else gemm_q8_0_avx512(packed, blocks, act, m, y, ldy, row_begin, row_end);
}

EK_AVX512 static void gemm_q8_0_row_scaled_amx_or_vnni(const uint8_t *packed, int64_t blocks, const ek_block_q8_act *act,
                                                       int64_t m, float *y, int64_t ldy, int64_t row_begin, int64_t row_end) {
    if (m >= EK_AMX_MIN_ROWS) ek_gemm_q8_0_row_scaled_amx(packed, blocks, act, m, y, ldy, row_begin, row_end);
    else gemm_q8_0_row_scaled_avx512(packed, blocks, act, m, y, ldy, row_begin, row_end);
}

/* The avx512 family where the CPU has AMX-INT8 and the tile state is granted: Q8_0's products differ. */
const ek_isa_kernels ek_kernels_avx512_amx = {
    .gemm = {gemm_q8_0_amx_or_vnni, gemm_q4_0_avx512, gemm_q4_1_avx512},
    .gemm_q8_0_row_scaled = {gemm_q8_0_row_scaled_amx_or_vnni, NULL},
    EK_AVX512_QUANTIZERS_AND_STREAM,
};

const ek_isa_kernels ek_kernels_avx512 = {
    .gemm = {gemm_q8_0_avx512, gemm_q4_0_avx512, gemm_q4_1_avx512},
    .gemm_q8_0_row_scaled = {gemm_q8_0_row_scaled_avx512, NULL},
    EK_AVX512_QUANTIZERS_AND_STREAM,
};
#else
/* AVX-512 without VNNI: the same kernels, dot4 by VPMADDUBSW. */
const ek_isa_kernels ek_kernels_avx512_novnni = {
    .gemm = {gemm_q8_0_avx512, gemm_q4_0_avx512, gemm_q4_1_avx512},
    .gemm_q8_0_row_scaled = {gemm_q8_0_row_scaled_avx512, NULL},
    EK_AVX512_QUANTIZERS_AND_STREAM,
};
#endif
