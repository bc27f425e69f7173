/*
 * rows_dispatch.c — the row kernels' entry points: validate every argument,
 * then run the ISA's SIMD kernel for the format, or the scalar oracle.
 */
#include "quant_impl.h"
#include "rows_impl.h"

static const ek_row_kernels no_row_kernels = {0};

const ek_row_kernels *ek_row_kernels_for(ek_isa isa) {
    ek_cpu_features features = ek_cpu_features_detect();
    if (!ek_isa_supported(isa, &features)) return NULL;
    switch (isa) {
#if defined(__x86_64__)
    case EK_ISA_AVX2: case EK_ISA_AVX2_PLAIN: return &ek_row_kernels_avx2;
    case EK_ISA_AVX512: case EK_ISA_AVX512_PLAIN: case EK_ISA_AVX512_NOVNNI: return &ek_row_kernels_avx512;
#endif
#if defined(__aarch64__)
    case EK_ISA_NEON: return &ek_row_kernels_neon;
#endif
    default: return &no_row_kernels; /* scalar */
    }
}

static size_t activation_block_bytes(ek_format format) {
    return ek_format_super_activations(format) ? sizeof(ek_block_q8_k) : sizeof(ek_block_q8_act);
}

size_t ek_row_activation_size(ek_format format, int64_t m, int64_t k) {
    int64_t elements = ek_format_block_elements(format);
    if (elements == 0 || m < 0 || k < 0 || k % elements != 0) return 0;
    uint64_t blocks = (uint64_t)(k / elements), bytes = activation_block_bytes(format);
    if (blocks != 0 && (uint64_t)m > SIZE_MAX / blocks / bytes) return 0;
    return (size_t)((uint64_t)m * blocks * bytes);
}

ek_status ek_quantize_row_activations(ek_isa isa, ek_format format, const float *x, int64_t m, int64_t k,
                                      void *act, size_t act_bytes) {
    if (x == NULL || act == NULL) return EK_ERR_NULL_POINTER;
    int64_t elements = ek_format_block_elements(format);
    if (elements == 0) return EK_ERR_FORMAT;
    if (m < 0 || k < 0 || k % elements != 0) return EK_ERR_SHAPE;
    if (act_bytes < ek_row_activation_size(format, m, k)) return EK_ERR_BUFFER_TOO_SMALL;
    const ek_row_kernels *kernels = ek_row_kernels_for(isa);
    if (kernels == NULL) return EK_ERR_ISA_UNSUPPORTED;
    int64_t blocks = k / elements;
    if (ek_format_super_activations(format)) {
        void (*quantize)(const float *, int64_t, ek_block_q8_k *) =
            kernels->quantize_q8_k ? kernels->quantize_q8_k : ek_quantize_act_q8_k_scalar;
        for (int64_t i = 0; i < m; i++) quantize(x + i * k, blocks, (ek_block_q8_k *)act + i * blocks);
        return EK_OK;
    }
    /* Per 32: the packed kernels' activation blocks; Q4_1 and Q5_1 also need s = d·Σq. */
    ek_format like = format == EK_FORMAT_Q4_1 || format == EK_FORMAT_Q5_1 ? EK_FORMAT_Q4_1 : EK_FORMAT_Q8_0;
    return ek_quantize_activations(isa, like, x, m, k, act, act_bytes);
}

ek_status ek_gemm_rows(ek_isa isa, ek_format format, const void *w, int64_t n, int64_t k, const void *act, int64_t m,
                       float *y, int64_t ldy, int64_t row_begin, int64_t row_end) {
    if (w == NULL || act == NULL || y == NULL) return EK_ERR_NULL_POINTER;
    int64_t elements = ek_format_block_elements(format);
    if (elements == 0) return EK_ERR_FORMAT;
    if (m < 0 || n < 0 || k < 0 || k % elements != 0 || ldy < n) return EK_ERR_SHAPE;
    if (row_begin < 0 || row_end < row_begin || row_end > n) return EK_ERR_RANGE;
    const ek_row_kernels *kernels = ek_row_kernels_for(isa);
    if (kernels == NULL) return EK_ERR_ISA_UNSUPPORTED;
    if (m == 0 || row_begin == row_end) return EK_OK;
    int64_t blocks = k / elements;
    if (blocks == 0) {
        for (int64_t i = 0; i < m; i++)
            for (int64_t r = row_begin; r < row_end; r++) y[i * ldy + r] = 0.0f;
        return EK_OK;
    }
    size_t row_bytes = (size_t)blocks * ek_format_block_bytes(format);
    size_t act_row_bytes = (size_t)blocks * activation_block_bytes(format);
    ek_row_kernel kernel = kernels->gemm[format];
    const bool decode = m <= EK_ROWS_DECODE_ROWS;
    if (kernel != NULL && decode && kernels->decode_amd[format] != NULL && ek_cpu_features_detect().amd)
        kernel = kernels->decode_amd[format];
    if (kernel != NULL) {
        kernel(w, row_bytes, blocks, act, act_row_bytes, m, y, ldy, row_begin, row_end);
    } else {
        ek_gemm_rows_scalar(format, w, row_bytes, blocks, act, act_row_bytes, m, y, ldy, row_begin, row_end);
    }
    return EK_OK;
}

bool ek_row_kernel_is_simd(ek_isa isa, ek_format format) {
    const ek_row_kernels *kernels = ek_row_kernels_for(isa);
    return kernels != NULL && (unsigned)format < EK_FORMAT_COUNT && kernels->gemm[format] != NULL;
}

/* The float-weight entry points' checks; *kernels set when the call has work (EK_OK and *kernels NULL: nothing to do). */
static ek_status check_float_call(ek_isa isa, const void *w, int64_t n, int64_t k, const float *x, int64_t m, float *y,
                                  int64_t ldy, int64_t row_begin, int64_t row_end, const ek_row_kernels **kernels) {
    *kernels = NULL;
    if (w == NULL || x == NULL || y == NULL) return EK_ERR_NULL_POINTER;
    if (m < 0 || n < 0 || k < 0 || ldy < n) return EK_ERR_SHAPE;
    if (row_begin < 0 || row_end < row_begin || row_end > n) return EK_ERR_RANGE;
    const ek_row_kernels *found = ek_row_kernels_for(isa);
    if (found == NULL) return EK_ERR_ISA_UNSUPPORTED;
    if (m > 0 && row_begin < row_end) *kernels = found;
    return EK_OK;
}

ek_status ek_gemm_half(ek_isa isa, bool bf16, const uint16_t *w, int64_t n, int64_t k, const float *x, int64_t m,
                       float *y, int64_t ldy, int64_t row_begin, int64_t row_end) {
    const ek_row_kernels *kernels;
    ek_status status = check_float_call(isa, w, n, k, x, m, y, ldy, row_begin, row_end, &kernels);
    if (kernels == NULL) return status;
    ek_half_kernel kernel = kernels->half ? kernels->half : ek_gemm_half_scalar;
    if (m == 1 && kernels->half_amd != NULL && ek_cpu_features_detect().amd) kernel = kernels->half_amd;
    kernel(bf16, w, k, x, m, y, ldy, row_begin, row_end);
    return status;
}

ek_status ek_gemm_f32(ek_isa isa, const float *w, int64_t n, int64_t k, const float *x, int64_t m, float *y, int64_t ldy,
                      int64_t row_begin, int64_t row_end) {
    const ek_row_kernels *kernels;
    ek_status status = check_float_call(isa, w, n, k, x, m, y, ldy, row_begin, row_end, &kernels);
    if (kernels == NULL) return status;
    ek_f32_kernel kernel = kernels->f32 ? kernels->f32 : ek_gemm_f32_scalar;
    if (m == 1 && kernels->f32_one_row != NULL && ek_cpu_features_detect().amd) kernel = kernels->f32_one_row;
    kernel(w, k, x, m, y, ldy, row_begin, row_end);
    return status;
}

bool ek_gemm_f32_is_simd(ek_isa isa) {
    const ek_row_kernels *kernels = ek_row_kernels_for(isa);
    return kernels != NULL && kernels->f32 != NULL;
}
