/*
 * arm_neon.c — arm64 NEON kernels with the dot-product instructions (SDOT).
 *
 * A 128-bit register holds four rows: each 64-byte chunk of a packed group is
 * four quarters of four rows, processed one after the other. SDOT multiplies
 * signed bytes by signed bytes and its lane-indexed form picks four
 * activation bytes from a register, so no broadcast is needed. Q4 nibbles
 * (0…15) are valid signed bytes; packed Q8_0 weights lose their +128 by an
 * XOR, so only Q4_0 needs its −8·Σq correction.
 */
#if defined(__aarch64__)
#include <arm_neon.h>
#include <string.h>
#include "quant_impl.h"

#define EK_NEON __attribute__((target("arch=armv8.2-a+dotprod")))
#define EK_INLINE static inline __attribute__((always_inline))

EK_NEON static void quantize_act_neon(const float *x, int64_t blocks, ek_block_q8_act *act, bool q8_1) {
    for (int64_t b = 0; b < blocks; b++) {
        const float *v = x + b * EK_BLOCK;
        float32x4_t values[8];
        float32x4_t amax = vdupq_n_f32(0.0f);
        for (int j = 0; j < 8; j++) {
            values[j] = vld1q_f32(v + 4 * j);
            amax = vmaxq_f32(amax, vabsq_f32(values[j]));
        }
        const float max = vmaxvq_f32(amax), d = max / 127.0f;
        const float inverse = max != 0.0f ? 127.0f / max : 0.0f; /* as the oracle's q8_scale */
        int32x4_t sum = vdupq_n_s32(0);
        for (int j = 0; j < 8; j += 2) {
            int32x4_t q0 = vcvtnq_s32_f32(vmulq_n_f32(values[j], inverse));     /* nearest, ties to even */
            int32x4_t q1 = vcvtnq_s32_f32(vmulq_n_f32(values[j + 1], inverse));
            sum = vaddq_s32(sum, vaddq_s32(q0, q1));
            int8x8_t bytes = vqmovn_s16(vcombine_s16(vqmovn_s32(q0), vqmovn_s32(q1)));
            vst1_s8(act[b].qs + 4 * j, bytes);
        }
        int32_t total = vaddvq_s32(sum);
        act[b].d = ek_fp16_to_fp32(ek_fp32_to_fp16(d));
        act[b].s = q8_1 ? ek_fp16_to_fp32(ek_fp32_to_fp16(d * (float)total)) : 0.0f;
        act[b].sum = total;
        act[b].row_sum = 0;
    }
}

EK_NEON EK_INLINE float32x4_t load_fp16x4(const uint8_t *p) {
    uint16_t h[4];
    memcpy(h, p, sizeof h);
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h)));
}

/* Four weight rows (quarter `quarter` of a group) against `tile` activation rows. */
EK_NEON EK_INLINE void quarter_tile(ek_format format, int tile, const uint8_t *gb, int quarter, int64_t blocks,
                                    const ek_block_q8_act *act, float32x4_t *acc) {
    const size_t group_block = EK_GROUP_BLOCK_BYTES(format), scale_bytes = EK_GROUP_SCALE_BYTES(format);
    const uint8x16_t low_mask = vdupq_n_u8(0x0f), flip = vdupq_n_u8(0x80);
    for (int i = 0; i < tile; i++) acc[i] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < blocks; b++, gb += group_block) {
        const uint8_t *quants = gb + scale_bytes + 16 * quarter;
        int8x16_t w[8];
        if (format == EK_FORMAT_Q8_0) {
            for (int c = 0; c < 8; c++) w[c] = vreinterpretq_s8_u8(veorq_u8(vld1q_u8(quants + 64 * c), flip));
        } else {
            for (int c = 0; c < 4; c++) {
                uint8x16_t raw = vld1q_u8(quants + 64 * c);
                w[c] = vreinterpretq_s8_u8(vandq_u8(raw, low_mask));
                w[4 + c] = vreinterpretq_s8_u8(vshrq_n_u8(raw, 4));
            }
        }
        const float32x4_t d = load_fp16x4(gb + 8 * quarter);
        float32x4_t mins = vdupq_n_f32(0.0f);
        if (format == EK_FORMAT_Q4_1) mins = load_fp16x4(gb + 32 + 8 * quarter);
        for (int i = 0; i < tile; i++) {
            const ek_block_q8_act *a = act + i * blocks + b;
            const int8x16_t x0 = vld1q_s8(a->qs), x1 = vld1q_s8(a->qs + 16);
            int32x4_t s0 = vdupq_n_s32(0), s1 = vdupq_n_s32(0);
            s0 = vdotq_laneq_s32(s0, w[0], x0, 0);
            s1 = vdotq_laneq_s32(s1, w[1], x0, 1);
            s0 = vdotq_laneq_s32(s0, w[2], x0, 2);
            s1 = vdotq_laneq_s32(s1, w[3], x0, 3);
            s0 = vdotq_laneq_s32(s0, w[4], x1, 0);
            s1 = vdotq_laneq_s32(s1, w[5], x1, 1);
            s0 = vdotq_laneq_s32(s0, w[6], x1, 2);
            s1 = vdotq_laneq_s32(s1, w[7], x1, 3);
            float32x4_t dot = vcvtq_f32_s32(vaddq_s32(s0, s1));
            if (format == EK_FORMAT_Q4_0) dot = vsubq_f32(dot, vdupq_n_f32(8.0f * (float)a->sum));
            acc[i] = vfmaq_f32(acc[i], dot, vmulq_n_f32(d, a->d));
            if (format == EK_FORMAT_Q4_1) acc[i] = vfmaq_n_f32(acc[i], mins, a->s);
        }
    }
}

EK_NEON EK_INLINE void store_rows(float *y, float32x4_t v, int64_t lo, int64_t hi) {
    if (lo == 0 && hi == 4) {
        vst1q_f32(y, v);
        return;
    }
    float lanes[4];
    vst1q_f32(lanes, v);
    for (int64_t r = lo; r < hi; r++) y[r] = lanes[r];
}

#define EK_NEON_TILE 4

EK_NEON EK_INLINE void gemm_neon(ek_format format, const uint8_t *packed, int64_t blocks, const ek_block_q8_act *act,
                                 int64_t m, float *y, int64_t ldy, int64_t row_begin, int64_t row_end) {
    const size_t group_block = EK_GROUP_BLOCK_BYTES(format);
    for (int64_t first = (row_begin / 4) * 4; first < row_end; first += 4) {
        const int64_t g = first / EK_PACK_ROWS;
        const int quarter = (int)((first / 4) % 4);
        const int64_t lo = row_begin > first ? row_begin - first : 0;
        const int64_t hi = row_end - first < 4 ? row_end - first : 4;
        const uint8_t *gb = packed + (size_t)g * (size_t)blocks * group_block;
        int64_t i = 0;
        for (; i + EK_NEON_TILE <= m; i += EK_NEON_TILE) {
            float32x4_t acc[EK_NEON_TILE];
            quarter_tile(format, EK_NEON_TILE, gb, quarter, blocks, act + i * blocks, acc);
            for (int t = 0; t < EK_NEON_TILE; t++) store_rows(y + (i + t) * ldy + first, acc[t], lo, hi);
        }
        for (; i < m; i++) {
            float32x4_t acc[1];
            quarter_tile(format, 1, gb, quarter, blocks, act + i * blocks, acc);
            store_rows(y + i * ldy + first, acc[0], lo, hi);
        }
    }
}

#define EK_NEON_GEMM(name, format)                                                                        \
    EK_NEON static void name(const uint8_t *packed, int64_t blocks, const ek_block_q8_act *act, int64_t m, \
                             float *y, int64_t ldy, int64_t row_begin, int64_t row_end) {                \
        gemm_neon(format, packed, blocks, act, m, y, ldy, row_begin, row_end);                           \
    }
EK_NEON_GEMM(gemm_q8_0_neon, EK_FORMAT_Q8_0)
EK_NEON_GEMM(gemm_q4_0_neon, EK_FORMAT_Q4_0)
EK_NEON_GEMM(gemm_q4_1_neon, EK_FORMAT_Q4_1)

static uint64_t read_stream_neon(const void *data, size_t bytes) {
    const uint8_t *p = data;
    uint64x2_t a0 = vdupq_n_u64(0), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 64 <= bytes; i += 64) {
        a0 = veorq_u64(a0, vld1q_u64((const uint64_t *)(p + i)));
        a1 = veorq_u64(a1, vld1q_u64((const uint64_t *)(p + i + 16)));
        a2 = veorq_u64(a2, vld1q_u64((const uint64_t *)(p + i + 32)));
        a3 = veorq_u64(a3, vld1q_u64((const uint64_t *)(p + i + 48)));
    }
    uint64x2_t all = veorq_u64(veorq_u64(a0, a1), veorq_u64(a2, a3));
    uint64_t sum = vgetq_lane_u64(all, 0) ^ vgetq_lane_u64(all, 1);
    for (; i + 8 <= bytes; i += 8) {
        uint64_t word;
        memcpy(&word, p + i, sizeof word);
        sum ^= word;
    }
    return sum;
}

const ek_isa_kernels ek_kernels_neon = {
    .gemm = {gemm_q8_0_neon, gemm_q4_0_neon, gemm_q4_1_neon},
    .quantize_act = quantize_act_neon,
    .read_stream = read_stream_neon,
};
#endif /* __aarch64__ */
