/*
 * kernels_fuzz.c — libFuzzer harness for the C kernels' entry points: the
 * fuzzer's bytes choose a weight format, an ISA this CPU runs, a shape (odd
 * sizes, 1–12 activation rows, 1–37 weight rows, 1–3 blocks), a row range and
 * the activations; weights are random blocks from a seed in the input. Each
 * SIMD path (row kernels, interleaved kernels, fp16/bf16) must agree with the
 * scalar oracle within the fp32 accumulation bound, and must not read or
 * write outside its buffers (built with AddressSanitizer and UBSan).
 *   make fuzz-kernels FUZZ_SECONDS=60
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ek_cpu.h"
#include "ek_interleaved.h"
#include "ek_quant.h"
#include "ek_rows.h"

typedef struct { const uint8_t *data; size_t size, at; } reader;
static unsigned take(reader *r) { return r->at < r->size ? r->data[r->at++] : 0; }

static ek_isa isas[8];
static int isa_count;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    ek_cpu_features features = ek_cpu_features_detect();
    const ek_isa all[] = {EK_ISA_AVX2, EK_ISA_AVX512, EK_ISA_NEON, EK_ISA_AVX2_PLAIN, EK_ISA_AVX512_PLAIN, EK_ISA_AVX512_NOVNNI};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (ek_isa_supported(all[i], &features)) isas[isa_count++] = all[i];
    return 0;
}

static void fail(const char *what, const char *format, const char *isa, int64_t m, int64_t n, int64_t k, int64_t i,
                 float expected, float got, double bound) {
    fprintf(stderr, "MISMATCH %s %s %s m=%lld n=%lld k=%lld at %lld: oracle %g, simd %g, bound %g\n", what, format, isa,
            (long long)m, (long long)n, (long long)k, (long long)i, expected, got, bound);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (isa_count == 0 || size < 8) return 0;
    reader r = {data, size, 0};
    ek_format format = (ek_format)(take(&r) % EK_FORMAT_COUNT);
    ek_isa isa = isas[take(&r) % isa_count];
    /* up to 12 rows: more than AVX-512's tile of eight, so the GEMMs that decode weights once per call run too */
    int64_t m = 1 + take(&r) % 12, n = 1 + take(&r) % 37, blocks = 1 + take(&r) % 3;
    int64_t k = blocks * ek_format_block_elements(format);
    int64_t begin = take(&r) % n, end = begin + 1 + take(&r) % (n - begin);
    uint64_t seed = take(&r) | (uint64_t)take(&r) << 8;
    size_t row_bytes = (size_t)blocks * ek_format_block_bytes(format);
    uint8_t *w = malloc(row_bytes * (size_t)n);
    float *x = malloc(sizeof(float) * (size_t)(m * k)), *wf = malloc(sizeof(float) * (size_t)k);
    float *expected = calloc((size_t)(m * n), sizeof(float)), *got = calloc((size_t)(m * n), sizeof(float));
    double *bound = calloc((size_t)(m * n), sizeof(double));
    ek_fill_random_blocks(format, seed, w, n * blocks);
    for (int64_t i = 0; i < m * k; i++) x[i] = ((int)take(&r) - 128) / 16.0f * (i % 7 == 0 ? 8.0f : 1.0f);
    for (int64_t row = 0; row < n; row++) { /* Σ|w||x| per output: what fp32 accumulation may lose */
        ek_dequantize_row(EK_ISA_SCALAR, format, w + (size_t)row * row_bytes, wf, k);
        for (int64_t i = 0; i < m; i++) {
            double sum = 0;
            for (int64_t j = 0; j < k; j++) sum += fabs((double)wf[j] * x[i * k + j]);
            bound[i * n + row] = 2e-4 * sum + 1e-5;
        }
    }
    size_t act_bytes = ek_row_activation_size(format, m, k);
    uint8_t *act = malloc(act_bytes), *act_simd = malloc(act_bytes);
    if (ek_quantize_row_activations(EK_ISA_SCALAR, format, x, m, k, act, act_bytes) != EK_OK ||
        ek_quantize_row_activations(isa, format, x, m, k, act_simd, act_bytes) != EK_OK) abort();
    if (memcmp(act, act_simd, act_bytes) != 0) fail("activations", ek_format_name(format), ek_isa_name(isa), m, n, k, 0, 0, 0, 0);
    if (ek_gemm_rows(EK_ISA_SCALAR, format, w, n, k, act, m, expected, n, begin, end) != EK_OK) abort();
    if (ek_gemm_rows(isa, format, w, n, k, act, m, got, n, begin, end) != EK_OK) abort();
    for (int64_t i = 0; i < m * n; i++)
        if (fabs((double)expected[i] - got[i]) > bound[i]) fail("rows", ek_format_name(format), ek_isa_name(isa), m, n, k, i, expected[i], got[i], bound[i]);
    if (ek_format_interleavable(format)) {
        size_t bytes = ek_interleaved_size(format, n, k);
        uint8_t *packed = malloc(bytes);
        memset(got, 0, sizeof(float) * (size_t)(m * n));
        if (ek_interleave_weights(format, w, n, k, packed, bytes) != EK_OK ||
            ek_gemm_interleaved(isa, format, packed, n, k, act, m, got, n, begin, end) != EK_OK) abort();
        for (int64_t i = 0; i < m * n; i++)
            if (fabs((double)expected[i] - got[i]) > bound[i]) fail("interleaved", ek_format_name(format), ek_isa_name(isa), m, n, k, i, expected[i], got[i], bound[i]);
        free(packed);
    }
    /* fp16 and bf16 weights: raw halves from the input (any bits but NaN/inf exponents), fp32 activations. */
    uint16_t *half = malloc(sizeof(uint16_t) * (size_t)(n * k));
    bool bf16 = take(&r) & 1;
    for (int64_t i = 0; i < n * k; i++) {
        uint16_t bits = (uint16_t)(take(&r) | take(&r) << 8);
        half[i] = bf16 ? (uint16_t)((bits & 0x80ff) | 0x3c00) : (uint16_t)(bits & 0xbbff); /* exponents kept small */
    }
    memset(expected, 0, sizeof(float) * (size_t)(m * n));
    memset(got, 0, sizeof(float) * (size_t)(m * n));
    if (ek_gemm_half(EK_ISA_SCALAR, bf16, half, n, k, x, m, expected, n, begin, end) != EK_OK ||
        ek_gemm_half(isa, bf16, half, n, k, x, m, got, n, begin, end) != EK_OK) abort();
    for (int64_t i = 0; i < m * n; i++) {
        double tolerance = 1e-3 * (fabs((double)expected[i]) + 1.0) * k;
        if (fabs((double)expected[i] - got[i]) > tolerance) fail(bf16 ? "bf16" : "f16", "half", ek_isa_name(isa), m, n, k, i, expected[i], got[i], tolerance);
    }
    free(half); free(act); free(act_simd); free(w); free(x); free(wf); free(expected); free(got); free(bound);
    return 0;
}
