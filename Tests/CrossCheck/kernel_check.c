/*
 * kernel_check.c — checks one ISA's packed kernels against the scalar oracle
 * from plain C, so the arm64 NEON kernels can be checked on an x86 machine:
 * `make test-arm64` cross-compiles CKernels with this file and runs it under
 * qemu-aarch64. Same checks as the Swift suite, fewer shapes:
 *   - activation quantization equals the oracle's, byte for byte;
 *   - integer-exact inputs give bit-identical products;
 *   - random inputs agree within the fp32 accumulation bound;
 *   - the row kernels of every other GGUF type (ek_gemm_rows) and of fp16/bf16 weights (ek_gemm_half) agree with
 *     the scalar ones within the fp32 accumulation bound, over odd row ranges and 1–6 activation rows;
 *   - the fp32-weight GEMM (ek_gemm_f32: dot-product tiles, and the packed outer products from 40 rows) agrees
 *     with the in-order loop — under ASan, its packing reads and panel memory are checked too;
 *   - the fp32 and fp16/bf16 decode forms the entry points take only on AMD cores (x86: the kernel tables'
 *     f32_one_row and half_amd, called directly) agree with the scalar loop too, whatever CPU runs the check;
 *   - row-scaled Q8_0 (one scale per weight row and per activation row, EK_PACKED_Q8_ROW_SCALES): the activations
 *     (with and without column scales) equal the oracle's byte for byte, and the product summed over all of K equals
 *     the per-block oracle's — bit for bit on integer-exact inputs — or falls back to it when the activations are
 *     not row-scaled.
 * Prints "N passed, N failed" and exits non-zero on any failure.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ek_quant.h"
#include "ek_rows.h"
#include "ek_interleaved.h"
#include "rows_impl.h"
#include "interleaved_impl.h"

static uint64_t state = 0x5eed;
static uint64_t next_random(void) {
    state += 0x9E3779B97F4A7C15ull;
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static float uniform(float scale) { return ((float)(next_random() >> 40) / 16777216.0f * 2.0f - 1.0f) * scale; }

static int passed = 0, failed = 0;
static void check(int ok, const char *what, ek_format format, int m, int n, int k) {
    if (ok) {
        passed++;
    } else {
        failed++;
        printf("FAIL %s %s m=%d n=%d k=%d\n", what, ek_format_name(format), m, n, k);
    }
}

static void quantize_rows_ref(ek_format format, const float *x, uint8_t *blocks, int rows, int k) {
    size_t row_bytes = (size_t)(k / EK_BLOCK) * ek_format_block_bytes(format);
    for (int r = 0; r < rows; r++) {
        const float *src = x + (size_t)r * k;
        void *dst = blocks + (size_t)r * row_bytes;
        if (format == EK_FORMAT_Q8_0) ek_quantize_row_q8_0_ref(src, dst, k);
        if (format == EK_FORMAT_Q4_0) ek_quantize_row_q4_0_ref(src, dst, k);
        if (format == EK_FORMAT_Q4_1) ek_quantize_row_q4_1_ref(src, dst, k);
    }
}

/* ek_gemm_packed on `isa` over weight rows [first, end) into `got` (m × n) against `expected`: outputs outside the
   range untouched, inside bit-identical (`integer_exact`) or within a loose bound from the magnitudes of the fp32
   inputs x (times the column scales, when any) — quantization aside, both sum the same terms. */
static int packed_product_agrees(ek_isa isa, const ek_packed_matrix *matrix, const ek_block_q8_act *act, const float *x,
                                 const float *scales, const float *expected, float *got, int m, int first, int end,
                                 int integer_exact) {
    const int n = (int)matrix->n, k = (int)matrix->k;
    const float untouched = -12345.0f;
    for (int i = 0; i < m * n; i++) got[i] = untouched;
    check(ek_gemm_packed(isa, matrix, act, m, got, n, first, end) == EK_OK, "gemm status", matrix->format, m, n, k);
    int ok = 1;
    for (int i = 0; i < m * n; i++) {
        if (i % n < first || i % n >= end) {
            if (got[i] != untouched) ok = 0;
        } else if (integer_exact) {
            if (memcmp(&got[i], &expected[i], sizeof(float)) != 0) ok = 0;
        } else {
            double magnitude = 0;
            for (int j = 0; j < k; j++) magnitude += fabs((double)x[(i / n) * k + j] * (scales ? scales[j] : 1.0f)) * 2.0;
            if (fabs((double)got[i] - expected[i]) > (k / EK_BLOCK + 4) * 1.2e-7 * magnitude * 16) ok = 0;
        }
    }
    return ok;
}

/* The packed GEMM on `isa` for weight rows [first, end) against the oracle; outputs outside the range stay untouched. */
/* Q8_0 weights made within [−64, 63] and packed with EK_PACKED_Q8_SEVEN_BITS (the faster no-VNNI path). */
static int seven_bits = 0;

static void run_rows(ek_isa isa, ek_format format, int m, int n, int k, int integer_exact, int first, int end) {
    const int seven = seven_bits && format == EK_FORMAT_Q8_0;
    size_t block_bytes = ek_format_block_bytes(format), blocks = (size_t)n * (k / EK_BLOCK);
    uint8_t *gguf = malloc(blocks * block_bytes);
    float *x = malloc(sizeof(float) * (size_t)m * k), *w = malloc(sizeof(float) * (size_t)n * k);
    float *expected = malloc(sizeof(float) * (size_t)m * n), *got = malloc(sizeof(float) * (size_t)m * n);
    if (integer_exact) { /* scales 1 (Q4_1: minimum −3), integer activations with block maximum 127 */
        for (size_t b = 0; b < blocks; b++) {
            uint8_t *block = gguf + b * block_bytes;
            for (size_t j = 0; j < block_bytes; j++) block[j] = (uint8_t)next_random();
            ek_fp16 one = ek_fp32_to_fp16(1.0f), minus3 = ek_fp32_to_fp16(-3.0f);
            memcpy(block, &one, 2);
            if (format == EK_FORMAT_Q4_1) memcpy(block + 2, &minus3, 2);
            if (format == EK_FORMAT_Q8_0)
                for (size_t j = 2; j < block_bytes; j++) {
                    if (block[j] == 0x80) block[j] = 0x81;
                    if (seven) block[j] = (uint8_t)(int8_t)((int)(block[j] & 0x7f) - 64); /* −64 … 63 */
                }
        }
        for (int i = 0; i < m * k; i++) x[i] = (float)((int)(next_random() % 255) - 127);
        for (int i = 0; i < m * k; i += EK_BLOCK) x[i + 7] = 127.0f;
    } else {
        for (int i = 0; i < n * k; i++) w[i] = uniform(1.0f);
        for (int i = 0; i < m * k; i++) x[i] = uniform(4.0f);
        if (seven) {
            for (int r = 0; r < n; r++)
                ek_quantize_row_q8_0_limited(w + (size_t)r * k, (ek_block_q8_0 *)gguf + (size_t)r * (k / EK_BLOCK), k, 63);
        } else {
            quantize_rows_ref(format, w, gguf, n, k);
        }
    }
    if (seven) check(ek_q8_0_within_seven_bits((const ek_block_q8_0 *)gguf, (int64_t)blocks), "seven-bit values", format, m, n, k);
    size_t packed_bytes = ek_packed_size(format, n, k);
    void *packed = malloc(packed_bytes);
    ek_pack_weights(format, gguf, n, k, packed, packed_bytes);
    ek_block_q8_act *act = malloc(ek_activation_size(m, k)), *act_ref = malloc(ek_activation_size(m, k));
    check(ek_quantize_activations(isa, format, x, m, k, act, ek_activation_size(m, k)) == EK_OK, "quantize status", format, m, n, k);
    ek_quantize_activations(EK_ISA_SCALAR, format, x, m, k, act_ref, ek_activation_size(m, k));
    check(memcmp(act, act_ref, ek_activation_size(m, k)) == 0, "activations equal oracle", format, m, n, k);

    ek_gemm_ref(format, gguf, x, expected, m, n, k, 0, n);
    ek_packed_matrix matrix = {format, n, k, packed, seven ? EK_PACKED_Q8_SEVEN_BITS : 0u};
    const int ok = packed_product_agrees(isa, &matrix, act, x, NULL, expected, got, m, first, end, integer_exact);
    check(ok, integer_exact ? "gemm bit-exact" : "gemm within bound", format, m, n, k);
    free(gguf); free(x); free(w); free(expected); free(got); free(packed); free(act); free(act_ref);
}

/* Row-scaled Q8_0 on `isa` (values within `limit`: 127, or 63 for the seven-bit path), rows [first, end), against
   the scalar per-block kernel on the same activations; `columns`: activations multiplied by column scales first;
   `per_block`: the flagged weights against per-block activations instead (the kernels must take the per-block path). */
static void run_row_scaled(ek_isa isa, int m, int n, int k, int limit, int columns, int integer_exact, int per_block,
                           int first, int end) {
    const ek_format format = EK_FORMAT_Q8_0;
    const int blocks_per_row = k / EK_BLOCK;
    ek_block_q8_0 *gguf = malloc(sizeof(ek_block_q8_0) * (size_t)n * blocks_per_row);
    float *x = malloc(sizeof(float) * (size_t)m * k), *w = malloc(sizeof(float) * (size_t)n * k), *scales = NULL;
    float *expected = malloc(sizeof(float) * (size_t)m * n), *got = malloc(sizeof(float) * (size_t)m * n);
    for (int i = 0; i < n * k; i++) w[i] = integer_exact ? (float)((int)(next_random() % (2 * limit + 1)) - limit) : uniform(1.0f);
    if (integer_exact) /* each row's maximum is `limit`, so its scale is 1 and the values stay as they are */
        for (int r = 0; r < n; r++) w[(size_t)r * k + (size_t)r % k] = (float)limit;
    for (int r = 0; r < n; r++) ek_quantize_row_q8_0_row_scaled(w + (size_t)r * k, gguf + (size_t)r * blocks_per_row, k, limit);
    for (int i = 0; i < m * k; i++) x[i] = integer_exact ? (float)((int)(next_random() % 255) - 127) : uniform(4.0f);
    if (integer_exact)
        for (int i = 0; i < m; i++) x[(size_t)i * k + (size_t)i % k] = 127.0f;
    if (columns) {
        scales = malloc(sizeof(float) * (size_t)k);
        for (int j = 0; j < k; j++) scales[j] = integer_exact ? 1.0f : 0.25f + (uniform(1.0f) + 1.0f) * 1.875f;
    }
    check(ek_q8_0_rows_share_scales(gguf, n, blocks_per_row), "row-scaled weights share their scales", format, m, n, k);
    if (limit == 63) check(ek_q8_0_within_seven_bits(gguf, (int64_t)n * blocks_per_row), "row-scaled seven-bit values", format, m, n, k);
    size_t packed_bytes = ek_packed_size(format, n, k);
    void *packed = malloc(packed_bytes);
    ek_pack_weights(format, gguf, n, k, packed, packed_bytes);
    const size_t act_bytes = ek_activation_size(m, k);
    ek_block_q8_act *act = malloc(act_bytes), *act_ref = malloc(act_bytes);
    if (per_block) {
        ek_quantize_activations(isa, format, x, m, k, act, act_bytes);
        ek_quantize_activations(EK_ISA_SCALAR, format, x, m, k, act_ref, act_bytes);
    } else {
        check(ek_quantize_activations_row_scaled(isa, x, m, k, scales, act, act_bytes) == EK_OK, "row-scaled quantize status",
              format, m, n, k);
        ek_quantize_activations_row_scaled(EK_ISA_SCALAR, x, m, k, scales, act_ref, act_bytes);
    }
    check(memcmp(act, act_ref, act_bytes) == 0, "row-scaled activations equal oracle", format, m, n, k);
    ek_packed_matrix plain = {format, n, k, packed, 0u};
    ek_gemm_packed(EK_ISA_SCALAR, &plain, act_ref, m, expected, n, 0, n);
    ek_packed_matrix matrix = {format, n, k, packed, EK_PACKED_Q8_ROW_SCALES | (limit == 63 ? EK_PACKED_Q8_SEVEN_BITS : 0u)};
    const int ok = packed_product_agrees(isa, &matrix, act, x, scales, expected, got, m, first, end, integer_exact);
    check(ok, per_block ? "row-scaled weights, per-block activations" : integer_exact ? "row-scaled gemm bit-exact"
                                                                                       : "row-scaled gemm within bound",
          format, m, n, k);
    free(gguf); free(x); free(w); free(scales); free(expected); free(got); free(packed); free(act); free(act_ref);
}

static void run(ek_isa isa, ek_format format, int m, int n, int k, int integer_exact) {
    run_rows(isa, format, m, n, k, integer_exact, 0, n);
}

/* ek_gemm_rows on `isa` for a row format against the scalar oracle (same quantized activations), rows [first, end):
   within 1e-5 of Σ|w·x| (the dequantized weights), outputs outside the range untouched. */
/* Whether rows [first, end) of got are within 10⁻⁵·Σ|w·x| of expected and the others still hold `untouched`. */
static int rows_within_bound(const float *got, const float *expected, const float *wf, const float *x, int m, int n,
                             int k, int first, int end, float untouched) {
    for (int i = 0; i < m * n; i++) {
        int row = i % n;
        if (row < first || row >= end) {
            if (got[i] != untouched) return 0;
            continue;
        }
        double magnitude = 0;
        for (int j = 0; j < k; j++) magnitude += fabs((double)wf[(size_t)row * k + j] * x[(size_t)(i / n) * k + j]);
        if (!(fabs((double)got[i] - expected[i]) <= 1e-5 * magnitude + 1e-6)) return 0;
    }
    return 1;
}

static void run_row_format(ek_isa isa, ek_format format, int m, int n, int blocks_per_row, int first, int end) {
    const int k = blocks_per_row * (int)ek_format_block_elements(format);
    const size_t row_bytes = (size_t)blocks_per_row * ek_format_block_bytes(format);
    uint8_t *w = malloc(row_bytes * n);
    ek_fill_random_blocks(format, next_random(), w, (int64_t)n * blocks_per_row);
    float *x = malloc(sizeof(float) * (size_t)m * k), *wf = malloc(sizeof(float) * (size_t)n * k);
    for (int i = 0; i < m * k; i++) x[i] = uniform(3.0f);
    for (int r = 0; r < n; r++) ek_dequantize_row(EK_ISA_SCALAR, format, w + (size_t)r * row_bytes, wf + (size_t)r * k, k);
    size_t act_bytes = ek_row_activation_size(format, m, k);
    void *act = malloc(act_bytes), *act_ref = malloc(act_bytes);
    int ok = ek_quantize_row_activations(isa, format, x, m, k, act, act_bytes) == EK_OK &&
             ek_quantize_row_activations(EK_ISA_SCALAR, format, x, m, k, act_ref, act_bytes) == EK_OK &&
             memcmp(act, act_ref, act_bytes) == 0;
    check(ok, "row activations equal oracle", format, m, n, k);
    float *expected = malloc(sizeof(float) * (size_t)m * n), *got = malloc(sizeof(float) * (size_t)m * n);
    const float untouched = -12345.0f;
    for (int i = 0; i < m * n; i++) got[i] = expected[i] = untouched;
    ok = ek_gemm_rows(EK_ISA_SCALAR, format, w, n, k, act_ref, m, expected, n, first, end) == EK_OK &&
         ek_gemm_rows(isa, format, w, n, k, act_ref, m, got, n, first, end) == EK_OK;
    ok = ok && rows_within_bound(got, expected, wf, x, m, n, k, first, end, untouched);
    check(ok, ek_row_kernel_is_simd(isa, format) ? "row kernel within bound" : "row oracle (no SIMD kernel)", format, m, n, k);
    if (ek_format_interleavable(format) && ek_interleaved_available(isa, format)) {
        /* the same product over the interleaved copy (on AVX-512 pairs of groups from 9 rows on) */
        const size_t il_bytes = ek_interleaved_size(format, n, k);
        uint8_t *il = malloc(il_bytes);
        for (int i = 0; i < m * n; i++) got[i] = untouched;
        ok = ek_interleave_weights(format, w, n, k, il, il_bytes) == EK_OK &&
             ek_gemm_interleaved(isa, format, il, n, k, act_ref, m, got, n, first, end) == EK_OK;
        ok = ok && rows_within_bound(got, expected, wf, x, m, n, k, first, end, untouched);
        check(ok, "interleaved kernel within bound", format, m, n, k);
        /* the AMD cores' decode GEMV over the same copy, called directly (the entry point takes it only there) */
        const ek_il_kernels *il_table = ek_il_kernels_for(isa);
        if (m == 1 && first < end && il_table != NULL && il_table->gemv_amd[format] != NULL) {
            for (int i = 0; i < m * n; i++) got[i] = untouched;
            il_table->gemv_amd[format](il, blocks_per_row, act_ref, ek_row_activation_size(format, 1, k), 1, got, n,
                                       first, end);
            check(rows_within_bound(got, expected, wf, x, m, n, k, first, end, untouched),
                  "interleaved AMD decode GEMV within bound", format, m, n, k);
        }
        free(il);
    }
    /* the AMD cores' decode-step row kernel, called directly (the entry point takes it only there) */
    const ek_row_kernels *row_table = ek_row_kernels_for(isa);
    if (m <= EK_ROWS_DECODE_ROWS && first < end && row_table != NULL && row_table->decode_amd[format] != NULL) {
        for (int i = 0; i < m * n; i++) got[i] = untouched;
        row_table->decode_amd[format](w, row_bytes, blocks_per_row, act_ref, ek_row_activation_size(format, 1, k), m,
                                      got, n, first, end);
        check(rows_within_bound(got, expected, wf, x, m, n, k, first, end, untouched),
              "AMD decode-step row kernel within bound", format, m, n, k);
    }
    free(w); free(x); free(wf); free(act); free(act_ref); free(expected); free(got);
}

/* A float-weight product against the scalar loop's: within 10⁻⁵·√k (relative above 1); counts and reports. */
static void check_float_product(int ok, const char *label, const float *got, const float *want, int m, int n, int k,
                                int first, int end) {
    for (int i = 0; ok && i < m * n; i++)
        ok = fabsf(got[i] - want[i]) <= 1e-5f * sqrtf((float)k) * fmaxf(1.0f, fabsf(want[i]));
    if (ok) {
        passed++;
    } else {
        failed++;
        printf("FAIL %s gemm m=%d n=%d k=%d rows %d..<%d\n", label, m, n, k, first, end);
    }
}

/* ek_gemm_half on `isa` against the scalar loop, fp16 or bf16 weights, rows [first, end). */
static void run_half(ek_isa isa, bool bf16, int m, int n, int k, int first, int end) {
    uint16_t *w = malloc(sizeof(uint16_t) * (size_t)n * k);
    float *x = malloc(sizeof(float) * (size_t)m * k);
    float *got = calloc((size_t)m * n, sizeof(float)), *want = calloc((size_t)m * n, sizeof(float));
    for (int i = 0; i < n * k; i++) {
        float value = uniform(1.0f);
        uint32_t bits;
        memcpy(&bits, &value, sizeof bits);
        w[i] = bf16 ? (uint16_t)(bits >> 16) : ek_fp32_to_fp16(value);
    }
    for (int i = 0; i < m * k; i++) x[i] = uniform(1.0f);
    int ok = ek_gemm_half(isa, bf16, w, n, k, x, m, got, n, first, end) == EK_OK &&
             ek_gemm_half(EK_ISA_SCALAR, bf16, w, n, k, x, m, want, n, first, end) == EK_OK;
    check_float_product(ok, bf16 ? "bf16" : "f16", got, want, m, n, k, first, end);
    free(w); free(x); free(got); free(want);
}

/* ek_gemm_f32 on `isa` against the scalar loop, weight rows [first, end). */
static void run_f32(ek_isa isa, int m, int n, int k, int first, int end) {
    float *w = malloc((size_t)n * k * sizeof(float)), *x = malloc((size_t)m * k * sizeof(float));
    float *got = calloc((size_t)m * n, sizeof(float)), *want = calloc((size_t)m * n, sizeof(float));
    for (int i = 0; i < n * k; i++) w[i] = uniform(1);
    for (int i = 0; i < m * k; i++) x[i] = uniform(1);
    int ok = ek_gemm_f32(isa, w, n, k, x, m, got, n, first, end) == EK_OK &&
             ek_gemm_f32(EK_ISA_SCALAR, w, n, k, x, m, want, n, first, end) == EK_OK;
    check_float_product(ok, "f32", got, want, m, n, k, first, end);
    free(w); free(x); free(got); free(want);
}

/* The row kernels' AMD-only decode forms on `isa` (the ISA's table: f32_one_row, half_amd) against the scalar loops, one
   activation row, rows [first, end): the entry points choose them by vendor, so without this a check on an Intel
   machine would never run them (nor the Intel forms on AMD, which the entry points cover there). */
static void run_vendor_forms(ek_isa isa, int n, int k, int first, int end) {
    const ek_row_kernels *table = ek_row_kernels_for(isa);
    if (table == NULL || (table->f32_one_row == NULL && table->half_amd == NULL)) return;
    float *w = malloc((size_t)n * k * sizeof(float)), *x = malloc((size_t)k * sizeof(float));
    uint16_t *half = malloc((size_t)n * k * sizeof(uint16_t));
    float *got = calloc((size_t)n, sizeof(float)), *want = calloc((size_t)n, sizeof(float));
    for (int i = 0; i < n * k; i++) w[i] = uniform(1);
    for (int i = 0; i < k; i++) x[i] = uniform(1);
    if (table->f32_one_row != NULL) {
        table->f32_one_row(w, k, x, 1, got, n, first, end);
        ek_gemm_f32_scalar(w, k, x, 1, want, n, first, end);
        check_float_product(1, "f32 (AMD form)", got, want, 1, n, k, first, end);
    }
    for (int bf16 = 0; bf16 < 2 && table->half_amd != NULL; bf16++) {
        for (int i = 0; i < n * k; i++) {
            uint32_t bits;
            memcpy(&bits, &w[i], sizeof bits);
            half[i] = bf16 ? (uint16_t)(bits >> 16) : ek_fp32_to_fp16(w[i]);
        }
        memset(got, 0, (size_t)n * sizeof(float));
        memset(want, 0, (size_t)n * sizeof(float));
        table->half_amd(bf16, half, k, x, 1, got, n, first, end);
        ek_gemm_half_scalar(bf16, half, k, x, 1, want, n, first, end);
        check_float_product(1, bf16 ? "bf16 (AMD form)" : "f16 (AMD form)", got, want, 1, n, k, first, end);
    }
    free(w); free(x); free(half); free(got); free(want);
}

int main(int argc, char **argv) {
    ek_isa isa;
    if (argc < 2 || ek_isa_parse(argv[1], &isa) != EK_OK) {
        fprintf(stderr, "usage: kernel_check scalar|avx2|avx512|neon|avx2-novnni|avx512-noamx|avx512-novnni\n");
        return 2;
    }
    ek_cpu_features features = ek_cpu_features_detect();
    if (!ek_isa_supported(isa, &features)) {
        fprintf(stderr, "%s is not supported here\n", argv[1]);
        return 2;
    }
    static const int shapes[][3] = {{1, 1, 32}, {1, 17, 576}, {1, 100, 1024}, {3, 16, 128}, {4, 33, 96},
                                    {5, 48, 576}, {7, 9, 256}, {17, 31, 160}};
    for (int f = 0; f < 3; f++) {
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            run(isa, (ek_format)f, shapes[s][0], shapes[s][1], shapes[s][2], 0);
        }
        run(isa, (ek_format)f, 6, 35, 512, 1);
        /* Sub-ranges starting and ending inside a group, as a thread's share does: pairs of groups with a
           partial first or last group, a lone group after pairs, and a range inside one group. */
        run_rows(isa, (ek_format)f, 9, 70, 256, 0, 5, 61);
        run_rows(isa, (ek_format)f, 6, 70, 96, 1, 21, 70);
        run_rows(isa, (ek_format)f, 13, 100, 64, 0, 16, 96);
        run_rows(isa, (ek_format)f, 4, 40, 128, 0, 17, 30);
        /* more than 16 rows: whole groups of Q8_0 take the sixteen-column tiles (every tile size) */
        run_rows(isa, (ek_format)f, 19, 70, 256, 0, 5, 61);
        run_rows(isa, (ek_format)f, 23, 48, 384, 1, 0, 48);
        /* 32 rows and more: AMX's chunks of 32 and a remainder in one half or both */
        run_rows(isa, (ek_format)f, 37, 70, 256, 0, 5, 61);
        run_rows(isa, (ek_format)f, 64, 48, 384, 1, 0, 48);
        run_rows(isa, (ek_format)f, 50, 33, 96, 0, 16, 33);
    }
    seven_bits = 1; /* Q8_0 again, its values within seven bits */
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) run(isa, EK_FORMAT_Q8_0, shapes[s][0], shapes[s][1], shapes[s][2], 0);
    run(isa, EK_FORMAT_Q8_0, 6, 35, 512, 1);
    run_rows(isa, EK_FORMAT_Q8_0, 9, 70, 256, 0, 5, 61);
    run_rows(isa, EK_FORMAT_Q8_0, 6, 70, 96, 1, 21, 70);
    /* more than 16 rows: whole groups take the sixteen-column tiles (every tile size), partial ones the half tiles */
    run_rows(isa, EK_FORMAT_Q8_0, 19, 70, 256, 0, 5, 61);
    run_rows(isa, EK_FORMAT_Q8_0, 18, 70, 96, 1, 21, 70);
    run_rows(isa, EK_FORMAT_Q8_0, 23, 48, 384, 1, 0, 48);
    run_rows(isa, EK_FORMAT_Q8_0, 45, 70, 256, 0, 5, 61);
    seven_bits = 0;
    /* row-scaled Q8_0: full range and seven bits, with and without column scales, odd shapes and row ranges */
    static const int row_scaled_shapes[][5] = {{1, 17, 576, 0, 17}, {3, 16, 128, 0, 16}, {4, 33, 96, 0, 33},
                                               {7, 70, 384, 5, 61}, {17, 31, 160, 0, 31}, {9, 100, 1536, 16, 96},
                                               {18, 48, 384, 0, 48}, {19, 70, 256, 5, 61}, {22, 64, 96, 16, 64},
                                               {33, 70, 384, 5, 61}, {50, 100, 1536, 16, 96}, {64, 37, 160, 0, 37}};
    for (int limit = 127; limit >= 63; limit -= 64)
        for (size_t s = 0; s < sizeof row_scaled_shapes / sizeof row_scaled_shapes[0]; s++) {
            const int *r = row_scaled_shapes[s];
            run_row_scaled(isa, r[0], r[1], r[2], limit, (int)(s % 2), 0, 0, r[3], r[4]);
            run_row_scaled(isa, r[0], r[1], r[2], limit, 1, 1, 0, r[3], r[4]);
        }
    run_row_scaled(isa, 6, 35, 512, 127, 0, 0, 1, 0, 35);
    run_row_scaled(isa, 5, 40, 256, 63, 0, 0, 1, 3, 38);
    for (int f = 0; f < EK_FORMAT_COUNT; f++) {
        if (ek_format_packable((ek_format)f)) continue;
        /* one to six activation rows; 9 to 17 (more than a tile: the GEMMs that decode a group's values once; on AVX-512
           the per-32 formats' tiles of two pairs of groups, 33 blocks: two decoded chunks) */
        static const int row_shapes[][5] = {{1, 37, 1, 0, 37}, {3, 19, 3, 2, 18}, {5, 17, 2, 1, 17}, {4, 33, 1, 0, 33},
                                            {6, 7, 5, 3, 7}, {9, 37, 2, 0, 37}, {17, 20, 1, 3, 20},
                                            {13, 70, 33, 5, 66}, {12, 64, 3, 21, 60}};
        for (size_t s = 0; s < sizeof row_shapes / sizeof row_shapes[0]; s++) {
            const int *r = row_shapes[s];
            run_row_format(isa, (ek_format)f, r[0], r[1], r[2], r[3], r[4]);
        }
    }
    /* decode (m ≤ 2), tiles, and from 40 rows the packed outer products (k over one or more column blocks, edges;
       more than 256 weight rows: AVX2's groups of rows, the last one and its last panel partial; 360 activation rows
       over three column blocks) */
    static const int half_shapes[][5] = {{1, 9, 77, 0, 9}, {1, 10, 576, 1, 9}, {1, 5, 135, 0, 5}, {1, 6, 1600, 1, 6},
                                         {2, 13, 64, 3, 13}, {5, 11, 40, 0, 11}, {7, 6, 257, 1, 5}, {45, 77, 300, 2, 77},
                                         {41, 70, 517, 0, 70}, {41, 300, 1100, 5, 299}, {360, 34, 1030, 1, 33}};
    for (int bf16 = 0; bf16 < 2; bf16++)
        for (size_t s = 0; s < sizeof half_shapes / sizeof half_shapes[0]; s++) {
            const int *h = half_shapes[s];
            run_half(isa, bf16, h[0], h[1], h[2], h[3], h[4]);
        }
    static const int f32_shapes[][5] = {{7, 13, 384, 3, 13}, {45, 77, 300, 2, 77}, {40, 70, 8, 0, 70},
                                        {517, 64, 20, 0, 64}, {43, 66, 257, 0, 66}, {45, 530, 600, 3, 529}, {360, 40, 1030, 0, 40},
                                        {1, 9, 77, 0, 9}, {1, 7, 40, 2, 7}, {1, 6, 1539, 0, 6},
                                        /* one row either side of the 8 KB rows AMD cores read one at a time */
                                        {1, 5, 2048, 0, 5}, {1, 7, 2051, 1, 7}};
    for (size_t s = 0; s < sizeof f32_shapes / sizeof f32_shapes[0]; s++) {
        const int *f = f32_shapes[s];
        run_f32(isa, f[0], f[1], f[2], f[3], f[4]);
    }
    /* short rows (one at a time on AMD), rows over the AVX2 build's 3 KB fp16 limit and over AVX-512's 8 KB fp32 one */
    static const int vendor_shapes[][4] = {{9, 77, 0, 9}, {10, 576, 1, 9}, {6, 1600, 0, 6}, {5, 2051, 1, 5}};
    for (size_t s = 0; s < sizeof vendor_shapes / sizeof vendor_shapes[0]; s++) {
        const int *v = vendor_shapes[s];
        run_vendor_forms(isa, v[0], v[1], v[2], v[3]);
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
