/*
 * rows_ref.c — the scalar oracle of the row kernels (ek_rows.h): the
 * activation quantizers (per 32, per 256) and, per weight format, the dot
 * product of one GGUF row with one quantized activation row in integers
 * within each sub-block, scaled in fp32 once per block.
 *
 * Each weight block is first decoded to small integers — q[e] per element,
 * an integer scale and minimum per sub-block, and the fp32 factors they
 * multiply — by one decoder per format; one loop then does the arithmetic
 * for all of them. The decoders must agree with dequant_ref.c (tested).
 */
#include <math.h>
#include <string.h>
#include "quant_impl.h"
#include "ek_rows.h"
#include "rows_impl.h"

/* ------------------------------------------------------ activations --- */

void ek_quantize_act_q8_k_scalar(const float *x, int64_t blocks, ek_block_q8_k *act) {
    for (int64_t b = 0; b < blocks; b++) {
        const float *v = x + b * EK_SUPER_BLOCK;
        float amax = 0.0f;
        for (int j = 0; j < EK_SUPER_BLOCK; j++) {
            float a = fabsf(v[j]);
            if (a > amax) amax = a;
        }
        ek_block_q8_k *out = &act[b];
        out->reserved = 0;
        if (amax == 0.0f) {
            out->d = 0.0f;
            memset(out->qs, 0, sizeof out->qs);
            memset(out->bsums, 0, sizeof out->bsums);
            continue;
        }
        float inverse = 127.0f / amax;
        for (int j = 0; j < EK_SUPER_BLOCK; j++) {
            float scaled = v[j] * inverse;
            int q = (int)nearbyintf(scaled);
            out->qs[j] = (int8_t)(q > 127 ? 127 : q < -127 ? -127 : q);
        }
        for (int i = 0; i < 16; i++) {
            int sum = 0;
            for (int j = 0; j < 16; j++) sum += out->qs[16 * i + j];
            out->bsums[i] = (int16_t)sum;
        }
        out->d = 1.0f / inverse;
    }
}

/* ---------------------------------------------------------- decoders --- */

void ek_decode_block(ek_format format, const void *block, ek_decoded_block *out) {
    out->dmin = 0.0f;
    out->offset_m = 0.0f;
    for (int s = 0; s < 16; s++) out->min[s] = 0;
    switch (format) {
    case EK_FORMAT_Q8_0: {
        const ek_block_q8_0 *b = block;
        out->d = ek_fp16_to_fp32(b->d);
        out->sub_size = 32;
        out->scale[0] = 1;
        for (int j = 0; j < 32; j++) out->q[j] = b->qs[j];
        break;
    }
    case EK_FORMAT_Q4_0: case EK_FORMAT_Q4_1: case EK_FORMAT_IQ4_NL: {
        const uint8_t *qs = format == EK_FORMAT_Q4_1 ? ((const ek_block_q4_1 *)block)->qs
                          : format == EK_FORMAT_Q4_0 ? ((const ek_block_q4_0 *)block)->qs
                                                     : ((const ek_block_iq4_nl *)block)->qs;
        ek_fp16 d;
        memcpy(&d, block, sizeof d);
        out->d = ek_fp16_to_fp32(d);
        out->sub_size = 32;
        out->scale[0] = 1;
        for (int j = 0; j < 16; j++) {
            int low = qs[j] & 0x0f, high = qs[j] >> 4;
            if (format == EK_FORMAT_IQ4_NL) {
                low = ek_iq4_values[low];
                high = ek_iq4_values[high];
            } else if (format == EK_FORMAT_Q4_0) {
                low -= 8;
                high -= 8;
            }
            out->q[j] = (int8_t)low;
            out->q[j + 16] = (int8_t)high;
        }
        if (format == EK_FORMAT_Q4_1) out->offset_m = ek_fp16_to_fp32(((const ek_block_q4_1 *)block)->m);
        break;
    }
    case EK_FORMAT_Q5_0: case EK_FORMAT_Q5_1: {
        const uint8_t *qh = format == EK_FORMAT_Q5_0 ? ((const ek_block_q5_0 *)block)->qh : ((const ek_block_q5_1 *)block)->qh;
        const uint8_t *qs = format == EK_FORMAT_Q5_0 ? ((const ek_block_q5_0 *)block)->qs : ((const ek_block_q5_1 *)block)->qs;
        ek_fp16 d;
        memcpy(&d, block, sizeof d);
        out->d = ek_fp16_to_fp32(d);
        out->sub_size = 32;
        out->scale[0] = 1;
        uint32_t high = (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
        int offset = format == EK_FORMAT_Q5_0 ? 16 : 0;
        for (int j = 0; j < 16; j++) {
            out->q[j] = (int8_t)(((qs[j] & 0x0f) | (int)((high >> j) & 1) << 4) - offset);
            out->q[j + 16] = (int8_t)(((qs[j] >> 4) | (int)((high >> (j + 16)) & 1) << 4) - offset);
        }
        if (format == EK_FORMAT_Q5_1) out->offset_m = ek_fp16_to_fp32(((const ek_block_q5_1 *)block)->m);
        break;
    }
    case EK_FORMAT_Q2_K: case EK_FORMAT_Q3_K: {
        const uint8_t *qs = format == EK_FORMAT_Q2_K ? ((const ek_block_q2_k *)block)->qs : ((const ek_block_q3_k *)block)->qs;
        out->sub_size = 16;
        for (int e = 0; e < EK_SUPER_BLOCK; e++) {
            int h = e / 128, s = (e % 128) / 32, l = e % 32;
            int q = (qs[32 * h + l] >> (2 * s)) & 3;
            if (format == EK_FORMAT_Q3_K && !((((const ek_block_q3_k *)block)->hmask[l] >> (4 * h + s)) & 1)) q -= 4;
            out->q[e] = (int8_t)q;
        }
        /* Sub-block 8h + 2s + l/16 covers elements 128h + 32s + 16(l/16) …: sixteen in order. */
        if (format == EK_FORMAT_Q2_K) {
            const ek_block_q2_k *b = block;
            out->d = ek_fp16_to_fp32(b->d);
            out->dmin = ek_fp16_to_fp32(b->dmin);
            for (int s = 0; s < 16; s++) {
                out->scale[s] = b->scales[s] & 0x0f;
                out->min[s] = b->scales[s] >> 4;
            }
        } else {
            const ek_block_q3_k *b = block;
            out->d = ek_fp16_to_fp32(b->d);
            for (int s = 0; s < 16; s++) out->scale[s] = ek_q3_k_scale(b->scales, s) - 32;
        }
        break;
    }
    case EK_FORMAT_Q4_K: case EK_FORMAT_Q5_K: {
        const uint8_t *scales = format == EK_FORMAT_Q4_K ? ((const ek_block_q4_k *)block)->scales : ((const ek_block_q5_k *)block)->scales;
        const uint8_t *qs = format == EK_FORMAT_Q4_K ? ((const ek_block_q4_k *)block)->qs : ((const ek_block_q5_k *)block)->qs;
        ek_fp16 d[2];
        memcpy(d, block, sizeof d);
        out->d = ek_fp16_to_fp32(d[0]);
        out->dmin = ek_fp16_to_fp32(d[1]);
        out->sub_size = 32;
        for (int s = 0; s < 8; s++) {
            uint8_t scale, min;
            ek_k4_scale_min(scales, s, &scale, &min);
            out->scale[s] = scale;
            out->min[s] = min;
        }
        for (int e = 0; e < EK_SUPER_BLOCK; e++) {
            int c = e / 64, high = (e % 64) / 32, l = e % 32;
            int q = high ? qs[32 * c + l] >> 4 : qs[32 * c + l] & 0x0f;
            if (format == EK_FORMAT_Q5_K) q |= ((((const ek_block_q5_k *)block)->qh[l] >> (2 * c + high)) & 1) << 4;
            out->q[e] = (int8_t)q;
        }
        break;
    }
    case EK_FORMAT_Q6_K: {
        const ek_block_q6_k *b = block;
        out->d = ek_fp16_to_fp32(b->d);
        out->sub_size = 16;
        for (int s = 0; s < 16; s++) out->scale[s] = b->scales[s];
        for (int e = 0; e < EK_SUPER_BLOCK; e++) {
            int h = e / 128, s = (e % 128) / 32, l = e % 32;
            uint8_t low_byte = b->ql[64 * h + 32 * (s & 1) + l];
            int q = (s < 2 ? low_byte & 0x0f : low_byte >> 4) | ((b->qh[32 * h + l] >> (2 * s)) & 3) << 4;
            out->q[e] = (int8_t)(q - 32);
        }
        break;
    }
    case EK_FORMAT_IQ4_XS: {
        const ek_block_iq4_xs *b = block;
        out->d = ek_fp16_to_fp32(b->d);
        out->sub_size = 32;
        for (int s = 0; s < 8; s++) {
            out->scale[s] = ek_iq4_xs_scale(b, s) - 32;
            for (int j = 0; j < 16; j++) {
                out->q[32 * s + j] = ek_iq4_values[b->qs[16 * s + j] & 0x0f];
                out->q[32 * s + j + 16] = ek_iq4_values[b->qs[16 * s + j] >> 4];
            }
        }
        break;
    }
    default:
        break;
    }
}

/* ---------------------------------------------------------- the oracle - */

/* One weight row · one activation row: per block, integer sums per sub-block times integer scales,
   then d·d_act·Σ − dmin·d_act·Σ min·Σact (+ m·s for Q4_1/Q5_1), added in block order. */
float ek_row_dot_ref(ek_format format, const uint8_t *w, int64_t blocks, const void *act) {
    const size_t block_bytes = ek_format_block_bytes(format);
    const int64_t elements = ek_format_block_elements(format);
    const bool super = elements == EK_SUPER_BLOCK;
    ek_decoded_block decoded;
    float sum = 0.0f;
    for (int64_t b = 0; b < blocks; b++) {
        ek_decode_block(format, w + (size_t)b * block_bytes, &decoded);
        const int8_t *a = super ? ((const ek_block_q8_k *)act)[b].qs : ((const ek_block_q8_act *)act)[b].qs;
        float da = super ? ((const ek_block_q8_k *)act)[b].d : ((const ek_block_q8_act *)act)[b].d;
        int subs = (int)(elements / decoded.sub_size);
        int32_t sumi = 0, summ = 0;
        for (int s = 0; s < subs; s++) {
            int32_t dot = 0, asum = 0;
            for (int j = 0; j < decoded.sub_size; j++) {
                dot += (int32_t)decoded.q[s * decoded.sub_size + j] * a[s * decoded.sub_size + j];
                asum += a[s * decoded.sub_size + j];
            }
            sumi += decoded.scale[s] * dot;
            summ += decoded.min[s] * asum;
        }
        float scale = decoded.d * da;
        float term = (float)sumi * scale;
        sum = sum + term;
        if (decoded.dmin != 0.0f) {
            float min_scale = decoded.dmin * da;
            float min_term = (float)summ * min_scale;
            sum = sum - min_term;
        }
        if (format == EK_FORMAT_Q4_1 || format == EK_FORMAT_Q5_1) {
            float offset = decoded.offset_m * ((const ek_block_q8_act *)act)[b].s;
            sum = sum + offset;
        }
    }
    return sum;
}

void ek_gemm_rows_scalar(ek_format format, const uint8_t *w, size_t row_bytes, int64_t blocks, const void *act,
                         size_t act_row_bytes, int64_t m, float *y, int64_t ldy, int64_t row_begin, int64_t row_end) {
    for (int64_t i = 0; i < m; i++) {
        const void *a = (const uint8_t *)act + (size_t)i * act_row_bytes;
        for (int64_t r = row_begin; r < row_end; r++) y[i * ldy + r] = ek_row_dot_ref(format, w + (size_t)r * row_bytes, blocks, a);
    }
}

/* Half-precision weights: widened one at a time, summed in order. */
void ek_gemm_half_scalar(bool bf16, const uint16_t *w, int64_t k, const float *x, int64_t m, float *y, int64_t ldy,
                         int64_t row_begin, int64_t row_end) {
    for (int64_t i = 0; i < m; i++) {
        for (int64_t r = row_begin; r < row_end; r++) {
            const uint16_t *row = w + r * k;
            float sum = 0.0f;
            for (int64_t j = 0; j < k; j++) {
                float value;
                if (bf16) {
                    uint32_t bits = (uint32_t)row[j] << 16;
                    memcpy(&value, &bits, sizeof value);
                } else {
                    value = ek_fp16_to_fp32(row[j]);
                }
                float product = value * x[i * k + j];
                sum = sum + product;
            }
            y[i * ldy + r] = sum;
        }
    }
}

/* fp32 weights: products summed in order. */
void ek_gemm_f32_scalar(const float *w, int64_t k, const float *x, int64_t m, float *y, int64_t ldy, int64_t row_begin,
                        int64_t row_end) {
    for (int64_t i = 0; i < m; i++) {
        for (int64_t r = row_begin; r < row_end; r++) {
            const float *row = w + r * k;
            float sum = 0.0f;
            for (int64_t j = 0; j < k; j++) {
                float product = row[j] * x[i * k + j];
                sum = sum + product;
            }
            y[i * ldy + r] = sum;
        }
    }
}
