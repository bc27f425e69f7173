/*
 * pack.c — GGUF blocks → the packed layout described in quant_impl.h, and
 * the scalar kernels over that layout (the path EMBER_ISA=scalar runs, and
 * what arm64 without dot-product instructions runs).
 */
#include <string.h>
#include "quant_impl.h"

size_t ek_packed_size(ek_format format, int64_t n, int64_t k) {
    if (!ek_format_packable(format) || n < 0 || k < 0 || k % EK_BLOCK != 0) return 0;
    uint64_t groups = ((uint64_t)n + EK_PACK_ROWS - 1) / EK_PACK_ROWS;
    uint64_t blocks = (uint64_t)k / EK_BLOCK;
    if (blocks != 0 && groups > SIZE_MAX / blocks / EK_GROUP_BLOCK_BYTES(format)) return 0;
    return (size_t)(groups * blocks * EK_GROUP_BLOCK_BYTES(format));
}

ek_status ek_pack_weights(ek_format format, const void *gguf, int64_t n, int64_t k, void *packed, size_t packed_bytes) {
    if (gguf == NULL || packed == NULL) return EK_ERR_NULL_POINTER;
    if (!ek_format_packable(format)) return EK_ERR_FORMAT;
    size_t block_bytes = ek_format_block_bytes(format);
    if (n < 0 || k < 0 || k % EK_BLOCK != 0) return EK_ERR_SHAPE;
    size_t needed = ek_packed_size(format, n, k);
    if (needed == 0 && n > 0 && k > 0) return EK_ERR_SHAPE;
    if (packed_bytes < needed) return EK_ERR_BUFFER_TOO_SMALL;

    const int64_t blocks = k / EK_BLOCK, groups = (n + EK_PACK_ROWS - 1) / EK_PACK_ROWS;
    const size_t group_block = EK_GROUP_BLOCK_BYTES(format), scale_bytes = EK_GROUP_SCALE_BYTES(format);
    uint8_t *out = packed;
    for (int64_t g = 0; g < groups; g++) {
        for (int64_t b = 0; b < blocks; b++) {
            uint8_t *gb = out + (size_t)(g * blocks + b) * group_block;
            ek_fp16 *d = (ek_fp16 *)gb;
            ek_fp16 *mins = (ek_fp16 *)(gb + 32);
            uint8_t *quants = gb + scale_bytes;
            for (int r = 0; r < EK_PACK_ROWS; r++) {
                int64_t row = g * EK_PACK_ROWS + r;
                const uint8_t *block = row < n
                    ? (const uint8_t *)gguf + ((size_t)row * (size_t)blocks + (size_t)b) * block_bytes
                    : NULL;
                ek_fp16 scale = 0, minimum = 0;
                if (block != NULL) {
                    memcpy(&scale, block, sizeof scale);
                    if (format == EK_FORMAT_Q4_1) memcpy(&minimum, block + 2, sizeof minimum);
                }
                memcpy(&d[r], &scale, sizeof scale);
                if (format == EK_FORMAT_Q4_1) memcpy(&mins[r], &minimum, sizeof minimum);
                /* Four bytes of a row at a time: 4-byte chunk c of row r goes to quants[c·64 + r·4]. */
                if (format == EK_FORMAT_Q8_0) {
                    const int8_t *qs = block ? ((const ek_block_q8_0 *)block)->qs : NULL;
                    for (int c = 0; c < 8; c++) {
                        uint32_t word = 0;
                        if (qs) memcpy(&word, qs + 4 * c, 4);
                        word ^= 0x80808080u;
                        memcpy(quants + c * 64 + r * 4, &word, 4);
                    }
                } else {
                    const uint8_t *qs = block ? block + (format == EK_FORMAT_Q4_1 ? 4 : 2) : NULL;
                    for (int c = 0; c < 4; c++) {
                        uint32_t word = 0x88888888u;
                        if (qs) memcpy(&word, qs + 4 * c, 4);
                        memcpy(quants + c * 64 + r * 4, &word, 4);
                    }
                }
            }
        }
    }
    return EK_OK;
}

/* ------------------------------------------------ scalar packed kernels -- */

static float load_fp16(const uint8_t *p) {
    ek_fp16 h;
    memcpy(&h, p, sizeof h);
    return ek_fp16_to_fp32(h);
}

static void gemm_scalar(ek_format format, const uint8_t *packed, int64_t blocks, const ek_block_q8_act *act,
                        int64_t m, float *y, int64_t ldy, int64_t row_begin, int64_t row_end) {
    const size_t group_block = EK_GROUP_BLOCK_BYTES(format), scale_bytes = EK_GROUP_SCALE_BYTES(format);
    for (int64_t i = 0; i < m; i++) {
        const ek_block_q8_act *a = act + i * blocks;
        for (int64_t row = row_begin; row < row_end; row++) {
            int64_t g = row / EK_PACK_ROWS;
            int r = (int)(row % EK_PACK_ROWS);
            float sum = 0.0f;
            for (int64_t b = 0; b < blocks; b++) {
                const uint8_t *gb = packed + (size_t)(g * blocks + b) * group_block;
                const uint8_t *quants = gb + scale_bytes;
                int32_t dot = 0;
                if (format == EK_FORMAT_Q8_0) {
                    for (int c = 0; c < 8; c++)
                        for (int t = 0; t < 4; t++)
                            dot += (int32_t)(int8_t)(quants[c * 64 + r * 4 + t] ^ 0x80u) * a[b].qs[4 * c + t];
                } else {
                    int offset = format == EK_FORMAT_Q4_0 ? 8 : 0;
                    for (int c = 0; c < 4; c++)
                        for (int t = 0; t < 4; t++) {
                            uint8_t byte = quants[c * 64 + r * 4 + t];
                            dot += ((int32_t)(byte & 0x0f) - offset) * a[b].qs[4 * c + t];
                            dot += ((int32_t)(byte >> 4) - offset) * a[b].qs[16 + 4 * c + t];
                        }
                }
                float scale = load_fp16(gb + 2 * r) * a[b].d;
                float term = (float)dot * scale;
                sum = sum + term;
                if (format == EK_FORMAT_Q4_1) {
                    float offset_term = load_fp16(gb + 32 + 2 * r) * a[b].s;
                    sum = sum + offset_term;
                }
            }
            y[i * ldy + row] = sum;
        }
    }
}

#define EK_SCALAR_GEMM(name, format)                                                                      \
    static void name(const uint8_t *packed, int64_t blocks, const ek_block_q8_act *act, int64_t m, float *y, \
                     int64_t ldy, int64_t row_begin, int64_t row_end) {                                     \
        gemm_scalar(format, packed, blocks, act, m, y, ldy, row_begin, row_end);                            \
    }
EK_SCALAR_GEMM(gemm_q8_0_scalar, EK_FORMAT_Q8_0)
EK_SCALAR_GEMM(gemm_q4_0_scalar, EK_FORMAT_Q4_0)
EK_SCALAR_GEMM(gemm_q4_1_scalar, EK_FORMAT_Q4_1)

static uint64_t read_stream_scalar(const void *data, size_t bytes) {
    const uint64_t *words = data;
    uint64_t sum = 0;
    for (size_t i = 0; i < bytes / 8; i++) sum ^= words[i];
    return sum;
}

const ek_isa_kernels ek_kernels_scalar = {
    .gemm = {gemm_q8_0_scalar, gemm_q4_0_scalar, gemm_q4_1_scalar},
    .quantize_act = ek_quantize_act_scalar,
    .read_stream = read_stream_scalar,
};
