/*
 * ember_plugin.h — the versioned C ABI through which backends reach Ember (ABI version 2).
 *
 * A plugin is a shared library that exports one function,
 *
 *     const ember_plugin *ember_plugin_entry(void);
 *
 * returning a table that lives as long as the library: the ABI version, the
 * table's size, the plugin's name and its backends. A backend says which ops
 * it runs on which tensor types, the compute-unit route it belongs to, whether
 * Ember may call it from several threads at once, how it binds weights, and a
 * function per op. Ember's own CPU SIMD, BLAS and scalar paths are backends of
 * the same shape (the ops' signatures below are theirs too).
 *
 * Every struct that crosses the ABI starts with its `size` and `abi_version`,
 * so Ember refuses a table built against another version of this header
 * instead of reading past its end (a backend table of ABI 2's first size,
 * before `attention` and `geglu` were appended, is read with those NULL, and
 * one of its second size, before `sequence_attention`, with that NULL); Ember reads the tables through a fault
 * guard. It checks every field, runs each declared op on test data against
 * its scalar reference (with guard values around every output, the matmul's
 * and the prepared activations' included, and the inputs compared after the
 * call) before it places anything on the backend, and disables a backend
 * that crashes, writes out of bounds, changes its inputs, returns an error or
 * computes wrong results, with a logged reason; its ops go to the next
 * backend. A call that fails during a forward pass disables the backend the
 * same way: that call is redone by Ember's scalar reference, and the plans
 * made after it place the op on the next backend.
 *
 * Conventions: activations and outputs are fp32, row-major; tensor types are
 * GGUF's type ids (EMBER_TYPE_*); every function returns 0 on success and
 * non-zero on failure; `context` is the backend's own pointer, handed back.
 */
#ifndef EMBER_PLUGIN_H
#define EMBER_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#define EMBER_PLUGIN_ABI_VERSION 2u
#define EMBER_PLUGIN_ENTRY_SYMBOL "ember_plugin_entry"

/* Operations a backend can run. */
typedef enum ember_op {
    EMBER_OP_MATMUL = 1,               /* Y[m×n] = X[m×k]·Wᵀ over a range of weight rows (GEMV when m = 1) */
    EMBER_OP_EMBEDDING = 2,            /* one row of a token table, in the table's type, to fp32 */
    EMBER_OP_RMS_NORM = 3,
    EMBER_OP_LAYER_NORM = 4,
    EMBER_OP_ROPE = 5,
    EMBER_OP_ATTENTION_SCORES = 6,     /* scale·q·Kᵀ over the cached keys of one head */
    EMBER_OP_SOFTMAX = 7,
    EMBER_OP_ATTENTION_VALUES = 8,     /* Σ p·V over the cached values of one head */
    EMBER_OP_SILU = 9,
    EMBER_OP_GELU = 10,
    EMBER_OP_SWIGLU = 11,
    EMBER_OP_ADD = 12,
    EMBER_OP_MUL = 13,
    EMBER_OP_QUANTIZE_ACTIVATIONS = 14, /* fp32 rows into the blocks the backend's matmul reads */
    EMBER_OP_ATTENTION = 15,           /* one head over its cached keys and values in one pass (online softmax) */
    EMBER_OP_GEGLU = 16,               /* gelu(gate)·up, GELU's tanh form (Gemma's feed-forward) */
    EMBER_OP_SEQUENCE_ATTENTION = 17   /* every query of one sequence and head against all its keys (an encoder's) */
} ember_op;

/* Tensor types, numbered as GGUF's: the ones Ember computes with may be declared (F32, F16, BF16 and the block types below);
   a type Ember cannot check an op on is refused. */
typedef enum ember_type {
    EMBER_TYPE_F32 = 0,
    EMBER_TYPE_F16 = 1,
    EMBER_TYPE_Q4_0 = 2,
    EMBER_TYPE_Q4_1 = 3,
    EMBER_TYPE_Q5_0 = 6,
    EMBER_TYPE_Q5_1 = 7,
    EMBER_TYPE_Q8_0 = 8,
    EMBER_TYPE_Q2_K = 10,
    EMBER_TYPE_Q3_K = 11,
    EMBER_TYPE_Q4_K = 12,
    EMBER_TYPE_Q5_K = 13,
    EMBER_TYPE_Q6_K = 14,
    EMBER_TYPE_IQ4_NL = 20,
    EMBER_TYPE_IQ4_XS = 23,
    EMBER_TYPE_BF16 = 30,
} ember_type;

/* The compute-unit route a backend belongs to: a host's unit preferences choose among routes. */
typedef enum ember_unit {
    EMBER_UNIT_CPU = 0,
    EMBER_UNIT_GPU = 1,
    EMBER_UNIT_NEURAL_ENGINE = 2,
} ember_unit;

/* Backend flags. */
#define EMBER_BACKEND_CONCURRENT (1u << 0) /* ops may run on several threads at once over disjoint outputs */

/* CPU features a backend may require (bit set); a backend whose features the CPU lacks is skipped. */
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

/* --------------------------------------------------------------- ops --- */

/*
 * Y[i][r] for activation rows i < m and weight rows r in [row_begin, row_end):
 * Σ_j X[i][j]·W[r][j]; Y has row stride ldy ≥ n. `weights` is what
 * bind_weights returned, or the tensor's GGUF bytes (row after row) when the
 * backend has no bind_weights. `prepared` is the output of the backend's
 * quantize_activations for X when it declares one for this type, else NULL.
 */
typedef int32_t (*ember_matmul_fn)(void *context, const void *weights, uint32_t type, int64_t n, int64_t k,
                                   const float *x, const void *prepared, int64_t m, float *y, int64_t ldy,
                                   int64_t row_begin, int64_t row_end);
/*
 * Bytes quantize_activations writes for m rows of k; 0 when it cannot. The rows lie one after another, each the
 * same size, so m rows take m times one row's bytes (Ember's threads prepare row ranges at a row's offset), and a
 * row takes at most 64 bytes per value: both are checked at load.
 */
typedef size_t (*ember_activation_bytes_fn)(void *context, uint32_t weight_type, int64_t m, int64_t k);
/* m rows of k fp32 activations into `out` (capacity bytes), for a matmul on weights of `weight_type`. */
typedef int32_t (*ember_quantize_activations_fn)(void *context, uint32_t weight_type, const float *x, int64_t m,
                                                 int64_t k, void *out, size_t capacity);
/* One row of `columns` values of a token table in `type` (its GGUF bytes at `row`) into fp32 `out`. */
typedef int32_t (*ember_embedding_fn)(void *context, uint32_t type, const void *row, int64_t columns, float *out);
/* out[r] = x[r] / sqrt(mean(x[r]²) + eps) · weight, for `rows` rows of n. */
typedef int32_t (*ember_rms_norm_fn)(void *context, const float *x, const float *weight, float *out, int64_t rows,
                                     int64_t n, float eps);
/* out[r] = (x[r] − mean) / sqrt(variance + eps) · gamma + beta, for `rows` rows of n. */
typedef int32_t (*ember_layer_norm_fn)(void *context, const float *x, const float *gamma, const float *beta, float *out,
                                       int64_t rows, int64_t n, float eps);
/*
 * Rotates `heads` heads of head_dim values in x by `angles` ((cos, sin) per
 * pair, head_dim / 2 pairs). mode 0 rotates adjacent pairs (2i, 2i+1); mode 2
 * (NeoX) rotates (i, i + head_dim/2).
 */
typedef int32_t (*ember_rope_fn)(void *context, float *x, int64_t heads, int64_t head_dim, const float *angles,
                                 uint32_t mode);
/*
 * scores[p] = scale · q·K[p] for p < visible; key p starts p·stride elements
 * after `keys`, in `cache_type` (F32 or F16; with F16, q is rounded to fp16 first).
 */
typedef int32_t (*ember_attention_scores_fn)(void *context, uint32_t cache_type, const float *q, const void *keys,
                                             int64_t stride, int64_t visible, int64_t head_dim, float scale,
                                             float *scores);
/* Each of `rows` rows of n: x = exp(x − max) / Σ exp(x − max), in place. */
typedef int32_t (*ember_softmax_fn)(void *context, float *x, int64_t rows, int64_t n);
/*
 * out = Σ_p weights[p]·V[p] over p < visible (value rows as the keys above;
 * with F16, each weight is rounded to fp16 first).
 */
typedef int32_t (*ember_attention_values_fn)(void *context, uint32_t cache_type, const float *weights,
                                             const void *values, int64_t stride, int64_t visible, int64_t head_dim,
                                             float *out);
/*
 * out = softmax(scale · q·Kᵀ)·V over p < visible, keys and values as above (rows `stride` elements apart, in
 * `cache_type`), in one pass: the softmax computed online — a running maximum and sum, the output rescaled whenever
 * the maximum grows — as flash attention does.
 */
typedef int32_t (*ember_attention_fn)(void *context, uint32_t cache_type, const float *q, const void *keys,
                                      const void *values, int64_t stride, int64_t visible, int64_t head_dim, float scale,
                                      float *out);
/*
 * Bidirectional attention of one head over one whole sequence (an encoder's self-attention): for each of the `rows`
 * query rows i, out[i] = softmax(scale · q[i]·Kᵀ)·V over all `rows` key and value rows of the sequence. q, keys,
 * values and out rows are `stride` elements apart (keys and values in `cache_type`, q and out fp32); out does not
 * overlap the inputs.
 */
typedef int32_t (*ember_sequence_attention_fn)(void *context, uint32_t cache_type, const float *q, const void *keys,
                                               const void *values, int64_t stride, int64_t rows, int64_t head_dim,
                                               float scale, float *out);
/* In place over n values: SiLU x·σ(x), or GELU 0.5·x·(1 + erf(x/√2)). */
typedef int32_t (*ember_unary_fn)(void *context, float *x, int64_t n);
/* out = silu(gate) · up over n values (SWIGLU); out = gelu(gate) · up, GELU's tanh form, over n values (GEGLU). */
typedef int32_t (*ember_swiglu_fn)(void *context, const float *gate, const float *up, float *out, int64_t n);
/* x = x + y (ADD) or x = x · y (MUL) over n values. */
typedef int32_t (*ember_binary_fn)(void *context, float *x, const float *y, int64_t n);

/* One op on one tensor type that a backend runs (the activations' type F32 for element-wise ops). */
typedef struct ember_op_support {
    uint32_t op;   /* ember_op */
    uint32_t type; /* ember_type: the weights' (matmul, embedding), the KV cache's (attention), else F32 */
} ember_op_support;

/* One backend: what it runs, where, and how. Functions for undeclared ops may be NULL. */
typedef struct ember_backend {
    uint32_t size;                 /* sizeof(ember_backend) */
    uint32_t abi_version;          /* EMBER_PLUGIN_ABI_VERSION */
    const char *name;              /* unique in the process, 1–63 printable characters */
    uint32_t unit;                 /* ember_unit */
    uint32_t flags;                /* EMBER_BACKEND_* */
    uint32_t required_features;    /* EMBER_FEATURE_* */
    int32_t score;                 /* higher wins among backends of one route for the same op and type */
    void *context;                 /* handed back to every function below */
    uint32_t support_count;        /* 1–1024 */
    const ember_op_support *supports;

    /* Optional: 0 when the backend can run here (called once, before Ember's own checks). */
    int32_t (*self_test)(void *context);
    /* Optional: make `bound` from a weight matrix (rows × columns of `type`, `bytes` GGUF bytes) once, at load. */
    int32_t (*bind_weights)(void *context, uint32_t type, int64_t rows, int64_t columns, const void *data,
                            size_t bytes, void **bound);
    /* Optional (with bind_weights): frees what bind_weights made. */
    void (*release_weights)(void *context, void *bound);

    ember_matmul_fn matmul;
    ember_activation_bytes_fn activation_bytes;
    ember_quantize_activations_fn quantize_activations;
    ember_embedding_fn embedding;
    ember_rms_norm_fn rms_norm;
    ember_layer_norm_fn layer_norm;
    ember_rope_fn rope;
    ember_attention_scores_fn attention_scores;
    ember_softmax_fn softmax;
    ember_attention_values_fn attention_values;
    ember_unary_fn silu;
    ember_unary_fn gelu;
    ember_swiglu_fn swiglu;
    ember_binary_fn add;
    ember_binary_fn mul;

    /* Added to ABI 2 later: a table built against the earlier header (its size EMBER_BACKEND_SIZE_2_0) is read
       with these NULL, so it cannot declare their ops. */
    ember_attention_fn attention;
    ember_swiglu_fn geglu;
    /* Appended after those: a table of the size before it (EMBER_BACKEND_SIZE_2_1) is read with it NULL. */
    ember_sequence_attention_fn sequence_attention;
} ember_backend;

/* sizeof(ember_backend) in the first ABI 2 header, which ended at `mul`, and in the second, which ended at `geglu`:
   Ember reads such tables too. */
#define EMBER_BACKEND_SIZE_2_0 (offsetof(ember_backend, attention))
#define EMBER_BACKEND_SIZE_2_1 (offsetof(ember_backend, sequence_attention))

/* What ember_plugin_entry returns. */
typedef struct ember_plugin {
    uint32_t size;                 /* sizeof(ember_plugin) */
    uint32_t abi_version;          /* EMBER_PLUGIN_ABI_VERSION */
    const char *name;              /* 1–63 printable characters */
    uint32_t backend_count;        /* 1–16 */
    const ember_backend *backends;
} ember_plugin;

typedef const ember_plugin *(*ember_plugin_entry_fn)(void);

#endif /* EMBER_PLUGIN_H */
