/*
 * x86_outer_body.h — fp32 GEMM over many activation rows as outer products, included by x86_rows_body.h after its
 * EK_F32_* vector macros (AVX2 and AVX-512 alike).
 *
 * The dot-product tiles of gemm_float_panel (four weight rows × six activation rows, each sum reduced across the
 * vector at the end) read a vector of weights and one of activations per few FMAs; with hundreds of activation
 * rows the activations come from L2 for every group of four weight rows. Here the weights are packed per call —
 * EK_OUTER_NR rows (two vectors' worth of output columns) × EK_OUTER_KC columns, transposed so that each k holds the
 * NR weights side by side — and each activation row's value at k is broadcast against them: EK_OUTER_MR rows × two
 * vectors of sums stay in registers for a whole KC block, two vector loads and MR broadcasts per 2·MR FMAs, with no
 * reduction at the end. A packed panel (32 KB on AVX-512) stays in L1 while every activation row passes it.
 * Activation rows are taken in blocks of EK_OUTER_MC so that a block's KC columns stay in L2 across panels (AVX-512's
 * 256 columns: 480 KB; AVX2's blocks of up to 512 columns make that up to 960 KB — fewer rows a block, to keep
 * 480 KB, measured slower: docs/KERNELS.md).
 *
 * AVX2 builds also take the weight rows EK_OUTER_NB at a time, every KC block of a group of rows before the next
 * group, so the sums those rows add to (m × NB floats: 128 KB at 128 rows) stay in L2 from one KC block to the next
 * rather than coming back from L3 or memory; and they split K evenly into blocks of at most 512 columns (K = 576:
 * two of 288, not 256 + 256 + 64). While the tiles of one panel run, the next panel's weight lines are asked for
 * (outer_prefetch): packing had waited on memory for its loads. One Zen 3 core, 128 activation rows, GFLOP/s before
 * → after: fp16 16384 × 8192 54 → 75, bf16 52 → 75, fp32 57 → 72 (OpenBLAS's Zen sgemm 73–79); figures and the
 * two-thread ones in docs/KERNELS.md. AVX-512 builds keep KC = 256 over all their rows and no prefetch: their
 * 12-row tiles and 32-wide panels were not measured with these changes.
 */

#undef EK_OUTER_MR /* this header is included once per ISA */
#undef EK_F32_SET1
#undef EK_OUTER_NR

#undef EK_OUTER_MC
#undef EK_OUTER_CASE
#if defined(EK_ROWS_512)
#define EK_OUTER_MR 12 /* 24 accumulators + 2 weight vectors + 1 broadcast of 32 registers */
#define EK_F32_SET1 _mm512_set1_ps
#else
#define EK_OUTER_MR 6 /* 12 accumulators + 2 + 1 of 16 */
#define EK_F32_SET1 _mm256_set1_ps
#endif
#define EK_OUTER_NR (2 * EK_F32_WIDTH)
#undef EK_OUTER_KC
#undef EK_OUTER_NB
#undef EK_OUTER_EVEN_K
#undef EK_OUTER_PREFETCH
#if defined(EK_ROWS_512)
#define EK_OUTER_KC 256 /* columns per block */
#define EK_OUTER_NB 0 /* weight rows per group: 0, all of them */
#define EK_OUTER_EVEN_K 0 /* blocks of exactly KC columns, the last one shorter */
#define EK_OUTER_PREFETCH 0 /* the next panel's weights not asked for */
#else
#define EK_OUTER_KC 512 /* at most */
#define EK_OUTER_NB 256
#define EK_OUTER_EVEN_K 1 /* K split into equal blocks of at most KC columns */
#define EK_OUTER_PREFETCH 1
#endif
#define EK_OUTER_MC 480 /* rows per block: 480 × 256 × 4 B = 480 KB of activations at 256 columns */

/* Stores `cols` (≤ 2 vectors) sums into y, adding to what is there when `accumulate`. */
EK_ROWS_TARGET EK_ROWS_INLINE void EK_ROWS_NAME(outer_store)(float *y, EK_F32_VEC s0, EK_F32_VEC s1, int64_t cols,
                                                            bool accumulate) {
    if (cols == EK_OUTER_NR) {
        if (accumulate) {
            s0 = EK_F32_ADD(s0, EK_F32_LOAD(y));
            s1 = EK_F32_ADD(s1, EK_F32_LOAD(y + EK_F32_WIDTH));
        }
        EK_F32_STORE(y, s0);
        EK_F32_STORE(y + EK_F32_WIDTH, s1);
        return;
    }
    float sums[EK_OUTER_NR];
    EK_F32_STORE(sums, s0);
    EK_F32_STORE(sums + EK_F32_WIDTH, s1);
    for (int64_t j = 0; j < cols; j++) y[j] = accumulate ? y[j] + sums[j] : sums[j];
}

/* `rows` (a constant after inlining, ≤ MR) activation rows against one packed panel over kn columns. The loops over
   rows are unrolled by pragma: the package build kept the accumulators in memory otherwise (MiniLM fp32 0.58×). */
EK_ROWS_TARGET EK_ROWS_INLINE void EK_ROWS_NAME(outer_tile)(const int rows, const float *panel, int64_t kn,
                                                           const float *x, int64_t ldx, float *y, int64_t ldy,
                                                           int64_t cols, bool accumulate) {
    EK_F32_VEC acc0[EK_OUTER_MR], acc1[EK_OUTER_MR];
#pragma clang loop unroll(full)
    for (int i = 0; i < rows; i++) acc0[i] = acc1[i] = EK_F32_ZERO();
    for (int64_t kk = 0; kk < kn; kk++) {
        const EK_F32_VEC b0 = EK_F32_LOAD(panel + kk * EK_OUTER_NR);
        const EK_F32_VEC b1 = EK_F32_LOAD(panel + kk * EK_OUTER_NR + EK_F32_WIDTH);
#pragma clang loop unroll(full)
        for (int i = 0; i < rows; i++) {
            const EK_F32_VEC a = EK_F32_SET1(x[i * ldx + kk]);
            acc0[i] = EK_F32_FMA(a, b0, acc0[i]);
            acc1[i] = EK_F32_FMA(a, b1, acc1[i]);
        }
    }
#pragma clang loop unroll(full)
    for (int i = 0; i < rows; i++) EK_ROWS_NAME(outer_store)(y + i * ldy, acc0[i], acc1[i], cols, accumulate);
}

/* Weight rows [r, r + cols) × columns [k0, k0 + kn) into panel[kk][j], the columns past `cols` zero: 8 × 8 blocks by
   register transposes (scalar copies made the packing 40 % of a 40-row product), the edges one by one. fp16/bf16
   weights (`kind` as load_weights, a constant after inlining) are widened first, eight rows at a time, into
   `widened` (8 × EK_OUTER_KC floats): the panel is fp32 either way, so the products below are fp32's. */
EK_ROWS_TARGET EK_ROWS_INLINE void EK_ROWS_NAME(outer_pack)(const int kind, const void *w, int64_t k, int64_t r,
                                                           int64_t cols, int64_t k0, int64_t kn, float *widened,
                                                           float *panel) {
    const size_t row_bytes = (size_t)k * EK_ROWS_NAME(weight_bytes)(kind);
    const int64_t full_rows = cols / 8 * 8, full_k = kn / 8 * 8;
    for (int64_t j = 0; j < full_rows; j += 8) {
        const float *rows;
        int64_t ld = k;
        if (kind == 0) {
            rows = (const float *)w + (size_t)(r + j) * (size_t)k + k0;
        } else {
            for (int64_t q = 0; q < 8; q++) {
                const uint8_t *row = (const uint8_t *)w + (size_t)(r + j + q) * row_bytes;
                int64_t kk = 0;
                for (; kk + EK_F32_WIDTH <= kn; kk += EK_F32_WIDTH)
                    EK_F32_STORE(widened + q * kn + kk, EK_ROWS_NAME(load_weights)(row, k0 + kk, kind));
                for (; kk < kn; kk++) widened[q * kn + kk] = EK_ROWS_NAME(weight_at)(row, k0 + kk, kind);
            }
            rows = widened;
            ld = kn;
        }
        for (int64_t kk = 0; kk < full_k; kk += 8)
            ek_transpose8_ps(rows + kk, ld, panel + kk * EK_OUTER_NR + j, EK_OUTER_NR);
        for (int64_t q = 0; q < 8; q++)
            for (int64_t kk = full_k; kk < kn; kk++) panel[kk * EK_OUTER_NR + j + q] = rows[(size_t)q * (size_t)ld + kk];
    }
    for (int64_t j = full_rows; j < EK_OUTER_NR; j++) {
        if (j >= cols) {
            for (int64_t kk = 0; kk < kn; kk++) panel[kk * EK_OUTER_NR + j] = 0;
            continue;
        }
        const uint8_t *row = (const uint8_t *)w + (size_t)(r + j) * row_bytes;
        for (int64_t kk = 0; kk < kn; kk++) panel[kk * EK_OUTER_NR + j] = EK_ROWS_NAME(weight_at)(row, k0 + kk, kind);
    }
}

/* A panel of weights: rows [row, row + cols) × columns [k0, k0 + kn); cols 0 for none. */
#ifndef EK_OUTER_PANEL_DEFINED
#define EK_OUTER_PANEL_DEFINED
typedef struct {
    int64_t row, cols, k0, kn;
} ek_outer_panel;
#endif

/* How much of a block of `step` starting at `begin` lies below `end`. */
EK_ROWS_TARGET EK_ROWS_INLINE int64_t EK_ROWS_NAME(outer_span)(int64_t begin, int64_t end, int64_t step) {
    return end - begin < step ? end - begin : step;
}

/* The panel packed after rows [r, r + NR) of column block [k0, k0 + kn) of the group [n0, n1) (groups of `group` rows
   up to row_end, blocks of kc of k columns): the group's next rows, else its first rows' next block, else the next
   group's first rows, else none. */
EK_ROWS_TARGET EK_ROWS_INLINE ek_outer_panel EK_ROWS_NAME(outer_next)(int64_t r, int64_t n0, int64_t n1, int64_t row_end,
                                                                     int64_t group, int64_t k0, int64_t kn, int64_t k,
                                                                     int64_t kc) {
    ek_outer_panel next = {r + EK_OUTER_NR, 0, k0, kn};
    int64_t end = n1;
    if (next.row >= n1 && k0 + kn < k) {
        next.row = n0;
        next.k0 = k0 + kn;
    } else if (next.row >= n1) {
        next.row = n1;
        next.k0 = 0;
        end = n1 + EK_ROWS_NAME(outer_span)(n1, row_end, group);
    }
    next.kn = EK_ROWS_NAME(outer_span)(next.k0, k, kc);
    next.cols = next.row < end ? EK_ROWS_NAME(outer_span)(next.row, end, EK_OUTER_NR) : 0;
    return next;
}

/* Asks for slice `part` of `parts` of the cache lines of `panel` (the next one, a slice after each tile of the
   current one, so its packing finds them in L2). */
EK_ROWS_TARGET EK_ROWS_INLINE void EK_ROWS_NAME(outer_prefetch)(const int kind, const void *w, int64_t k,
                                                               ek_outer_panel panel, int64_t part, int64_t parts) {
    const size_t bytes = EK_ROWS_NAME(weight_bytes)(kind);
    const int64_t lines_per_row = (int64_t)(((size_t)panel.kn * bytes + 63) / 64);
    const int64_t lines = panel.cols * lines_per_row;
    for (int64_t line = part * lines / parts; line < (part + 1) * lines / parts; line++) {
        const char *row = (const char *)w + ((size_t)(panel.row + line / lines_per_row) * (size_t)k + (size_t)panel.k0) * bytes;
        _mm_prefetch(row + (line % lines_per_row) * 64, EK_PREFETCH_HINT);
    }
}

#define EK_OUTER_CASE(n) \
    case n: EK_ROWS_NAME(outer_tile)(n, panel, kn, xi, k, yi, ldy, cols, accumulate); break;

/* Y[m×n] = X·Wᵀ for weight rows [row_begin, row_end) of fp32, fp16 or bf16 weights (`kind` as load_weights) by
   packed outer products; false (nothing written) when the panel's memory could not be had. */
EK_ROWS_TARGET EK_ROWS_INLINE bool EK_ROWS_NAME(gemm_float_outer)(const int kind, const void *w, int64_t k, const float *x,
                                                                  int64_t m, float *y, int64_t ldy, int64_t row_begin,
                                                                  int64_t row_end) {
    float *panel = aligned_alloc(64, (EK_OUTER_KC * EK_OUTER_NR + (kind == 0 ? 0 : 8 * EK_OUTER_KC)) * sizeof(float));
    if (panel == NULL) return false;
    float *widened = panel + EK_OUTER_KC * EK_OUTER_NR;
    const int64_t kblocks = (k + EK_OUTER_KC - 1) / EK_OUTER_KC;
    const int64_t kc = EK_OUTER_EVEN_K ? ((k + kblocks - 1) / kblocks + 7) / 8 * 8 : EK_OUTER_KC; /* ≤ EK_OUTER_KC */
    const int64_t group = EK_OUTER_NB > 0 ? EK_OUTER_NB : row_end - row_begin;
    for (int64_t n0 = row_begin; n0 < row_end; n0 += group) {
        const int64_t n1 = n0 + EK_ROWS_NAME(outer_span)(n0, row_end, group);
        for (int64_t k0 = 0; k0 < k; k0 += kc) {
            const int64_t kn = EK_ROWS_NAME(outer_span)(k0, k, kc);
            const bool accumulate = k0 > 0;
            for (int64_t i0 = 0; i0 < m; i0 += EK_OUTER_MC) {
                const int64_t mc = EK_ROWS_NAME(outer_span)(i0, m, EK_OUTER_MC);
                const int64_t tiles = (mc + EK_OUTER_MR - 1) / EK_OUTER_MR;
                for (int64_t r = n0; r < n1; r += EK_OUTER_NR) {
                    const int64_t cols = EK_ROWS_NAME(outer_span)(r, n1, EK_OUTER_NR);
                    EK_ROWS_NAME(outer_pack)(kind, w, k, r, cols, k0, kn, widened, panel);
                    const ek_outer_panel next = EK_OUTER_PREFETCH ? EK_ROWS_NAME(outer_next)(r, n0, n1, row_end, group, k0, kn, k, kc)
                                                                  : (ek_outer_panel){0, 0, 0, 0};
                    for (int64_t i = i0; i < i0 + mc; i += EK_OUTER_MR) {
                        const float *xi = x + i * k + k0;
                        float *yi = y + i * ldy + r;
                        switch ((int)EK_ROWS_NAME(outer_span)(i, i0 + mc, EK_OUTER_MR)) {
#if defined(EK_ROWS_512)
                            EK_OUTER_CASE(12) EK_OUTER_CASE(11) EK_OUTER_CASE(10) EK_OUTER_CASE(9) EK_OUTER_CASE(8)
                            EK_OUTER_CASE(7)
#endif
                            EK_OUTER_CASE(6) EK_OUTER_CASE(5) EK_OUTER_CASE(4) EK_OUTER_CASE(3) EK_OUTER_CASE(2)
                            EK_OUTER_CASE(1)
                        default: break;
                        }
                        if (next.cols > 0) EK_ROWS_NAME(outer_prefetch)(kind, w, k, next, (i - i0) / EK_OUTER_MR, tiles);
                    }
                }
            }
        }
    }
    free(panel);
    return true;
}
