/*
 * sgemm_portable.c — the CPU route's fp32 matmul: plain C, no BLAS, no ISA
 * attributes, so it builds and runs anywhere. Y = X·Wᵀ, W stored n×k (the
 * weight layout), over weight rows [row_begin, row_end). Four rows of W at
 * a time share each load of X; the compiler vectorises the inner loop.
 */
#include "ek_quant.h"
#include "ek_sgemm.h"

ek_status ek_sgemm_portable(const float *x, const float *w, float *y, int64_t m, int64_t n, int64_t k,
                            int64_t row_begin, int64_t row_end) {
    if (x == NULL || w == NULL || y == NULL) return EK_ERR_NULL_POINTER;
    if (m < 0 || n < 0 || k < 0) return EK_ERR_SHAPE;
    if (row_begin < 0 || row_end < row_begin || row_end > n) return EK_ERR_RANGE;
    for (int64_t i = 0; i < m; i++) {
        const float *xi = x + i * k;
        int64_t r = row_begin;
        for (; r + 4 <= row_end; r += 4) {
            const float *w0 = w + r * k, *w1 = w0 + k, *w2 = w1 + k, *w3 = w2 + k;
            float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
            for (int64_t j = 0; j < k; j++) {
                float v = xi[j];
                s0 += v * w0[j];
                s1 += v * w1[j];
                s2 += v * w2[j];
                s3 += v * w3[j];
            }
            y[i * n + r] = s0;
            y[i * n + r + 1] = s1;
            y[i * n + r + 2] = s2;
            y[i * n + r + 3] = s3;
        }
        for (; r < row_end; r++) {
            const float *wr = w + r * k;
            float s = 0;
            for (int64_t j = 0; j < k; j++) s += xi[j] * wr[j];
            y[i * n + r] = s;
        }
    }
    return EK_OK;
}
