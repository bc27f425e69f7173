/*
 * example_plugin.c — a deliberately simple out-of-tree kernel plugin: an fp32
 * matmul for the CPU route with a high score, so Ember picks it over its own
 * portable kernel. It counts its calls so a host (or a test) can see it ran.
 *
 *   cc -O2 -shared -fPIC -I ../../CKernels/include example_plugin.c -o libexample_plugin.so
 *   EMBER_PLUGIN_PATH=$PWD/libexample_plugin.so ember info
 *
 * The BROKEN_* macros build the broken variants the tests feed to the loader.
 */
#include <stdint.h>
#include <stddef.h>
#include "ember_plugin.h"

static int64_t calls = 0;

/* How many times the kernel ran (for tests). */
int64_t example_plugin_calls(void) { return __atomic_load_n(&calls, __ATOMIC_RELAXED); }

static int32_t naive_matmul(const float *x, const void *weights, float *y, int64_t m, int64_t n, int64_t k,
                            int64_t row_begin, int64_t row_end) {
    const float *w = weights;
    if (x == NULL || w == NULL || y == NULL || row_begin < 0 || row_end > n) return 1;
    __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);
    for (int64_t i = 0; i < m; i++) {
        for (int64_t r = row_begin; r < row_end; r++) {
            float sum = 0;
            for (int64_t j = 0; j < k; j++) sum += x[i * k + j] * w[r * k + j];
            y[i * n + r] = sum;
        }
    }
    return 0;
}

static const ember_kernel_descriptor kernels[] = {{
#if defined(BROKEN_SHORT_DESCRIPTOR)
    .size = sizeof(ember_kernel_descriptor) - 8,
#else
    .size = sizeof(ember_kernel_descriptor),
#endif
    .abi_version = EMBER_PLUGIN_ABI_VERSION,
    .name = "example-naive-sgemm",
#if defined(BROKEN_UNKNOWN_OP)
    .op = 99,
#else
    .op = EMBER_OP_MATMUL,
#endif
    .weight_format = EMBER_FORMAT_F32,
    .unit = EMBER_UNIT_CPU,
    .required_features = 0,
    .score = 1000,
#if defined(BROKEN_NULL_FUNCTION)
    .function = NULL,
#else
    .function = naive_matmul,
#endif
}};

static const ember_plugin_table table = {
#if defined(BROKEN_SHORT_TABLE)
    .size = 12,
#else
    .size = sizeof(ember_plugin_table),
#endif
#if defined(BROKEN_VERSION)
    .abi_version = EMBER_PLUGIN_ABI_VERSION + 1,
#else
    .abi_version = EMBER_PLUGIN_ABI_VERSION,
#endif
    .name = "example",
    .kernel_count = 1,
    .kernels = kernels,
};

#if !defined(BROKEN_NO_ENTRY)
const ember_plugin_table *ember_plugin_entry(void) { return &table; }
#endif
