/*
 * backend_ops.c — Ember's CPU ops with the plugin ABI's signatures: what the
 * built-in "cpu-<isa>" and "scalar-reference" backends put in their op
 * tables. The context says which code runs (ek_backend_context.isa); every
 * function checks its arguments and returns non-zero instead of aborting.
 */
#include <string.h>
#include "ek_backend.h"
#include "ek_ops.h"
#include "ek_quant.h"

static bool simd_of(const void *context) {
    const ek_backend_context *backend = context;
    return backend != NULL && backend->isa != EK_ISA_SCALAR;
}

static ek_isa isa_of(const void *context) {
    const ek_backend_context *backend = context;
    return backend != NULL ? backend->isa : EK_ISA_SCALAR;
}

int32_t ek_op_embedding(void *context, uint32_t type, const void *row, int64_t columns, float *out) {
    if (row == NULL || out == NULL || columns < 0) return 1;
    switch (type) {
    case EMBER_TYPE_F32:
        memcpy(out, row, (size_t)columns * sizeof(float));
        return 0;
    case EMBER_TYPE_F16:
        ek_fp16_to_fp32_row(row, out, columns);
        return 0;
    case EMBER_TYPE_BF16: { /* the top half of an fp32 */
        const uint16_t *halves = row;
        for (int64_t i = 0; i < columns; i++) {
            uint32_t bits = (uint32_t)halves[i] << 16;
            memcpy(out + i, &bits, sizeof bits);
        }
        return 0;
    }
    default: {
        ek_format format;
        if (!ek_format_from_gguf(type, &format)) return 1;
        return ek_dequantize_row(isa_of(context), format, row, out, columns) == EK_OK ? 0 : 1;
    }
    }
}

int32_t ek_op_rms_norm(void *context, const float *x, const float *weight, float *out, int64_t rows, int64_t n, float eps) {
    (void)context;
    if (x == NULL || weight == NULL || out == NULL || rows < 0 || n <= 0) return 1;
    ek_rms_norm(x, weight, out, rows, n, eps);
    return 0;
}

int32_t ek_op_layer_norm(void *context, const float *x, const float *gamma, const float *beta, float *out, int64_t rows,
                         int64_t n, float eps) {
    if (x == NULL || gamma == NULL || beta == NULL || out == NULL || rows < 0 || n <= 0) return 1;
    ek_layer_norm_with(simd_of(context), x, gamma, beta, out, rows, n, eps);
    return 0;
}

int32_t ek_op_rope(void *context, float *x, int64_t heads, int64_t head_dim, const float *angles, uint32_t mode) {
    (void)context;
    if (x == NULL || angles == NULL || heads < 0 || head_dim <= 0 || head_dim % 2 != 0) return 1;
    if (mode == 0) ek_rope_apply(x, heads, head_dim, angles);
    else if (mode == 2) ek_rope_apply_neox(x, heads, head_dim, angles);
    else return 1;
    return 0;
}

int32_t ek_op_attention_scores(void *context, uint32_t cache_type, const float *q, const void *keys, int64_t stride,
                               int64_t visible, int64_t head_dim, float scale, float *scores) {
    if (q == NULL || keys == NULL || scores == NULL || stride < head_dim) return 1;
    if (cache_type != EMBER_TYPE_F32 && cache_type != EMBER_TYPE_F16) return 1;
    return ek_attention_scores_with(simd_of(context), cache_type == EMBER_TYPE_F16, q, keys, stride, visible, head_dim,
                                    scale, scores) ? 0 : 1;
}

int32_t ek_op_softmax(void *context, float *x, int64_t rows, int64_t n) {
    if (x == NULL || rows < 0 || n <= 0) return 1;
    ek_softmax_with(simd_of(context), x, rows, n);
    return 0;
}

int32_t ek_op_attention_values(void *context, uint32_t cache_type, const float *weights, const void *values,
                               int64_t stride, int64_t visible, int64_t head_dim, float *out) {
    if (weights == NULL || values == NULL || out == NULL || stride < head_dim) return 1;
    if (cache_type != EMBER_TYPE_F32 && cache_type != EMBER_TYPE_F16) return 1;
    return ek_attention_values_with(simd_of(context), cache_type == EMBER_TYPE_F16, weights, values, stride, visible,
                                    head_dim, out) ? 0 : 1;
}

int32_t ek_op_silu(void *context, float *x, int64_t n) {
    if (x == NULL || n < 0) return 1;
    ek_silu_with(simd_of(context), x, n);
    return 0;
}

int32_t ek_op_gelu(void *context, float *x, int64_t n) {
    if (x == NULL || n < 0) return 1;
    ek_gelu_for(isa_of(context), x, n);
    return 0;
}

int32_t ek_op_swiglu(void *context, const float *gate, const float *up, float *out, int64_t n) {
    if (gate == NULL || up == NULL || out == NULL || n < 0) return 1;
    ek_swiglu_for(isa_of(context), gate, up, out, n);
    return 0;
}

int32_t ek_op_geglu(void *context, const float *gate, const float *up, float *out, int64_t n) {
    (void)context;
    if (gate == NULL || up == NULL || out == NULL || n < 0) return 1;
    ek_geglu(gate, up, out, n);
    return 0;
}

int32_t ek_op_attention(void *context, uint32_t cache_type, const float *q, const void *keys, const void *values,
                        int64_t stride, int64_t visible, int64_t head_dim, float scale, float *out) {
    if (q == NULL || keys == NULL || values == NULL || out == NULL) return 1;
    if (cache_type != EMBER_TYPE_F32 && cache_type != EMBER_TYPE_F16) return 1;
    return ek_attention_online_with(simd_of(context), cache_type == EMBER_TYPE_F16, q, keys, values, stride, visible, head_dim,
                                    scale, out) ? 0 : 1;
}

int32_t ek_op_attention_group(void *context, uint32_t cache_type, const float *q, int64_t heads, const void *keys,
                              const void *values, int64_t stride, int64_t visible, int64_t head_dim, float scale,
                              float *out) {
    if (q == NULL || keys == NULL || values == NULL || out == NULL) return 1;
    if (cache_type != EMBER_TYPE_F32 && cache_type != EMBER_TYPE_F16) return 1;
    return ek_attention_group_for(isa_of(context), cache_type == EMBER_TYPE_F16, q, heads, keys, values, stride, visible,
                                  head_dim, scale, out) ? 0 : 1;
}

int32_t ek_op_sequence_attention(void *context, uint32_t cache_type, const float *q, const void *keys, const void *values,
                                 int64_t stride, int64_t rows, int64_t head_dim, float scale, float *out) {
    if (q == NULL || keys == NULL || values == NULL || out == NULL) return 1;
    if (cache_type != EMBER_TYPE_F32 && cache_type != EMBER_TYPE_F16) return 1;
    return ek_sequence_attention_with(simd_of(context), cache_type == EMBER_TYPE_F16, q, keys, values, stride, rows, head_dim,
                                      scale, out) ? 0 : 1;
}

int32_t ek_op_add(void *context, float *x, const float *y, int64_t n) {
    if (x == NULL || y == NULL || n < 0) return 1;
    ek_add_with(simd_of(context), x, y, n);
    return 0;
}

int32_t ek_op_mul(void *context, float *x, const float *y, int64_t n) {
    (void)context;
    if (x == NULL || y == NULL || n < 0) return 1;
    ek_mul(x, y, n);
    return 0;
}

int32_t ek_flag_load(const int32_t *flag) { return __atomic_load_n(flag, __ATOMIC_ACQUIRE); }

void ek_flag_store(int32_t *flag, int32_t value) { __atomic_store_n(flag, value, __ATOMIC_RELEASE); }
