/*
 * arm_neon_rows.c — the row kernels (ek_rows.h) on arm64 NEON with SDOT, for the GGUF types that are not packed:
 * Q5_0, Q5_1, IQ4_NL (per 32) and Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS (per 256), and fp16/bf16 weights.
 *
 * Every weight block is decoded once per tile of up to four activation rows into signed bytes, sixteen to a
 * register (one sub-block of 16, or half of one of 32): unsigned values (Q4_K 0…15, Q5_K and Q5_1 0…31, Q2_K 0…3)
 * are valid signed bytes as they are; Q5_0, Q3_K, Q6_K and the IQ4 tables decode straight to their signed values,
 * so no offset sums are needed. SDOT multiplies a register by sixteen activation bytes into four int32 partial
 * sums, the sub-block's integer scale multiplies them (MLA by a scalar), and the block is scaled once in fp32;
 * minimums (Q2_K, Q4_K, Q5_K) come off as Σ min·bsum from the activations' sums of 16. The integer sums are the
 * oracle's exactly; only the fp32 accumulation over blocks rounds differently.
 */
#if defined(__aarch64__)
#include <arm_neon.h>
#include <string.h>
#include "quant_impl.h"
#include "rows_impl.h"

#define EK_NEON __attribute__((target("arch=armv8.2-a+dotprod")))
#define EK_INLINE static inline __attribute__((always_inline))
#define EK_NEON_ROWS_TILE 4

/* A 256-value block as signed bytes: value j·16 + l is v[j][l]; sub-block j (of 16) has integer scale
   scale[j] and minimum min[j] (zero for formats without); the block is d·scale·v − dmin·min. */
typedef struct neon_super_block {
    int8x16_t v[16];
    int32_t scale[16], min[16];
    float d, dmin;
} neon_super_block;

EK_NEON EK_INLINE float load_f16(const void *p) {
    ek_fp16 h;
    memcpy(&h, p, sizeof h);
    return ek_fp16_to_fp32(h);
}

/* Bits of `bits` (8 a byte) as 0x10 in the bytes they stand for: byte l of the result is 0x10 where bit l is set. */
EK_NEON EK_INLINE uint8x16_t bits_to_16(uint16_t bits) {
    static const uint8_t select[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    uint8x16_t spread = vcombine_u8(vdup_n_u8((uint8_t)bits), vdup_n_u8((uint8_t)(bits >> 8)));
    return vandq_u8(vtstq_u8(spread, vld1q_u8(select)), vdupq_n_u8(0x10));
}

/* ------------------------------------------------------------- decoding -- */

EK_NEON EK_INLINE void decode_q4_k(const void *block, neon_super_block *out, bool five) {
    const ek_block_q4_k *b = block; /* Q5_K's fields before qs are Q4_K's plus qh */
    const uint8_t *qs = five ? ((const ek_block_q5_k *)block)->qs : b->qs;
    const uint8x16_t low = vdupq_n_u8(0x0f), one = vdupq_n_u8(1);
    uint8x16_t qh0 = vdupq_n_u8(0), qh1 = qh0;
    if (five) {
        qh0 = vld1q_u8(((const ek_block_q5_k *)block)->qh);
        qh1 = vld1q_u8(((const ek_block_q5_k *)block)->qh + 16);
    }
    for (int c = 0; c < 4; c++) {
        uint8x16_t r0 = vld1q_u8(qs + 32 * c), r1 = vld1q_u8(qs + 32 * c + 16);
        uint8x16_t v0 = vandq_u8(r0, low), v1 = vandq_u8(r1, low), v2 = vshrq_n_u8(r0, 4), v3 = vshrq_n_u8(r1, 4);
        if (five) {
            int8x16_t lo_shift = vdupq_n_s8((int8_t)(-2 * c)), hi_shift = vdupq_n_s8((int8_t)(-2 * c - 1));
            v0 = vorrq_u8(v0, vshlq_n_u8(vandq_u8(vshlq_u8(qh0, lo_shift), one), 4));
            v1 = vorrq_u8(v1, vshlq_n_u8(vandq_u8(vshlq_u8(qh1, lo_shift), one), 4));
            v2 = vorrq_u8(v2, vshlq_n_u8(vandq_u8(vshlq_u8(qh0, hi_shift), one), 4));
            v3 = vorrq_u8(v3, vshlq_n_u8(vandq_u8(vshlq_u8(qh1, hi_shift), one), 4));
        }
        out->v[4 * c] = vreinterpretq_s8_u8(v0);
        out->v[4 * c + 1] = vreinterpretq_s8_u8(v1);
        out->v[4 * c + 2] = vreinterpretq_s8_u8(v2);
        out->v[4 * c + 3] = vreinterpretq_s8_u8(v3);
    }
    for (int s = 0; s < 8; s++) {
        uint8_t scale, min;
        ek_k4_scale_min(b->scales, s, &scale, &min);
        out->scale[2 * s] = out->scale[2 * s + 1] = scale;
        out->min[2 * s] = out->min[2 * s + 1] = min;
    }
    out->d = load_f16(&b->d);
    out->dmin = load_f16(&b->dmin);
}

EK_NEON EK_INLINE void decode_q6_k(const ek_block_q6_k *b, neon_super_block *out) {
    const uint8x16_t low = vdupq_n_u8(0x0f), two = vdupq_n_u8(0x03);
    const int8x16_t offset = vdupq_n_s8(32);
    for (int h = 0; h < 2; h++) {
        for (int i = 0; i < 2; i++) { /* the two 16-byte halves of each 32-byte row of ql and qh */
            uint8x16_t a = vld1q_u8(b->ql + 64 * h + 16 * i), c = vld1q_u8(b->ql + 64 * h + 32 + 16 * i);
            uint8x16_t q = vld1q_u8(b->qh + 32 * h + 16 * i);
            uint8x16_t u[4] = {vorrq_u8(vandq_u8(a, low), vshlq_n_u8(vandq_u8(q, two), 4)),
                               vorrq_u8(vandq_u8(c, low), vshlq_n_u8(vandq_u8(vshrq_n_u8(q, 2), two), 4)),
                               vorrq_u8(vshrq_n_u8(a, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(q, 4), two), 4)),
                               vorrq_u8(vshrq_n_u8(c, 4), vshlq_n_u8(vshrq_n_u8(q, 6), 4))};
            for (int s = 0; s < 4; s++) out->v[8 * h + 2 * s + i] = vsubq_s8(vreinterpretq_s8_u8(u[s]), offset);
        }
    }
    for (int j = 0; j < 16; j++) {
        out->scale[j] = b->scales[j];
        out->min[j] = 0;
    }
    out->d = load_f16(&b->d);
    out->dmin = 0.0f;
}

/* Q2_K and Q3_K: element 128h + 32s + l is bits 2s…2s+1 of qs[32h + l]; Q3_K's third bit is bit 4h + s of
   hmask[l] (clear: the value is 4 less). */
EK_NEON EK_INLINE void decode_q23_k(const void *block, neon_super_block *out, bool three) {
    const ek_block_q2_k *b2 = block;
    const ek_block_q3_k *b3 = block;
    const uint8_t *qs = three ? b3->qs : b2->qs;
    const uint8x16_t two = vdupq_n_u8(0x03), one = vdupq_n_u8(1);
    for (int h = 0; h < 2; h++) {
        for (int i = 0; i < 2; i++) {
            uint8x16_t q = vld1q_u8(qs + 32 * h + 16 * i);
            uint8x16_t mask = three ? vld1q_u8(b3->hmask + 16 * i) : vdupq_n_u8(0);
            for (int s = 0; s < 4; s++) {
                uint8x16_t u = vandq_u8(vshlq_u8(q, vdupq_n_s8((int8_t)(-2 * s))), two);
                int8x16_t v = vreinterpretq_s8_u8(u);
                if (three) {
                    uint8x16_t high = vandq_u8(vshlq_u8(mask, vdupq_n_s8((int8_t)(-(4 * h + s)))), one);
                    v = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(u, vshlq_n_u8(high, 2))), vdupq_n_s8(4));
                }
                out->v[8 * h + 2 * s + i] = v;
            }
        }
    }
    for (int j = 0; j < 16; j++) {
        out->scale[j] = three ? ek_q3_k_scale(b3->scales, j) - 32 : b2->scales[j] & 0x0f;
        out->min[j] = three ? 0 : b2->scales[j] >> 4;
    }
    out->d = load_f16(three ? &b3->d : &b2->d);
    out->dmin = three ? 0.0f : load_f16(&b2->dmin);
}

EK_NEON EK_INLINE void decode_iq4_xs(const ek_block_iq4_xs *b, neon_super_block *out) {
    const int8x16_t table = vld1q_s8(ek_iq4_values);
    const uint8x16_t low = vdupq_n_u8(0x0f);
    for (int s = 0; s < 8; s++) {
        uint8x16_t q = vld1q_u8(b->qs + 16 * s);
        out->v[2 * s] = vqtbl1q_s8(table, vandq_u8(q, low));
        out->v[2 * s + 1] = vqtbl1q_s8(table, vshrq_n_u8(q, 4));
        out->scale[2 * s] = out->scale[2 * s + 1] = ek_iq4_xs_scale(b, s) - 32;
        out->min[2 * s] = out->min[2 * s + 1] = 0;
    }
    out->d = load_f16(&b->d);
    out->dmin = 0.0f;
}

EK_NEON EK_INLINE void decode_super(ek_format format, const void *block, neon_super_block *out) {
    switch (format) {
    case EK_FORMAT_Q2_K: decode_q23_k(block, out, false); break;
    case EK_FORMAT_Q3_K: decode_q23_k(block, out, true); break;
    case EK_FORMAT_Q4_K: decode_q4_k(block, out, false); break;
    case EK_FORMAT_Q5_K: decode_q4_k(block, out, true); break;
    case EK_FORMAT_Q6_K: decode_q6_k(block, out); break;
    default: decode_iq4_xs(block, out); break;
    }
}

/* ---------------------------------------------------------- per-256 tile -- */

/* One weight row of super-blocks against `tile` (1…4, a constant after inlining) rows of Q8_K activations. */
EK_NEON EK_INLINE void super_tile(ek_format format, const uint8_t *row, size_t block_bytes, int64_t blocks,
                                  const uint8_t *act, size_t act_row_bytes, const int tile, float *out) {
    const bool has_min = format == EK_FORMAT_Q2_K || format == EK_FORMAT_Q4_K || format == EK_FORMAT_Q5_K;
    float acc[EK_NEON_ROWS_TILE] = {0};
    neon_super_block w;
    for (int64_t b = 0; b < blocks; b++) {
        decode_super(format, row + (size_t)b * block_bytes, &w);
        for (int t = 0; t < tile; t++) {
            const ek_block_q8_k *a = (const ek_block_q8_k *)(act + (size_t)t * act_row_bytes) + b;
            int32x4_t sum = vdupq_n_s32(0);
            for (int j = 0; j < 16; j++)
                sum = vmlaq_n_s32(sum, vdotq_s32(vdupq_n_s32(0), w.v[j], vld1q_s8(a->qs + 16 * j)), w.scale[j]);
            float block = w.d * (float)vaddvq_s32(sum);
            if (has_min) {
                int32_t mins = 0;
                for (int j = 0; j < 16; j++) mins += w.min[j] * a->bsums[j];
                block -= w.dmin * (float)mins;
            }
            acc[t] += a->d * block;
        }
    }
    for (int t = 0; t < tile; t++) out[t] = acc[t];
}

/* ----------------------------------------------------------- per-32 tile -- */

/* Q5_0 (`kind` 0: u − 16), Q5_1 (1: u, plus m·s) and IQ4_NL (2: table values) against per-32 activations. */
EK_NEON EK_INLINE void small_tile(const int kind, const uint8_t *row, size_t block_bytes, int64_t blocks,
                                  const uint8_t *act, size_t act_row_bytes, const int tile, float *out) {
    const uint8x16_t low = vdupq_n_u8(0x0f);
    const int8x16_t table = vld1q_s8(ek_iq4_values);
    float acc[EK_NEON_ROWS_TILE] = {0};
    for (int64_t b = 0; b < blocks; b++) {
        const uint8_t *block = row + (size_t)b * block_bytes;
        float d = load_f16(block), m = 0.0f;
        int8x16_t v0, v1;
        if (kind == 2) {
            uint8x16_t q = vld1q_u8(((const ek_block_iq4_nl *)block)->qs);
            v0 = vqtbl1q_s8(table, vandq_u8(q, low));
            v1 = vqtbl1q_s8(table, vshrq_n_u8(q, 4));
        } else {
            const uint8_t *qh = kind == 0 ? ((const ek_block_q5_0 *)block)->qh : ((const ek_block_q5_1 *)block)->qh;
            const uint8_t *qs = kind == 0 ? ((const ek_block_q5_0 *)block)->qs : ((const ek_block_q5_1 *)block)->qs;
            uint32_t high;
            memcpy(&high, qh, sizeof high);
            uint8x16_t q = vld1q_u8(qs);
            uint8x16_t u0 = vorrq_u8(vandq_u8(q, low), bits_to_16((uint16_t)high));
            uint8x16_t u1 = vorrq_u8(vshrq_n_u8(q, 4), bits_to_16((uint16_t)(high >> 16)));
            v0 = vreinterpretq_s8_u8(u0);
            v1 = vreinterpretq_s8_u8(u1);
            if (kind == 0) {
                v0 = vsubq_s8(v0, vdupq_n_s8(16));
                v1 = vsubq_s8(v1, vdupq_n_s8(16));
            } else {
                m = load_f16(block + 2);
            }
        }
        for (int t = 0; t < tile; t++) {
            const ek_block_q8_act *a = (const ek_block_q8_act *)(act + (size_t)t * act_row_bytes) + b;
            int32x4_t sum = vdotq_s32(vdotq_s32(vdupq_n_s32(0), v0, vld1q_s8(a->qs)), v1, vld1q_s8(a->qs + 16));
            acc[t] += d * a->d * (float)vaddvq_s32(sum);
            if (kind == 1) acc[t] += m * a->s;
        }
    }
    for (int t = 0; t < tile; t++) out[t] = acc[t];
}

/* ---------------------------------------------------------------- drivers -- */

/* Weight rows [row_begin, row_end), activation rows in tiles of four: tile_fn(args…, tile, out) for each, `tile`
   a constant per case so the tile's loops unroll (args may name row, block_bytes, blocks, a and act_row_bytes). */
#define EK_NEON_ROWS_DRIVER(name, tile_fn, ...)                                                                       \
    EK_NEON static void name(const uint8_t *w, size_t row_bytes, int64_t blocks, const void *act, size_t act_row_bytes, \
                             int64_t m, float *y, int64_t ldy, int64_t row_begin, int64_t row_end) {                  \
        const size_t block_bytes = row_bytes / (size_t)blocks;                                                        \
        (void)block_bytes; /* the half kernels' tiles take the whole row */                                        \
        for (int64_t r = row_begin; r < row_end; r++) {                                                               \
            const uint8_t *row = w + (size_t)r * row_bytes;                                                           \
            for (int64_t i0 = 0; i0 < m; i0 += EK_NEON_ROWS_TILE) {                                                   \
                const uint8_t *a = (const uint8_t *)act + (size_t)i0 * act_row_bytes;                                \
                float out[EK_NEON_ROWS_TILE];                                                                         \
                const int tile = (int)(m - i0 < EK_NEON_ROWS_TILE ? m - i0 : EK_NEON_ROWS_TILE);                      \
                switch (tile) {                                                                                       \
                case 4: tile_fn(__VA_ARGS__, 4, out); break;                                                          \
                case 3: tile_fn(__VA_ARGS__, 3, out); break;                                                          \
                case 2: tile_fn(__VA_ARGS__, 2, out); break;                                                          \
                default: tile_fn(__VA_ARGS__, 1, out); break;                                                         \
                }                                                                                                     \
                for (int t = 0; t < tile; t++) y[(i0 + t) * ldy + r] = out[t];                                        \
            }                                                                                                         \
        }                                                                                                             \
    }
#define EK_NEON_SUPER(name, format) EK_NEON_ROWS_DRIVER(name, super_tile, format, row, block_bytes, blocks, a, act_row_bytes)
#define EK_NEON_SMALL(name, kind) EK_NEON_ROWS_DRIVER(name, small_tile, kind, row, block_bytes, blocks, a, act_row_bytes)

EK_NEON_SUPER(gemm_q2_k, EK_FORMAT_Q2_K)
EK_NEON_SUPER(gemm_q3_k, EK_FORMAT_Q3_K)
EK_NEON_SUPER(gemm_q4_k, EK_FORMAT_Q4_K)
EK_NEON_SUPER(gemm_q5_k, EK_FORMAT_Q5_K)
EK_NEON_SUPER(gemm_q6_k, EK_FORMAT_Q6_K)
EK_NEON_SUPER(gemm_iq4_xs, EK_FORMAT_IQ4_XS)
EK_NEON_SMALL(gemm_q5_0, 0)
EK_NEON_SMALL(gemm_q5_1, 1)
EK_NEON_SMALL(gemm_iq4_nl, 2)

/* ------------------------------------------------------- fp16 and bf16 -- */

EK_NEON EK_INLINE float32x4_t widen4(const uint16_t *p, const bool bf16) {
    uint16x4_t h = vld1_u16(p);
    if (bf16) return vreinterpretq_f32_u32(vshll_n_u16(h, 16));
    return vcvt_f32_f16(vreinterpret_f16_u16(h));
}

EK_NEON EK_INLINE float widen1(uint16_t h, const bool bf16) {
    if (!bf16) return ek_fp16_to_fp32(h);
    uint32_t bits = (uint32_t)h << 16;
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

/* One weight row against `tile` activation rows: each eight widened weights shared by the tile, two chains a row. */
EK_NEON EK_INLINE void half_tile(const bool bf16, const uint16_t *row, int64_t k, const float *x, int64_t ldx,
                                 const int tile, float *out) {
    float32x4_t acc[EK_NEON_ROWS_TILE][2];
    for (int t = 0; t < tile; t++) acc[t][0] = acc[t][1] = vdupq_n_f32(0.0f);
    int64_t j = 0;
    for (; j + 8 <= k; j += 8) {
        float32x4_t w0 = widen4(row + j, bf16), w1 = widen4(row + j + 4, bf16);
        for (int t = 0; t < tile; t++) {
            acc[t][0] = vfmaq_f32(acc[t][0], w0, vld1q_f32(x + t * ldx + j));
            acc[t][1] = vfmaq_f32(acc[t][1], w1, vld1q_f32(x + t * ldx + j + 4));
        }
    }
    for (int t = 0; t < tile; t++) {
        float sum = vaddvq_f32(vaddq_f32(acc[t][0], acc[t][1]));
        for (int64_t jj = j; jj < k; jj++) sum += widen1(row[jj], bf16) * x[t * ldx + jj];
        out[t] = sum;
    }
}

/* The half kernel through the rows driver: one "block" of k 16-bit weights a row, activation rows of k floats. */
#define EK_NEON_HALF(name, bf16)                                                                                  \
    EK_NEON_ROWS_DRIVER(name, half_tile, bf16, (const uint16_t *)row, (int64_t)(row_bytes / 2), (const float *)a, \
                        (int64_t)(row_bytes / 2))
EK_NEON_HALF(gemm_f16_rows, false)
EK_NEON_HALF(gemm_bf16_rows, true)

EK_NEON static void gemm_half(bool bf16, const uint16_t *w, int64_t k, const float *x, int64_t m, float *y, int64_t ldy,
                              int64_t row_begin, int64_t row_end) {
    const size_t row_bytes = (size_t)k * 2;
    if (bf16) gemm_bf16_rows((const uint8_t *)w, row_bytes, 1, x, row_bytes * 2, m, y, ldy, row_begin, row_end);
    else gemm_f16_rows((const uint8_t *)w, row_bytes, 1, x, row_bytes * 2, m, y, ldy, row_begin, row_end);
}

const ek_row_kernels ek_row_kernels_neon = {
    .gemm = {
        [EK_FORMAT_Q5_0] = gemm_q5_0,
        [EK_FORMAT_Q5_1] = gemm_q5_1,
        [EK_FORMAT_IQ4_NL] = gemm_iq4_nl,
        [EK_FORMAT_Q2_K] = gemm_q2_k,
        [EK_FORMAT_Q3_K] = gemm_q3_k,
        [EK_FORMAT_Q4_K] = gemm_q4_k,
        [EK_FORMAT_Q5_K] = gemm_q5_k,
        [EK_FORMAT_Q6_K] = gemm_q6_k,
        [EK_FORMAT_IQ4_XS] = gemm_iq4_xs,
    },
    .half = gemm_half,
};
#endif /* __aarch64__ */
