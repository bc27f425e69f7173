/*
 * x86_interleaved_wide.h — 512-bit kernels over the interleaved layout for
 * the AVX-512 variant of x86_interleaved_body.h, which includes this file
 * (EK_IL_WIDE) and so shares its helpers and its 256-bit tiles.
 *
 * The layout keeps eight rows to a 256-bit register; a 512-bit register here
 * holds the same register of two neighbouring groups (rows 8j … 8j + 15), its
 * halves loaded from the two group-blocks. Activations are the same for both
 * halves, so every broadcast and multiply now serves sixteen rows: on a
 * core with two 512-bit multiply ports that is twice the work per
 * instruction the 256-bit tiles get, for one extra insert per weight
 * register (shared by a tile's rows, and gone where the values are decoded
 * once per GEMM). Sub-block sums are VPDPBUSD's int32 (wide_dot: its exact
 * VPMADDUBSW + VPMADDWD form in the avx512-novnni build), scaled by one
 * VPMULLD a sub-block (Q4_K/Q5_K: exact integer block sums) or one
 * conversion and FMA (Q6_K, IQ4_XS: wide_scaled_add): at this width fewer
 * instructions than int16 sums and VPMADDWD. A lone last group of a row
 * range runs the 256-bit driver.
 */

#define EK_IL_WIDE_TILE 8 /* activation rows per weight register: 8 sub-block sums, 8 block sums, 8 fp32 outputs */

/* Register `offset` of two group-blocks `group_bytes` apart, the first group's in the low half. */
EK_IL_TARGET EK_IL_INLINE __m512i EK_IL_NAME(wide_load)(const uint8_t *gb, size_t group_bytes, size_t offset) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(gb + offset))),
                              _mm256_loadu_si256((const __m256i *)(gb + group_bytes + offset)), 1);
}

/* Sixteen bytes: eight at `offset` in each of the two group-blocks (one per row). */
EK_IL_TARGET EK_IL_INLINE __m128i EK_IL_NAME(wide_load8)(const uint8_t *gb, size_t group_bytes, size_t offset) {
    return _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)(gb + offset)),
                              _mm_loadl_epi64((const __m128i *)(gb + group_bytes + offset)));
}

/* Thirty-two bytes: sixteen at `offset` in each group-block. */
EK_IL_TARGET EK_IL_INLINE __m256i EK_IL_NAME(wide_load16)(const uint8_t *gb, size_t group_bytes, size_t offset) {
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(gb + offset))),
                                   _mm_loadu_si128((const __m128i *)(gb + group_bytes + offset)), 1);
}

/* The sixteen rows' fp16 factors (eight at the start of each group-block + offset) as fp32. */
EK_IL_TARGET EK_IL_INLINE __m512 EK_IL_NAME(wide_halves)(const uint8_t *gb, size_t group_bytes, size_t offset) {
    return _mm512_cvtph_ps(EK_IL_NAME(wide_load16)(gb, group_bytes, offset));
}

/* Four activation bytes in every 32-bit lane. */
EK_IL_TARGET EK_IL_INLINE __m512i EK_IL_NAME(wide_broadcast4)(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, sizeof v);
    return _mm512_set1_epi32(v);
}

/* wide_dot(acc, u, a, small): VPDPBUSD, or in the avx512-novnni build its exact VPMADDUBSW + VPMADDWD form
   (x86_dot512.h). */
#define EK_DOT512_TARGET EK_IL_TARGET
#define EK_DOT512_NAME EK_IL_NAME(wide_dot)
#if defined(EK_IL_VNNI)
#define EK_DOT512_VNNI 1
#else
#define EK_DOT512_VNNI 0
#endif
#include "x86_dot512.h"

/* The low (high = 0) or high nibble of every byte of `raw`. */
EK_IL_TARGET EK_IL_INLINE __m512i EK_IL_NAME(wide_nibbles)(__m512i raw, const int high) {
    return _mm512_and_si512(high ? _mm512_srli_epi16(raw, 4) : raw, _mm512_set1_epi8(0x0f));
}

/* low | (bits & mask), one VPTERNLOGD: the high bits of 5- and 6-bit values put beside their nibbles. */
EK_IL_TARGET EK_IL_INLINE __m512i EK_IL_NAME(wide_merge_bits)(__m512i low, __m512i bits, char mask) {
    return _mm512_ternarylogic_epi32(low, bits, _mm512_set1_epi8(mask), 0xF8);
}

/* The IQ4 table's signed values moved to unsigned, v + 128 (a byte's top bit flipped), in every 128-bit lane:
   VPDPBUSD takes them as they are, and the 128·Σa they add comes off the sum. */
EK_IL_TARGET EK_IL_INLINE __m512i EK_IL_NAME(wide_iq4_table)(void) {
    return _mm512_xor_si512(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)ek_iq4_values)),
                            _mm512_set1_epi8((char)0x80));
}

/* sums[t] += part[t] × each row's sub-block scale (as fp32), for the tile's rows: a conversion and an FMA a sub-block
   and row. The products are integers below 2²⁴ and a block's sum is rounded as fp32 once per sub-block; VPMULLD into
   int32 sums (exact) is two uops on the port that also runs VPDPBUSD on Intel cores, and the fp32 form measured
   ~10 % faster there on Q6_K's GEMM (single thread, 4096×8192×128, best of 7: 224–253 → 267–284 GOPS). Q4_K/Q5_K
   keep VPMULLD (wide_k45_sub_block): their exact sums are what llama.cpp's arithmetic gives. */
EK_IL_TARGET EK_IL_INLINE void EK_IL_NAME(wide_scaled_add)(__m512 *sums, const __m512i *part, __m512 scale,
                                                           const int tile) {
    for (int t = 0; t < tile; t++) sums[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(part[t]), scale, sums[t]);
}

/* The wide tiles' shared arguments: two groups from `group`, `blocks` group-blocks, `tile` (1 … EK_IL_WIDE_TILE, a
   constant after inlining) activation rows, sixteen fp32 outputs per row. With `decoded` (a constant) the tile reads
   its weight registers from `values`, decoded once per GEMM (below), and only the headers from the group-blocks.
   `pairs` (a constant): 2 runs the next pair too (its group-blocks 2·group_bytes on, its values EK_IL_WIDE_PAIR_VALUES
   on), its outputs at out[EK_IL_WIDE_TILE + t] — only tiles that say so take it (EK_IL_WIDE_DRIVER's `quads`). */
#define EK_IL_WIDE_TILE_ARGS const uint8_t *group, size_t group_bytes, int64_t blocks, const uint8_t *values, \
                             const int decoded, const uint8_t *act, size_t act_row_bytes, const int tile,            \
                             const int pairs, __m512 *out
#define EK_IL_WIDE_CASE(name, n, grp, nblocks, decoded, pairs)                                                      \
    case n:                                                                                                         \
        EK_IL_NAME(wide_##name##_tile)(grp, group_bytes, nblocks, values, decoded, a, act_row_bytes, n, pairs, out); \
        break;
/* Activation rows a tile takes: eight against one pair, `name`'s quad_rows against two (each broadcast feeding two
   VPDPBUSD). */
#define EK_IL_WIDE_ROWS(name, pairs) ((pairs) == 2 ? EK_IL_NAME(name##_quad_rows) : EK_IL_WIDE_TILE)
/* Every activation tile over `nblocks` group-blocks of the pair (`pairs` 2: the two pairs) at `grp`, from activation
   block `b0`; the outputs are stored, or added to what is stored when `accumulate`. */
#define EK_IL_WIDE_RUN_TILES(name, grp, nblocks, b0, decoded, accumulate, pairs)                                    \
    for (int64_t i0 = 0; i0 < m; i0 += EK_IL_WIDE_ROWS(name, pairs)) {                                              \
        const uint8_t *a = (const uint8_t *)act + (size_t)i0 * act_row_bytes + (size_t)(b0) * EK_IL_NAME(name##_act_block_bytes); \
        __m512 out[2 * EK_IL_WIDE_TILE];                                                                            \
        const int rows = EK_IL_WIDE_ROWS(name, pairs), tile = (int)(m - i0 < rows ? m - i0 : rows);                 \
        switch (tile) { /* a constant tile per call: registers, not arrays */                                       \
        EK_IL_WIDE_CASE(name, 8, grp, nblocks, decoded, pairs) EK_IL_WIDE_CASE(name, 7, grp, nblocks, decoded, pairs) \
        EK_IL_WIDE_CASE(name, 6, grp, nblocks, decoded, pairs) EK_IL_WIDE_CASE(name, 5, grp, nblocks, decoded, pairs) \
        EK_IL_WIDE_CASE(name, 4, grp, nblocks, decoded, pairs) EK_IL_WIDE_CASE(name, 3, grp, nblocks, decoded, pairs) \
        EK_IL_WIDE_CASE(name, 2, grp, nblocks, decoded, pairs)                                                      \
        default: EK_IL_WIDE_CASE(name, 1, grp, nblocks, decoded, pairs)                                             \
        }                                                                                                           \
        for (int p = 0; p < (pairs); p++)                                                                           \
            for (int t = 0; t < tile; t++) {                                                                        \
                float *row = y + (i0 + t) * ldy + first + 16 * p;                                                   \
                const __m512 o = out[p * EK_IL_WIDE_TILE + t];                                                      \
                _mm512_mask_storeu_ps(row, mask[p], (accumulate) ? _mm512_add_ps(o, _mm512_maskz_loadu_ps(mask[p], row)) : o); \
            }                                                                                                       \
    }
/* Decoding once per GEMM, as the 256-bit drivers do (EK_IL_DRIVER_DECODING), into 64-byte registers that hold both
   groups: a tile then loads each weight register whole — no insert, shift or mask per tile. A block's values take
   sixteen bytes a column; EK_IL_DECODE_ELEMENTS columns at a time make 16 KB, in L1 beside the activations (two
   pairs: 32 KB over the same columns, the second pair's EK_IL_WIDE_PAIR_VALUES on — the same chunks, so the same
   fp32 additions; half the columns each measured no faster and would round otherwise). */
#define EK_IL_WIDE_VALUES(elements) (16 * (size_t)(elements)) /* bytes of one decoded block of `elements` columns */
#define EK_IL_WIDE_PAIR_VALUES EK_IL_WIDE_VALUES(EK_IL_DECODE_ELEMENTS)
/* Decodes `n` group-blocks of `pairs` pairs from `chunk` and runs every activation tile over them. */
#define EK_IL_WIDE_DECODED_CHUNK(name, pairs)                                                                       \
    for (int p = 0; p < (pairs); p++)                                                                               \
        for (int64_t b = 0; b < n; b++)                                                                             \
            EK_IL_NAME(wide_##name##_decode)(chunk + 2 * (size_t)p * group_bytes + (size_t)b * block_bytes, group_bytes, \
                                             values + (size_t)p * EK_IL_WIDE_PAIR_VALUES + EK_IL_WIDE_VALUES(EK_IL_NAME(name##_block_elements)) * b); \
    EK_IL_WIDE_RUN_TILES(name, chunk, n, b0, 1, b0 > 0, pairs)
/* Pairs of groups over every activation tile, masked to [row_begin, row_end); a lone last group runs the 256-bit
   driver `name`. With `quads` (a constant: tiles that take two pairs) and more rows than one tile, two whole pairs
   at a time: each activation broadcast then feeds two VPDPBUSD and each activation block is read once per 32 weight
   rows, not 16. */
#define EK_IL_WIDE_DRIVER(name, quads)                                                                              \
    EK_IL_TARGET static void EK_IL_NAME(wide_##name)(const uint8_t *w, int64_t blocks, const void *act,            \
                                                    size_t act_row_bytes, int64_t m, float *y, int64_t ldy,        \
                                                    int64_t row_begin, int64_t row_end) {                          \
        const size_t block_bytes = EK_IL_NAME(name##_block_bytes), group_bytes = (size_t)blocks * block_bytes;      \
        const int64_t chunk_blocks = EK_IL_DECODE_ELEMENTS / EK_IL_NAME(name##_block_elements);                     \
        uint8_t values[((quads) ? 2 : 1) * EK_IL_WIDE_PAIR_VALUES] __attribute__((aligned(64)));                                    \
        int64_t first = (row_begin / 8) * 8;                                                                        \
        while (first + 8 < row_end) {                                                                               \
            const int two = (quads) && m > EK_IL_WIDE_TILE && first + 24 < row_end;                                \
            __mmask16 mask[2];                                                                                      \
            for (int p = 0; p < 2; p++) {                                                                           \
                const int64_t start = first + 16 * p;                                                               \
                const int64_t lo = row_begin > start ? row_begin - start : 0;                                       \
                const int64_t hi = row_end - start < 16 ? (row_end > start ? row_end - start : 0) : 16;              \
                mask[p] = (__mmask16)((((uint32_t)1 << hi) - 1) & ~(((uint32_t)1 << lo) - 1));                      \
            }                                                                                                       \
            const uint8_t *pair = w + (size_t)(first / 8) * group_bytes;                                            \
            if (m <= EK_IL_WIDE_TILE) {                                                                             \
                EK_IL_WIDE_RUN_TILES(name, pair, blocks, 0, 0, false, 1)                                            \
            } else {                                                                                                \
                for (int64_t b0 = 0; b0 < blocks; b0 += chunk_blocks) {                                             \
                    const int64_t n = blocks - b0 < chunk_blocks ? blocks - b0 : chunk_blocks;                      \
                    const uint8_t *chunk = pair + (size_t)b0 * block_bytes;                                         \
                    if (two) {                                                                                      \
                        EK_IL_WIDE_DECODED_CHUNK(name, 2)                                                           \
                    } else {                                                                                        \
                        EK_IL_WIDE_DECODED_CHUNK(name, 1)                                                           \
                    }                                                                                               \
                }                                                                                                   \
            }                                                                                                       \
            first += two ? 32 : 16;                                                                                 \
        }                                                                                                           \
        if (first < row_end)                                                                                        \
            EK_IL_NAME(name)(w, blocks, act, act_row_bytes, m, y, ldy, row_begin > first ? row_begin : first, row_end); \
    }

/* Part `part` of `parts` of the lines ahead of a block of both group-blocks of a pair (ek_prefetch_part): the
   K-quant and IQ4_XS tiles of the decode GEMV ask for each part as they start on it, as the 256-bit tiles do — asked
   for in one burst as each block began, the two streams' 35–53 lines filled the core's queue of misses and memory
   idled between bursts. One Emerald Rapids, two threads, 16384×8192 from memory, medians of 7 alternating rounds in
   one process against the burst: Q6_K (8 parts) 1.19–1.26×, Q5_K 1.07–1.26×, Q4_K 1.04–1.07×, IQ4_XS 1.03–1.05× (4
   parts; 8 parts and a 16 KB distance measured the same); the per-32 tiles ask for a block whole (one part). A tile
   of one row (`tile`, a constant) is the decode GEMV, which only Intel cores run here (AMD's takes the 256-bit tiles,
   `gemv_amd`): it asks EK_PREFETCH_NEAR_AHEAD past, into L1 (x86_prefetch.h); the others EK_PREFETCH_AHEAD, into L2. */
EK_IL_TARGET EK_IL_INLINE void EK_IL_NAME(wide_prefetch_part)(const uint8_t *gb, size_t group_bytes, size_t block_bytes,
                                                              const int part, const int parts, const int tile) {
    ek_prefetch_part(gb, block_bytes, part, parts, tile == 1);
    ek_prefetch_part(gb + group_bytes, block_bytes, part, parts, tile == 1);
}

/* ------------------------------------------------------ per-32 formats -- */

/* The eight registers of one block of a pair of group-blocks, as unsigned bytes: register v holds elements
   4v … 4v + 3 (v < 4: the low nibbles of quant register v; IQ4_NL's v ≥ 4 the high nibbles of v − 4). Q5_0 / Q5_1
   as q5_values (x86_interleaved_body.h) takes them from the five re-coded registers, the ORs as VPTERNLOGD: 19
   instructions where the nibbles and a register of fifth bits took 28. wide_q5_field is value register v (a constant
   after inlining) of the five `r`. */
EK_IL_TARGET EK_IL_INLINE __m512i EK_IL_NAME(wide_q5_field)(const __m512i *r, const int v) {
#define EK_IL_LOW3(x) _mm512_and_si512(_mm512_srli_epi16(x, 5), _mm512_set1_epi8(0x07))
    switch (v) {
    case 5: return EK_IL_NAME(wide_merge_bits)(EK_IL_LOW3(r[0]), _mm512_srli_epi16(r[1], 2), 0x18);
    case 6: return EK_IL_NAME(wide_merge_bits)(EK_IL_LOW3(r[2]), _mm512_srli_epi16(r[3], 2), 0x18);
    case 7: {
        const __m512i low = EK_IL_NAME(wide_merge_bits)(EK_IL_LOW3(r[4]), _mm512_srli_epi16(r[1], 4), 0x08);
        return EK_IL_NAME(wide_merge_bits)(low, _mm512_srli_epi16(r[3], 3), 0x10);
    }
    default: return _mm512_and_si512(r[v], _mm512_set1_epi8(0x1f));
    }
#undef EK_IL_LOW3
}

EK_IL_TARGET EK_IL_INLINE void EK_IL_NAME(wide_q5_values)(const uint8_t *gb, size_t group_bytes, size_t quants,
                                                          size_t high, __m512i *u) {
    (void)high; /* the signature is the per-32 tile's */
    __m512i r[5];
    for (int c = 0; c < 5; c++) r[c] = EK_IL_NAME(wide_load)(gb, group_bytes, quants + 32 * c);
    _Pragma("clang loop unroll(full)") /* v a constant in each: no switch left */
    for (int v = 0; v < 8; v++) u[v] = EK_IL_NAME(wide_q5_field)(r, v);
}

/* IQ4_NL: the table's values as v + 128 (wide_iq4_table). */
EK_IL_TARGET EK_IL_INLINE void EK_IL_NAME(wide_iq4_nl_values)(const uint8_t *gb, size_t group_bytes, size_t quants,
                                                              size_t high, __m512i *u) {
    (void)high; /* no high-bit register: the signature is the per-32 tile's */
    const __m512i table = EK_IL_NAME(wide_iq4_table)();
    for (int c = 0; c < 4; c++) {
        const __m512i raw = EK_IL_NAME(wide_load)(gb, group_bytes, quants + 32 * c);
        u[c] = _mm512_shuffle_epi8(table, EK_IL_NAME(wide_nibbles)(raw, 0));
        u[4 + c] = _mm512_shuffle_epi8(table, EK_IL_NAME(wide_nibbles)(raw, 1));
    }
}

/* Activation block b of tile row t, and where register v's four bytes start in a block (v < 4: elements 4v …, the
   low nibbles; v ≥ 4: 16 further on). */
#define EK_IL_WIDE_ACT(t, b) ((const ek_block_q8_act *)(act + (size_t)(t) * act_row_bytes) + (b))
#define EK_IL_WIDE_QS(v) (4 * ((v) & 3) + 16 * ((v) >> 2))
/* A per-32 format over unsigned values u = value + `offset`: one VPDPBUSD chain a row and pair, started at
   −offset·Σa (the activation block's exact sum; Q5_0 16, IQ4_NL 128), weight register outside, rows inside, so a
   tile's chains (8) run side by side; Q5_1 (`five_one`) adds minimum·(d·Σq) in fp32. Only IQ4_NL's offset of 128
   makes values past 127, the bytes wide_dot's no-VNNI form must take whole. Two pairs a tile (four activation rows,
   32 weight rows) against one (eight rows, two chains a row, the rows in turn): one Emerald Rapids core,
   128×4096×4096 Q5_0, alternating runs of a C harness, 308 → 374 GOPS (medians of six), bit for bit the same
   results (the same chunks, so the same fp32 additions). */
#define EK_IL_WIDE_PER32(name, values_of, offset, five_one, bytes, quants, high)                                       \
    static const int EK_IL_NAME(name##_quad_rows) = 4;                                                              \
    EK_IL_TARGET EK_IL_INLINE void EK_IL_NAME(wide_##name##_decode)(const uint8_t *gb, size_t group_bytes, uint8_t *out) { \
        __m512i u[8];                                                                                               \
        EK_IL_NAME(values_of)(gb, group_bytes, quants, high, u);                                                    \
        for (int v = 0; v < 8; v++) _mm512_store_si512((__m512i *)(out + 64 * v), u[v]);                            \
    }                                                                                                               \
    EK_IL_TARGET EK_IL_INLINE void EK_IL_NAME(wide_##name##_tile)(EK_IL_WIDE_TILE_ARGS) {                           \
        __m512 acc[2][EK_IL_WIDE_TILE];                                                                             \
        for (int p = 0; p < pairs; p++)                                                                             \
            for (int t = 0; t < tile; t++) acc[p][t] = _mm512_setzero_ps();                                         \
        for (int64_t b = 0; b < blocks; b++) {                                                                      \
            const uint8_t *gb[2] = {group + (size_t)b * bytes, pairs == 2 ? group + 2 * group_bytes + (size_t)b * bytes : NULL};         \
            __m512i u[8];                                                                                           \
            if (!decoded) { /* one pair (the driver's rows of few activations) */                                   \
                EK_IL_NAME(wide_prefetch_part)(gb[0], group_bytes, bytes, 0, 1, tile);                              \
                EK_IL_NAME(values_of)(gb[0], group_bytes, quants, high, u);                                         \
            }                                                                                                       \
            __m512 d[2], mins[2];                                                                                   \
            __m512i dot[2][EK_IL_WIDE_TILE];                                                                        \
            for (int p = 0; p < pairs; p++) {                                                                       \
                d[p] = EK_IL_NAME(wide_halves)(gb[p], group_bytes, 0);                                              \
                mins[p] = five_one ? EK_IL_NAME(wide_halves)(gb[p], group_bytes, EK_IL_Q5_1_MINS) : d[p];           \
            }                                                                                                       \
            for (int t = 0; t < tile; t++) {                                                                        \
                const __m512i start = _mm512_set1_epi32(-(offset) * EK_IL_WIDE_ACT(t, b)->sum);                     \
                for (int p = 0; p < pairs; p++) dot[p][t] = start;                                                  \
            }                                                                                                       \
            /* one weight register of each pair at a time against every tile row: a chain per row and pair, each    \
               broadcast feeding every pair */                                                                      \
            _Pragma("clang loop unroll(full)")                                                                      \
            for (int v = 0; v < 8; v++) {                                                                           \
                __m512i wv[2];                                                                                      \
                for (int p = 0; p < pairs; p++)                                                                     \
                    wv[p] = decoded ? _mm512_load_si512((const __m512i *)(values + (size_t)p * EK_IL_WIDE_PAIR_VALUES + EK_IL_WIDE_VALUES(32) * b + 64 * v)) : u[v]; \
                _Pragma("clang loop unroll(full)")                                                                  \
                for (int t = 0; t < tile; t++) {                                                                    \
                    const __m512i x = EK_IL_NAME(wide_broadcast4)(EK_IL_WIDE_ACT(t, b)->qs + EK_IL_WIDE_QS(v));     \
                    for (int p = 0; p < pairs; p++) dot[p][t] = EK_IL_NAME(wide_dot)(dot[p][t], wv[p], x, (offset) != 128); \
                }                                                                                                   \
            }                                                                                                       \
            for (int t = 0; t < tile; t++) {                                                                        \
                const ek_block_q8_act *ab = EK_IL_WIDE_ACT(t, b);                                                   \
                for (int p = 0; p < pairs; p++) {                                                                   \
                    acc[p][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[p][t]), _mm512_mul_ps(d[p], _mm512_set1_ps(ab->d)), acc[p][t]); \
                    if (five_one)                                                                                   \
                        acc[p][t] = _mm512_fmadd_ps(mins[p], _mm512_set1_ps(ab->s), acc[p][t]);                     \
                }                                                                                                   \
            }                                                                                                       \
        }                                                                                                           \
        for (int p = 0; p < pairs; p++)                                                                             \
            for (int t = 0; t < tile; t++) out[p * EK_IL_WIDE_TILE + t] = acc[p][t];                                \
    }                                                                                                               \
    EK_IL_WIDE_DRIVER(name, 1)
EK_IL_WIDE_PER32(gemm_q5_0, wide_q5_values, 16, 0, EK_IL_Q5_0_BYTES, EK_IL_Q5_0_QUANTS, 0)
EK_IL_WIDE_PER32(gemm_q5_1, wide_q5_values, 0, 1, EK_IL_Q5_1_BYTES, EK_IL_Q5_1_QUANTS, 0)
EK_IL_WIDE_PER32(gemm_iq4_nl, wide_iq4_nl_values, 128, 0, EK_IL_IQ4_NL_BYTES, EK_IL_IQ4_NL_QUANTS, 0)

/* -------------------------------------------------- per-256 formats --- */


/* A K-quant tile's start of block b: the activation blocks of the tile's rows and their quants. */
EK_IL_TARGET EK_IL_INLINE void EK_IL_NAME(wide_block_start)(const uint8_t *act, size_t act_row_bytes, int64_t b,
                                                            const int tile, const ek_block_q8_k **ab, const int8_t **aq) {
    for (int t = 0; t < tile; t++) {
        ab[t] = (const ek_block_q8_k *)(act + (size_t)t * act_row_bytes) + b;
        aq[t] = ab[t]->qs;
    }
}

/* The end of a K-quant block whose sums are all the block has: acc[t] += Σ·d·(the activation block's d). */
EK_IL_TARGET EK_IL_INLINE void EK_IL_NAME(wide_block_end)(const uint8_t *gb, size_t group_bytes,
                                                          const ek_block_q8_k *const *ab, const __m512 *sums,
                                                          const int tile, __m512 *acc) {
    const __m512 d = EK_IL_NAME(wide_halves)(gb, group_bytes, 0);
    for (int t = 0; t < tile; t++) acc[t] = _mm512_fmadd_ps(sums[t], _mm512_mul_ps(d, _mm512_set1_ps(ab[t]->d)), acc[t]);
}

/* Q4_K and Q5_K, as EK_IL_K45 (`five` a constant after inlining): per sub-block s, Σ u·a of its eight registers,
   × the rows' scales (VPMULLD: the block's sum stays an exact integer, unlike wide_scaled_add's fp32); the minimums'
   Σ min·Σa per pair of sub-blocks, into an accumulator of their own taken off at the end — the order of llama.cpp's
   repacked Q4_K kernel as read in its source (not compared bit for bit; its Q5_K keeps the minimums apart too), where
   one accumulator for both parts and fp32 sub-block sums measured 0.35 % off its perplexity on a file whose
   ffn_down is Q4_K (16.0946 vs 16.1504; now 16.1599). The greedy tokens of a quantized model follow such roundings:
   see docs/KERNELS.md. The unsigned values of register g of sub-block
   s (Q4_K: its parity picks the nibble; Q5_K: value register s of g's five re-coded ones, `s` a constant) of a pair
   of group-blocks: */
EK_IL_TARGET EK_IL_INLINE __m512i EK_IL_NAME(wide_k45_values)(const int five, const uint8_t *gb, size_t group_bytes,
                                                              const int s, const int g) {
    if (five) {
        __m512i r[5]; /* the loads value register s does not use are dropped */
        for (int c = 0; c < 5; c++) r[c] = EK_IL_NAME(wide_load)(gb, group_bytes, EK_IL_Q5_K_VALUES + 160 * g + 32 * c);
        return EK_IL_NAME(wide_q5_field)(r, s);
    }
    const __m512i raw = EK_IL_NAME(wide_load)(gb, group_bytes, EK_IL_Q4_K_QUANTS + 32 * (8 * (s / 2) + g));
    return EK_IL_NAME(wide_nibbles)(raw, s % 2);
}

/* Decoded: register 8s + g of a block at values + 64·(8s + g) (Q5_K: each g's eight from its five, wide_q5_values). */
EK_IL_TARGET EK_IL_INLINE void EK_IL_NAME(wide_k45_decode)(const int five, const uint8_t *gb, size_t group_bytes,
                                                           uint8_t *values) {
    for (int g = 0; g < 8; g++) {
        __m512i u[8];
        if (five) EK_IL_NAME(wide_q5_values)(gb, group_bytes, EK_IL_Q5_K_VALUES + 160 * g, 0, u);
        else
            for (int s = 0; s < 8; s++) u[s] = EK_IL_NAME(wide_k45_values)(0, gb, group_bytes, s, g);
        for (int s = 0; s < 8; s++) _mm512_store_si512((__m512i *)(values + 64 * (8 * s + g)), u[s]);
    }
}

EK_IL_TARGET EK_IL_INLINE void EK_IL_NAME(wide_k45_sub_block)(const int five, const int tile, const int pairs,
                                                              const uint8_t *const *gb, size_t group_bytes,
                                                              const uint8_t *values, const int decoded, const int s,
                                                              const int8_t *const *aq, __m512i sums[2][EK_IL_WIDE_TILE]) {
    __m512i scale[2], part[2][EK_IL_WIDE_TILE];
    for (int p = 0; p < pairs; p++) {
        scale[p] = _mm512_cvtepu8_epi32(EK_IL_NAME(wide_load8)(gb[p], group_bytes, EK_IL_K_SCALES + 8 * s));
        for (int t = 0; t < tile; t++) part[p][t] = _mm512_setzero_si512();
    }
    for (int g = 0; g < 8; g++) {
        __m512i u[2];
        for (int p = 0; p < pairs; p++)
            u[p] = decoded ? _mm512_load_si512((const __m512i *)(values + (size_t)p * EK_IL_WIDE_PAIR_VALUES + 64 * (8 * s + g)))
                           : EK_IL_NAME(wide_k45_values)(five, gb[p], group_bytes, s, g);
        for (int t = 0; t < tile; t++) {
            const __m512i x = EK_IL_NAME(wide_broadcast4)(aq[t] + 32 * s + 4 * g);
            for (int p = 0; p < pairs; p++) part[p][t] = EK_IL_NAME(wide_dot)(part[p][t], u[p], x, 1);
        }
    }
    for (int p = 0; p < pairs; p++)
        for (int t = 0; t < tile; t++) sums[p][t] = _mm512_add_epi32(sums[p][t], _mm512_mullo_epi32(part[p][t], scale[p]));
}

/* One activation row over a packed Q4_K pair (the decode GEMV): sub-blocks s and s + 1 (even s) together, each
   register of nibbles loaded once for both, two independent VPDPBUSD chains — as the 256-bit k4_pair_one_row, with
   the same integer sums. One Emerald Rapids core, 512×2048 warm, best of 30: Q4_K 44 → 45 GB/s; two threads,
   16384×8192 from memory (C harness, 1 GiB of copies, medians of four alternating rounds), share of the read loop:
   Q4_K 0.74 → 0.79. */
EK_IL_TARGET EK_IL_INLINE __m512i EK_IL_NAME(wide_k4_pair_one_row)(const uint8_t *gb, size_t group_bytes, const int s,
                                                                  const int8_t *aq, __m512i sums) {
    __m512i even = _mm512_setzero_si512(), odd = _mm512_setzero_si512();
    for (int g = 0; g < 8; g++) {
        const __m512i raw = EK_IL_NAME(wide_load)(gb, group_bytes, EK_IL_Q4_K_QUANTS + 32 * (8 * (s / 2) + g));
        even = EK_IL_NAME(wide_dot)(even, EK_IL_NAME(wide_nibbles)(raw, 0), EK_IL_NAME(wide_broadcast4)(aq + 32 * s + 4 * g), 1);
        odd = EK_IL_NAME(wide_dot)(odd, EK_IL_NAME(wide_nibbles)(raw, 1), EK_IL_NAME(wide_broadcast4)(aq + 32 * (s + 1) + 4 * g), 1);
    }
    const __m512i scale_even = _mm512_cvtepu8_epi32(EK_IL_NAME(wide_load8)(gb, group_bytes, EK_IL_K_SCALES + 8 * s));
    const __m512i scale_odd = _mm512_cvtepu8_epi32(EK_IL_NAME(wide_load8)(gb, group_bytes, EK_IL_K_SCALES + 8 * (s + 1)));
    sums = _mm512_add_epi32(sums, _mm512_mullo_epi32(even, scale_even));
    return _mm512_add_epi32(sums, _mm512_mullo_epi32(odd, scale_odd));
}

/* One activation row over a packed Q5_K pair (the decode GEMV): each g's eight value registers (one per sub-block)
   from its five re-coded ones (wide_q5_values), eight VPDPBUSD chains side by side, each sub-block's sum × its scale
   at the end — 19 instructions for eight registers where a register of nibbles and one of fifth bits took 14 for
   two. The same integer sums, so the results are bit for bit the former layout's. */
EK_IL_TARGET EK_IL_INLINE __m512i EK_IL_NAME(wide_q5_k_one_row)(const uint8_t *gb, size_t group_bytes, size_t bytes,
                                                               const int8_t *aq, __m512i sums) {
    __m512i part[8];
    for (int s = 0; s < 8; s++) part[s] = _mm512_setzero_si512();
    _Pragma("clang loop unroll(full)")
    for (int g = 0; g < 8; g++) {
        if (g % 2 == 0) EK_IL_NAME(wide_prefetch_part)(gb, group_bytes, bytes, g / 2, 4, 1);
        __m512i u[8];
        EK_IL_NAME(wide_q5_values)(gb, group_bytes, EK_IL_Q5_K_VALUES + 160 * g, 0, u);
        for (int s = 0; s < 8; s++)
            part[s] = EK_IL_NAME(wide_dot)(part[s], u[s], EK_IL_NAME(wide_broadcast4)(aq + 32 * s + 4 * g), 1);
    }
    for (int s = 0; s < 8; s++)
        sums = _mm512_add_epi32(sums, _mm512_mullo_epi32(part[s], _mm512_cvtepu8_epi32(EK_IL_NAME(wide_load8)(gb, group_bytes, EK_IL_K_SCALES + 8 * s))));
    return sums;
}

/* Two pairs (`pairs` 2, decoded only) as the per-32 tiles take them: each activation broadcast feeds both, six
   activation rows a tile (twelve chains). One Emerald Rapids core, 128×4096×4096, alternating runs of a C harness,
   medians of eight: Q4_K 309 → 354 GOPS, Q5_K 289 → 315; four rows a tile measured no faster than one pair, the
   per-32 formats' four rows faster than six (352 vs 339). Bit for bit the former results. */
EK_IL_TARGET EK_IL_INLINE void EK_IL_NAME(wide_k45_tile)(const int five, EK_IL_WIDE_TILE_ARGS) {
    const size_t bytes = five ? EK_IL_Q5_K_BYTES : EK_IL_Q4_K_BYTES;
    __m512 acc[2][EK_IL_WIDE_TILE], acc_min[2][EK_IL_WIDE_TILE];
    for (int p = 0; p < pairs; p++)
        for (int t = 0; t < tile; t++) acc[p][t] = acc_min[p][t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < blocks; b++) {
        const uint8_t *gb[2] = {group + (size_t)b * bytes, pairs == 2 ? group + 2 * group_bytes + (size_t)b * bytes : NULL};
        const uint8_t *bv = values + EK_IL_WIDE_VALUES(256) * b;
        const ek_block_q8_k *ab[EK_IL_WIDE_TILE];
        const int8_t *aq[EK_IL_WIDE_TILE];
        __m512i sums[2][EK_IL_WIDE_TILE];
        EK_IL_NAME(wide_block_start)(act, act_row_bytes, b, tile, ab, aq);
        for (int p = 0; p < pairs; p++)
            for (int t = 0; t < tile; t++) sums[p][t] = _mm512_setzero_si512();
        if (tile == 1 && pairs == 1 && !decoded && five) { /* the decode GEMV */
            sums[0][0] = EK_IL_NAME(wide_q5_k_one_row)(gb[0], group_bytes, bytes, aq[0], sums[0][0]);
        } else if (tile == 1 && pairs == 1 && !decoded) { /* the decode GEMV: a pair of sub-blocks at a time */
            _Pragma("clang loop unroll(full)")
            for (int s = 0; s < 8; s += 2) {
                EK_IL_NAME(wide_prefetch_part)(gb[0], group_bytes, bytes, s / 2, 4, tile);
                sums[0][0] = EK_IL_NAME(wide_k4_pair_one_row)(gb[0], group_bytes, s, aq[0], sums[0][0]);
            }
        } else {
            _Pragma("clang loop unroll(full)") /* the parity and the offsets as constants */
            for (int s = 0; s < 8; s++) {
                if (!decoded && s % 2 == 0) EK_IL_NAME(wide_prefetch_part)(gb[0], group_bytes, bytes, s / 2, 4, tile);
                EK_IL_NAME(wide_k45_sub_block)(five, tile, pairs, gb, group_bytes, bv, decoded, s, aq, sums);
            }
        }
        __m512 d[2], dmin[2];
        __m512i mins[2][4]; /* per pair p of sub-blocks: (row, minimum of 2p / 2p + 1) as int16 */
        for (int p = 0; p < pairs; p++) {
            d[p] = EK_IL_NAME(wide_halves)(gb[p], group_bytes, 0);
            dmin[p] = EK_IL_NAME(wide_halves)(gb[p], group_bytes, EK_IL_K_DMIN);
            for (int q = 0; q < 4; q++)
                mins[p][q] = _mm512_cvtepu8_epi16(EK_IL_NAME(wide_load16)(gb[p], group_bytes, EK_IL_K_MINS + 16 * q));
        }
        for (int t = 0; t < tile; t++) {
            /* the activations' sums of 32 per sub-block, as int16 pairs (2q, 2q + 1) per 32-bit word */
            int32_t bsum_pairs[4];
            _mm_storeu_si128((__m128i *)bsum_pairs, _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)ab[t]->bsums),
                                                                   _mm_loadu_si128((const __m128i *)(ab[t]->bsums + 8))));
            const __m512 da = _mm512_set1_ps(ab[t]->d);
            for (int p = 0; p < pairs; p++) {
                __m512i min_sum = _mm512_setzero_si512();
                for (int q = 0; q < 4; q++)
                    min_sum = _mm512_add_epi32(min_sum, _mm512_madd_epi16(mins[p][q], _mm512_set1_epi32(bsum_pairs[q])));
                acc[p][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums[p][t]), _mm512_mul_ps(d[p], da), acc[p][t]);
                acc_min[p][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(min_sum), _mm512_mul_ps(dmin[p], da), acc_min[p][t]);
            }
        }
    }
    for (int p = 0; p < pairs; p++)
        for (int t = 0; t < tile; t++) out[p * EK_IL_WIDE_TILE + t] = _mm512_sub_ps(acc[p][t], acc_min[p][t]);
}
#define EK_IL_WIDE_K45(name, five)                                                                                  \
    static const int EK_IL_NAME(name##_quad_rows) = 6;                                                              \
    EK_IL_TARGET EK_IL_INLINE void EK_IL_NAME(wide_##name##_decode)(const uint8_t *gb, size_t group_bytes, uint8_t *values) { \
        EK_IL_NAME(wide_k45_decode)(five, gb, group_bytes, values);                                                 \
    }                                                                                                               \
    EK_IL_TARGET EK_IL_INLINE void EK_IL_NAME(wide_##name##_tile)(EK_IL_WIDE_TILE_ARGS) {                           \
        EK_IL_NAME(wide_k45_tile)(five, group, group_bytes, blocks, values, decoded, act, act_row_bytes, tile, pairs, out); \
    }                                                                                                               \
    EK_IL_WIDE_DRIVER(name, 1)
EK_IL_WIDE_K45(gemm_q4_k, 0)
EK_IL_WIDE_K45(gemm_q5_k, 1)

/* Q6_K, as the 256-bit tile: unsigned 6-bit values of register g of quarter q of half h (constants after inlining),
   Σ u·a per sub-block of sixteen (four registers), × the rows' signed scales, −32·Σ s·(sum of 16) once per block. */
EK_IL_TARGET EK_IL_INLINE __m512i EK_IL_NAME(wide_q6_k_value_of)(__m512i a, __m512i b, __m512i c, const int q) {
    const __m512i six = _mm512_set1_epi8(0x3f);
    switch (q) { /* the re-coded layout (interleaved_impl.h): quarters 0–2 one AND, quarter 3 from bits 6-7 */
    case 0: return _mm512_and_si512(a, six);
    case 1: return _mm512_and_si512(b, six);
    case 2: return _mm512_and_si512(c, six);
    default:
        return _mm512_or_si512(_mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(a, 2), _mm512_set1_epi8(0x30)),
                                               _mm512_and_si512(_mm512_srli_epi16(b, 4), _mm512_set1_epi8(0x0c))),
                               _mm512_and_si512(_mm512_srli_epi16(c, 6), _mm512_set1_epi8(0x03)));
    }
}
/* The planes a, b, c of register g of half h of a pair (quarters 0, 1, 2; their bits 6–7 quarter 3). */
EK_IL_TARGET EK_IL_INLINE void EK_IL_NAME(wide_q6_k_planes)(const uint8_t *gb, size_t group_bytes, const int h,
                                                            const int g, __m512i *a, __m512i *b, __m512i *c) {
    *a = EK_IL_NAME(wide_load)(gb, group_bytes, EK_IL_Q6_K_QUANTS + 32 * (16 * h + g));
    *b = EK_IL_NAME(wide_load)(gb, group_bytes, EK_IL_Q6_K_QUANTS + 32 * (16 * h + 8 + g));
    *c = EK_IL_NAME(wide_load)(gb, group_bytes, EK_IL_Q6_K_HIGH + 32 * (8 * h + g));
}
EK_IL_TARGET EK_IL_INLINE __m512i EK_IL_NAME(wide_q6_k_values)(const uint8_t *gb, size_t group_bytes, const int h,
                                                               const int q, const int g) {
    __m512i a, b, c;
    EK_IL_NAME(wide_q6_k_planes)(gb, group_bytes, h, g, &a, &b, &c);
    return EK_IL_NAME(wide_q6_k_value_of)(a, b, c, q);
}

/* Decoded: register g of quarter q of half h at values + 64·(32h + 8q + g). */
EK_IL_TARGET EK_IL_INLINE void EK_IL_NAME(wide_gemm_q6_k_decode)(const uint8_t *gb, size_t group_bytes, uint8_t *values) {
    for (int h = 0; h < 2; h++)
        for (int q = 0; q < 4; q++)
            for (int g = 0; g < 8; g++)
                _mm512_store_si512((__m512i *)(values + 64 * (32 * h + 8 * q + g)),
                                   EK_IL_NAME(wide_q6_k_values)(gb, group_bytes, h, q, g));
}

EK_IL_TARGET EK_IL_INLINE void EK_IL_NAME(wide_q6_k_quarter)(const uint8_t *gb, size_t group_bytes,
                                                             const uint8_t *values, const int decoded,
                                                             const int8_t *const *aq, const int tile, const int h,
                                                             const int q, __m512 *sums) {
    /* the scales of sub-blocks 8h + 2q and 8h + 2q + 1 of each row as fp32 lanes, from int16 pairs (row, i) */
    const __m512i pair = _mm512_cvtepi8_epi16(EK_IL_NAME(wide_load16)(gb, group_bytes, EK_IL_Q6_K_SCALES + 16 * (4 * h + q)));
    const __m512 scales[2] = {_mm512_cvtepi32_ps(_mm512_srai_epi32(_mm512_slli_epi32(pair, 16), 16)),
                              _mm512_cvtepi32_ps(_mm512_srai_epi32(pair, 16))};
    for (int half = 0; half < 2; half++) {
        __m512i part[EK_IL_WIDE_TILE];
        for (int t = 0; t < tile; t++) part[t] = _mm512_setzero_si512();
        for (int g = 4 * half; g < 4 * half + 4; g++) {
            const __m512i u = decoded ? _mm512_load_si512((const __m512i *)(values + 64 * (32 * h + 8 * q + g)))
                                      : EK_IL_NAME(wide_q6_k_values)(gb, group_bytes, h, q, g);
            for (int t = 0; t < tile; t++)
                part[t] = EK_IL_NAME(wide_dot)(part[t], u, EK_IL_NAME(wide_broadcast4)(aq[t] + 128 * h + 32 * q + 4 * g), 1);
        }
        EK_IL_NAME(wide_scaled_add)(sums, part, scales[half], tile);
    }
}

/* One activation row over half h of a packed pair (the decode GEMV): each register of the three planes loaded once
   for the four quarters it makes, eight chains (quarter, half of the registers); their fp32 sums then added in
   wide_q6_k_quarter's order, so the results are bit for bit the quarter-at-a-time ones. One Emerald Rapids core,
   512×2048 warm, best of 30: 42.4 → 43.5 GB/s; from memory level (two threads, C harness: 0.85 → 0.84 of the read
   loop, medians of four alternating rounds). */
EK_IL_TARGET EK_IL_INLINE __m512 EK_IL_NAME(wide_q6_k_half_one_row)(const uint8_t *gb, size_t group_bytes,
                                                                   const int8_t *aq, const int tile, const int h,
                                                                   __m512 sums) {
    __m512i part[4][2];
    _Pragma("clang loop unroll(full)") /* q a constant: wide_q6_k_value_of's switch */
    for (int g = 0; g < 8; g++) {
        if (g % 2 == 0) EK_IL_NAME(wide_prefetch_part)(gb, group_bytes, EK_IL_Q6_K_BYTES, 4 * h + g / 2, 8, tile);
        __m512i a, b, c;
        EK_IL_NAME(wide_q6_k_planes)(gb, group_bytes, h, g, &a, &b, &c);
        for (int q = 0; q < 4; q++) {
            const __m512i x = EK_IL_NAME(wide_broadcast4)(aq + 128 * h + 32 * q + 4 * g);
            if (g % 4 == 0) part[q][g / 4] = _mm512_setzero_si512();
            part[q][g / 4] = EK_IL_NAME(wide_dot)(part[q][g / 4], EK_IL_NAME(wide_q6_k_value_of)(a, b, c, q), x, 1);
        }
    }
    for (int q = 0; q < 4; q++) {
        const __m512i pair = _mm512_cvtepi8_epi16(EK_IL_NAME(wide_load16)(gb, group_bytes, EK_IL_Q6_K_SCALES + 16 * (4 * h + q)));
        sums = _mm512_fmadd_ps(_mm512_cvtepi32_ps(part[q][0]), _mm512_cvtepi32_ps(_mm512_srai_epi32(_mm512_slli_epi32(pair, 16), 16)), sums);
        sums = _mm512_fmadd_ps(_mm512_cvtepi32_ps(part[q][1]), _mm512_cvtepi32_ps(_mm512_srai_epi32(pair, 16)), sums);
    }
    return sums;
}

EK_IL_TARGET EK_IL_INLINE void EK_IL_NAME(wide_gemm_q6_k_tile)(EK_IL_WIDE_TILE_ARGS) {
    (void)pairs; /* one pair: EK_IL_WIDE_DRIVER(…, 0) */
    __m512 acc[EK_IL_WIDE_TILE];
    for (int t = 0; t < tile; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < blocks; b++) {
        const uint8_t *gb = group + (size_t)b * EK_IL_Q6_K_BYTES, *bv = values + EK_IL_WIDE_VALUES(256) * b;
        const ek_block_q8_k *ab[EK_IL_WIDE_TILE];
        const int8_t *aq[EK_IL_WIDE_TILE];
        __m512 sums[EK_IL_WIDE_TILE];
        EK_IL_NAME(wide_block_start)(act, act_row_bytes, b, tile, ab, aq);
        for (int t = 0; t < tile; t++) sums[t] = _mm512_setzero_ps();
        for (int h = 0; h < 2; h++) {
            if (tile == 1 && !decoded) { /* the decode GEMV */
                sums[0] = EK_IL_NAME(wide_q6_k_half_one_row)(gb, group_bytes, aq[0], tile, h, sums[0]);
                continue;
            }
            _Pragma("clang loop unroll(full)") /* the quarter's shifts as constants */
            for (int q = 0; q < 4; q++) {
                if (!decoded) EK_IL_NAME(wide_prefetch_part)(gb, group_bytes, EK_IL_Q6_K_BYTES, 4 * h + q, 8, tile);
                EK_IL_NAME(wide_q6_k_quarter)(gb, group_bytes, bv, decoded, aq, tile, h, q, sums);
            }
        }
        __m512i offsets[EK_IL_WIDE_TILE]; /* the −32 of every value: Σ 32·s·(sum of 16), exact in int32 */
        for (int t = 0; t < tile; t++) offsets[t] = _mm512_setzero_si512();
        for (int p = 0; p < 8; p++) { /* 32·s fits int16 */
            const __m512i scaled = _mm512_slli_epi16(
                _mm512_cvtepi8_epi16(EK_IL_NAME(wide_load16)(gb, group_bytes, EK_IL_Q6_K_SCALES + 16 * p)), 5);
            for (int t = 0; t < tile; t++) {
                int32_t bsum_pair;
                memcpy(&bsum_pair, ab[t]->bsums + 2 * p, sizeof bsum_pair);
                offsets[t] = _mm512_add_epi32(offsets[t], _mm512_madd_epi16(scaled, _mm512_set1_epi32(bsum_pair)));
            }
        }
        for (int t = 0; t < tile; t++) sums[t] = _mm512_sub_ps(sums[t], _mm512_cvtepi32_ps(offsets[t]));
        EK_IL_NAME(wide_block_end)(gb, group_bytes, ab, sums, tile, acc);
    }
    for (int t = 0; t < tile; t++) out[t] = acc[t];
}
static const int EK_IL_NAME(gemm_q6_k_quad_rows) = EK_IL_WIDE_TILE; /* one pair a tile */
EK_IL_WIDE_DRIVER(gemm_q6_k, 0)

/* IQ4_XS: the table's values as v + 128 (wide_iq4_table), each sub-block's sum starting at −128·Σa (from the
   activations' sums of 16); × the rows' signed scales (− 32) by wide_scaled_add. Registers 8s + 2j (+1) of sub-block s: the low (high) nibbles of quant register
   4s + j, elements 32s + 4j + i (+16). */
EK_IL_TARGET EK_IL_INLINE __m512i EK_IL_NAME(wide_iq4_xs_values)(const uint8_t *gb, size_t group_bytes, const int s,
                                                                 const int r) {
    const __m512i raw = EK_IL_NAME(wide_load)(gb, group_bytes, EK_IL_IQ4_XS_QUANTS + 32 * (4 * s + r / 2));
    return _mm512_shuffle_epi8(EK_IL_NAME(wide_iq4_table)(), EK_IL_NAME(wide_nibbles)(raw, r % 2));
}

EK_IL_TARGET EK_IL_INLINE void EK_IL_NAME(wide_gemm_iq4_xs_decode)(const uint8_t *gb, size_t group_bytes, uint8_t *values) {
    for (int s = 0; s < 8; s++)
        for (int r = 0; r < 8; r++)
            _mm512_store_si512((__m512i *)(values + 64 * (8 * s + r)), EK_IL_NAME(wide_iq4_xs_values)(gb, group_bytes, s, r));
}

/* Two pairs a tile (six rows) as Q4_K/Q5_K: one core, 128×4096×4096, medians of five alternating runs, 308 → 402
   GOPS, bit for bit the former results. */
EK_IL_TARGET EK_IL_INLINE void EK_IL_NAME(wide_gemm_iq4_xs_tile)(EK_IL_WIDE_TILE_ARGS) {
    __m512 acc[2][EK_IL_WIDE_TILE];
    for (int p = 0; p < pairs; p++)
        for (int t = 0; t < tile; t++) acc[p][t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < blocks; b++) {
        const uint8_t *gb[2] = {group + (size_t)b * EK_IL_IQ4_XS_BYTES,
                                pairs == 2 ? group + 2 * group_bytes + (size_t)b * EK_IL_IQ4_XS_BYTES : NULL};
        const uint8_t *bv = values + EK_IL_WIDE_VALUES(256) * b;
        const ek_block_q8_k *ab[EK_IL_WIDE_TILE];
        const int8_t *aq[EK_IL_WIDE_TILE];
        __m512 sums[2][EK_IL_WIDE_TILE];
        EK_IL_NAME(wide_block_start)(act, act_row_bytes, b, tile, ab, aq);
        for (int p = 0; p < pairs; p++)
            for (int t = 0; t < tile; t++) sums[p][t] = _mm512_setzero_ps();
        _Pragma("clang loop unroll(full)")
        for (int s = 0; s < 8; s++) {
            if (!decoded && s % 2 == 0) EK_IL_NAME(wide_prefetch_part)(gb[0], group_bytes, EK_IL_IQ4_XS_BYTES, s / 2, 4, tile);
            __m512 scale[2];
            __m512i part[2][EK_IL_WIDE_TILE];
            for (int p = 0; p < pairs; p++)
                scale[p] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(EK_IL_NAME(wide_load8)(gb[p], group_bytes, EK_IL_IQ4_XS_SCALES + 8 * s)));
            for (int t = 0; t < tile; t++) {
                const __m512i start = _mm512_set1_epi32(-128 * ((int32_t)ab[t]->bsums[2 * s] + ab[t]->bsums[2 * s + 1]));
                for (int p = 0; p < pairs; p++) part[p][t] = start;
            }
            for (int r = 0; r < 8; r++) {
                __m512i u[2];
                for (int p = 0; p < pairs; p++)
                    u[p] = decoded ? _mm512_load_si512((const __m512i *)(bv + (size_t)p * EK_IL_WIDE_PAIR_VALUES + 64 * (8 * s + r)))
                                   : EK_IL_NAME(wide_iq4_xs_values)(gb[p], group_bytes, s, r);
                for (int t = 0; t < tile; t++) {
                    const __m512i x = EK_IL_NAME(wide_broadcast4)(aq[t] + 32 * s + 16 * (r % 2) + 4 * (r / 2));
                    for (int p = 0; p < pairs; p++) part[p][t] = EK_IL_NAME(wide_dot)(part[p][t], u[p], x, 0);
                }
            }
            for (int p = 0; p < pairs; p++) EK_IL_NAME(wide_scaled_add)(sums[p], part[p], scale[p], tile);
        }
        for (int p = 0; p < pairs; p++) EK_IL_NAME(wide_block_end)(gb[p], group_bytes, ab, sums[p], tile, acc[p]);
    }
    for (int p = 0; p < pairs; p++)
        for (int t = 0; t < tile; t++) out[p * EK_IL_WIDE_TILE + t] = acc[p][t];
}
static const int EK_IL_NAME(gemm_iq4_xs_quad_rows) = 6;
EK_IL_WIDE_DRIVER(gemm_iq4_xs, 1)
