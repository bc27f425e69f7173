/*
 * gemm_ref.c — the scalar oracle for every matrix kernel: GGUF blocks as
 * they lie in the file, activations quantized with the reference quantizer,
 * one output at a time, blocks in order.
 */
#include <stdlib.h>
#include "quant_impl.h"

/* Σ over one block of weight quant × activation quant, as GGUF defines the weight values. */
static int32_t block_dot(ek_format format, const void *w, const int8_t *x) {
    int32_t sum = 0;
    switch (format) {
    case EK_FORMAT_Q8_0: {
        const ek_block_q8_0 *b = w;
        for (int j = 0; j < EK_BLOCK; j++) sum += (int32_t)b->qs[j] * x[j];
        break;
    }
    case EK_FORMAT_Q4_0: {
        const ek_block_q4_0 *b = w;
        for (int j = 0; j < EK_BLOCK / 2; j++) {
            sum += ((int32_t)(b->qs[j] & 0x0f) - 8) * x[j];
            sum += ((int32_t)(b->qs[j] >> 4) - 8) * x[j + 16];
        }
        break;
    }
    case EK_FORMAT_Q4_1: {
        const ek_block_q4_1 *b = w;
        for (int j = 0; j < EK_BLOCK / 2; j++) {
            sum += (int32_t)(b->qs[j] & 0x0f) * x[j];
            sum += (int32_t)(b->qs[j] >> 4) * x[j + 16];
        }
        break;
    }
    default: break;
    }
    return sum;
}

static float weight_scale(ek_format format, const void *w) {
    switch (format) {
    case EK_FORMAT_Q8_0: return ek_fp16_to_fp32(((const ek_block_q8_0 *)w)->d);
    case EK_FORMAT_Q4_0: return ek_fp16_to_fp32(((const ek_block_q4_0 *)w)->d);
    case EK_FORMAT_Q4_1: return ek_fp16_to_fp32(((const ek_block_q4_1 *)w)->d);
    default: break;
    }
    return 0.0f;
}

ek_status ek_gemm_ref(ek_format format, const void *w, const float *x, float *y,
                      int64_t m, int64_t n, int64_t k, int64_t row_begin, int64_t row_end) {
    if (w == NULL || x == NULL || y == NULL) return EK_ERR_NULL_POINTER;
    if (!ek_format_packable(format)) return EK_ERR_FORMAT; /* the others: ek_gemm_rows */
    size_t block_bytes = ek_format_block_bytes(format);
    if (m < 0 || n < 0 || k < 0 || k % EK_BLOCK != 0) return EK_ERR_SHAPE;
    if (row_begin < 0 || row_end < row_begin || row_end > n) return EK_ERR_RANGE;
    int64_t blocks = k / EK_BLOCK;
    if (m == 0 || blocks == 0 || row_begin == row_end) {
        for (int64_t i = 0; i < m; i++)
            for (int64_t r = row_begin; r < row_end; r++) y[i * n + r] = 0.0f;
        return EK_OK;
    }
    /* One quantized activation row at a time: Q8_1 for Q4_1 weights, Q8_0 otherwise. */
    ek_block_q8_1 *xq = malloc((size_t)blocks * sizeof *xq);
    ek_block_q8_0 *xq0 = malloc((size_t)blocks * sizeof *xq0);
    if (xq == NULL || xq0 == NULL) {
        free(xq);
        free(xq0);
        return EK_ERR_OUT_OF_MEMORY;
    }
    for (int64_t i = 0; i < m; i++) {
        if (format == EK_FORMAT_Q4_1) {
            ek_quantize_row_q8_1_ref(x + i * k, xq, k);
        } else {
            ek_quantize_row_q8_0_ref(x + i * k, xq0, k);
        }
        for (int64_t r = row_begin; r < row_end; r++) {
            const uint8_t *row = (const uint8_t *)w + (size_t)r * (size_t)blocks * block_bytes;
            float sum = 0.0f;
            for (int64_t b = 0; b < blocks; b++) {
                const void *wb = row + (size_t)b * block_bytes;
                const int8_t *qs = format == EK_FORMAT_Q4_1 ? xq[b].qs : xq0[b].qs;
                float dx = ek_fp16_to_fp32(format == EK_FORMAT_Q4_1 ? xq[b].d : xq0[b].d);
                float scale = weight_scale(format, wb) * dx;
                float term = (float)block_dot(format, wb, qs) * scale;
                sum = sum + term;
                if (format == EK_FORMAT_Q4_1) {
                    float offset = ek_fp16_to_fp32(((const ek_block_q4_1 *)wb)->m) * ek_fp16_to_fp32(xq[b].s);
                    sum = sum + offset;
                }
            }
            y[i * n + r] = sum;
        }
    }
    free(xq);
    free(xq0);
    return EK_OK;
}
