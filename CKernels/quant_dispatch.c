/*
 * quant_dispatch.c — the public entry points: validate every argument, then
 * run the chosen ISA's kernel (or the scalar code where an ISA has none).
 */
#include "quant_impl.h"
#include "ek_rows.h"

static const ek_isa_kernels *kernels_for(ek_isa isa) {
    ek_cpu_features features = ek_cpu_features_detect();
    if (!ek_isa_supported(isa, &features)) return NULL;
    switch (isa) {
    case EK_ISA_SCALAR: return &ek_kernels_scalar;
#if defined(__x86_64__)
    case EK_ISA_AVX512: return features.amx_int8 && ek_amx_tiles_granted() ? &ek_kernels_avx512_amx : &ek_kernels_avx512;
    case EK_ISA_AVX512_PLAIN: return &ek_kernels_avx512;
    case EK_ISA_AVX512_NOVNNI: return &ek_kernels_avx512_novnni;
    case EK_ISA_AVX2: return features.avxvnni ? &ek_kernels_avx2 : &ek_kernels_avx2_plain;
    case EK_ISA_AVX2_PLAIN: return &ek_kernels_avx2_plain;
#endif
#if defined(__aarch64__)
    case EK_ISA_NEON: return &ek_kernels_neon;
#endif
    default: return NULL;
    }
}

/* The formats with the packed layout, quantizers and Q8 activation blocks per 32. */
static bool valid_format(ek_format format) { return ek_format_packable(format); }

ek_status ek_quantize_row(ek_isa isa, ek_format format, const float *x, void *blocks, int64_t k) {
    if (x == NULL || blocks == NULL) return EK_ERR_NULL_POINTER;
    if (!valid_format(format)) return EK_ERR_FORMAT;
    if (k < 0 || k % EK_BLOCK != 0) return EK_ERR_SHAPE;
    const ek_isa_kernels *kernels = kernels_for(isa);
    if (kernels == NULL) return EK_ERR_ISA_UNSUPPORTED;
    if (kernels->quantize_row[format] != NULL) {
        kernels->quantize_row[format](x, blocks, k / EK_BLOCK);
        return EK_OK;
    }
    switch (format) {
    case EK_FORMAT_Q8_0: return ek_quantize_row_q8_0_ref(x, blocks, k);
    case EK_FORMAT_Q4_0: return ek_quantize_row_q4_0_ref(x, blocks, k);
    case EK_FORMAT_Q4_1: return ek_quantize_row_q4_1_ref(x, blocks, k);
    default: return EK_ERR_FORMAT;
    }
}

ek_status ek_quantize_row_q8_1(ek_isa isa, const float *x, ek_block_q8_1 *y, int64_t k) {
    if (x == NULL || y == NULL) return EK_ERR_NULL_POINTER;
    if (k < 0 || k % EK_BLOCK != 0) return EK_ERR_SHAPE;
    const ek_isa_kernels *kernels = kernels_for(isa);
    if (kernels == NULL) return EK_ERR_ISA_UNSUPPORTED;
    if (kernels->quantize_row_q8_1 != NULL) {
        kernels->quantize_row_q8_1(x, y, k / EK_BLOCK);
        return EK_OK;
    }
    return ek_quantize_row_q8_1_ref(x, y, k);
}

ek_status ek_dequantize_row(ek_isa isa, ek_format format, const void *blocks, float *y, int64_t k) {
    if (blocks == NULL || y == NULL) return EK_ERR_NULL_POINTER;
    int64_t elements = ek_format_block_elements(format);
    if (elements == 0) return EK_ERR_FORMAT;
    if (k < 0 || k % elements != 0) return EK_ERR_SHAPE;
    const ek_isa_kernels *kernels = kernels_for(isa);
    if (kernels == NULL) return EK_ERR_ISA_UNSUPPORTED;
    if (!valid_format(format)) return ek_dequantize_row_other_ref(format, blocks, y, k);
    if (kernels->dequantize_row[format] != NULL) {
        kernels->dequantize_row[format](blocks, y, k / EK_BLOCK);
        return EK_OK;
    }
    switch (format) {
    case EK_FORMAT_Q8_0: return ek_dequantize_row_q8_0_ref(blocks, y, k);
    case EK_FORMAT_Q4_0: return ek_dequantize_row_q4_0_ref(blocks, y, k);
    case EK_FORMAT_Q4_1: return ek_dequantize_row_q4_1_ref(blocks, y, k);
    default: return EK_ERR_FORMAT;
    }
}

size_t ek_activation_size(int64_t m, int64_t k) {
    if (m < 0 || k < 0 || k % EK_BLOCK != 0) return 0;
    uint64_t blocks = (uint64_t)k / EK_BLOCK;
    if (blocks != 0 && (uint64_t)m > SIZE_MAX / blocks / sizeof(ek_block_q8_act)) return 0;
    return (size_t)((uint64_t)m * blocks * sizeof(ek_block_q8_act));
}

ek_status ek_quantize_activations(ek_isa isa, ek_format format, const float *x, int64_t m, int64_t k,
                                  ek_block_q8_act *act, size_t act_bytes) {
    if (x == NULL || act == NULL) return EK_ERR_NULL_POINTER;
    if (!valid_format(format)) return EK_ERR_FORMAT;
    if (m < 0 || k < 0 || k % EK_BLOCK != 0) return EK_ERR_SHAPE;
    if (act_bytes < ek_activation_size(m, k)) return EK_ERR_BUFFER_TOO_SMALL;
    const ek_isa_kernels *kernels = kernels_for(isa);
    if (kernels == NULL) return EK_ERR_ISA_UNSUPPORTED;
    ek_quantize_act_kernel quantize = kernels->quantize_act ? kernels->quantize_act : ek_quantize_act_scalar;
    int64_t blocks = k / EK_BLOCK;
    for (int64_t i = 0; i < m; i++) quantize(x + i * k, blocks, act + i * blocks, format == EK_FORMAT_Q4_1);
    return EK_OK;
}

ek_status ek_quantize_activations_row_scaled(ek_isa isa, const float *x, int64_t m, int64_t k, const float *column_scales,
                                             ek_block_q8_act *act, size_t act_bytes) {
    if (x == NULL || act == NULL) return EK_ERR_NULL_POINTER;
    if (m < 0 || k < 0 || k % EK_BLOCK != 0) return EK_ERR_SHAPE;
    if (act_bytes < ek_activation_size(m, k)) return EK_ERR_BUFFER_TOO_SMALL;
    const ek_isa_kernels *kernels = kernels_for(isa);
    if (kernels == NULL) return EK_ERR_ISA_UNSUPPORTED;
    ek_quantize_act_row_scaled_kernel quantize =
        kernels->quantize_act_row_scaled ? kernels->quantize_act_row_scaled : ek_quantize_act_row_scaled_scalar;
    int64_t blocks = k / EK_BLOCK;
    for (int64_t i = 0; i < m; i++) {
        ek_block_q8_act *row = act + i * blocks;
        const float d = quantize(x + i * k, blocks, column_scales, row);
        int32_t total = 0;
        for (int64_t b = 0; b < blocks; b++) total += row[b].sum;
        for (int64_t b = 0; b < blocks; b++) row[b].d = d, row[b].s = 0.0f, row[b].row_sum = total;
    }
    return EK_OK;
}

/* Whether each of the m activation rows has one scale in all its blocks and its Σq in its first block's row_sum —
   what the row-scaled kernels assume (m·blocks compares and adds: nothing beside a product). */
static bool activation_rows_share_scales(const ek_block_q8_act *act, int64_t m, int64_t blocks) {
    for (int64_t i = 0; i < m; i++) {
        const ek_block_q8_act *row = act + i * blocks;
        int64_t total = 0;
        for (int64_t b = 0; b < blocks; b++) {
            if (row[b].d != row[0].d) return false;
            total += row[b].sum;
        }
        if (total != row[0].row_sum) return false;
    }
    return true;
}

/* The kernel for w and these activations: the row-scaled one where both sides have one scale a row. */
static ek_gemm_kernel packed_kernel(const ek_isa_kernels *kernels, const ek_packed_matrix *w, const ek_block_q8_act *act,
                                    int64_t m, int64_t blocks) {
    if (w->format != EK_FORMAT_Q8_0) return kernels->gemm[w->format];
    const bool seven = (w->flags & EK_PACKED_Q8_SEVEN_BITS) != 0;
    if ((w->flags & EK_PACKED_Q8_ROW_SCALES) && kernels->gemm_q8_0_row_scaled[0] != NULL && blocks <= EK_ROW_SCALED_MAX_BLOCKS &&
        activation_rows_share_scales(act, m, blocks)) {
        return seven && kernels->gemm_q8_0_row_scaled[1] != NULL ? kernels->gemm_q8_0_row_scaled[1] : kernels->gemm_q8_0_row_scaled[0];
    }
    return seven && kernels->gemm_q8_0_seven != NULL ? kernels->gemm_q8_0_seven : kernels->gemm[w->format];
}

ek_status ek_gemm_packed(ek_isa isa, const ek_packed_matrix *w, const ek_block_q8_act *act, int64_t m,
                         float *y, int64_t ldy, int64_t row_begin, int64_t row_end) {
    if (w == NULL || w->data == NULL || act == NULL || y == NULL) return EK_ERR_NULL_POINTER;
    if (!valid_format(w->format)) return EK_ERR_FORMAT;
    if (m < 0 || w->n < 0 || w->k < 0 || w->k % EK_BLOCK != 0 || ldy < w->n) return EK_ERR_SHAPE;
    if (row_begin < 0 || row_end < row_begin || row_end > w->n) return EK_ERR_RANGE;
    const ek_isa_kernels *kernels = kernels_for(isa);
    if (kernels == NULL) return EK_ERR_ISA_UNSUPPORTED;
    if (m == 0 || row_begin == row_end) return EK_OK;
    int64_t blocks = w->k / EK_BLOCK;
    if (blocks == 0) {
        for (int64_t i = 0; i < m; i++)
            for (int64_t r = row_begin; r < row_end; r++) y[i * ldy + r] = 0.0f;
        return EK_OK;
    }
    packed_kernel(kernels, w, act, m, blocks)(w->data, blocks, act, m, y, ldy, row_begin, row_end);
    return EK_OK;
}

uint64_t ek_read_stream(ek_isa isa, const void *data, size_t bytes) {
    const ek_isa_kernels *kernels = kernels_for(isa);
    if (data == NULL || kernels == NULL) return 0;
    return (kernels->read_stream ? kernels->read_stream : ek_kernels_scalar.read_stream)(data, bytes);
}
