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
 * Activation rows are taken in blocks of EK_OUTER_MC so that a block's KC columns stay in L2 across panels.
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
#ifndef EK_OUTER_KC
#define EK_OUTER_KC 256
#endif
#define EK_OUTER_MC 480 /* rows per block: 480 × 256 × 4 B = 480 KB of activations */

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
    for (int64_t k0 = 0; k0 < k; k0 += EK_OUTER_KC) {
        const int64_t kn = k - k0 < EK_OUTER_KC ? k - k0 : EK_OUTER_KC;
        const bool accumulate = k0 > 0;
        for (int64_t i0 = 0; i0 < m; i0 += EK_OUTER_MC) {
            const int64_t mc = m - i0 < EK_OUTER_MC ? m - i0 : EK_OUTER_MC;
            for (int64_t r = row_begin; r < row_end; r += EK_OUTER_NR) {
                const int64_t cols = row_end - r < EK_OUTER_NR ? row_end - r : EK_OUTER_NR;
                EK_ROWS_NAME(outer_pack)(kind, w, k, r, cols, k0, kn, widened, panel);
                for (int64_t i = i0; i < i0 + mc; i += EK_OUTER_MR) {
                    const float *xi = x + i * k + k0;
                    float *yi = y + i * ldy + r;
                    switch (i0 + mc - i < EK_OUTER_MR ? (int)(i0 + mc - i) : EK_OUTER_MR) {
#if defined(EK_ROWS_512)
                        EK_OUTER_CASE(12) EK_OUTER_CASE(11) EK_OUTER_CASE(10) EK_OUTER_CASE(9) EK_OUTER_CASE(8)
                        EK_OUTER_CASE(7)
#endif
                        EK_OUTER_CASE(6) EK_OUTER_CASE(5) EK_OUTER_CASE(4) EK_OUTER_CASE(3) EK_OUTER_CASE(2)
                        EK_OUTER_CASE(1)
                    default: break;
                    }
                }
            }
        }
    }
    free(panel);
    return true;
}
