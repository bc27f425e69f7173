/*
 * dequant_ref.c — the scalar oracles for the formats of ek_rows.h: one
 * function per format turning a row of GGUF blocks into fp32. These define,
 * for Ember, which element each bit belongs to; they are checked against the
 * numpy dequantizers of the `gguf` package on fixtures made by llama.cpp's
 * llama-quantize (Tests/KernelTests/Fixtures).
 *
 * Each value is computed as scale × integer (minus minimum × sub-scale) with
 * one rounding per product, the way GGUF's own dequantizers do.
 */
#include "quant_impl.h"
#include "ek_rows.h"

static float f16(ek_fp16 h) { return ek_fp16_to_fp32(h); }

static uint32_t q5_high_bits(const uint8_t qh[4]) {
    return (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
}

static void dequantize_q5_0(const ek_block_q5_0 *x, float *y, int64_t blocks) {
    for (int64_t b = 0; b < blocks; b++, y += EK_BLOCK) {
        float d = f16(x[b].d);
        uint32_t high = q5_high_bits(x[b].qh);
        for (int j = 0; j < 16; j++) {
            int low = (x[b].qs[j] & 0x0f) | (int)((high >> j) & 1) << 4;
            int up = (x[b].qs[j] >> 4) | (int)((high >> (j + 16)) & 1) << 4;
            y[j] = (float)(low - 16) * d;
            y[j + 16] = (float)(up - 16) * d;
        }
    }
}

static void dequantize_q5_1(const ek_block_q5_1 *x, float *y, int64_t blocks) {
    for (int64_t b = 0; b < blocks; b++, y += EK_BLOCK) {
        float d = f16(x[b].d), m = f16(x[b].m);
        uint32_t high = q5_high_bits(x[b].qh);
        for (int j = 0; j < 16; j++) {
            int low = (x[b].qs[j] & 0x0f) | (int)((high >> j) & 1) << 4;
            int up = (x[b].qs[j] >> 4) | (int)((high >> (j + 16)) & 1) << 4;
            float a = (float)low * d, c = (float)up * d;
            y[j] = a + m;
            y[j + 16] = c + m;
        }
    }
}

static void dequantize_iq4_nl(const ek_block_iq4_nl *x, float *y, int64_t blocks) {
    for (int64_t b = 0; b < blocks; b++, y += EK_BLOCK) {
        float d = f16(x[b].d);
        for (int j = 0; j < 16; j++) {
            y[j] = d * (float)ek_iq4_values[x[b].qs[j] & 0x0f];
            y[j + 16] = d * (float)ek_iq4_values[x[b].qs[j] >> 4];
        }
    }
}

/* Q2_K: element 128h + 32s + l (half h, shift s = 0…3, l = 0…31) is bits 2s…2s+1 of qs[32h + l];
   its sub-block of 16 is 8h + 2s + l/16. */
static void dequantize_q2_k(const ek_block_q2_k *x, float *y, int64_t blocks) {
    for (int64_t b = 0; b < blocks; b++, y += EK_SUPER_BLOCK) {
        float d = f16(x[b].d), dmin = f16(x[b].dmin);
        for (int e = 0; e < EK_SUPER_BLOCK; e++) {
            int h = e / 128, s = (e % 128) / 32, l = e % 32, sub = 8 * h + 2 * s + l / 16;
            int q = (x[b].qs[32 * h + l] >> (2 * s)) & 3;
            float scale = d * (float)(x[b].scales[sub] & 0x0f), min = dmin * (float)(x[b].scales[sub] >> 4);
            float v = scale * (float)q;
            y[e] = v - min;
        }
    }
}

/* Q3_K: as Q2_K for the low two bits; the third is bit 4h + s of hmask[l] (set: q as is, clear: q − 4). */
static void dequantize_q3_k(const ek_block_q3_k *x, float *y, int64_t blocks) {
    for (int64_t b = 0; b < blocks; b++, y += EK_SUPER_BLOCK) {
        float d = f16(x[b].d);
        for (int e = 0; e < EK_SUPER_BLOCK; e++) {
            int h = e / 128, s = (e % 128) / 32, l = e % 32, sub = 8 * h + 2 * s + l / 16;
            int q = (x[b].qs[32 * h + l] >> (2 * s)) & 3;
            if (!((x[b].hmask[l] >> (4 * h + s)) & 1)) q -= 4;
            float scale = d * (float)(ek_q3_k_scale(x[b].scales, sub) - 32);
            y[e] = scale * (float)q;
        }
    }
}

/* Q4_K: element 64c + l (l < 32) is the low nibble of qs[32c + l], sub-block 2c; 64c + 32 + l the
   high nibble, sub-block 2c + 1. */
static void dequantize_q4_k(const ek_block_q4_k *x, float *y, int64_t blocks) {
    for (int64_t b = 0; b < blocks; b++, y += EK_SUPER_BLOCK) {
        float d = f16(x[b].d), dmin = f16(x[b].dmin);
        for (int e = 0; e < EK_SUPER_BLOCK; e++) {
            int c = e / 64, high = (e % 64) / 32, l = e % 32;
            uint8_t scale, min;
            ek_k4_scale_min(x[b].scales, 2 * c + high, &scale, &min);
            int q = high ? x[b].qs[32 * c + l] >> 4 : x[b].qs[32 * c + l] & 0x0f;
            float ds = d * (float)scale, dm = dmin * (float)min;
            float v = ds * (float)q;
            y[e] = v - dm;
        }
    }
}

/* Q5_K: Q4_K's nibbles plus a fifth bit, bit 2c + high of qh[l]. */
static void dequantize_q5_k(const ek_block_q5_k *x, float *y, int64_t blocks) {
    for (int64_t b = 0; b < blocks; b++, y += EK_SUPER_BLOCK) {
        float d = f16(x[b].d), dmin = f16(x[b].dmin);
        for (int e = 0; e < EK_SUPER_BLOCK; e++) {
            int c = e / 64, high = (e % 64) / 32, l = e % 32, sub = 2 * c + high;
            uint8_t scale, min;
            ek_k4_scale_min(x[b].scales, sub, &scale, &min);
            int q = high ? x[b].qs[32 * c + l] >> 4 : x[b].qs[32 * c + l] & 0x0f;
            q |= ((x[b].qh[l] >> sub) & 1) << 4;
            float ds = d * (float)scale, dm = dmin * (float)min;
            float v = ds * (float)q;
            y[e] = v - dm;
        }
    }
}

/* Q6_K: in half h (128 elements), element 32s + l (s = 0…3) takes its low four bits from ql[64h + l]
   (s = 0), ql[64h + 32 + l] (s = 1), their high nibbles (s = 2, 3), and bits 2s…2s+1 of qh[32h + l];
   its sub-block of 16 is 8h + 2s + l/16. */
static void dequantize_q6_k(const ek_block_q6_k *x, float *y, int64_t blocks) {
    for (int64_t b = 0; b < blocks; b++, y += EK_SUPER_BLOCK) {
        float d = f16(x[b].d);
        for (int e = 0; e < EK_SUPER_BLOCK; e++) {
            int h = e / 128, s = (e % 128) / 32, l = e % 32, sub = 8 * h + 2 * s + l / 16;
            uint8_t low_byte = x[b].ql[64 * h + 32 * (s & 1) + l];
            int q = (s < 2 ? low_byte & 0x0f : low_byte >> 4) | ((x[b].qh[32 * h + l] >> (2 * s)) & 3) << 4;
            float scale = d * (float)x[b].scales[sub];
            y[e] = scale * (float)(q - 32);
        }
    }
}

static void dequantize_iq4_xs(const ek_block_iq4_xs *x, float *y, int64_t blocks) {
    for (int64_t b = 0; b < blocks; b++) {
        float d = f16(x[b].d);
        for (int s = 0; s < 8; s++, y += EK_BLOCK) {
            float dl = d * (float)(ek_iq4_xs_scale(&x[b], s) - 32);
            const uint8_t *qs = x[b].qs + 16 * s;
            for (int j = 0; j < 16; j++) {
                y[j] = dl * (float)ek_iq4_values[qs[j] & 0x0f];
                y[j + 16] = dl * (float)ek_iq4_values[qs[j] >> 4];
            }
        }
    }
}

ek_status ek_dequantize_row_other_ref(ek_format format, const void *blocks, float *y, int64_t k) {
    int64_t n = k / ek_format_block_elements(format);
    switch (format) {
    case EK_FORMAT_Q5_0: dequantize_q5_0(blocks, y, n); return EK_OK;
    case EK_FORMAT_Q5_1: dequantize_q5_1(blocks, y, n); return EK_OK;
    case EK_FORMAT_IQ4_NL: dequantize_iq4_nl(blocks, y, n); return EK_OK;
    case EK_FORMAT_Q2_K: dequantize_q2_k(blocks, y, n); return EK_OK;
    case EK_FORMAT_Q3_K: dequantize_q3_k(blocks, y, n); return EK_OK;
    case EK_FORMAT_Q4_K: dequantize_q4_k(blocks, y, n); return EK_OK;
    case EK_FORMAT_Q5_K: dequantize_q5_k(blocks, y, n); return EK_OK;
    case EK_FORMAT_Q6_K: dequantize_q6_k(blocks, y, n); return EK_OK;
    case EK_FORMAT_IQ4_XS: dequantize_iq4_xs(blocks, y, n); return EK_OK;
    default: return EK_ERR_FORMAT;
    }
}
