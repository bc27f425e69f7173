/*
 * example_backend.c — an out-of-tree backend for Ember (plugin ABI 2,
 * CKernels/include/ember_plugin.h): RMSNorm, SwiGLU and the residual add in
 * plain C on the CPU route, with a score above Ember's own CPU backends so it takes
 * those ops in every plan. It counts its calls so a host (or a test) can see
 * it ran in a real forward pass.
 *
 *   make examples      # → .build/plugins/libexample_backend.so
 *   EMBER_PLUGIN_PATH=$PWD/.build/plugins/libexample_backend.so ember plan --json
 *
 * The BROKEN_* macros build the broken variants the tests feed to Ember.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include "ember_plugin.h"

static int64_t calls[3];

/* How many times op 0 (RMSNorm), 1 (SwiGLU) or 2 (add) ran (for tests). */
int64_t example_backend_calls(int op) { return op >= 0 && op < 3 ? __atomic_load_n(&calls[op], __ATOMIC_RELAXED) : -1; }

static int32_t rms_norm(void *context, const float *x, const float *weight, float *out, int64_t rows, int64_t n, float eps) {
    (void)context;
    if (x == NULL || weight == NULL || out == NULL || rows < 0 || n <= 0) return 1;
    __atomic_add_fetch(&calls[0], 1, __ATOMIC_RELAXED);
#if defined(BROKEN_CRASH)
    volatile float *bad = NULL;
    bad[rows] = 1; /* writes through a NULL pointer: SIGSEGV */
#endif
    for (int64_t r = 0; r < rows; r++) {
        const float *row = x + r * n;
        double sum = 0; /* the sum of squares in double, as Ember's reference does */
        for (int64_t i = 0; i < n; i++) sum += (double)(row[i] * row[i]);
        float scale = 1.0f / sqrtf((float)(sum / (double)n) + eps);
        for (int64_t i = 0; i < n; i++) out[r * n + i] = row[i] * scale * weight[i];
    }
    return 0;
}

static int32_t swiglu(void *context, const float *gate, const float *up, float *out, int64_t n) {
    (void)context;
    if (gate == NULL || up == NULL || out == NULL || n < 0) return 1;
#if defined(BROKEN_ERROR)
    return 7;
#endif
#if defined(BROKEN_RUNTIME_ERROR)
    if (n < 600) return 9; /* Ember's check and timing use 600 and 3200 values: fails only in a forward pass */
#endif
    __atomic_add_fetch(&calls[1], 1, __ATOMIC_RELAXED);
    for (int64_t i = 0; i < n; i++) out[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
#if defined(BROKEN_OVERRUN)
    out[n] = 0; /* writes one value past the output it was given */
#endif
    return 0;
}

/* x += y over n values (the residual stream). */
static int32_t add(void *context, float *x, const float *y, int64_t n) {
    (void)context;
    if (x == NULL || y == NULL || n < 0) return 1;
    __atomic_add_fetch(&calls[2], 1, __ATOMIC_RELAXED);
    for (int64_t i = 0; i < n; i++) x[i] += y[i];
#if defined(BROKEN_WRONG)
    if (n > 0) x[0] += 0.25f; /* a result that disagrees with the reference */
#endif
    return 0;
}

static const ember_op_support supports[] = {
    {EMBER_OP_RMS_NORM, EMBER_TYPE_F32},
    {EMBER_OP_SWIGLU, EMBER_TYPE_F32},
#if defined(BROKEN_UNKNOWN_OP)
    {99, EMBER_TYPE_F32},
#else
    {EMBER_OP_ADD, EMBER_TYPE_F32},
#endif
};

static const ember_backend backends[] = {{
#if defined(BROKEN_SHORT_BACKEND)
    .size = sizeof(ember_backend) - 4, /* no size the ABI ever had */
#elif defined(EARLIER_SIZE_2_0)
    .size = EMBER_BACKEND_SIZE_2_0, /* as a plugin built against ABI 2's first header (ending at `mul`) says */
#elif defined(EARLIER_SIZE_2_1)
    .size = EMBER_BACKEND_SIZE_2_1, /* … and its second (ending at `geglu`) */
#else
    .size = sizeof(ember_backend),
#endif
    .abi_version = EMBER_PLUGIN_ABI_VERSION,
    .name = "example-c",
    .unit = EMBER_UNIT_CPU,
    .flags = EMBER_BACKEND_CONCURRENT,
    .required_features = 0,
    .score = 1000,
    .context = NULL,
    .support_count = sizeof supports / sizeof supports[0],
    .supports = supports,
    .rms_norm = rms_norm,
    .swiglu = swiglu,
#if !defined(BROKEN_NULL_FUNCTION)
    .add = add,
#endif
}};

static const ember_plugin plugin = {
#if defined(BROKEN_SHORT_TABLE)
    .size = 12,
#else
    .size = sizeof(ember_plugin),
#endif
#if defined(BROKEN_VERSION_1)
    .abi_version = 1,
#elif defined(BROKEN_VERSION)
    .abi_version = EMBER_PLUGIN_ABI_VERSION + 1,
#else
    .abi_version = EMBER_PLUGIN_ABI_VERSION,
#endif
    .name = "example",
    .backend_count = 1,
    .backends = backends,
};

#if !defined(BROKEN_NO_ENTRY)
const ember_plugin *ember_plugin_entry(void) { return &plugin; }
#endif
