/*
 * x86_amx.c — packed Q8_0 products on AMX tiles (AMX-TILE + AMX-INT8: Intel Xeon from Sapphire Rapids on), which the
 * avx512 family runs for sixteen activation rows and more where the CPU has them (EMBER_ISA=avx512-noamx runs
 * x86_avx512.c's VNNI kernels instead, as AMD's AVX-512 cores do).
 *
 * The packed layout (quant_impl.h) already is what TDPBSUD takes as its second operand: a group-block's quants are
 * eight 64-byte lines, line c holding bytes 4c..4c+3 of each of the group's sixteen rows — a tile of 8 rows × 64
 * bytes, unsigned (the packed Q8_0 carries +128), for 32 inputs of 16 weight rows. The first operand is 16 activation
 * rows of one block's 32 signed quants, loaded with the activation rows' stride. So a tile product covers one block
 * (K = 32, half what one instruction can take): the packed blocks have their scales between them, and the per-block
 * kernels need each block's integer sums apart anyway. Four accumulator tiles (two halves of 32 activation rows ×
 * two groups) take each loaded operand twice.
 *
 * Integer sums are exact and are scaled exactly as x86_avx512.c scales them — the +128 taken off as 128·Σa, each
 * block's sum times (row scale × activation scale) added with one FMA in block order, or (row-scaled weights) one sum
 * over all of K scaled once — so the results equal the AVX-512 kernels' bit for bit.
 *
 * Row-scaled products (the int8 encoder's) run at 2.2-3.2× the VNNI kernels (one Emerald Rapids core, MiniLM's
 * shapes); per-block ones at only 1.05-1.2×: each block's 16×16 sums go through memory (TILESTORED: 1 KB, ~10 ns a
 * tile on that core, more than the tile product's ~6 ns) and then take six vector instructions an output row to scale
 * and add. Tried for them, no faster: one tile of 16 activation rows with its accumulators in registers, and two
 * accumulator tiles in turn so that one block's scaling overlaps the next block's product.
 */
#if defined(__x86_64__)
#include <immintrin.h>
#include <string.h>
#include "quant_impl.h"

#define EK_AMX __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,f16c,fma,amx-tile,amx-int8")))
#define EK_INLINE static inline __attribute__((always_inline))

/* LDTILECFG's 64-byte operand, palette 1. */
typedef struct tile_config {
    uint8_t palette;
    uint8_t start_row;
    uint8_t reserved[14];
    uint16_t bytes_per_row[16];
    uint8_t rows[16];
} tile_config;

/* The tiles: accumulators C[half][group] (half: activation rows 0-15 or 16-31 of a chunk), A[half], B[group]. */
enum { C00 = 0, C01 = 1, C10 = 2, C11 = 3, A0 = 4, A1 = 5, B0 = 6, B1 = 7 };

/* Tiles for `rows0` (1-16) activation rows in the first half and `rows1` (0-16) in the second; a tile with no rows
   stays unconfigured and unused. */
EK_AMX static void configure_tiles(int rows0, int rows1) {
    tile_config config;
    memset(&config, 0, sizeof config);
    config.palette = 1;
    const int rows[2] = {rows0, rows1};
    for (int half = 0; half < 2; half++) {
        for (int group = 0; group < 2; group++) {
            config.rows[C00 + 2 * half + group] = (uint8_t)rows[half];
            config.bytes_per_row[C00 + 2 * half + group] = rows[half] ? 64 : 0;
        }
        config.rows[A0 + half] = (uint8_t)rows[half];
        config.bytes_per_row[A0 + half] = rows[half] ? EK_BLOCK : 0;
        config.rows[B0 + half] = EK_BLOCK / 4;
        config.bytes_per_row[B0 + half] = 64;
    }
    _tile_loadconfig(&config);
}

/* Where one chunk of activation rows and one or two weight groups meet. */
typedef struct tile_pass {
    const uint8_t *group[2];      /* the groups' first group-blocks (group[1] NULL: one group)          */
    const ek_block_q8_act *act;   /* the chunk's first activation row                                  */
    int rows[2];                  /* activation rows in each half (rows[1] 0: one half)                 */
    int64_t blocks;
    float *y;                     /* output of the chunk's first row and the first group's first row    */
    int64_t ldy;
    __mmask16 mask[2];            /* each group's outputs inside the row range                         */
} tile_pass;

/* Each used accumulator tile into `sums` ([tile][row][lane], 64-byte rows). */
EK_AMX EK_INLINE void store_sums(const tile_pass *p, int32_t sums[4][16][16]) {
    _tile_stored(C00, sums[0], 64);
    if (p->group[1]) _tile_stored(C01, sums[1], 64);
    if (p->rows[1]) {
        _tile_stored(C10, sums[2], 64);
        if (p->group[1]) _tile_stored(C11, sums[3], 64);
    }
}

/* One block's products into the zeroed or running accumulators. */
EK_AMX EK_INLINE void multiply_block(const tile_pass *p, int64_t b) {
    const size_t group_block = EK_GROUP_BLOCK_BYTES(EK_FORMAT_Q8_0), scale_bytes = EK_GROUP_SCALE_BYTES(EK_FORMAT_Q8_0);
    const size_t stride = (size_t)p->blocks * sizeof(ek_block_q8_act);
    _tile_loadd(A0, p->act[b].qs, stride);
    _tile_loadd(B0, p->group[0] + (size_t)b * group_block + scale_bytes, 64);
    if (p->group[1]) _tile_loadd(B1, p->group[1] + (size_t)b * group_block + scale_bytes, 64);
    _tile_dpbsud(C00, A0, B0);
    if (p->group[1]) _tile_dpbsud(C01, A0, B1);
    if (p->rows[1]) {
        _tile_loadd(A1, p->act[16 * p->blocks + b].qs, stride);
        _tile_dpbsud(C10, A1, B0);
        if (p->group[1]) _tile_dpbsud(C11, A1, B1);
    }
}

EK_AMX EK_INLINE void zero_accumulators(const tile_pass *p) {
    _tile_zero(C00);
    if (p->group[1]) _tile_zero(C01);
    if (p->rows[1]) {
        _tile_zero(C10);
        if (p->group[1]) _tile_zero(C11);
    }
}

/* Per-block scales: acc[tile][row] += (sum − 128·Σa) × (row scales × activation scale), in x86_avx512.c's order. */
EK_AMX EK_INLINE void add_scaled_block(const tile_pass *p, int64_t b, int32_t sums[4][16][16], __m512 acc[4][16]) {
    const size_t group_block = EK_GROUP_BLOCK_BYTES(EK_FORMAT_Q8_0);
    for (int group = 0; group < 2 && p->group[group]; group++) {
        const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p->group[group] + (size_t)b * group_block)));
        for (int half = 0; half < 2; half++) {
            const int t = 2 * half + group;
            for (int r = 0; r < p->rows[half]; r++) {
                const ek_block_q8_act *a = p->act + (16 * half + r) * p->blocks + b;
                const __m512i dot = _mm512_sub_epi32(_mm512_load_si512(sums[t][r]), _mm512_set1_epi32(128 * a->sum));
                acc[t][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(d, _mm512_set1_ps(a->d)), acc[t][r]);
            }
        }
    }
}

/* Row-scaled weights: each output's sum over all of K, less 128·Σa, times the row's scale and the activation row's. */
EK_AMX EK_INLINE void scale_rows(const tile_pass *p, int32_t sums[4][16][16], __m512 acc[4][16]) {
    for (int group = 0; group < 2 && p->group[group]; group++) {
        const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p->group[group]));
        for (int half = 0; half < 2; half++) {
            const int t = 2 * half + group;
            for (int r = 0; r < p->rows[half]; r++) {
                const ek_block_q8_act *a = p->act + (16 * half + r) * p->blocks;
                const __m512i dot = _mm512_sub_epi32(_mm512_load_si512(sums[t][r]), _mm512_set1_epi32(128 * a->row_sum));
                acc[t][r] = _mm512_mul_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(d, _mm512_set1_ps(a->d)));
            }
        }
    }
}

EK_AMX EK_INLINE void run_pass(bool rows_scaled, const tile_pass *p) {
    int32_t sums[4][16][16] __attribute__((aligned(64)));
    __m512 acc[4][16];
    if (rows_scaled) {
        zero_accumulators(p);
        for (int64_t b = 0; b < p->blocks; b++) multiply_block(p, b);
        store_sums(p, sums);
        scale_rows(p, sums, acc);
    } else {
        for (int t = 0; t < 4; t++)
            for (int r = 0; r < 16; r++) acc[t][r] = _mm512_setzero_ps();
        for (int64_t b = 0; b < p->blocks; b++) {
            zero_accumulators(p);
            multiply_block(p, b);
            store_sums(p, sums);
            add_scaled_block(p, b, sums, acc);
        }
    }
    for (int half = 0; half < 2; half++)
        for (int r = 0; r < p->rows[half]; r++) {
            float *out = p->y + (16 * half + r) * p->ldy;
            _mm512_mask_storeu_ps(out, p->mask[0], acc[2 * half][r]);
            if (p->group[1]) _mm512_mask_storeu_ps(out + EK_PACK_ROWS, p->mask[1], acc[2 * half + 1][r]);
        }
}

/* Activation rows [first, last) in chunks of `chunk` (32, or the last 1-31 once) against every group pair of the row
   range, with the tiles configured for that chunk size: whole chunks first, then the remainder, so the tiles are
   configured at most twice a call. Groups outside, chunks inside: a group pair's weights come from memory once and
   from the caches for the chunks after the first. */
EK_AMX EK_INLINE void run_chunks(bool rows_scaled, const uint8_t *packed, int64_t blocks, const ek_block_q8_act *act,
                                 int64_t first, int64_t last, int64_t chunk, float *y, int64_t ldy, int64_t row_begin,
                                 int64_t row_end) {
    if (first >= last) return;
    const int rows0 = chunk < 16 ? (int)chunk : 16, rows1 = chunk > 16 ? (int)chunk - 16 : 0;
    configure_tiles(rows0, rows1);
    const size_t group_bytes = (size_t)blocks * EK_GROUP_BLOCK_BYTES(EK_FORMAT_Q8_0);
    for (int64_t g = row_begin / EK_PACK_ROWS; g * EK_PACK_ROWS < row_end;) {
        const bool pair = (g + 1) * EK_PACK_ROWS < row_end;
        tile_pass p = {
            .group = {packed + (size_t)g * group_bytes, pair ? packed + (size_t)(g + 1) * group_bytes : NULL},
            .rows = {rows0, rows1},
            .blocks = blocks,
            .ldy = ldy,
            .mask = {ek_group_mask(g, row_begin, row_end), pair ? ek_group_mask(g + 1, row_begin, row_end) : 0},
        };
        for (int64_t i = first; i < last; i += chunk) {
            p.act = act + i * blocks;
            p.y = y + i * ldy + g * EK_PACK_ROWS;
            run_pass(rows_scaled, &p);
        }
        g += pair ? 2 : 1;
    }
}

/* Inlined into each entry point below with rows_scaled a constant. */
EK_AMX EK_INLINE void gemm_q8_0_amx(bool rows_scaled, const uint8_t *packed, int64_t blocks, const ek_block_q8_act *act,
                                    int64_t m, float *y, int64_t ldy, int64_t row_begin, int64_t row_end) {
    const int64_t whole = m / 32 * 32;
    run_chunks(rows_scaled, packed, blocks, act, 0, whole, 32, y, ldy, row_begin, row_end);
    run_chunks(rows_scaled, packed, blocks, act, whole, m, m - whole, y, ldy, row_begin, row_end);
    _tile_release(); /* the tile state back to its initial one: no 8 KB saved at each context switch */
}

EK_AMX void ek_gemm_q8_0_amx(const uint8_t *packed, int64_t blocks, const ek_block_q8_act *act, int64_t m, float *y,
                             int64_t ldy, int64_t row_begin, int64_t row_end) {
    gemm_q8_0_amx(false, packed, blocks, act, m, y, ldy, row_begin, row_end);
}

EK_AMX void ek_gemm_q8_0_row_scaled_amx(const uint8_t *packed, int64_t blocks, const ek_block_q8_act *act, int64_t m,
                                        float *y, int64_t ldy, int64_t row_begin, int64_t row_end) {
    gemm_q8_0_amx(true, packed, blocks, act, m, y, ldy, row_begin, row_end);
}
#endif /* __x86_64__ */
