/*
 * quant_ref.c — the scalar oracles: quantize and dequantize one row in each
 * GGUF format. Every SIMD row kernel must equal these bit for bit.
 *
 * Floating-point steps are written one per statement so no compiler fuses a
 * multiply and an add into an FMA (which would round differently).
 */
#include <math.h>
#include "quant_impl.h"

#define EK_CHECK_ROW(x, y, k)                                   \
    do {                                                        \
        if ((x) == NULL || (y) == NULL) return EK_ERR_NULL_POINTER; \
        if ((k) < 0 || (k) % EK_BLOCK != 0) return EK_ERR_SHAPE; \
    } while (0)

/* Q8_0 and Q8_1 share the scale and the rounding (to nearest, ties to even). */
/* max|x| over n values. */
static float abs_max(const float *x, int64_t n) {
    float amax = 0.0f;
    for (int64_t j = 0; j < n; j++) amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
    return amax;
}

static float q8_scale(const float *x, float *inverse) {
    const float amax = abs_max(x, EK_BLOCK);
    /* 127 / max in one division, as llama.cpp's x86 activation quantizers take it: 1 / (max / 127) rounds twice and
       moves some products across a half, a ±1 in a quant that SmolLM2's outlying channels turn into other tokens. */
    *inverse = amax != 0.0f ? 127.0f / amax : 0.0f;
    return amax / 127.0f;
}

static int32_t q8_quantize(const float *x, float inverse, int8_t *qs) {
    int32_t sum = 0;
    for (int j = 0; j < EK_BLOCK; j++) {
        float scaled = x[j] * inverse;
        int q = (int)nearbyintf(scaled);
        qs[j] = (int8_t)q;
        sum += q;
    }
    return sum;
}

ek_status ek_quantize_row_q8_0_ref(const float *x, ek_block_q8_0 *y, int64_t k) {
    EK_CHECK_ROW(x, y, k);
    for (int64_t b = 0; b < k / EK_BLOCK; b++) {
        float inverse;
        float d = q8_scale(x + b * EK_BLOCK, &inverse);
        y[b].d = ek_fp32_to_fp16(d);
        q8_quantize(x + b * EK_BLOCK, inverse, y[b].qs);
    }
    return EK_OK;
}

/* One block's values at 1/d, rounded half away from zero and clamped to [−limit, limit]. */
static void q8_quantize_limited(const float *x, float inverse, int limit, int8_t *qs) {
    for (int j = 0; j < EK_BLOCK; j++) {
        float q = roundf(x[j] * inverse);
        q = q > (float)limit ? (float)limit : (q < -(float)limit ? -(float)limit : q);
        qs[j] = (int8_t)q;
    }
}

ek_status ek_quantize_row_q8_0_limited(const float *x, ek_block_q8_0 *y, int64_t k, int limit) {
    EK_CHECK_ROW(x, y, k);
    if (limit < 1 || limit > 127) return EK_ERR_SHAPE;
    for (int64_t b = 0; b < k / EK_BLOCK; b++) {
        const float d = abs_max(x + b * EK_BLOCK, EK_BLOCK) / (float)limit;
        y[b].d = ek_fp32_to_fp16(d);
        q8_quantize_limited(x + b * EK_BLOCK, d != 0.0f ? 1.0f / d : 0.0f, limit, y[b].qs);
    }
    return EK_OK;
}

bool ek_q8_0_within_seven_bits(const ek_block_q8_0 *blocks, int64_t count) {
    if (blocks == NULL || count < 0) return false;
    for (int64_t b = 0; b < count; b++)
        for (int j = 0; j < EK_BLOCK; j++)
            if (blocks[b].qs[j] < -64 || blocks[b].qs[j] > 63) return false;
    return true;
}

ek_status ek_quantize_row_q8_0_row_scaled(const float *x, ek_block_q8_0 *y, int64_t k, int limit) {
    EK_CHECK_ROW(x, y, k);
    if (limit < 1 || limit > 127) return EK_ERR_SHAPE;
    const ek_fp16 stored = ek_fp32_to_fp16(abs_max(x, k) / (float)limit);
    const float d = ek_fp16_to_fp32(stored), inverse = d != 0.0f ? 1.0f / d : 0.0f;
    for (int64_t b = 0; b < k / EK_BLOCK; b++) {
        y[b].d = stored;
        q8_quantize_limited(x + b * EK_BLOCK, inverse, limit, y[b].qs);
    }
    return EK_OK;
}

bool ek_q8_0_rows_share_scales(const ek_block_q8_0 *blocks, int64_t rows, int64_t blocks_per_row) {
    if (blocks == NULL || rows < 0 || blocks_per_row < 0) return false;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t b = 1; b < blocks_per_row; b++)
            if (blocks[r * blocks_per_row + b].d != blocks[r * blocks_per_row].d) return false;
    return true;
}

ek_status ek_quantize_row_q8_1_ref(const float *x, ek_block_q8_1 *y, int64_t k) {
    EK_CHECK_ROW(x, y, k);
    for (int64_t b = 0; b < k / EK_BLOCK; b++) {
        float inverse;
        float d = q8_scale(x + b * EK_BLOCK, &inverse);
        int32_t sum = q8_quantize(x + b * EK_BLOCK, inverse, y[b].qs);
        float s = d * (float)sum;
        y[b].d = ek_fp32_to_fp16(d);
        y[b].s = ek_fp32_to_fp16(s);
    }
    return EK_OK;
}

ek_status ek_quantize_row_q4_0_ref(const float *x, ek_block_q4_0 *y, int64_t k) {
    EK_CHECK_ROW(x, y, k);
    for (int64_t b = 0; b < k / EK_BLOCK; b++) {
        const float *v = x + b * EK_BLOCK;
        /* The element of largest magnitude (the first, on ties) maps to −8. */
        float amax = 0.0f, extreme = 0.0f;
        for (int j = 0; j < EK_BLOCK; j++) {
            if (fabsf(v[j]) > amax) {
                amax = fabsf(v[j]);
                extreme = v[j];
            }
        }
        float d = extreme / -8.0f;
        float inverse = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = ek_fp32_to_fp16(d);
        for (int j = 0; j < EK_BLOCK / 2; j++) {
            float low = v[j] * inverse;
            low = low + 8.5f;
            float high = v[j + 16] * inverse;
            high = high + 8.5f;
            int ql = (int)low, qh = (int)high; /* truncation */
            if (ql > 15) ql = 15;
            if (qh > 15) qh = 15;
            y[b].qs[j] = (uint8_t)(ql | (qh << 4));
        }
    }
    return EK_OK;
}

ek_status ek_quantize_row_q4_1_ref(const float *x, ek_block_q4_1 *y, int64_t k) {
    EK_CHECK_ROW(x, y, k);
    for (int64_t b = 0; b < k / EK_BLOCK; b++) {
        const float *v = x + b * EK_BLOCK;
        float lo = v[0], hi = v[0];
        for (int j = 1; j < EK_BLOCK; j++) {
            if (v[j] < lo) lo = v[j];
            if (v[j] > hi) hi = v[j];
        }
        float d = (hi - lo) / 15.0f;
        float inverse = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = ek_fp32_to_fp16(d);
        y[b].m = ek_fp32_to_fp16(lo);
        for (int j = 0; j < EK_BLOCK / 2; j++) {
            float low = v[j] - lo;
            low = low * inverse;
            low = low + 0.5f;
            float high = v[j + 16] - lo;
            high = high * inverse;
            high = high + 0.5f;
            int ql = (int)low, qh = (int)high;
            if (ql > 15) ql = 15;
            if (qh > 15) qh = 15;
            y[b].qs[j] = (uint8_t)(ql | (qh << 4));
        }
    }
    return EK_OK;
}

ek_status ek_dequantize_row_q8_0_ref(const ek_block_q8_0 *x, float *y, int64_t k) {
    EK_CHECK_ROW(x, y, k);
    for (int64_t b = 0; b < k / EK_BLOCK; b++) {
        float d = ek_fp16_to_fp32(x[b].d);
        for (int j = 0; j < EK_BLOCK; j++) y[b * EK_BLOCK + j] = (float)x[b].qs[j] * d;
    }
    return EK_OK;
}

ek_status ek_dequantize_row_q4_0_ref(const ek_block_q4_0 *x, float *y, int64_t k) {
    EK_CHECK_ROW(x, y, k);
    for (int64_t b = 0; b < k / EK_BLOCK; b++) {
        float d = ek_fp16_to_fp32(x[b].d);
        for (int j = 0; j < EK_BLOCK / 2; j++) {
            y[b * EK_BLOCK + j] = (float)((x[b].qs[j] & 0x0f) - 8) * d;
            y[b * EK_BLOCK + j + 16] = (float)((x[b].qs[j] >> 4) - 8) * d;
        }
    }
    return EK_OK;
}

ek_status ek_dequantize_row_q4_1_ref(const ek_block_q4_1 *x, float *y, int64_t k) {
    EK_CHECK_ROW(x, y, k);
    for (int64_t b = 0; b < k / EK_BLOCK; b++) {
        float d = ek_fp16_to_fp32(x[b].d);
        float m = ek_fp16_to_fp32(x[b].m);
        for (int j = 0; j < EK_BLOCK / 2; j++) {
            float low = (float)(x[b].qs[j] & 0x0f) * d;
            float high = (float)(x[b].qs[j] >> 4) * d;
            y[b * EK_BLOCK + j] = low + m;
            y[b * EK_BLOCK + j + 16] = high + m;
        }
    }
    return EK_OK;
}

/* The oracle of the row-scaled activations: each block's quants and Σq at the row's one scale, which it returns. */
float ek_quantize_act_row_scaled_scalar(const float *x, int64_t blocks, const float *column_scales, ek_block_q8_act *act) {
    float amax = 0.0f;
    for (int64_t j = 0; j < blocks * EK_BLOCK; j++) {
        const float v = fabsf(column_scales ? x[j] * column_scales[j] : x[j]);
        amax = v > amax ? v : amax;
    }
    const float d = amax / 127.0f, inverse = d != 0.0f ? 1.0f / d : 0.0f;
    for (int64_t b = 0; b < blocks; b++) {
        float scaled[EK_BLOCK];
        for (int j = 0; j < EK_BLOCK; j++)
            scaled[j] = column_scales ? x[b * EK_BLOCK + j] * column_scales[b * EK_BLOCK + j] : x[b * EK_BLOCK + j];
        act[b].sum = q8_quantize(scaled, inverse, act[b].qs);
    }
    return d;
}

/* The activation quantizer of the scalar packed kernels: the oracle's numbers, kept in fp32. */
void ek_quantize_act_scalar(const float *x, int64_t blocks, ek_block_q8_act *act, bool q8_1) {
    for (int64_t b = 0; b < blocks; b++) {
        float inverse;
        float d = q8_scale(x + b * EK_BLOCK, &inverse);
        int32_t sum = q8_quantize(x + b * EK_BLOCK, inverse, act[b].qs);
        float s = d * (float)sum;
        act[b].d = ek_fp16_to_fp32(ek_fp32_to_fp16(d));
        act[b].s = q8_1 ? ek_fp16_to_fp32(ek_fp32_to_fp16(s)) : 0.0f;
        act[b].sum = sum;
        act[b].row_sum = 0;
    }
}
