/* ek_sgemm.h — the portable fp32 matmul of the CPU route. */
#ifndef EK_SGEMM_H
#define EK_SGEMM_H

#include <stdint.h>
#include "ek_status.h"

/* Y[m×n] = X[m×k]·Wᵀ (W n×k, row-major) over weight rows [row_begin, row_end). */
ek_status ek_sgemm_portable(const float *x, const float *w, float *y, int64_t m, int64_t n, int64_t k,
                            int64_t row_begin, int64_t row_end);

#endif
