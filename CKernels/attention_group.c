/*
 * attention_group.c — the query heads that share one key/value head (grouped-query attention) attending over a KV
 * cache together: what a decode step runs per key/value head.
 *
 * Alone (attention.c), each head reads and widens every key and value of the context again and waits on its own
 * FMA chains. Together, each key chunk is widened once for up to three heads and meets them in twelve independent
 * chains (four keys × three heads), each value chunk once for three heads' accumulators; the next block's rows are
 * asked for while this one is computed on. The softmax weights come from a polynomial exp within ~2 ulp and are
 * summed in registers. So the result is the one-pass op's to rounding, not bit for bit; the portable form runs the
 * portable op per head (the oracle).
 */
#include <math.h>
#include <string.h>
#include "ek_ops.h"
#include "ek_quant.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include "exp_avx2.h"
#include "attention_avx2.h"

/* Heads a pass over the keys and values serves at most: a pass keeps 4 keys × 3 heads of scores in twelve registers. */
#define EK_GROUP_HEADS 3

/* One pass of up to EK_GROUP_HEADS heads: (q, keys, values, stride, visible, head_dim, scale, out). */
typedef void (*ek_group_pass)(const float *, const void *, const void *, int64_t, int64_t, int64_t, float, float *);

#define EK_GB_TARGET __attribute__((target("avx2,fma,f16c")))
#define EK_GB_NAME(x) x##_avx2
#define EK_GB_SLICE 16
#include "attention_group_body.h"
#undef EK_GB_TARGET
#undef EK_GB_NAME
#undef EK_GB_SLICE

#define EK_GB_TARGET __attribute__((target("avx512f,avx512vl,avx2,fma,f16c")))
#define EK_GB_NAME(x) x##_avx512vl
#define EK_GB_SLICE 32
#include "attention_group_body.h"
#undef EK_GB_TARGET
#undef EK_GB_NAME
#undef EK_GB_SLICE

/* The heads in passes of up to EK_GROUP_HEADS, none of one head where there are more: four heads as 2 + 2, seven as
   3 + 2 + 2. A pass of one head is latency-bound as the one-pass op is, and keeps nothing for a second head to share.
   One Zen 4 core, four heads over one fp16 key/value head in L2, 21 alternating rounds, ns per position and head,
   3 + 1 → 2 + 2: head_dim 64, 136 / 1,024 positions, AVX-512VL code 6.19 → 5.82 / 4.55 → 4.24, AVX2 code 5.29 → 4.80 /
   5.38 → 4.83; head_dim 256, AVX2 code 21.9 → 18.7 / 22.1 → 17.6 (AVX-512VL code 13.7 → 13.1 / 21.2 → 20.7). */
static void group_attention(const ek_group_pass passes[2][EK_GROUP_HEADS], bool half_cache, const float *q, int64_t heads,
                            const void *keys, const void *values, int64_t stride, int64_t visible, int64_t head_dim,
                            float scale, float *out) {
    for (int64_t h = 0, n; h < heads; h += n) {
        const int64_t left = heads - h;
        n = left == EK_GROUP_HEADS + 1 ? 2 : left < EK_GROUP_HEADS ? left : EK_GROUP_HEADS;
        passes[half_cache][n - 1](q + h * head_dim, keys, values, stride, visible, head_dim, scale, out + h * head_dim);
    }
}
#endif

bool ek_attention_group_for(ek_isa isa, bool half_cache, const float *q, int64_t heads, const void *keys, const void *values,
                             int64_t stride, int64_t visible, int64_t head_dim, float scale, float *out) {
    if (heads < 1 || head_dim <= 0 || head_dim > EK_ATTENTION_MAX_HEAD || visible < 0 || stride < head_dim) return false;
#if defined(__x86_64__)
    const bool wide = ek_isa_is_avx512(isa);
    if (isa != EK_ISA_SCALAR && isa != EK_ISA_NEON && ek_ops_simd_available() && head_dim % 16 == 0) {
        group_attention(wide && ek_ops_avx512_available() ? group_passes_avx512vl : group_passes_avx2, half_cache, q, heads,
                        keys, values, stride, visible, head_dim, scale, out);
        return true;
    }
#endif
    const bool simd = isa != EK_ISA_SCALAR;
    for (int64_t h = 0; h < heads; h++)
        if (!ek_attention_online_with(simd, half_cache, q + h * head_dim, keys, values, stride, visible, head_dim, scale,
                                      out + h * head_dim))
            return false;
    return true;
}
