/*
 * interleave.c — GGUF blocks ⇄ the interleaved layout (ek_interleaved.h),
 * the entry points, and the oracle path: a row de-interleaved block by block
 * and handed to the row oracle (rows_ref.c).
 */
#include <string.h>
#include "interleaved_impl.h"
#include "rows_impl.h"

static const ek_il_kernels no_il_kernels = {0};

const ek_il_kernels *ek_il_kernels_for(ek_isa isa) {
    ek_cpu_features features = ek_cpu_features_detect();
    if (!ek_isa_supported(isa, &features)) return NULL;
    switch (isa) {
#if defined(__x86_64__)
    case EK_ISA_AVX2: case EK_ISA_AVX2_PLAIN: return &ek_il_kernels_avx2;
    case EK_ISA_AVX512: case EK_ISA_AVX512_PLAIN: return &ek_il_kernels_avx512;
    case EK_ISA_AVX512_NOVNNI: return &ek_il_kernels_avx512_novnni;
#endif
    default: return &no_il_kernels;
    }
}

size_t ek_il_group_block_bytes(ek_format format) {
    switch (format) {
    case EK_FORMAT_Q4_0: return EK_IL_Q4_0_BYTES;
    case EK_FORMAT_Q4_1: return EK_IL_Q4_1_BYTES;
    case EK_FORMAT_Q5_0: return EK_IL_Q5_0_BYTES;
    case EK_FORMAT_Q5_1: return EK_IL_Q5_1_BYTES;
    case EK_FORMAT_IQ4_NL: return EK_IL_IQ4_NL_BYTES;
    case EK_FORMAT_Q4_K: return EK_IL_Q4_K_BYTES;
    case EK_FORMAT_Q5_K: return EK_IL_Q5_K_BYTES;
    case EK_FORMAT_Q6_K: return EK_IL_Q6_K_BYTES;
    case EK_FORMAT_IQ4_XS: return EK_IL_IQ4_XS_BYTES;
    default: return 0;
    }
}

bool ek_format_interleavable(ek_format format) {
    return (unsigned)format < EK_FORMAT_COUNT && ek_il_group_block_bytes(format) != 0;
}

bool ek_interleaved_available(ek_isa isa, ek_format format) {
    const ek_il_kernels *kernels = ek_il_kernels_for(isa);
    return kernels != NULL && ek_format_interleavable(format) && kernels->gemm[format] != NULL;
}

size_t ek_interleaved_size(ek_format format, int64_t n, int64_t k) {
    int64_t elements = ek_format_block_elements(format);
    if (!ek_format_interleavable(format) || n < 0 || k < 0 || k % elements != 0) return 0;
    uint64_t groups = ((uint64_t)n + EK_INTERLEAVE_ROWS - 1) / EK_INTERLEAVE_ROWS, blocks = (uint64_t)(k / elements);
    uint64_t group_block = ek_il_group_block_bytes(format);
    if (blocks != 0 && groups > SIZE_MAX / blocks / group_block) return 0;
    return (size_t)(groups * blocks * group_block);
}

/* ------------------------------------------------ one block, one row --- */

/* Quant bytes of a row's block (count bytes at src) into lane r of consecutive 32-byte registers at dst. */
static void spread_lanes(const uint8_t *src, size_t count, uint8_t *dst, int r) {
    for (size_t q = 0; q < count / 4; q++) memcpy(dst + 32 * q + 4 * r, src + 4 * q, 4);
}

static void gather_lanes(const uint8_t *src, size_t count, uint8_t *dst, int r) {
    for (size_t q = 0; q < count / 4; q++) memcpy(dst + 4 * q, src + 32 * q + 4 * r, 4);
}

/* Eight five-bit values x_0 … x_7 as five bytes, and back: x_0 … x_4 in bits 0–4 of bytes 0 … 4; x_5's bits 0–2 and
   x_6's and x_7's likewise in bits 5–7 of bytes 0, 2 and 4; the top two bits of x_5 in bits 5–6 of byte 1, of x_6 in
   bits 5–6 of byte 3; bit 3 of x_7 in bit 7 of byte 1, bit 4 in bit 7 of byte 3. Byte c of a lane is register c of
   five, so five of the eight value registers are one AND and the others a few shifts (x86_interleaved_body.h,
   q5_values), where nibbles and a register of fifth bits took three instructions more for each. */
static void pack_five_bit_values(const uint8_t x[8], uint8_t out[5]) {
    for (int c = 0; c < 5; c++) out[c] = x[c];
    out[0] |= (uint8_t)((x[5] & 7) << 5);
    out[1] |= (uint8_t)((x[5] >> 3) << 5 | (x[7] >> 3 & 1) << 7);
    out[2] |= (uint8_t)((x[6] & 7) << 5);
    out[3] |= (uint8_t)((x[6] >> 3) << 5 | (x[7] >> 4) << 7);
    out[4] |= (uint8_t)((x[7] & 7) << 5);
}

static void unpack_five_bit_values(const uint8_t in[5], uint8_t x[8]) {
    for (int c = 0; c < 5; c++) x[c] = in[c] & 31;
    x[5] = (uint8_t)(in[0] >> 5 | (in[1] >> 5 & 3) << 3);
    x[6] = (uint8_t)(in[2] >> 5 | (in[3] >> 5 & 3) << 3);
    x[7] = (uint8_t)(in[4] >> 5 | (in[1] >> 7) << 3 | (in[3] >> 7) << 4);
}

/* Q5_x's 32 five-bit values of a row's block (element e: the nibble of qs[e % 16], low for e < 16, and bit e of
   qh) ⇄ lane r of five registers: byte t of the lane packs, for register v (0…7) of the tiles (elements 4v + t),
   value x_v (pack_five_bit_values). */
static void encode_q5_values(const uint8_t qs[16], const uint8_t qh[4], uint8_t *dst, int r) {
    const uint32_t bits = (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
    for (int t = 0; t < 4; t++) {
        uint8_t x[8], out[5];
        for (int v = 0; v < 8; v++) {
            const int e = 4 * v + t;
            x[v] = (uint8_t)((e < 16 ? qs[e] & 15 : qs[e - 16] >> 4) | ((bits >> e) & 1) << 4);
        }
        pack_five_bit_values(x, out);
        for (int c = 0; c < 5; c++) dst[32 * c + 4 * r + t] = out[c];
    }
}

static void decode_q5_values(const uint8_t *src, uint8_t qs[16], uint8_t qh[4], int r) {
    uint32_t bits = 0;
    memset(qs, 0, 16);
    for (int t = 0; t < 4; t++) {
        uint8_t in[5], x[8];
        for (int c = 0; c < 5; c++) in[c] = src[32 * c + 4 * r + t];
        unpack_five_bit_values(in, x);
        for (int v = 0; v < 8; v++) {
            const int e = 4 * v + t;
            if (e < 16) qs[e] = (uint8_t)((qs[e] & 0xf0) | (x[v] & 15));
            else qs[e - 16] = (uint8_t)((qs[e - 16] & 0x0f) | (x[v] & 15) << 4);
            bits |= (uint32_t)(x[v] >> 4) << e;
        }
    }
    for (int i = 0; i < 4; i++) qh[i] = (uint8_t)(bits >> (8 * i));
}

/* Q5_K's 256 five-bit values of a row's block (element 32s + i: the nibble of qs[32·(s / 2) + i], low for even s, and
   bit s of qh[i]) ⇄ lane r of 40 registers: for each g (0…7) five registers at 160·g, byte t of the lane packing
   x_s = element 32s + 4g + t for the eight sub-blocks s (pack_five_bit_values) — the eight value registers of a g
   from five, as Q5_0's from its block's five. */
static void encode_q5_k_values(const uint8_t qs[128], const uint8_t qh[32], uint8_t *dst, int r) {
    for (int g = 0; g < 8; g++) {
        for (int t = 0; t < 4; t++) {
            const int i = 4 * g + t;
            uint8_t x[8], out[5];
            for (int s = 0; s < 8; s++)
                x[s] = (uint8_t)((qs[32 * (s / 2) + i] >> (4 * (s % 2)) & 15) | ((qh[i] >> s) & 1) << 4);
            pack_five_bit_values(x, out);
            for (int c = 0; c < 5; c++) dst[160 * g + 32 * c + 4 * r + t] = out[c];
        }
    }
}

static void decode_q5_k_values(const uint8_t *src, uint8_t qs[128], uint8_t qh[32], int r) {
    for (int g = 0; g < 8; g++) {
        for (int t = 0; t < 4; t++) {
            const int i = 4 * g + t;
            uint8_t in[5], x[8];
            for (int c = 0; c < 5; c++) in[c] = src[160 * g + 32 * c + 4 * r + t];
            unpack_five_bit_values(in, x);
            qh[i] = 0;
            for (int s = 0; s < 4; s++) qs[32 * s + i] = (uint8_t)((x[2 * s] & 15) | (x[2 * s + 1] & 15) << 4);
            for (int s = 0; s < 8; s++) qh[i] |= (uint8_t)((x[s] >> 4) << s);
        }
    }
}

/* The 12-byte 6-bit scales and minimums of Q4_K/Q5_K from their values (the inverse of ek_k4_scale_min). */
static void encode_k4_scales(const uint8_t scale[8], const uint8_t min[8], uint8_t scales[12]) {
    for (int j = 0; j < 4; j++) {
        scales[j] = (uint8_t)((scale[j] & 63) | ((scale[j + 4] >> 4) << 6));
        scales[j + 4] = (uint8_t)((min[j] & 63) | ((min[j + 4] >> 4) << 6));
        scales[j + 8] = (uint8_t)((scale[j + 4] & 15) | ((min[j + 4] & 15) << 4));
    }
}

static void encode_iq4_xs_scales(const int8_t value[8], ek_block_iq4_xs *block) {
    uint16_t high = 0;
    memset(block->scales_l, 0, sizeof block->scales_l);
    for (int j = 0; j < 8; j++) {
        int s = value[j] + 32;
        block->scales_l[j / 2] |= (uint8_t)((s & 15) << (4 * (j % 2)));
        high |= (uint16_t)(((s >> 4) & 3) << (2 * j));
    }
    block->scales_h = high;
}

/* Q6_K's quants ⇄ the interleaved layout's: for each element position l (0…31) of half h the four 6-bit values
   u0…u3 (quarters: elements 128h + 32q + l) go as three bytes — A = u0 | (u3's bits 4-5) << 6 at ql[64h + l],
   B = u1 | (u3's bits 2-3) << 6 at ql[64h + 32 + l], C = u2 | (u3's bits 0-1) << 6 at qh[32h + l] — so that a
   register of three quarters' values is one AND, and only the fourth's is put together (x86_interleaved_body.h). */
static void encode_q6_k_quants(const ek_block_q6_k *b, uint8_t ql[128], uint8_t qh[64]) {
    for (int h = 0; h < 2; h++) {
        for (int l = 0; l < 32; l++) {
            uint8_t u[4];
            for (int q = 0; q < 4; q++) {
                const uint8_t low = b->ql[64 * h + 32 * (q & 1) + l];
                u[q] = (uint8_t)((q < 2 ? low & 15 : low >> 4) | ((b->qh[32 * h + l] >> (2 * q)) & 3) << 4);
            }
            ql[64 * h + l] = (uint8_t)(u[0] | (u[3] >> 4) << 6);
            ql[64 * h + 32 + l] = (uint8_t)(u[1] | ((u[3] >> 2) & 3) << 6);
            qh[32 * h + l] = (uint8_t)(u[2] | (u[3] & 3) << 6);
        }
    }
}

static void decode_q6_k_quants(const uint8_t ql[128], const uint8_t qh[64], ek_block_q6_k *b) {
    for (int h = 0; h < 2; h++) {
        for (int l = 0; l < 32; l++) {
            const uint8_t a = ql[64 * h + l], c = ql[64 * h + 32 + l], e = qh[32 * h + l];
            const uint8_t u[4] = {(uint8_t)(a & 63), (uint8_t)(c & 63), (uint8_t)(e & 63),
                                  (uint8_t)((a >> 6) << 4 | (c >> 6) << 2 | e >> 6)};
            b->ql[64 * h + l] = (uint8_t)((u[0] & 15) | (u[2] & 15) << 4);
            b->ql[64 * h + 32 + l] = (uint8_t)((u[1] & 15) | (u[3] & 15) << 4);
            b->qh[32 * h + l] = (uint8_t)(u[0] >> 4 | (u[1] >> 4) << 2 | (u[2] >> 4) << 4 | (u[3] >> 4) << 6);
        }
    }
}

/* Block `src` (GGUF) of row r into group-block gb; src NULL: a zero row. */
static void put_block(ek_format format, const uint8_t *src, uint8_t *gb, int r) {
    if (src == NULL) {
        /* A padding row: zero scales, zero quants; any bytes would do, zero keeps the copy deterministic. */
        static const uint8_t zero_block[256] = {0};
        src = zero_block;
    }
    switch (format) {
    case EK_FORMAT_Q4_0: {
        const ek_block_q4_0 *b = (const ek_block_q4_0 *)src;
        memcpy(gb + 2 * r, &b->d, 2);
        spread_lanes(b->qs, 16, gb + EK_IL_Q4_0_QUANTS, r);
        break;
    }
    case EK_FORMAT_Q4_1: {
        const ek_block_q4_1 *b = (const ek_block_q4_1 *)src;
        memcpy(gb + 2 * r, &b->d, 2);
        memcpy(gb + EK_IL_Q4_1_MINS + 2 * r, &b->m, 2);
        spread_lanes(b->qs, 16, gb + EK_IL_Q4_1_QUANTS, r);
        break;
    }
    case EK_FORMAT_Q5_0: {
        const ek_block_q5_0 *b = (const ek_block_q5_0 *)src;
        memcpy(gb + 2 * r, &b->d, 2);
        encode_q5_values(b->qs, b->qh, gb + EK_IL_Q5_0_QUANTS, r);
        break;
    }
    case EK_FORMAT_Q5_1: {
        const ek_block_q5_1 *b = (const ek_block_q5_1 *)src;
        memcpy(gb + 2 * r, &b->d, 2);
        memcpy(gb + EK_IL_Q5_1_MINS + 2 * r, &b->m, 2);
        encode_q5_values(b->qs, b->qh, gb + EK_IL_Q5_1_QUANTS, r);
        break;
    }
    case EK_FORMAT_IQ4_NL: {
        const ek_block_iq4_nl *b = (const ek_block_iq4_nl *)src;
        memcpy(gb + 2 * r, &b->d, 2);
        spread_lanes(b->qs, 16, gb + EK_IL_IQ4_NL_QUANTS, r);
        break;
    }
    case EK_FORMAT_Q4_K: case EK_FORMAT_Q5_K: {
        const bool five = format == EK_FORMAT_Q5_K;
        const uint8_t *scales = five ? ((const ek_block_q5_k *)src)->scales : ((const ek_block_q4_k *)src)->scales;
        const uint8_t *qs = five ? ((const ek_block_q5_k *)src)->qs : ((const ek_block_q4_k *)src)->qs;
        memcpy(gb + 2 * r, src, 2);
        memcpy(gb + EK_IL_K_DMIN + 2 * r, src + 2, 2);
        for (int s = 0; s < 8; s++) {
            uint8_t scale, min;
            ek_k4_scale_min(scales, s, &scale, &min);
            gb[EK_IL_K_SCALES + 8 * s + r] = scale;
            gb[EK_IL_K_MINS + 16 * (s / 2) + 2 * r + s % 2] = min;
        }
        if (five) encode_q5_k_values(qs, ((const ek_block_q5_k *)src)->qh, gb + EK_IL_Q5_K_VALUES, r);
        else spread_lanes(qs, 128, gb + EK_IL_Q4_K_QUANTS, r);
        break;
    }
    case EK_FORMAT_Q6_K: {
        const ek_block_q6_k *b = (const ek_block_q6_k *)src;
        memcpy(gb + 2 * r, &b->d, 2);
        for (int s = 0; s < 16; s++) gb[EK_IL_Q6_K_SCALES + 16 * (s / 2) + 2 * r + s % 2] = (uint8_t)b->scales[s];
        uint8_t ql[128], qh[64];
        encode_q6_k_quants(b, ql, qh);
        spread_lanes(ql, 128, gb + EK_IL_Q6_K_QUANTS, r);
        spread_lanes(qh, 64, gb + EK_IL_Q6_K_HIGH, r);
        break;
    }
    case EK_FORMAT_IQ4_XS: {
        const ek_block_iq4_xs *b = (const ek_block_iq4_xs *)src;
        memcpy(gb + 2 * r, &b->d, 2);
        for (int s = 0; s < 8; s++) gb[EK_IL_IQ4_XS_SCALES + 8 * s + r] = (uint8_t)(int8_t)(ek_iq4_xs_scale(b, s) - 32);
        spread_lanes(b->qs, 128, gb + EK_IL_IQ4_XS_QUANTS, r);
        break;
    }
    default:
        break;
    }
}

/* Row r's block back from group-block gb into dst (GGUF). */
static void get_block(ek_format format, const uint8_t *gb, int r, uint8_t *dst) {
    switch (format) {
    case EK_FORMAT_Q4_0: {
        ek_block_q4_0 *b = (ek_block_q4_0 *)dst;
        memcpy(&b->d, gb + 2 * r, 2);
        gather_lanes(gb + EK_IL_Q4_0_QUANTS, 16, b->qs, r);
        break;
    }
    case EK_FORMAT_Q4_1: {
        ek_block_q4_1 *b = (ek_block_q4_1 *)dst;
        memcpy(&b->d, gb + 2 * r, 2);
        memcpy(&b->m, gb + EK_IL_Q4_1_MINS + 2 * r, 2);
        gather_lanes(gb + EK_IL_Q4_1_QUANTS, 16, b->qs, r);
        break;
    }
    case EK_FORMAT_Q5_0: {
        ek_block_q5_0 *b = (ek_block_q5_0 *)dst;
        memcpy(&b->d, gb + 2 * r, 2);
        decode_q5_values(gb + EK_IL_Q5_0_QUANTS, b->qs, b->qh, r);
        break;
    }
    case EK_FORMAT_Q5_1: {
        ek_block_q5_1 *b = (ek_block_q5_1 *)dst;
        memcpy(&b->d, gb + 2 * r, 2);
        memcpy(&b->m, gb + EK_IL_Q5_1_MINS + 2 * r, 2);
        decode_q5_values(gb + EK_IL_Q5_1_QUANTS, b->qs, b->qh, r);
        break;
    }
    case EK_FORMAT_IQ4_NL: {
        ek_block_iq4_nl *b = (ek_block_iq4_nl *)dst;
        memcpy(&b->d, gb + 2 * r, 2);
        gather_lanes(gb + EK_IL_IQ4_NL_QUANTS, 16, b->qs, r);
        break;
    }
    case EK_FORMAT_Q4_K: case EK_FORMAT_Q5_K: {
        const bool five = format == EK_FORMAT_Q5_K;
        uint8_t scale[8], min[8];
        for (int s = 0; s < 8; s++) {
            scale[s] = gb[EK_IL_K_SCALES + 8 * s + r];
            min[s] = gb[EK_IL_K_MINS + 16 * (s / 2) + 2 * r + s % 2];
        }
        memcpy(dst, gb + 2 * r, 2);
        memcpy(dst + 2, gb + EK_IL_K_DMIN + 2 * r, 2);
        encode_k4_scales(scale, min, five ? ((ek_block_q5_k *)dst)->scales : ((ek_block_q4_k *)dst)->scales);
        if (five) decode_q5_k_values(gb + EK_IL_Q5_K_VALUES, ((ek_block_q5_k *)dst)->qs, ((ek_block_q5_k *)dst)->qh, r);
        else gather_lanes(gb + EK_IL_Q4_K_QUANTS, 128, ((ek_block_q4_k *)dst)->qs, r);
        break;
    }
    case EK_FORMAT_Q6_K: {
        ek_block_q6_k *b = (ek_block_q6_k *)dst;
        memcpy(&b->d, gb + 2 * r, 2);
        for (int s = 0; s < 16; s++) b->scales[s] = (int8_t)gb[EK_IL_Q6_K_SCALES + 16 * (s / 2) + 2 * r + s % 2];
        uint8_t ql[128], qh[64];
        gather_lanes(gb + EK_IL_Q6_K_QUANTS, 128, ql, r);
        gather_lanes(gb + EK_IL_Q6_K_HIGH, 64, qh, r);
        decode_q6_k_quants(ql, qh, b);
        break;
    }
    case EK_FORMAT_IQ4_XS: {
        ek_block_iq4_xs *b = (ek_block_iq4_xs *)dst;
        int8_t value[8];
        memcpy(&b->d, gb + 2 * r, 2);
        for (int s = 0; s < 8; s++) value[s] = (int8_t)gb[EK_IL_IQ4_XS_SCALES + 8 * s + r];
        encode_iq4_xs_scales(value, b);
        gather_lanes(gb + EK_IL_IQ4_XS_QUANTS, 128, b->qs, r);
        break;
    }
    default:
        break;
    }
}

/* ------------------------------------------------------- entry points --- */

static ek_status check_matrix(ek_format format, int64_t n, int64_t k) {
    if (!ek_format_interleavable(format)) return EK_ERR_FORMAT;
    if (n < 0 || k < 0 || k % ek_format_block_elements(format) != 0) return EK_ERR_SHAPE;
    if (n > 0 && k > 0 && ek_interleaved_size(format, n, k) == 0) return EK_ERR_SHAPE;
    return EK_OK;
}

ek_status ek_interleave_weights(ek_format format, const void *gguf, int64_t n, int64_t k, void *out, size_t out_bytes) {
    if (gguf == NULL || out == NULL) return EK_ERR_NULL_POINTER;
    ek_status status = check_matrix(format, n, k);
    if (status != EK_OK) return status;
    if (out_bytes < ek_interleaved_size(format, n, k)) return EK_ERR_BUFFER_TOO_SMALL;
    const int64_t blocks = k / ek_format_block_elements(format), groups = (n + EK_INTERLEAVE_ROWS - 1) / EK_INTERLEAVE_ROWS;
    const size_t block_bytes = ek_format_block_bytes(format), group_block = ek_il_group_block_bytes(format);
    for (int64_t g = 0; g < groups; g++)
        for (int64_t b = 0; b < blocks; b++) {
            uint8_t *gb = (uint8_t *)out + (size_t)(g * blocks + b) * group_block;
            memset(gb, 0, group_block);
            for (int r = 0; r < EK_INTERLEAVE_ROWS; r++) {
                int64_t row = g * EK_INTERLEAVE_ROWS + r;
                const uint8_t *src = row < n ? (const uint8_t *)gguf + ((size_t)row * (size_t)blocks + (size_t)b) * block_bytes : NULL;
                put_block(format, src, gb, r);
            }
        }
    return EK_OK;
}

ek_status ek_deinterleave_weights(ek_format format, const void *interleaved, int64_t n, int64_t k, void *gguf,
                                  size_t gguf_bytes) {
    if (interleaved == NULL || gguf == NULL) return EK_ERR_NULL_POINTER;
    ek_status status = check_matrix(format, n, k);
    if (status != EK_OK) return status;
    const int64_t blocks = k / ek_format_block_elements(format);
    const size_t block_bytes = ek_format_block_bytes(format), group_block = ek_il_group_block_bytes(format);
    if ((uint64_t)n * (uint64_t)blocks > SIZE_MAX / block_bytes || gguf_bytes < (size_t)n * (size_t)blocks * block_bytes)
        return EK_ERR_BUFFER_TOO_SMALL;
    for (int64_t row = 0; row < n; row++)
        for (int64_t b = 0; b < blocks; b++) {
            const uint8_t *gb = (const uint8_t *)interleaved + (size_t)((row / EK_INTERLEAVE_ROWS) * blocks + b) * group_block;
            get_block(format, gb, (int)(row % EK_INTERLEAVE_ROWS), (uint8_t *)gguf + ((size_t)row * (size_t)blocks + (size_t)b) * block_bytes);
        }
    return EK_OK;
}

/* The oracle path: each block of each row de-interleaved and dotted by the row oracle, summed in block order. */
static void gemm_interleaved_oracle(ek_format format, const uint8_t *w, int64_t blocks, const void *act,
                                    size_t act_row_bytes, int64_t m, float *y, int64_t ldy, int64_t row_begin,
                                    int64_t row_end) {
    const size_t group_block = ek_il_group_block_bytes(format);
    const size_t act_block = act_row_bytes / (size_t)blocks;
    uint8_t block[256];
    for (int64_t i = 0; i < m; i++) {
        const uint8_t *a = (const uint8_t *)act + (size_t)i * act_row_bytes;
        for (int64_t row = row_begin; row < row_end; row++) {
            float sum = 0.0f;
            for (int64_t b = 0; b < blocks; b++) {
                get_block(format, w + (size_t)((row / EK_INTERLEAVE_ROWS) * blocks + b) * group_block,
                          (int)(row % EK_INTERLEAVE_ROWS), block);
                float term = ek_row_dot_ref(format, block, 1, a + (size_t)b * act_block);
                sum = sum + term;
            }
            y[i * ldy + row] = sum;
        }
    }
}

ek_status ek_gemm_interleaved(ek_isa isa, ek_format format, const void *w, int64_t n, int64_t k, const void *act,
                              int64_t m, float *y, int64_t ldy, int64_t row_begin, int64_t row_end) {
    if (w == NULL || act == NULL || y == NULL) return EK_ERR_NULL_POINTER;
    ek_status status = check_matrix(format, n, k);
    if (status != EK_OK) return status;
    if (m < 0 || ldy < n) return EK_ERR_SHAPE;
    if (row_begin < 0 || row_end < row_begin || row_end > n) return EK_ERR_RANGE;
    const ek_il_kernels *kernels = ek_il_kernels_for(isa);
    if (kernels == NULL) return EK_ERR_ISA_UNSUPPORTED;
    if (m == 0 || row_begin == row_end) return EK_OK;
    const int64_t blocks = k / ek_format_block_elements(format);
    if (blocks == 0) {
        for (int64_t i = 0; i < m; i++)
            for (int64_t r = row_begin; r < row_end; r++) y[i * ldy + r] = 0.0f;
        return EK_OK;
    }
    const size_t act_row_bytes = ek_row_activation_size(format, 1, k);
    ek_il_kernel kernel = kernels->gemm[format];
    if (m == 1 && kernels->gemv_amd[format] != NULL && ek_cpu_features_detect().amd) kernel = kernels->gemv_amd[format];
    if (kernel != NULL) {
        kernel(w, blocks, act, act_row_bytes, m, y, ldy, row_begin, row_end);
    } else {
        gemm_interleaved_oracle(format, w, blocks, act, act_row_bytes, m, y, ldy, row_begin, row_end);
    }
    return EK_OK;
}
