/*
 * x86_interleaved_body.h — the kernels over the interleaved layout
 * (ek_interleaved.h) on 256-bit registers, included by x86_interleaved.c
 * for AVX2 + FMA + F16C and, compiled with their features, for AVX-512
 * machines by x86_interleaved_avx512.c and x86_interleaved_avx512_novnni.c
 * (one translation unit each). Before including, define
 *   EK_IL_TARGET   the function attribute (target features),
 *   EK_IL_NAME(x)  how to name this variant's functions,
 *   EK_IL_TABLE    the ek_il_kernels table to define.
 *
 * A register is eight rows × four bytes. One broadcast of four activation
 * bytes meets eight rows at once (VPMADDUBSW: unsigned weight × signed
 * activation, or |w| × sign-moved activation for the signed IQ4 values;
 * the decoded Q4_0/Q5_0 GEMM: activation + 128 × signed weight);
 * int16 pair sums are added while they cannot overflow, then VPMADDWD
 * applies each row's integer sub-block scale (or 1) into int32 lanes, one
 * lane per row; the fp32 scaling happens once per block, and no horizontal
 * sum is needed: lane r is row r's output. Activation tiles of up to four
 * rows share each decoded weight register (the prefill GEMM).
 */
#include <immintrin.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "interleaved_impl.h"
#include "rows_impl.h"
#include "x86_prefetch.h"

#define EK_IL_INLINE static inline __attribute__((always_inline))
#ifndef EK_IL_TILE
#define EK_IL_TILE 4 /* activation rows per decoded weight register: 4 fits AVX2's 16 registers */
#endif

/* With VNNI (EK_IL_VNNI, the AVX-512 variant) VPDPBUSD adds u·a of four bytes straight into each int32 lane; without
   it the kernels keep their int16 pair sums and VPMADDWD. Q5_0/Q5_1 use it (GEMM 1.8× → 2.6× sgemm); Q4_K/Q5_K do
   not here: with their per-sub-block scales applied by VPMULLD these 256-bit tiles measured 2.3× slower than the
   int16 sums and VPMADDWD (the 512-bit tiles of x86_interleaved_wide.h, which the AVX-512 variant runs, do and gain). */
#if defined(EK_IL_VNNI)
#define EK_IL_HAS_VNNI 1
#else
#define EK_IL_HAS_VNNI 0
#endif

EK_IL_TARGET EK_IL_INLINE __m256i EK_IL_NAME(dot_add)(__m256i acc, __m256i u, __m256i a) {
#if defined(EK_IL_VNNI)
    return _mm256_dpbusd_epi32(acc, u, a);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, a), _mm256_set1_epi16(1)));
#endif
}

/* Packed kernels ask for the bytes past each group-block as its turn comes (ek_prefetch_ahead, x86_prefetch.h): a
   group's blocks lie one after another, so every line of the stream is asked for once, ahead of the kernel (the
   K-quants and IQ4_XS a part of the block at a time, as they work through it: ek_prefetch_ahead_part). The
   decode GEMV computes enough per byte that the hardware prefetcher alone left memory idle between requests: Q4_K
   and Q5_K at 16384×8192 read 0.84-0.91 of the measured bandwidth without, 0.95-1.0 with. */

EK_IL_TARGET EK_IL_INLINE __m256i EK_IL_NAME(broadcast4)(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, sizeof v);
    return _mm256_set1_epi32(v);
}

/* Eight unsigned bytes (one per row) → each row's value in both int16 halves of its lane. */
EK_IL_TARGET EK_IL_INLINE __m256i EK_IL_NAME(scale_pairs_u8)(const uint8_t *p) {
    __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
    return _mm256_or_si256(v, _mm256_slli_epi32(v, 16));
}

/* The same for signed bytes. */
EK_IL_TARGET EK_IL_INLINE __m256i EK_IL_NAME(scale_pairs_i8)(const uint8_t *p) {
    __m256i v = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p));
    return _mm256_blend_epi16(v, _mm256_slli_epi32(v, 16), 0xAA);
}

EK_IL_TARGET EK_IL_INLINE __m256 EK_IL_NAME(halves)(const uint8_t *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

/* Rows × activation tiles: every kernel is a tile function over one group (eight rows) and `tile` (1…4, a constant
   after inlining) activation rows, writing eight fp32 lanes per activation row; the driver masks the stores to
   [row_begin, row_end). With `decoded` (a constant) the tile reads a decoded copy of the group-blocks (below)
   instead of the packed ones. */
#define EK_IL_TILE_ARGS const uint8_t *group, int64_t blocks, const uint8_t *act, size_t act_row_bytes, const int tile, \
                        const int decoded, __m256 *out
#define EK_IL_TILE_CASE(name, n, grp, nblocks, decoded)                                                             \
    case n:                                                                                                         \
        if (n <= EK_IL_TILE) EK_IL_NAME(name##_tile)(grp, nblocks, a, act_row_bytes, n <= EK_IL_TILE ? n : 1, decoded, out); \
        break;
/* Every activation tile of the m rows over all `nblocks` group-blocks at `grp`, the outputs stored to Y (masked to
   the group's rows in range). */
/* One tile of `tile` activation rows from `a` into out[]: a constant tile per call (registers, not arrays); cases
   above EK_IL_TILE are dead. */
#define EK_IL_TILE_SWITCH(name, grp, nblocks, decoded)                                                              \
        switch (tile) {                                                                                             \
        EK_IL_TILE_CASE(name, 8, grp, nblocks, decoded) EK_IL_TILE_CASE(name, 7, grp, nblocks, decoded)              \
        EK_IL_TILE_CASE(name, 6, grp, nblocks, decoded) EK_IL_TILE_CASE(name, 5, grp, nblocks, decoded)              \
        EK_IL_TILE_CASE(name, 4, grp, nblocks, decoded) EK_IL_TILE_CASE(name, 3, grp, nblocks, decoded)              \
        EK_IL_TILE_CASE(name, 2, grp, nblocks, decoded)                                                             \
        default: EK_IL_NAME(name##_tile)(grp, nblocks, a, act_row_bytes, 1, decoded, out); break;                   \
        }
#define EK_IL_RUN_TILES(name, grp, nblocks, decoded)                                                                \
    for (int64_t i0 = 0; i0 < m; i0 += EK_IL_TILE) {                                                                \
        const uint8_t *a = (const uint8_t *)act + (size_t)i0 * act_row_bytes;                                      \
        __m256 out[EK_IL_TILE];                                                                                     \
        int tile = (int)(m - i0 < EK_IL_TILE ? m - i0 : EK_IL_TILE);                                                \
        EK_IL_TILE_SWITCH(name, grp, nblocks, decoded)                                                              \
        for (int t = 0; t < tile; t++) _mm256_maskstore_ps(y + (i0 + t) * ldy + first, mask, out[t]);                \
    }
/* A driver's signature, then the loop over its groups of eight rows (`first`, the store `mask`, `group`). */
#define EK_IL_DRIVER_SIGNATURE(name)                                                                                \
    EK_IL_TARGET static void EK_IL_NAME(name)(const uint8_t *w, int64_t blocks, const void *act, size_t act_row_bytes, \
                                              int64_t m, float *y, int64_t ldy, int64_t row_begin, int64_t row_end) { \
        const size_t group_bytes = (size_t)blocks * EK_IL_NAME(name##_block_bytes);
#define EK_IL_DRIVER_LOOP                                                                                           \
        const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);                                             \
        for (int64_t first = (row_begin / 8) * 8; first < row_end; first += 8) {                                    \
            const int64_t lo = row_begin > first ? row_begin - first : 0;                                          \
            const int64_t hi = row_end - first < 8 ? row_end - first : 8;                                          \
            const __m256i mask = _mm256_and_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32((int)hi), lane),            \
                                                  _mm256_cmpgt_epi32(lane, _mm256_set1_epi32((int)lo - 1)));       \
            const uint8_t *group = w + (size_t)(first / 8) * group_bytes;
#define EK_IL_DRIVER_HEAD(name) EK_IL_DRIVER_SIGNATURE(name) EK_IL_DRIVER_LOOP
#define EK_IL_DRIVER(name)                                                                                          \
    EK_IL_DRIVER_HEAD(name)                                                                                         \
            EK_IL_RUN_TILES(name, group, blocks, 0)                                                                 \
        }                                                                                                           \
    }

/* A copy of m rows of Q8 activation blocks (ek_block_q8_act, or ek_block_q8_k when `block` is its size) with every
   value v as the unsigned byte v + 128 (v ^ 0x80), for the decoded tiles of formats with an offset (Q4_0, Q5_0,
   Q6_K): they multiply these by signed weights and take 128·Σw back (EK_IL_PER32, gemm_q6_k). NULL when it cannot
   be allocated or the rows are not whole blocks (the caller then runs the tiles over the interleaved blocks as they
   lie, on the signed activations). At most EK_IL_SUM_ROWS rows (the driver runs more in slices): at most 1.5
   bytes an input, 3 MB for 256 rows of 8192. */
EK_IL_TARGET static uint8_t *EK_IL_NAME(offset_activations)(const void *act, int64_t m, size_t act_row_bytes, size_t block) {
    const bool super = block == sizeof(ek_block_q8_k);
    const size_t bytes = (size_t)m * act_row_bytes, values = super ? EK_SUPER_BLOCK : EK_BLOCK;
    const size_t at_values = super ? offsetof(ek_block_q8_k, qs) : offsetof(ek_block_q8_act, qs);
    if (act_row_bytes % block != 0) return NULL;
    uint8_t *copy = malloc(bytes);
    if (copy == NULL) return NULL;
    memcpy(copy, act, bytes);
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    for (size_t at = 0; at < bytes; at += block) {
        for (size_t v = 0; v < values; v += 32) {
            __m256i *q = (__m256i *)(copy + at + at_values + v);
            _mm256_storeu_si256(q, _mm256_xor_si256(_mm256_loadu_si256(q), flip));
        }
    }
    return copy;
}

/*
 * Decoding once per GEMM. Each activation tile of a prefill GEMM met the packed weights anew, so the unpacking of
 * 5- and 6-bit values (shifts, masks, the high bits merged: about one instruction per register per tile row beside
 * the two or three of the dot product) was paid m/tile times. With more rows than one tile the driver decodes
 * EK_IL_DECODE_ELEMENTS columns of a group at a time into a buffer on the stack — each group-block's header
 * (K-quants: scales and minimums padded to 160 bytes; per-32 formats: d, m and 128·Σw widened to 96), then one byte
 * per value, register after register in the order the tile reads them — and runs every tile over that, which stays
 * in L1. Whether a format does is measured per
 * variant (`name_decodes`): on AVX2 (tiles of four) every one of them gains (GEMM 128×16384×8192 vs sgemm, avx2-novnni:
 * Q5_K 1.75 → 2.63×, Q6_K 1.60 → 2.31×, Q5_0 1.88 → 2.15×, Q4_K 2.55 → 2.79×); on AVX-512, whose tiles of eight
 * already share each unpacked register among eight rows, only Q5_K does (2.03 → 2.68×; Q5_0 2.58 → 2.43×,
 * Q6_K 2.33 → 2.16×, Q4_K unchanged).
 */
/* AVX2's tiles of four rows take 2048 columns (a chunk's decoded bytes, 18 KB for K-quants, beside a tile's 9 KB of
   activations): fewer chunks, so fewer passes of the sums and of each tile's setup. One Zen 3, 128×16384×8192 against
   sgemm in one process, 3–5 alternating rounds, 1024 → 2048: Q4_K 1.80–2.08 → 2.07–2.37×, Q6_K 1.42–1.58 →
   1.54–1.61×, Q5_0 1.71–1.89 → 1.89–1.96×, Q4_0 1.65–1.93 → 1.97–2.00×, Q5_K 1.85–2.03 → 1.93–1.99×, Q4_1 even
   (4096 measured like 2048). AVX-512's tiles of eight (twice the activations) keep 1024, unmeasured at 2048. */
#define EK_IL_DECODE_ELEMENTS (EK_IL_TILE <= 4 ? 2048 : 1024)
/* A per-32 group-block's decoded header: d and m in fp32, 128·Σw in int32, eight rows each (x86 per-32 tiles). */
#define EK_IL_PER32_DECODED_HEADER 96
/* eight value bytes per column and the headers: at most 96 bytes per 32 columns (per-32 formats), 160 per 256
   (K-quants) */
#define EK_IL_DECODE_BUFFER (EK_IL_DECODE_ELEMENTS * 11)
#define EK_IL_DECODED_BYTES(header, elements) ((size_t)(header) + 8 * (size_t)(elements))
/* A group's sums over several chunks stay in `sums` (eight lanes per activation row, EK_IL_SUM_ROWS rows at a time)
   and go to Y once: added to Y chunk after chunk, the eight columns of every activation row lay a row stride
   apart — 64 KB for 16384 outputs — so the rows' lines fell in one set of L1 and of L2 and were read back from L3
   for every chunk. The same fp32 additions in the same order: the results are bit for bit the former ones. */
#define EK_IL_SUM_ROWS 256
#define EK_IL_RUN_TILES_SUMMED(name, grp, nblocks, b0, r0, rows, accumulate)                                        \
    for (int64_t i0 = 0; i0 < (rows); i0 += EK_IL_TILE) {                                                           \
        const uint8_t *a = (const uint8_t *)act + (size_t)((r0) + i0) * act_row_bytes                               \
                           + (size_t)(b0) * EK_IL_NAME(name##_act_block_bytes);                                     \
        __m256 out[EK_IL_TILE];                                                                                     \
        int tile = (int)((rows) - i0 < EK_IL_TILE ? (rows) - i0 : EK_IL_TILE);                                      \
        EK_IL_TILE_SWITCH(name, grp, nblocks, 1)                                                                    \
        for (int t = 0; t < tile; t++) sums[i0 + t] = (accumulate) ? _mm256_add_ps(out[t], sums[i0 + t]) : out[t];   \
    }
/* Group-blocks [b0, b0 + n) of `group` decoded into `buffer`. */
#define EK_IL_DECODE_CHUNK(name, b0, n)                                                                             \
    for (int64_t b = 0; b < (n); b++)                                                                               \
        EK_IL_NAME(name##_decode)(group + (size_t)((b0) + b) * EK_IL_NAME(name##_block_bytes),                       \
                                  buffer + (size_t)b * EK_IL_NAME(name##_decoded_bytes));
#define EK_IL_DRIVER_DECODING(name)                                                                                 \
    EK_IL_DRIVER_SIGNATURE(name)                                                                                    \
        /* the activations + 128 for the tiles that take them (EK_IL_NAME(name##_unsigned_act)), made for at most    \
           EK_IL_SUM_ROWS rows: more run in slices, each row summed exactly as in one call (the weights are decoded  \
           again per slice); when the copy cannot be made, the tiles over the blocks as they lie */                 \
        uint8_t *unsigned_act = NULL;                                                                               \
        if (EK_IL_NAME(name##_unsigned_act) && m > EK_IL_TILE) {                                                    \
            if (m > EK_IL_SUM_ROWS) {                                                                               \
                for (int64_t r = 0; r < m; r += EK_IL_SUM_ROWS)                                                     \
                    EK_IL_NAME(name)(w, blocks, (const uint8_t *)act + (size_t)r * act_row_bytes, act_row_bytes,    \
                                     m - r < EK_IL_SUM_ROWS ? m - r : EK_IL_SUM_ROWS, y + r * ldy, ldy, row_begin, row_end); \
                return;                                                                                             \
            }                                                                                                       \
            unsigned_act = EK_IL_NAME(offset_activations)(act, m, act_row_bytes,                                    \
                                                          EK_IL_NAME(name##_act_block_bytes));                      \
            if (unsigned_act) act = unsigned_act;                                                                   \
        }                                                                                                           \
        const bool decoding = m > EK_IL_TILE && EK_IL_NAME(name##_decodes)                                          \
                              && (!EK_IL_NAME(name##_unsigned_act) || unsigned_act != NULL);                        \
    EK_IL_DRIVER_LOOP                                                                                               \
            if (!decoding) {                                                                                        \
                EK_IL_RUN_TILES(name, group, blocks, 0)                                                             \
                continue;                                                                                           \
            }                                                                                                       \
            const int64_t chunk = EK_IL_DECODE_ELEMENTS / EK_IL_NAME(name##_block_elements);                        \
            _Static_assert(EK_IL_DECODE_ELEMENTS % 256 == 0, "whole K-quant blocks per chunk");                      \
            uint8_t buffer[EK_IL_DECODE_BUFFER] __attribute__((aligned(64)));                                       \
            if (blocks <= chunk) { /* one chunk: nothing to add up, the tiles store to Y */                         \
                EK_IL_DECODE_CHUNK(name, 0, blocks)                                                                 \
                EK_IL_RUN_TILES(name, buffer, blocks, 1)                                                            \
                continue;                                                                                           \
            }                                                                                                       \
            __m256 sums[EK_IL_SUM_ROWS];                                                                            \
            for (int64_t r0 = 0; r0 < m; r0 += EK_IL_SUM_ROWS) {                                                    \
                const int64_t rows = m - r0 < EK_IL_SUM_ROWS ? m - r0 : EK_IL_SUM_ROWS;                             \
                for (int64_t b0 = 0; b0 < blocks; b0 += chunk) {                                                    \
                    const int64_t n = blocks - b0 < chunk ? blocks - b0 : chunk;                                    \
                    EK_IL_DECODE_CHUNK(name, b0, n)                                                                 \
                    EK_IL_RUN_TILES_SUMMED(name, buffer, n, b0, r0, rows, b0 > 0)                                   \
                }                                                                                                   \
                for (int64_t i = 0; i < rows; i++) _mm256_maskstore_ps(y + (r0 + i) * ldy + first, mask, sums[i]);   \
            }                                                                                                       \
        }                                                                                                           \
        free(unsigned_act);                                                                                         \
    }

/* ------------------------------------------------------ per-32 formats -- */

/* Σ u·a of a block's value registers 0–3 (s0) and 4–7 (s1) as int16 pair sums: u unsigned (at most 31), qs the
   block's 32 signed activations (four registers of 2·31·127 stay below 2¹⁵). */
EK_IL_TARGET EK_IL_INLINE void EK_IL_NAME(pair_sums)(const __m256i *u, const int8_t *qs, __m256i *s0, __m256i *s1) {
    __m256i low = _mm256_maddubs_epi16(u[0], EK_IL_NAME(broadcast4)(qs));
    __m256i high = _mm256_maddubs_epi16(u[4], EK_IL_NAME(broadcast4)(qs + 16));
    for (int v = 1; v < 4; v++) {
        low = _mm256_add_epi16(low, _mm256_maddubs_epi16(u[v], EK_IL_NAME(broadcast4)(qs + 4 * v)));
        high = _mm256_add_epi16(high, _mm256_maddubs_epi16(u[4 + v], EK_IL_NAME(broadcast4)(qs + 16 + 4 * v)));
    }
    *s0 = low;
    *s1 = high;
}

/* The eight registers of 5-bit values of a Q5_0/Q5_1 group-block from its five re-coded registers at `q`
   (interleave.c, encode_q5_values): registers 0–4 one AND each, 5–7 from the bits 5–7 — 23 instructions where the
   nibbles and a register of fifth bits took 35. The 16-bit shifts bring the next byte's low bits into each byte's
   top; the masks keep only the byte's own. One Emerald Rapids core (avx2), 512×2048 warm, best of 30: the decode
   GEMV 24.7 → 29.2 GB/s; two threads, 16384×8192 from memory, share of the read loop 0.76 → 0.81 (medians of five
   alternating rounds of a C harness). q5_field is value register v (a constant after inlining) of the five `r`. */
EK_IL_TARGET EK_IL_INLINE __m256i EK_IL_NAME(q5_field)(const __m256i *r, const int v) {
#define EK_IL_FIELD(x, shift, mask) _mm256_and_si256(_mm256_srli_epi16(x, shift), _mm256_set1_epi8(mask))
    switch (v) {
    case 5: return _mm256_or_si256(EK_IL_FIELD(r[0], 5, 0x07), EK_IL_FIELD(r[1], 2, 0x18));
    case 6: return _mm256_or_si256(EK_IL_FIELD(r[2], 5, 0x07), EK_IL_FIELD(r[3], 2, 0x18));
    case 7: return _mm256_or_si256(_mm256_or_si256(EK_IL_FIELD(r[4], 5, 0x07), EK_IL_FIELD(r[1], 4, 0x08)),
                                   EK_IL_FIELD(r[3], 3, 0x10));
    default: return _mm256_and_si256(r[v], _mm256_set1_epi8(0x1f));
    }
#undef EK_IL_FIELD
}

EK_IL_TARGET EK_IL_INLINE void EK_IL_NAME(q5_values)(const uint8_t *q, __m256i *u) {
    __m256i r[5];
    for (int c = 0; c < 5; c++) r[c] = _mm256_loadu_si256((const __m256i *)(q + 32 * c));
    _Pragma("clang loop unroll(full)") /* v a constant in each: no switch left */
    for (int v = 0; v < 8; v++) u[v] = EK_IL_NAME(q5_field)(r, v);
}

/* Q5_0 ((u − 16)·d), Q5_1 (u·d + m): unsigned 5-bit u from the five re-coded registers (`high` > 0: q5_values);
   Q4_0 ((u − 8)·d) and Q4_1 (u·d + m) the same without it. Over the blocks as they lie (a decode GEMV, a GEMM of a
   few rows) Σ u·a in int16 for four registers at a time (≤ 4·2·31·127 < 2¹⁵), the −offset·Σa of Q5_0 and Q4_0 from
   the activation block's exact sum; the decoded tile (a prefill GEMM) as its decode function says. */
#define EK_IL_Q5(name, five_one, bytes, quants, high) EK_IL_PER32(name, five_one, 16, bytes, quants, high)
#define EK_IL_PER32(name, five_one, offset, bytes, quants, high)                                                    \
    static const size_t EK_IL_NAME(name##_block_bytes) = bytes;                                                     \
    static const size_t EK_IL_NAME(name##_block_elements) = 32;                                                     \
    static const size_t EK_IL_NAME(name##_act_block_bytes) = sizeof(ek_block_q8_act);                               \
    static const size_t EK_IL_NAME(name##_decoded_bytes) = EK_IL_DECODED_BYTES(EK_IL_PER32_DECODED_HEADER, 32);     \
    static const bool EK_IL_NAME(name##_decodes) = EK_IL_TILE <= 4;                                                 \
    static const bool EK_IL_NAME(name##_unsigned_act) = !(five_one) && EK_IL_TILE <= 4;                             \
    /* the eight registers of unsigned 5-bit values of one group-block */                                          \
    EK_IL_TARGET EK_IL_INLINE void EK_IL_NAME(name##_values)(const uint8_t *gb, __m256i *u) {                       \
        if (high > 0) {                                                                                             \
            EK_IL_NAME(q5_values)(gb + quants, u);                                                                  \
            return;                                                                                                 \
        }                                                                                                           \
        const __m256i low_mask = _mm256_set1_epi8(0x0f);                                                            \
        for (int c = 0; c < 4; c++) {                                                                               \
            __m256i raw = _mm256_loadu_si256((const __m256i *)(gb + quants + 32 * c));                              \
            u[c] = _mm256_and_si256(raw, low_mask);                                                                 \
            u[4 + c] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low_mask);                                       \
        }                                                                                                           \
    }                                                                                                               \
    /* Decoded (EK_IL_PER32_DECODED_HEADER): the scales d and the minimums m in fp32, then 128·Σw per row (the   \
       formats with an offset), then the values: Q4_1 and Q5_1 unsigned u, Q4_0 and Q5_0 signed w = u − offset. */  \
    EK_IL_TARGET EK_IL_INLINE void EK_IL_NAME(name##_decode)(const uint8_t *gb, uint8_t *out) {                     \
        __m256i u[8];                                                                                               \
        EK_IL_NAME(name##_values)(gb, u);                                                                           \
        _mm256_store_ps((float *)out, EK_IL_NAME(halves)(gb));                                                      \
        if (five_one) {                                                                                             \
            _mm256_store_ps((float *)(out + 32), EK_IL_NAME(halves)(gb + EK_IL_Q5_1_MINS));                         \
            for (int v = 0; v < 8; v++) _mm256_store_si256((__m256i *)(out + 96 + 32 * v), u[v]);                   \
            return;                                                                                                 \
        }                                                                                                           \
        __m256i total = _mm256_setzero_si256();                                                                     \
        for (int v = 0; v < 8; v++) {                                                                               \
            const __m256i w = _mm256_sub_epi8(u[v], _mm256_set1_epi8(offset));                                     \
            total = _mm256_add_epi32(total, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), w),         \
                                                              _mm256_set1_epi16(1)));                               \
            _mm256_store_si256((__m256i *)(out + 96 + 32 * v), w);                                                  \
        }                                                                                                           \
        _mm256_store_si256((__m256i *)(out + 64), _mm256_slli_epi32(total, 7));                                     \
    }                                                                                                               \
    EK_IL_TARGET EK_IL_INLINE void EK_IL_NAME(name##_decoded_tile)(const uint8_t *group, int64_t blocks,             \
                                                                   const uint8_t *act, size_t act_row_bytes,        \
                                                                   const int tile, __m256 *out) {                   \
        const __m256i ones = _mm256_set1_epi16(1);                                                                  \
        __m256 acc[EK_IL_TILE];                                                                                     \
        for (int t = 0; t < tile; t++) acc[t] = _mm256_setzero_ps();                                                \
        for (int64_t b = 0; b < blocks; b++) {                                                                      \
            const uint8_t *gb = group + (size_t)b * EK_IL_NAME(name##_decoded_bytes);                               \
            const __m256 d = _mm256_load_ps((const float *)gb);                                                     \
            const __m256i *values = (const __m256i *)(gb + EK_IL_PER32_DECODED_HEADER);                             \
            /* Each value register is loaded once and meets every row of the tile (v outside, rows inside): with    \
               the rows outside, the compiler kept the eight value registers live beside the rows' sums and spilled \
               them. One Zen 4 core (avx2 build), old and new tiles alternating in one process, 15 rounds, medians: \
               SmolLM2's 128×576×576, 128×1536×576 and 128×576×1536 Q4_1 +10-20 %, Q5_0 +9-16 %, Q5_1 +5-18 %,      \
               Q4_0 -8…+3 %; 128×4096×4096 +1-4 %; results bit for bit the same. Q4_1 and Q5_1: u · signed a; Q4_0  \
               and Q5_0: (a + 128) · signed w. Pair sums stay int16 for eight registers with 4 bits (≤ 8·2·255·8 or \
               8·2·15·127 < 2¹⁵), four with 5. */                                                                   \
            const int per_sum = high > 0 ? 4 : 8;                                                                   \
            const ek_block_q8_act *ab[EK_IL_TILE];                                                                  \
            __m256i s[EK_IL_TILE], dot[EK_IL_TILE];                                                                 \
            _Pragma("clang loop unroll(full)")                                                                      \
            for (int t = 0; t < tile; t++) ab[t] = (const ek_block_q8_act *)(act + (size_t)t * act_row_bytes) + b;  \
            _Pragma("clang loop unroll(full)")                                                                      \
            for (int v = 0; v < 8; v++) {                                                                           \
                const __m256i w = _mm256_load_si256(values + v);                                                    \
                _Pragma("clang loop unroll(full)") /* the rows' sums in registers, not an array in memory */        \
                for (int t = 0; t < tile; t++) {                                                                    \
                    const __m256i a = EK_IL_NAME(broadcast4)(ab[t]->qs + 4 * v);                                    \
                    const __m256i p = five_one ? _mm256_maddubs_epi16(w, a) : _mm256_maddubs_epi16(a, w);           \
                    s[t] = v % per_sum == 0 ? p : _mm256_add_epi16(s[t], p);                                        \
                    if (v % per_sum == per_sum - 1) {                                                               \
                        const __m256i widened = _mm256_madd_epi16(s[t], ones);                                      \
                        dot[t] = v == per_sum - 1 ? widened : _mm256_add_epi32(dot[t], widened);                    \
                    }                                                                                               \
                }                                                                                                   \
            }                                                                                                       \
            _Pragma("clang loop unroll(full)")                                                                      \
            for (int t = 0; t < tile; t++) {                                                                        \
                if (!five_one) dot[t] = _mm256_sub_epi32(dot[t], _mm256_load_si256((const __m256i *)(gb + 64)));    \
                acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[t]), _mm256_mul_ps(d, _mm256_set1_ps(ab[t]->d)), acc[t]); \
                if (five_one) acc[t] = _mm256_fmadd_ps(_mm256_load_ps((const float *)(gb + 32)), _mm256_set1_ps(ab[t]->s), acc[t]); \
            }                                                                                                       \
        }                                                                                                           \
        for (int t = 0; t < tile; t++) out[t] = acc[t];                                                             \
    }                                                                                                               \
    EK_IL_TARGET EK_IL_INLINE void EK_IL_NAME(name##_tile)(EK_IL_TILE_ARGS) {                                       \
        if (decoded) {                                                                                              \
            EK_IL_NAME(name##_decoded_tile)(group, blocks, act, act_row_bytes, tile, out);                          \
            return;                                                                                                 \
        }                                                                                                           \
        const __m256i ones = _mm256_set1_epi16(1);                                                                  \
        __m256 acc[EK_IL_TILE];                                                                                     \
        for (int t = 0; t < tile; t++) acc[t] = _mm256_setzero_ps();                                                \
        for (int64_t b = 0; b < blocks; b++) {                                                                      \
            const uint8_t *gb = group + (size_t)b * bytes;                                                          \
            __m256i u[8];                                                                                           \
            ek_prefetch_ahead(gb, bytes);                                                                           \
            EK_IL_NAME(name##_values)(gb, u);                                                                       \
            const __m256 d = EK_IL_NAME(halves)(gb);                                                                \
            for (int t = 0; t < tile; t++) {                                                                        \
                const ek_block_q8_act *ab = (const ek_block_q8_act *)(act + (size_t)t * act_row_bytes) + b;         \
                __m256i dot;                                                                                        \
                if (EK_IL_HAS_VNNI) {                                                                               \
                    __m256i d0 = _mm256_setzero_si256(), d1 = _mm256_setzero_si256();                               \
                    for (int v = 0; v < 4; v++) {                                                                   \
                        d0 = EK_IL_NAME(dot_add)(d0, u[v], EK_IL_NAME(broadcast4)(ab->qs + 4 * v));                 \
                        d1 = EK_IL_NAME(dot_add)(d1, u[4 + v], EK_IL_NAME(broadcast4)(ab->qs + 16 + 4 * v));        \
                    }                                                                                               \
                    dot = _mm256_add_epi32(d0, d1);                                                                 \
                } else {                                                                                            \
                    __m256i s0, s1;                                                                                 \
                    EK_IL_NAME(pair_sums)(u, ab->qs, &s0, &s1);                                                     \
                    dot = _mm256_add_epi32(_mm256_madd_epi16(s0, ones), _mm256_madd_epi16(s1, ones));               \
                }                                                                                                   \
                /* Q5_0's −16·Σa (Q4_0's −8·Σa) in integers: one subtraction, no scalar conversion per row and block */ \
                if (!five_one) dot = _mm256_sub_epi32(dot, _mm256_set1_epi32((offset) * ab->sum));                  \
                const __m256 total = _mm256_cvtepi32_ps(dot);                                                       \
                acc[t] = _mm256_fmadd_ps(total, _mm256_mul_ps(d, _mm256_set1_ps(ab->d)), acc[t]);                   \
                if (five_one) acc[t] = _mm256_fmadd_ps(EK_IL_NAME(halves)(gb + EK_IL_Q5_1_MINS), _mm256_set1_ps(ab->s), acc[t]); \
            }                                                                                                       \
        }                                                                                                           \
        for (int t = 0; t < tile; t++) out[t] = acc[t];                                                             \
    }                                                                                                               \
    EK_IL_DRIVER_DECODING(name)
EK_IL_Q5(gemm_q5_0, 0, EK_IL_Q5_0_BYTES, EK_IL_Q5_0_QUANTS, 1)
EK_IL_Q5(gemm_q5_1, 1, EK_IL_Q5_1_BYTES, EK_IL_Q5_1_QUANTS, 1)
#if !defined(EK_IL_WIDE)
/* Q4_0 and Q4_1 on AVX2 only: AVX-512 VNNI keeps the packed layout, whose decode GEMV already reads 0.96–1.04 of the
   measured bandwidth there; on AVX2 without VNNI the packed GEMV read 0.80–0.84 (Zen 3). */
EK_IL_PER32(gemm_q4_0, 0, 8, EK_IL_Q4_0_BYTES, EK_IL_Q4_0_QUANTS, 0)
EK_IL_PER32(gemm_q4_1, 1, 0, EK_IL_Q4_1_BYTES, EK_IL_Q4_1_QUANTS, 0)
#endif

/* IQ4_NL: signed table values v, |v| × (a with v's sign); each pair sum (≤ 2·127²) widened at once. */
static const size_t EK_IL_NAME(gemm_iq4_nl_block_bytes) = EK_IL_IQ4_NL_BYTES;
static const size_t EK_IL_NAME(gemm_iq4_nl_act_block_bytes) = sizeof(ek_block_q8_act);
static const size_t EK_IL_NAME(gemm_iq4_nl_block_elements) = 32;
EK_IL_TARGET EK_IL_INLINE void EK_IL_NAME(gemm_iq4_nl_tile)(EK_IL_TILE_ARGS) {
    (void)decoded; /* the table lookup is one instruction per register: nothing to save by decoding once */
    const __m256i low_mask = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)ek_iq4_values));
    __m256 acc[EK_IL_TILE];
    for (int t = 0; t < tile; t++) acc[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < blocks; b++) {
        const uint8_t *gb = group + (size_t)b * EK_IL_IQ4_NL_BYTES;
        ek_prefetch_ahead(gb, EK_IL_IQ4_NL_BYTES);
        __m256i sums[EK_IL_TILE];
        for (int t = 0; t < tile; t++) sums[t] = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            __m256i raw = _mm256_loadu_si256((const __m256i *)(gb + EK_IL_IQ4_NL_QUANTS + 32 * c));
            __m256i v_lo = _mm256_shuffle_epi8(table, _mm256_and_si256(raw, low_mask));
            __m256i v_hi = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(raw, 4), low_mask));
            __m256i m_lo = _mm256_sign_epi8(v_lo, v_lo), m_hi = _mm256_sign_epi8(v_hi, v_hi);
            for (int t = 0; t < tile; t++) {
                const ek_block_q8_act *ab = (const ek_block_q8_act *)(act + (size_t)t * act_row_bytes) + b;
                __m256i p_lo = _mm256_maddubs_epi16(m_lo, _mm256_sign_epi8(EK_IL_NAME(broadcast4)(ab->qs + 4 * c), v_lo));
                __m256i p_hi = _mm256_maddubs_epi16(m_hi, _mm256_sign_epi8(EK_IL_NAME(broadcast4)(ab->qs + 16 + 4 * c), v_hi));
                sums[t] = _mm256_add_epi32(sums[t], _mm256_add_epi32(_mm256_madd_epi16(p_lo, ones), _mm256_madd_epi16(p_hi, ones)));
            }
        }
        const __m256 d = EK_IL_NAME(halves)(gb);
        for (int t = 0; t < tile; t++) {
            const ek_block_q8_act *ab = (const ek_block_q8_act *)(act + (size_t)t * act_row_bytes) + b;
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums[t]), _mm256_mul_ps(d, _mm256_set1_ps(ab->d)), acc[t]);
        }
    }
    for (int t = 0; t < tile; t++) out[t] = acc[t];
}
EK_IL_DRIVER(gemm_iq4_nl)

/* -------------------------------------------------- per-256 formats --- */

/* Value register s (a constant after inlining: every caller unrolls the sub-blocks) of Q5_K's five re-coded registers
   for g at `q` (interleave.c, encode_q5_k_values): q5_values' register s alone. */
EK_IL_TARGET EK_IL_INLINE __m256i EK_IL_NAME(q5_value)(const uint8_t *q, const int s) {
    __m256i r[5]; /* the loads register s does not use are dropped */
    for (int c = 0; c < 5; c++) r[c] = _mm256_loadu_si256((const __m256i *)(q + 32 * c));
    return EK_IL_NAME(q5_field)(r, s);
}

/* Q4_K and Q5_K: per sub-block s (32 elements: Q4_K's registers 8·(s/2) … + 7, low nibbles for even s, high for
   odd; Q5_K's value register s of each g's five), Σ u·a in int16 (eight registers for 4 bits: ≤ 8·2·15·127; four
   for 5 bits), × the rows' 6-bit scales by VPMADDWD; the minimums' Σ min·Σa per pair of sub-blocks from the
   activations' sums of 16. One sub-block, `five` a constant after inlining and `odd` and `s` too where the caller
   unrolls the pairs: with the parity a run-time value Q4_K's decode GEMV branched on it for every register (12 % of
   its samples on one test-and-branch; unrolled +4-5 %), and AVX2's Q5_K GEMM ran 1.5× sgemm against 1.7-1.8×. */
/* The unsigned values of register g of sub-block s (odd = s % 2) of a packed Q4_K/Q5_K group-block. */
EK_IL_TARGET EK_IL_INLINE __m256i EK_IL_NAME(k45_values)(const int five, const int odd, const uint8_t *gb, size_t quants,
                                                        const int s, const int g) {
    if (five) return EK_IL_NAME(q5_value)(gb + EK_IL_Q5_K_VALUES + 160 * g, s);
    __m256i raw = _mm256_loadu_si256((const __m256i *)(gb + quants + 32 * (8 * (s / 2) + g)));
    return _mm256_and_si256(odd ? _mm256_srli_epi16(raw, 4) : raw, _mm256_set1_epi8(0x0f));
}

/* A decoded K-quant group-block: the header (d, dmin, scales, minimums: 160 bytes; Q6_K's own, below), then the
   64 registers of values, register 8s + g for element 32s + 4g (Q4_K/Q5_K) or 32·(4h + q) + 4g (Q6_K). */
#define EK_IL_K_DECODED_HEADER 160

EK_IL_TARGET EK_IL_INLINE void EK_IL_NAME(k45_sub_block)(const int five, const int odd, const int tile, const int decoded,
                                                         const uint8_t *gb, size_t quants, const int s,
                                                         const int8_t *const *aq, __m256i *sums) {
    const __m256i scale = EK_IL_NAME(scale_pairs_u8)(gb + EK_IL_K_SCALES + 8 * s);
    /* four-bit values: eight registers per int16 sum; five-bit: four */
    for (int g0 = 0; g0 < 8; g0 += five ? 4 : 8) {
        __m256i part[EK_IL_TILE];
        for (int t = 0; t < tile; t++) part[t] = _mm256_setzero_si256();
        for (int g = g0; g < g0 + (five ? 4 : 8); g++) {
            const __m256i u = decoded ? _mm256_load_si256((const __m256i *)(gb + EK_IL_K_DECODED_HEADER + 32 * (8 * s + g)))
                                      : EK_IL_NAME(k45_values)(five, odd, gb, quants, s, g);
            for (int t = 0; t < tile; t++)
                part[t] = _mm256_add_epi16(part[t], _mm256_maddubs_epi16(u, EK_IL_NAME(broadcast4)(aq[t] + 32 * s + 4 * g)));
        }
        for (int t = 0; t < tile; t++) sums[t] = _mm256_add_epi32(sums[t], _mm256_madd_epi16(part[t], scale));
    }
}

/* One activation row over a packed Q4_K block (the decode GEMV): sub-blocks s and s + 1 (even s) together, so each
   register of nibbles is loaded once for both, and the two sums are two independent chains. One Emerald Rapids
   core, 512×2048 warm, best of 30 (avx2): Q4_K 30.6 → 36.0 GB/s; 16384×8192 from memory, medians of six alternating
   rounds, share of the read loop: one thread 0.78 → 0.86, two 0.72 → 0.77. The same integer sums, so the results
   are bit for bit the sub-block-at-a-time ones. */
EK_IL_TARGET EK_IL_INLINE __m256i EK_IL_NAME(k4_pair_one_row)(const uint8_t *gb, const int s, const int8_t *aq,
                                                             __m256i sums) {
    const __m256i low_mask = _mm256_set1_epi8(0x0f);
    __m256i even = _mm256_setzero_si256(), odd = _mm256_setzero_si256();
    for (int g = 0; g < 8; g++) {
        const __m256i raw = _mm256_loadu_si256((const __m256i *)(gb + EK_IL_Q4_K_QUANTS + 32 * (8 * (s / 2) + g)));
        const __m256i low = _mm256_and_si256(raw, low_mask), high = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low_mask);
        even = _mm256_add_epi16(even, _mm256_maddubs_epi16(low, EK_IL_NAME(broadcast4)(aq + 32 * s + 4 * g)));
        odd = _mm256_add_epi16(odd, _mm256_maddubs_epi16(high, EK_IL_NAME(broadcast4)(aq + 32 * (s + 1) + 4 * g)));
    }
    sums = _mm256_add_epi32(sums, _mm256_madd_epi16(even, EK_IL_NAME(scale_pairs_u8)(gb + EK_IL_K_SCALES + 8 * s)));
    return _mm256_add_epi32(sums, _mm256_madd_epi16(odd, EK_IL_NAME(scale_pairs_u8)(gb + EK_IL_K_SCALES + 8 * (s + 1))));
}

/* One activation row over half a packed Q5_K block (the decode GEMV): g0 … g0 + 3 (four registers a sum keep the
   int16 pair sums of 5-bit values below 2¹⁵), each g's eight value registers — one per sub-block — from its five
   re-coded ones (q5_values), eight sums side by side. Where a pair of sub-blocks took a register of nibbles and one
   of fifth bits, merged by shifts and ORs into two value registers, this takes 23 instructions for eight. The same
   integer sums, so the results are bit for bit the former layout's. */
EK_IL_TARGET EK_IL_INLINE __m256i EK_IL_NAME(q5_k_half_one_row)(const uint8_t *gb, size_t bytes, const int g0,
                                                               const int8_t *aq, __m256i sums) {
    __m256i part[8];
    for (int s = 0; s < 8; s++) part[s] = _mm256_setzero_si256();
    for (int g = g0; g < g0 + 4; g++) {
        if (g % 2 == 0) ek_prefetch_ahead_part(gb, bytes, g / 2, 4);
        __m256i u[8];
        EK_IL_NAME(q5_values)(gb + EK_IL_Q5_K_VALUES + 160 * g, u);
        for (int s = 0; s < 8; s++)
            part[s] = _mm256_add_epi16(part[s], _mm256_maddubs_epi16(u[s], EK_IL_NAME(broadcast4)(aq + 32 * s + 4 * g)));
    }
    for (int s = 0; s < 8; s++)
        sums = _mm256_add_epi32(sums, _mm256_madd_epi16(part[s], EK_IL_NAME(scale_pairs_u8)(gb + EK_IL_K_SCALES + 8 * s)));
    return sums;
}

#define EK_IL_K45(name, five, bytes, quants)                                                                        \
    static const size_t EK_IL_NAME(name##_block_bytes) = bytes;                                                     \
    static const size_t EK_IL_NAME(name##_block_elements) = 256;                                                    \
    static const size_t EK_IL_NAME(name##_act_block_bytes) = sizeof(ek_block_q8_k);                                 \
    static const size_t EK_IL_NAME(name##_decoded_bytes) = EK_IL_DECODED_BYTES(EK_IL_K_DECODED_HEADER, 256);        \
    static const bool EK_IL_NAME(name##_unsigned_act) = false;                                                      \
    static const bool EK_IL_NAME(name##_decodes) = five || EK_IL_TILE <= 4;                                         \
    EK_IL_TARGET EK_IL_INLINE void EK_IL_NAME(name##_decode)(const uint8_t *gb, uint8_t *out) {                     \
        memcpy(out, gb, EK_IL_Q4_K_QUANTS);                                                                         \
        for (int g = 0; g < 8 && five; g++) {                                                                       \
            __m256i u[8];                                                                                           \
            EK_IL_NAME(q5_values)(gb + EK_IL_Q5_K_VALUES + 160 * g, u);                                             \
            for (int s = 0; s < 8; s++)                                                                             \
                _mm256_store_si256((__m256i *)(out + EK_IL_K_DECODED_HEADER + 32 * (8 * s + g)), u[s]);             \
        }                                                                                                           \
        for (int s = 0; s < 8 && !five; s += 2) {                                                                   \
            for (int g = 0; g < 8; g++) {                                                                           \
                _mm256_store_si256((__m256i *)(out + EK_IL_K_DECODED_HEADER + 32 * (8 * s + g)),                    \
                                   EK_IL_NAME(k45_values)(five, 0, gb, quants, s, g));                              \
                _mm256_store_si256((__m256i *)(out + EK_IL_K_DECODED_HEADER + 32 * (8 * (s + 1) + g)),              \
                                   EK_IL_NAME(k45_values)(five, 1, gb, quants, s + 1, g));                          \
            }                                                                                                       \
        }                                                                                                           \
    }                                                                                                               \
    EK_IL_TARGET EK_IL_INLINE void EK_IL_NAME(name##_tile)(EK_IL_TILE_ARGS) {                                       \
        const size_t stride = decoded ? EK_IL_NAME(name##_decoded_bytes) : bytes;                                   \
        __m256 acc[EK_IL_TILE], acc_min[EK_IL_TILE];                                                                \
        for (int t = 0; t < tile; t++) acc[t] = acc_min[t] = _mm256_setzero_ps();                                   \
        for (int64_t b = 0; b < blocks; b++) {                                                                      \
            const uint8_t *gb = group + (size_t)b * stride;                                                         \
            const int8_t *aq[EK_IL_TILE];                                                                           \
            __m256i sums[EK_IL_TILE];                                                                               \
            for (int t = 0; t < tile; t++) {                                                                        \
                aq[t] = ((const ek_block_q8_k *)(act + (size_t)t * act_row_bytes) + b)->qs;                         \
                sums[t] = _mm256_setzero_si256();                                                                   \
            }                                                                                                       \
            if (tile == 1 && !decoded && five) { /* the decode GEMV: half a block at a time */                     \
                sums[0] = EK_IL_NAME(q5_k_half_one_row)(gb, bytes, 0, aq[0], sums[0]);                              \
                sums[0] = EK_IL_NAME(q5_k_half_one_row)(gb, bytes, 4, aq[0], sums[0]);                              \
            } else if (tile == 1 && !decoded) { /* the decode GEMV: a pair of sub-blocks at a time */              \
                _Pragma("clang loop unroll(full)")                                                                  \
                for (int s = 0; s < 8; s += 2) {                                                                    \
                    ek_prefetch_ahead_part(gb, bytes, s / 2, 4);                                                    \
                    sums[0] = EK_IL_NAME(k4_pair_one_row)(gb, s, aq[0], sums[0]);                                   \
                }                                                                                                   \
            } else if (five && EK_IL_TILE > 4 && tile > 1 && decoded) { /* AVX-512: faster rolled (2.1 vs 1.95× sgemm) */ \
                for (int s = 0; s < 8; s++) EK_IL_NAME(k45_sub_block)(five, s % 2, tile, decoded, gb, quants, s, aq, sums);\
            } else if (five && !decoded) { /* sub-blocks as constants (q5_value) */                 \
                _Pragma("clang loop unroll(full)")                                                                  \
                for (int s = 0; s < 8; s += 2) {                                                                    \
                    ek_prefetch_ahead_part(gb, bytes, s / 2, 4);                                                    \
                    EK_IL_NAME(k45_sub_block)(five, 0, tile, decoded, gb, quants, s, aq, sums);                     \
                    EK_IL_NAME(k45_sub_block)(five, 1, tile, decoded, gb, quants, s + 1, aq, sums);                 \
                }                                                                                                   \
            } else {                                                                                                \
                for (int s = 0; s < 8; s += 2) {                                                                    \
                    if (!decoded) ek_prefetch_ahead_part(gb, bytes, s / 2, 4);                                      \
                    EK_IL_NAME(k45_sub_block)(five, 0, tile, decoded, gb, quants, s, aq, sums);                     \
                    EK_IL_NAME(k45_sub_block)(five, 1, tile, decoded, gb, quants, s + 1, aq, sums);                 \
                }                                                                                                   \
            }                                                                                                       \
            const __m256 d = EK_IL_NAME(halves)(gb), dmin = EK_IL_NAME(halves)(gb + EK_IL_K_DMIN);                  \
            for (int t = 0; t < tile; t++) {                                                                        \
                const ek_block_q8_k *ab = (const ek_block_q8_k *)(act + (size_t)t * act_row_bytes) + b;             \
                /* sums of 32 per sub-block, as int16 pairs (s even, s odd) per 32-bit word */                      \
                __m128i bsums_lo = _mm_loadu_si128((const __m128i *)ab->bsums);                                     \
                __m128i bsums_hi = _mm_loadu_si128((const __m128i *)(ab->bsums + 8));                               \
                int32_t pairs[4];                                                                                   \
                _mm_storeu_si128((__m128i *)pairs, _mm_hadd_epi16(bsums_lo, bsums_hi));                             \
                __m256i min_sum = _mm256_setzero_si256();                                                           \
                for (int p = 0; p < 4; p++) {                                                                       \
                    __m256i mins = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(gb + EK_IL_K_MINS + 16 * p))); \
                    min_sum = _mm256_add_epi32(min_sum, _mm256_madd_epi16(mins, _mm256_set1_epi32(pairs[p])));      \
                }                                                                                                   \
                const __m256 da = _mm256_set1_ps(ab->d);                                                            \
                acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums[t]), _mm256_mul_ps(d, da), acc[t]);                \
                acc_min[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(min_sum), _mm256_mul_ps(dmin, da), acc_min[t]);      \
            }                                                                                                       \
        }                                                                                                           \
        for (int t = 0; t < tile; t++) out[t] = _mm256_sub_ps(acc[t], acc_min[t]);                                  \
    }                                                                                                               \
    EK_IL_DRIVER_DECODING(name)
EK_IL_K45(gemm_q4_k, 0, EK_IL_Q4_K_BYTES, EK_IL_Q4_K_QUANTS)
EK_IL_K45(gemm_q5_k, 1, EK_IL_Q5_K_BYTES, EK_IL_Q5_K_VALUES)

/* Q6_K: unsigned u = q + 32 (0…63), re-coded at load (interleaved_impl.h); per sub-block of 16 (four registers), Σ u·a
   of two registers at a time in int16 (≤ 2·2·63·127 < 2¹⁵), × the rows' signed scales by VPMADDWD (VPDPWSSD with
   VNNI); the −32 as 32·Σ s·(sum of 16 activations) once per block. Quarter q of half h holds elements 128h + 32q + l:
   "ql" registers 16h + l/4 (quarter 0) and 16h + 8 + l/4 (quarter 1), "qh" register 8h + l/4 (quarter 2). */
static const size_t EK_IL_NAME(gemm_q6_k_block_bytes) = EK_IL_Q6_K_BYTES;
static const size_t EK_IL_NAME(gemm_q6_k_block_elements) = 256;
static const size_t EK_IL_NAME(gemm_q6_k_act_block_bytes) = sizeof(ek_block_q8_k);
/* Decoded (AVX2's tiles of four): the block's d and scales as they lie (144 bytes), 128·Σ s·Σw per row (int32, at
   160), then the signed values w = u − 32, multiplied by the activations + 128: pairs ≤ 2·255·32, two registers
   in int16 as before, and the offset's correction made once per decoded chunk instead of every tile row's
   −32·Σ s·(sum of 16) per block (eight VPMADDWD and a conversion per block and row). */
#define EK_IL_Q6_K_DECODED_HEADER 192
#define EK_IL_Q6_K_DECODED_OFFSET 160
static const size_t EK_IL_NAME(gemm_q6_k_decoded_bytes) = EK_IL_DECODED_BYTES(EK_IL_Q6_K_DECODED_HEADER, 256);
static const bool EK_IL_NAME(gemm_q6_k_unsigned_act) = EK_IL_TILE <= 4;
static const bool EK_IL_NAME(gemm_q6_k_decodes) = EK_IL_TILE <= 4;

EK_IL_TARGET EK_IL_INLINE __m256i EK_IL_NAME(scaled_add)(__m256i acc, __m256i pairs, __m256i scale) {
#if defined(EK_IL_VNNI)
    return _mm256_dpwssd_epi32(acc, pairs, scale);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, scale));
#endif
}

/* The unsigned 6-bit values of quarter q (a constant after inlining) of a register g (l = 4g … 4g + 3) of half h,
   from its planes a, b, c (q6_k_planes): in the re-coded layout (interleaved_impl.h) quarters 0–2 are one AND
   each, quarter 3 three shifts, masks and ORs — 11 instructions for the four registers where GGUF's nibbles and
   2-bit fields took 17. One Zen 4 core, 576×1536
   from L2, Gweights/s, medians of 5 alternating rounds: avx2-novnni 23.6 → 34.5, the AVX-512 build's 256-bit VNNI
   tile 30.2 → 33.2; two threads, 16384×8192 from memory: 16.2 → 20.5 GB/s and 20.5 → 21.4. */
EK_IL_TARGET EK_IL_INLINE __m256i EK_IL_NAME(q6_k_value_of)(__m256i a, __m256i b, __m256i c, const int q) {
    const __m256i six = _mm256_set1_epi8(0x3f);
    switch (q) {
    case 0: return _mm256_and_si256(a, six);
    case 1: return _mm256_and_si256(b, six);
    case 2: return _mm256_and_si256(c, six);
    default: /* bits 6-7 of a, b, c → bits 4-5, 2-3, 0-1 */
        return _mm256_or_si256(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 2), _mm256_set1_epi8(0x30)),
                                               _mm256_and_si256(_mm256_srli_epi16(b, 4), _mm256_set1_epi8(0x0c))),
                               _mm256_and_si256(_mm256_srli_epi16(c, 6), _mm256_set1_epi8(0x03)));
    }
}
/* The registers a (quarter 0), b (quarter 1) and c (quarter 2) of register g of half h, whose bits 6–7 make
   quarter 3. */
EK_IL_TARGET EK_IL_INLINE void EK_IL_NAME(q6_k_planes)(const uint8_t *gb, const int h, const int g, __m256i *a,
                                                       __m256i *b, __m256i *c) {
    *a = _mm256_loadu_si256((const __m256i *)(gb + EK_IL_Q6_K_QUANTS + 32 * (16 * h + g)));
    *b = _mm256_loadu_si256((const __m256i *)(gb + EK_IL_Q6_K_QUANTS + 32 * (16 * h + 8 + g)));
    *c = _mm256_loadu_si256((const __m256i *)(gb + EK_IL_Q6_K_HIGH + 32 * (8 * h + g)));
}
EK_IL_TARGET EK_IL_INLINE __m256i EK_IL_NAME(q6_k_values)(const uint8_t *gb, const int h, const int q, const int g) {
    __m256i a, b, c;
    EK_IL_NAME(q6_k_planes)(gb, h, g, &a, &b, &c);
    return EK_IL_NAME(q6_k_value_of)(a, b, c, q);
}

/* The scale pairs of quarter q of half h: [0] sub-block 8h + 2q, [1] the next, each row's value in both int16
   halves of its lane. */
EK_IL_TARGET EK_IL_INLINE void EK_IL_NAME(q6_k_scale_pairs)(const uint8_t *gb, const int h, const int q, __m256i *scales) {
    const __m256i pair = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(gb + EK_IL_Q6_K_SCALES + 16 * (4 * h + q))));
    scales[0] = _mm256_blend_epi16(pair, _mm256_slli_epi32(pair, 16), 0xAA);
    scales[1] = _mm256_blend_epi16(_mm256_srai_epi32(pair, 16), pair, 0xAA);
}

EK_IL_TARGET EK_IL_INLINE void EK_IL_NAME(gemm_q6_k_decode)(const uint8_t *gb, uint8_t *out) {
    memcpy(out, gb, EK_IL_Q6_K_QUANTS);
    const __m256i thirty_two = _mm256_set1_epi8(32), ones = _mm256_set1_epi8(1);
    __m256i offset = _mm256_setzero_si256(); /* Σ s·Σw per row */
    for (int h = 0; h < 2; h++) {
        _Pragma("clang loop unroll(full)") /* q a constant: q6_k_values' switch */
        for (int q = 0; q < 4; q++) {
            __m256i scales[2];
            EK_IL_NAME(q6_k_scale_pairs)(gb, h, q, scales);
            for (int half = 0; half < 2; half++) {
                __m256i sum = _mm256_setzero_si256(); /* four registers' pair sums, each ≤ 4·2·32 */
                for (int g = 4 * half; g < 4 * half + 4; g++) {
                    const __m256i w = _mm256_sub_epi8(EK_IL_NAME(q6_k_values)(gb, h, q, g), thirty_two);
                    _mm256_store_si256((__m256i *)(out + EK_IL_Q6_K_DECODED_HEADER + 32 * (32 * h + 8 * q + g)), w);
                    sum = _mm256_add_epi16(sum, _mm256_maddubs_epi16(ones, w));
                }
                offset = _mm256_add_epi32(offset, _mm256_madd_epi16(sum, scales[half]));
            }
        }
    }
    _mm256_store_si256((__m256i *)(out + EK_IL_Q6_K_DECODED_OFFSET), _mm256_slli_epi32(offset, 7));
}

EK_IL_TARGET EK_IL_INLINE void EK_IL_NAME(q6_k_quarter)(const uint8_t *gb, const int8_t *const *aq, const int tile,
                                                         const int decoded, const int h, const int q, __m256i *sums) {
    __m256i scales[2];
    EK_IL_NAME(q6_k_scale_pairs)(gb, h, q, scales);
    for (int half = 0; half < 2; half++) {
        for (int two = 0; two < 2; two++) {
            __m256i part[EK_IL_TILE];
            for (int i = 0; i < 2; i++) {
                const int g = 4 * half + 2 * two + i;
                /* decoded: signed w against the activations + 128; else unsigned u against the signed ones */
                const __m256i u = decoded
                    ? _mm256_load_si256((const __m256i *)(gb + EK_IL_Q6_K_DECODED_HEADER + 32 * (32 * h + 8 * q + g)))
                    : EK_IL_NAME(q6_k_values)(gb, h, q, g);
                for (int t = 0; t < tile; t++) {
                    const __m256i a = EK_IL_NAME(broadcast4)(aq[t] + 128 * h + 32 * q + 4 * g);
                    __m256i p = decoded ? _mm256_maddubs_epi16(a, u) : _mm256_maddubs_epi16(u, a);
                    part[t] = i ? _mm256_add_epi16(part[t], p) : p;
                }
            }
            for (int t = 0; t < tile; t++) sums[t] = EK_IL_NAME(scaled_add)(sums[t], part[t], scales[half]);
        }
    }
}

/* One activation row over half h of a packed block (the decode GEMV): each register of the three planes loaded once
   for the four quarters it makes, two registers a step (the int16 sums of two, as q6_k_quarter's). One Emerald
   Rapids core, 512×2048 warm, best of 30: 26.5 → 28.5 GB/s; from memory level (two threads, 0.80 of the read loop
   either way). The same integer sums as the quarter-at-a-time tiles, so bit for bit their results. */
EK_IL_TARGET EK_IL_INLINE __m256i EK_IL_NAME(q6_k_half_one_row)(const uint8_t *gb, const int8_t *aq, const int h,
                                                               __m256i sums) {
    __m256i scales[4][2];
    for (int q = 0; q < 4; q++) EK_IL_NAME(q6_k_scale_pairs)(gb, h, q, scales[q]);
    _Pragma("clang loop unroll(full)") /* q a constant: q6_k_value_of's switch */
    for (int j = 0; j < 4; j++) {
        ek_prefetch_ahead_part(gb, EK_IL_Q6_K_BYTES, 4 * h + j, 8);
        __m256i part[4];
        for (int i = 0; i < 2; i++) {
            const int g = 2 * j + i;
            __m256i a, b, c;
            EK_IL_NAME(q6_k_planes)(gb, h, g, &a, &b, &c);
            for (int q = 0; q < 4; q++) {
                const __m256i p = _mm256_maddubs_epi16(EK_IL_NAME(q6_k_value_of)(a, b, c, q),
                                                       EK_IL_NAME(broadcast4)(aq + 128 * h + 32 * q + 4 * g));
                part[q] = i ? _mm256_add_epi16(part[q], p) : p;
            }
        }
        for (int q = 0; q < 4; q++) sums = EK_IL_NAME(scaled_add)(sums, part[q], scales[q][j / 2]);
    }
    return sums;
}

EK_IL_TARGET EK_IL_INLINE void EK_IL_NAME(gemm_q6_k_tile)(EK_IL_TILE_ARGS) {
    const size_t stride = decoded ? EK_IL_NAME(gemm_q6_k_decoded_bytes) : EK_IL_Q6_K_BYTES;
    __m256 acc[EK_IL_TILE];
    for (int t = 0; t < tile; t++) acc[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < blocks; b++) {
        const uint8_t *gb = group + (size_t)b * stride;
        const ek_block_q8_k *ab[EK_IL_TILE];
        const int8_t *aq[EK_IL_TILE];
        __m256i sums[EK_IL_TILE];
        for (int t = 0; t < tile; t++) {
            ab[t] = (const ek_block_q8_k *)(act + (size_t)t * act_row_bytes) + b;
            aq[t] = ab[t]->qs;
            sums[t] = _mm256_setzero_si256();
        }
        for (int h = 0; h < 2; h++) {
            if (tile == 1 && !decoded) { /* the decode GEMV */
                sums[0] = EK_IL_NAME(q6_k_half_one_row)(gb, aq[0], h, sums[0]);
                continue;
            }
            _Pragma("clang loop unroll(full)") /* q a constant: q6_k_values' switch */
            for (int q = 0; q < 4; q++) {
                if (!decoded) ek_prefetch_ahead_part(gb, EK_IL_Q6_K_BYTES, 4 * h + q, 8);
                EK_IL_NAME(q6_k_quarter)(gb, aq, tile, decoded, h, q, sums);
            }
        }
        if (decoded) { /* − 128·Σ s·Σw, made by the decode */
            const __m256i offset = _mm256_load_si256((const __m256i *)(gb + EK_IL_Q6_K_DECODED_OFFSET));
            for (int t = 0; t < tile; t++) sums[t] = _mm256_sub_epi32(sums[t], offset);
        }
        for (int p = 0; p < 8 && !decoded; p++) { /* − 32·Σ s·(sum of 16): 32·s fits int16 */
            const __m256i scaled = _mm256_slli_epi16(
                _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(gb + EK_IL_Q6_K_SCALES + 16 * p))), 5);
            for (int t = 0; t < tile; t++) {
                int32_t bsum_pair;
                memcpy(&bsum_pair, ab[t]->bsums + 2 * p, sizeof bsum_pair);
                sums[t] = _mm256_sub_epi32(sums[t], _mm256_madd_epi16(scaled, _mm256_set1_epi32(bsum_pair)));
            }
        }
        const __m256 d = EK_IL_NAME(halves)(gb);
        for (int t = 0; t < tile; t++)
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums[t]), _mm256_mul_ps(d, _mm256_set1_ps(ab[t]->d)), acc[t]);
    }
    for (int t = 0; t < tile; t++) out[t] = acc[t];
}
EK_IL_DRIVER_DECODING(gemm_q6_k)

/* IQ4_XS: per sub-block s (registers 4s … 4s + 3: low nibbles elements 32s + 4j + t, high ones 16 further on),
   signed table values, |v| × sign-moved activations, each pair sum × the sub-block's signed scale by VPMADDWD. */
static const size_t EK_IL_NAME(gemm_iq4_xs_block_bytes) = EK_IL_IQ4_XS_BYTES;
static const size_t EK_IL_NAME(gemm_iq4_xs_act_block_bytes) = sizeof(ek_block_q8_k);
static const size_t EK_IL_NAME(gemm_iq4_xs_block_elements) = 256;
EK_IL_TARGET EK_IL_INLINE void EK_IL_NAME(gemm_iq4_xs_tile)(EK_IL_TILE_ARGS) {
    (void)decoded; /* the table lookup is one instruction per register: nothing to save by decoding once */
    const __m256i low_mask = _mm256_set1_epi8(0x0f);
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)ek_iq4_values));
    __m256 acc[EK_IL_TILE];
    for (int t = 0; t < tile; t++) acc[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < blocks; b++) {
        const uint8_t *gb = group + (size_t)b * EK_IL_IQ4_XS_BYTES;
        const int8_t *aq[EK_IL_TILE];
        __m256i sums[EK_IL_TILE];
        for (int t = 0; t < tile; t++) {
            aq[t] = ((const ek_block_q8_k *)(act + (size_t)t * act_row_bytes) + b)->qs;
            sums[t] = _mm256_setzero_si256();
        }
        for (int s = 0; s < 8; s++) {
            if (s % 2 == 0) ek_prefetch_ahead_part(gb, EK_IL_IQ4_XS_BYTES, s / 2, 4);
            const __m256i scale = EK_IL_NAME(scale_pairs_i8)(gb + EK_IL_IQ4_XS_SCALES + 8 * s);
            for (int j = 0; j < 4; j++) {
                __m256i raw = _mm256_loadu_si256((const __m256i *)(gb + EK_IL_IQ4_XS_QUANTS + 32 * (4 * s + j)));
                __m256i v_lo = _mm256_shuffle_epi8(table, _mm256_and_si256(raw, low_mask));
                __m256i v_hi = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(raw, 4), low_mask));
                __m256i m_lo = _mm256_sign_epi8(v_lo, v_lo), m_hi = _mm256_sign_epi8(v_hi, v_hi);
                for (int t = 0; t < tile; t++) {
                    __m256i p_lo = _mm256_maddubs_epi16(m_lo, _mm256_sign_epi8(EK_IL_NAME(broadcast4)(aq[t] + 32 * s + 4 * j), v_lo));
                    __m256i p_hi = _mm256_maddubs_epi16(m_hi, _mm256_sign_epi8(EK_IL_NAME(broadcast4)(aq[t] + 32 * s + 16 + 4 * j), v_hi));
                    sums[t] = _mm256_add_epi32(sums[t], _mm256_add_epi32(_mm256_madd_epi16(p_lo, scale), _mm256_madd_epi16(p_hi, scale)));
                }
            }
        }
        const __m256 d = EK_IL_NAME(halves)(gb);
        for (int t = 0; t < tile; t++) {
            const ek_block_q8_k *ab = (const ek_block_q8_k *)(act + (size_t)t * act_row_bytes) + b;
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums[t]), _mm256_mul_ps(d, _mm256_set1_ps(ab->d)), acc[t]);
        }
    }
    for (int t = 0; t < tile; t++) out[t] = acc[t];
}
EK_IL_DRIVER(gemm_iq4_xs)

#if defined(EK_IL_WIDE)
#include "x86_interleaved_wide.h"
#define EK_IL_WIDE_OR_NOT(x) EK_IL_NAME(wide_##x)
#else
#define EK_IL_WIDE_OR_NOT(x) EK_IL_NAME(x)
#endif

/* The formats every x86 build interleaves, as [format] = kernel entries, each kernel named by `driver`. */
#define EK_IL_COMMON_ENTRIES(driver)                                                                                \
    [EK_FORMAT_Q5_0] = driver(gemm_q5_0), [EK_FORMAT_Q5_1] = driver(gemm_q5_1),                                     \
    [EK_FORMAT_IQ4_NL] = driver(gemm_iq4_nl), [EK_FORMAT_Q4_K] = driver(gemm_q4_k),                                 \
    [EK_FORMAT_Q5_K] = driver(gemm_q5_k), [EK_FORMAT_Q6_K] = driver(gemm_q6_k),                                     \
    [EK_FORMAT_IQ4_XS] = driver(gemm_iq4_xs)

const ek_il_kernels EK_IL_TABLE = {
    .gemm = {
#if !defined(EK_IL_WIDE)
        [EK_FORMAT_Q4_0] = EK_IL_NAME(gemm_q4_0),
        [EK_FORMAT_Q4_1] = EK_IL_NAME(gemm_q4_1),
#endif
        EK_IL_COMMON_ENTRIES(EK_IL_WIDE_OR_NOT),
    },
#if defined(EK_IL_WIDE)
    /* One Zen 4 core, SmolLM2's decode shapes (576×1536, 1536×576, 576×576) cycled from memory, Gweights/s, two
       rounds, 512-bit pairs → these: Q6_K 11-13 → 18-19, Q4_K 22-25 → 30-33, Q5_K 19-20 → 23-26, Q5_0 15-18 →
       25-29, Q5_1 13 → 23-26, IQ4_XS 21-23 → 27-29, IQ4_NL 24-25 → 25-26. The pairs read two groups as two streams a
       group apart, each prefetching into the other's bytes where groups are short. (An Emerald Rapids core measured
       the pairs faster for one row: Q4_K 57 → 89 GOPS, IQ4_XS 27 → 57; Intel keeps them.) */
    .gemv_amd = {EK_IL_COMMON_ENTRIES(EK_IL_NAME)},
#endif
};
#undef EK_IL_COMMON_ENTRIES
