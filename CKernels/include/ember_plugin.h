/*
 * ember_plugin.h — the versioned C ABI through which kernels reach Ember.
 *
 * A plugin is a shared library that exports one function,
 *
 *     const ember_plugin_table *ember_plugin_entry(void);
 *
 * returning a table that lives as long as the library: the ABI version, the
 * table's size, the plugin's name, and its kernels. Every struct that
 * crosses the ABI starts with its `size` and `abi_version`, so Ember can
 * refuse a table built against another version of this header instead of
 * reading past its end. Ember checks every field and refuses a bad plugin
 * with an error naming the field; the rest of Ember keeps working.
 *
 * Weights reach a kernel in GGUF layout (row after row of blocks, or fp32
 * rows for EMBER_FORMAT_F32); activations and outputs are fp32, row-major.
 */
#ifndef EMBER_PLUGIN_H
#define EMBER_PLUGIN_H

#include <stdint.h>

#define EMBER_PLUGIN_ABI_VERSION 1u
#define EMBER_PLUGIN_ENTRY_SYMBOL "ember_plugin_entry"

/* Operations a kernel can implement. */
typedef enum ember_op {
    EMBER_OP_MATMUL = 1, /* Y[m×n] = X[m×k]·Wᵀ, W n×k */
} ember_op;

/* Weight formats, numbered as GGUF's tensor types. */
typedef enum ember_weight_format {
    EMBER_FORMAT_F32 = 0,
    EMBER_FORMAT_Q4_0 = 2,
    EMBER_FORMAT_Q4_1 = 3,
    EMBER_FORMAT_Q8_0 = 8,
} ember_weight_format;

/* The compute-unit route a kernel belongs to. */
typedef enum ember_unit {
    EMBER_UNIT_CPU = 0,
    EMBER_UNIT_GPU = 1,
    EMBER_UNIT_NEURAL_ENGINE = 2,
} ember_unit;

/* CPU features a kernel may require (bit set). */
#define EMBER_FEATURE_AVX2 (1u << 0)
#define EMBER_FEATURE_FMA (1u << 1)
#define EMBER_FEATURE_F16C (1u << 2)
#define EMBER_FEATURE_AVX512F (1u << 3)
#define EMBER_FEATURE_AVX512BW (1u << 4)
#define EMBER_FEATURE_AVX512VL (1u << 5)
#define EMBER_FEATURE_AVX512VNNI (1u << 6)
#define EMBER_FEATURE_AVXVNNI (1u << 7)
#define EMBER_FEATURE_NEON (1u << 8)
#define EMBER_FEATURE_DOTPROD (1u << 9)
#define EMBER_FEATURE_ALL 0x3ffu /* every bit above */

/*
 * A matmul kernel: writes Y columns [row_begin, row_end) (weight rows), all m
 * activation rows; returns 0, or non-zero to report failure.
 */
typedef int32_t (*ember_matmul_kernel)(const float *x, const void *w, float *y, int64_t m, int64_t n, int64_t k,
                                       int64_t row_begin, int64_t row_end);

typedef struct ember_kernel_descriptor {
    uint32_t size;                  /* sizeof(ember_kernel_descriptor) */
    uint32_t abi_version;           /* EMBER_PLUGIN_ABI_VERSION */
    const char *name;               /* unique within the plugin, 1–63 printable characters */
    uint32_t op;                    /* ember_op */
    uint32_t weight_format;         /* ember_weight_format */
    uint32_t unit;                  /* ember_unit */
    uint32_t required_features;     /* EMBER_FEATURE_* bits */
    int32_t score;                  /* higher wins among kernels for the same op, format and unit */
    ember_matmul_kernel function;   /* non-NULL */
} ember_kernel_descriptor;

typedef struct ember_plugin_table {
    uint32_t size;                  /* sizeof(ember_plugin_table) */
    uint32_t abi_version;           /* EMBER_PLUGIN_ABI_VERSION */
    const char *name;               /* 1–63 printable characters */
    uint32_t kernel_count;          /* 1–256 */
    const ember_kernel_descriptor *kernels;
} ember_plugin_table;

typedef const ember_plugin_table *(*ember_plugin_entry_fn)(void);

#endif /* EMBER_PLUGIN_H */
