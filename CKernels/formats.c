/*
 * formats.c — the facts of each GGUF block format: bytes and elements per
 * block, names, and the small decoders of packed scales shared by every
 * kernel (reference and SIMD).
 */
#include <string.h>
#include "ek_rows.h"

/* Sizes are checked against GGUF's at compile time: a layout mistake fails the build. */
_Static_assert(sizeof(ek_block_q5_0) == 22, "Q5_0 block");
_Static_assert(sizeof(ek_block_q5_1) == 24, "Q5_1 block");
_Static_assert(sizeof(ek_block_iq4_nl) == 18, "IQ4_NL block");
_Static_assert(sizeof(ek_block_q2_k) == 84, "Q2_K block");
_Static_assert(sizeof(ek_block_q3_k) == 110, "Q3_K block");
_Static_assert(sizeof(ek_block_q4_k) == 144, "Q4_K block");
_Static_assert(sizeof(ek_block_q5_k) == 176, "Q5_K block");
_Static_assert(sizeof(ek_block_q6_k) == 210, "Q6_K block");
_Static_assert(sizeof(ek_block_iq4_xs) == 136, "IQ4_XS block");

const int8_t ek_iq4_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

size_t ek_format_block_bytes(ek_format format) {
    switch (format) {
    case EK_FORMAT_Q8_0: return sizeof(ek_block_q8_0);
    case EK_FORMAT_Q4_0: return sizeof(ek_block_q4_0);
    case EK_FORMAT_Q4_1: return sizeof(ek_block_q4_1);
    case EK_FORMAT_Q5_0: return sizeof(ek_block_q5_0);
    case EK_FORMAT_Q5_1: return sizeof(ek_block_q5_1);
    case EK_FORMAT_IQ4_NL: return sizeof(ek_block_iq4_nl);
    case EK_FORMAT_Q2_K: return sizeof(ek_block_q2_k);
    case EK_FORMAT_Q3_K: return sizeof(ek_block_q3_k);
    case EK_FORMAT_Q4_K: return sizeof(ek_block_q4_k);
    case EK_FORMAT_Q5_K: return sizeof(ek_block_q5_k);
    case EK_FORMAT_Q6_K: return sizeof(ek_block_q6_k);
    case EK_FORMAT_IQ4_XS: return sizeof(ek_block_iq4_xs);
    case EK_FORMAT_COUNT: break;
    }
    return 0;
}

int64_t ek_format_block_elements(ek_format format) {
    if (ek_format_block_bytes(format) == 0) return 0;
    return format >= EK_FORMAT_Q2_K ? EK_SUPER_BLOCK : EK_BLOCK;
}

bool ek_format_packable(ek_format format) {
    return format == EK_FORMAT_Q8_0 || format == EK_FORMAT_Q4_0 || format == EK_FORMAT_Q4_1;
}

bool ek_format_super_activations(ek_format format) { return ek_format_block_elements(format) == EK_SUPER_BLOCK; }

bool ek_format_from_gguf(uint32_t type, ek_format *out) {
    ek_format format;
    switch (type) {
    case 2: format = EK_FORMAT_Q4_0; break;
    case 3: format = EK_FORMAT_Q4_1; break;
    case 6: format = EK_FORMAT_Q5_0; break;
    case 7: format = EK_FORMAT_Q5_1; break;
    case 8: format = EK_FORMAT_Q8_0; break;
    case 10: format = EK_FORMAT_Q2_K; break;
    case 11: format = EK_FORMAT_Q3_K; break;
    case 12: format = EK_FORMAT_Q4_K; break;
    case 13: format = EK_FORMAT_Q5_K; break;
    case 14: format = EK_FORMAT_Q6_K; break;
    case 20: format = EK_FORMAT_IQ4_NL; break;
    case 23: format = EK_FORMAT_IQ4_XS; break;
    default: return false;
    }
    if (out != NULL) *out = format;
    return true;
}

const char *ek_format_name(ek_format format) {
    static const char *const names[EK_FORMAT_COUNT] = {
        "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "iq4_xs",
    };
    return (unsigned)format < EK_FORMAT_COUNT ? names[format] : "unknown";
}

/* Byte offsets of a block's fp16 scale and, where there is one, its minimum (−1: none). */
static void scale_offsets(ek_format format, int *scale, int *min) {
    *min = -1;
    switch (format) {
    case EK_FORMAT_Q2_K: *scale = 80; *min = 82; break;
    case EK_FORMAT_Q3_K: *scale = 108; break;
    case EK_FORMAT_Q6_K: *scale = 208; break;
    case EK_FORMAT_Q4_1: case EK_FORMAT_Q5_1: case EK_FORMAT_Q4_K: case EK_FORMAT_Q5_K: *scale = 0; *min = 2; break;
    default: *scale = 0; break;
    }
}

ek_status ek_fill_random_blocks(ek_format format, uint64_t seed, void *blocks, int64_t count) {
    size_t bytes = ek_format_block_bytes(format);
    if (bytes == 0) return EK_ERR_FORMAT;
    if (blocks == NULL) return EK_ERR_NULL_POINTER;
    if (count < 0) return EK_ERR_SHAPE;
    uint64_t state = seed;
    uint8_t *out = blocks;
    int scale, min;
    scale_offsets(format, &scale, &min);
    for (int64_t b = 0; b < count; b++) {
        uint8_t *block = out + (size_t)b * bytes;
        for (size_t j = 0; j < bytes; j++) { /* splitmix64, one byte per step */
            state += 0x9E3779B97F4A7C15ull;
            uint64_t z = (state ^ (state >> 30)) * 0xBF58476D1CE4E5B9ull;
            z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
            block[j] = (uint8_t)(z ^ (z >> 31));
        }
        /* 0.002 … 0.02 for the scale, half that for the minimum, from the block's first random byte */
        float unit = (float)(block[bytes - 1] % 100) / 100.0f;
        ek_fp16 d = ek_fp32_to_fp16(0.002f + 0.018f * unit), m = ek_fp32_to_fp16(0.001f + 0.009f * unit);
        memcpy(block + scale, &d, sizeof d);
        if (min >= 0) memcpy(block + min, &m, sizeof m);
    }
    return EK_OK;
}
