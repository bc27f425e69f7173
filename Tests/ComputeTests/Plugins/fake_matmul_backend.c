/*
 * fake_matmul_backend.c — a fake backend for the tests (not an example to
 * copy): an fp32 matmul through every part of the plugin ABI's matmul path —
 * bind_weights (a private copy of the weights), release_weights,
 * activation_bytes and quantize_activations (an identity "quantization"
 * into the backend's own buffer) — on the CPU route, score 1000. The
 * BROKEN_* macros make it fail in the ways Ember must catch.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "ember_plugin.h"

static int64_t binds, releases, products;

int64_t fake_matmul_binds(void) { return __atomic_load_n(&binds, __ATOMIC_RELAXED); }
int64_t fake_matmul_releases(void) { return __atomic_load_n(&releases, __ATOMIC_RELAXED); }
int64_t fake_matmul_products(void) { return __atomic_load_n(&products, __ATOMIC_RELAXED); }

typedef struct bound { int64_t rows, columns; float values[]; } bound;

static int32_t bind_weights(void *context, uint32_t type, int64_t rows, int64_t columns, const void *data, size_t bytes, void **out) {
    (void)context;
    if (type != EMBER_TYPE_F32 || data == NULL || out == NULL || bytes != (size_t)(rows * columns) * sizeof(float)) return 1;
    bound *copy = malloc(sizeof(bound) + bytes);
    if (copy == NULL) return 2;
    copy->rows = rows;
    copy->columns = columns;
    memcpy(copy->values, data, bytes);
    __atomic_add_fetch(&binds, 1, __ATOMIC_RELAXED);
    *out = copy;
    return 0;
}

static void release_weights(void *context, void *weights) {
    (void)context;
    free(weights);
    __atomic_add_fetch(&releases, 1, __ATOMIC_RELAXED);
}

static size_t activation_bytes(void *context, uint32_t type, int64_t m, int64_t k) {
    (void)context;
    (void)type;
#if defined(BROKEN_NONLINEAR)
    return (size_t)(m * k) * sizeof(float) + 16; /* a header before the rows: not linear in m */
#else
    return (size_t)(m * k) * sizeof(float);
#endif
}

static int32_t quantize_activations(void *context, uint32_t type, const float *x, int64_t m, int64_t k, void *out, size_t capacity) {
    if (x == NULL || out == NULL || capacity < activation_bytes(context, type, m, k)) return 1;
    memcpy(out, x, (size_t)(m * k) * sizeof(float));
    return 0;
}

static int32_t matmul(void *context, const void *weights, uint32_t type, int64_t n, int64_t k, const float *x, const void *prepared,
                      int64_t m, float *y, int64_t ldy, int64_t row_begin, int64_t row_end) {
    (void)context;
    (void)x;
    const bound *w = weights;
    if (type != EMBER_TYPE_F32 || w == NULL || prepared == NULL || w->rows != n || w->columns != k) return 1;
#if defined(BROKEN_MATMUL_ERROR)
    return 5;
#endif
#if defined(BROKEN_MATMUL_LATER)
    if (m == 4) return 6; /* Ember's check and timing use 3 and 16 rows: fails only in the test's 4-token pass */
#endif
#if defined(BROKEN_MATMUL_RANGE)
    row_begin = 0;
    row_end = n; /* ignores the rows it was given */
#endif
    __atomic_add_fetch(&products, 1, __ATOMIC_RELAXED);
    const float *a = prepared;
    for (int64_t i = 0; i < m; i++) {
        for (int64_t r = row_begin; r < row_end; r++) {
            double sum = 0;
            for (int64_t j = 0; j < k; j++) sum += (double)a[i * k + j] * w->values[r * k + j];
            y[i * ldy + r] = (float)sum;
        }
    }
    return 0;
}

static const ember_op_support supports[] = {{EMBER_OP_MATMUL, EMBER_TYPE_F32}, {EMBER_OP_QUANTIZE_ACTIVATIONS, EMBER_TYPE_F32}};

static const ember_backend backends[] = {{
    .size = sizeof(ember_backend),
    .abi_version = EMBER_PLUGIN_ABI_VERSION,
    .name = "fake-matmul",
    .unit = EMBER_UNIT_CPU,
    .flags = 0, /* not concurrent: Ember serialises its calls */
    .score = 1000,
    .support_count = 2,
    .supports = supports,
    .bind_weights = bind_weights,
    .release_weights = release_weights,
    .matmul = matmul,
    .activation_bytes = activation_bytes,
    .quantize_activations = quantize_activations,
}};

static const ember_plugin plugin = {
    .size = sizeof(ember_plugin),
    .abi_version = EMBER_PLUGIN_ABI_VERSION,
    .name = "fake-matmul",
    .backend_count = 1,
    .backends = backends,
};

const ember_plugin *ember_plugin_entry(void) { return &plugin; }
