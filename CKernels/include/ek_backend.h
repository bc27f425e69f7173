/*
 * ek_backend.h — Ember's own CPU ops with the plugin ABI's signatures
 * (ember_plugin.h), so the built-in backends are op tables like any
 * plugin's; and the guarded calls through which Ember runs a plugin's
 * functions, so a plugin that crashes is disabled instead of taking the
 * process down.
 */
#ifndef EK_BACKEND_H
#define EK_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "ek_cpu.h"
#include "ember_plugin.h"

/* The context a built-in backend hands its ops: the kernel ISA they run (EK_ISA_SCALAR: the portable oracle). */
typedef struct ek_backend_context {
    ek_isa isa;
} ek_backend_context;

int32_t ek_op_embedding(void *context, uint32_t type, const void *row, int64_t columns, float *out);
int32_t ek_op_rms_norm(void *context, const float *x, const float *weight, float *out, int64_t rows, int64_t n, float eps);
int32_t ek_op_layer_norm(void *context, const float *x, const float *gamma, const float *beta, float *out, int64_t rows,
                         int64_t n, float eps);
int32_t ek_op_rope(void *context, float *x, int64_t heads, int64_t head_dim, const float *angles, uint32_t mode);
int32_t ek_op_attention_scores(void *context, uint32_t cache_type, const float *q, const void *keys, int64_t stride,
                               int64_t visible, int64_t head_dim, float scale, float *scores);
int32_t ek_op_softmax(void *context, float *x, int64_t rows, int64_t n);
int32_t ek_op_attention_values(void *context, uint32_t cache_type, const float *weights, const void *values,
                               int64_t stride, int64_t visible, int64_t head_dim, float *out);
int32_t ek_op_silu(void *context, float *x, int64_t n);
int32_t ek_op_gelu(void *context, float *x, int64_t n);
int32_t ek_op_swiglu(void *context, const float *gate, const float *up, float *out, int64_t n);
int32_t ek_op_geglu(void *context, const float *gate, const float *up, float *out, int64_t n);
int32_t ek_op_attention(void *context, uint32_t cache_type, const float *q, const void *keys, const void *values,
                        int64_t stride, int64_t visible, int64_t head_dim, float scale, float *out);
/* `heads` query heads sharing one key/value head (grouped-query attention), head j at q + j·head_dim, into
   out + j·head_dim: ek_op_attention for each, to rounding, each key and value read once for up to three heads
   (ek_attention_group_for). Not in the plugin ABI: the built-in backends' form of their `attention` op, which
   plugins run one head at a time. */
typedef int32_t (*ek_attention_group_fn)(void *context, uint32_t cache_type, const float *q, int64_t heads,
                                         const void *keys, const void *values, int64_t stride, int64_t visible,
                                         int64_t head_dim, float scale, float *out);
int32_t ek_op_attention_group(void *context, uint32_t cache_type, const float *q, int64_t heads, const void *keys,
                              const void *values, int64_t stride, int64_t visible, int64_t head_dim, float scale,
                              float *out);
int32_t ek_op_sequence_attention(void *context, uint32_t cache_type, const float *q, const void *keys, const void *values,
                                 int64_t stride, int64_t rows, int64_t head_dim, float scale, float *out);
int32_t ek_op_add(void *context, float *x, const float *y, int64_t n);
int32_t ek_op_mul(void *context, float *x, const float *y, int64_t n);

/* A flag one thread sets and others read without a lock (a disabled backend): atomic loads and stores. */
int32_t ek_flag_load(const int32_t *flag);
void ek_flag_store(int32_t *flag, int32_t value);

/* ------------------------------------------------------ guarded calls --- */

/*
 * What a guarded call returns when the function it ran raised SIGSEGV,
 * SIGBUS, SIGILL or SIGFPE; ek_guard_last_signal() says which.
 */
enum { EK_GUARD_CRASHED = INT32_MIN };

/*
 * Installs the fault handler once per process (idempotent, thread-safe). A
 * fault inside a guarded call on the faulting thread jumps back out of the
 * call; any other fault goes to the handler that was installed before, or
 * to the default action.
 */
void ek_guard_install(void);
/* The signal that ended this thread's last crashed guarded call, 0 if none. */
int ek_guard_last_signal(void);

/* Calls a plugin's entry point; *out receives its table (NULL if it crashed). */
int32_t ek_guarded_plugin_entry(ember_plugin_entry_fn entry, const ember_plugin **out);
int32_t ek_guarded_self_test(int32_t (*function)(void *), void *context);
int32_t ek_guarded_release_weights(void (*function)(void *, void *), void *context, void *bound);
/* Copies `bytes` from `source` (memory a plugin handed over) into `destination`: 0, or EK_GUARD_CRASHED when reading
   it faulted (a bad pointer, a count that runs past the plugin's table). */
int32_t ek_guarded_read(void *destination, const void *source, size_t bytes);
/* Copies the C string at `source` into `destination` (capacity bytes, always terminated): its length, -1 when it is
   longer than capacity − 1, -2 when reading it faulted or an argument is NULL. */
int64_t ek_guarded_read_string(char *destination, const char *source, size_t capacity);
int32_t ek_guarded_bind_weights(int32_t (*function)(void *, uint32_t, int64_t, int64_t, const void *, size_t, void **),
                                void *context, uint32_t type, int64_t rows, int64_t columns, const void *data,
                                size_t bytes, void **bound);
/* ek_guarded_activation_bytes returns 0 (and records the signal) when the call crashed. */
size_t ek_guarded_activation_bytes(ember_activation_bytes_fn function, void *context, uint32_t weight_type, int64_t m,
                                   int64_t k);
int32_t ek_guarded_quantize_activations(ember_quantize_activations_fn function, void *context, uint32_t weight_type,
                                        const float *x, int64_t m, int64_t k, void *out, size_t capacity);
int32_t ek_guarded_matmul(ember_matmul_fn function, void *context, const void *weights, uint32_t type, int64_t n,
                          int64_t k, const float *x, const void *prepared, int64_t m, float *y, int64_t ldy,
                          int64_t row_begin, int64_t row_end);
int32_t ek_guarded_embedding(ember_embedding_fn function, void *context, uint32_t type, const void *row, int64_t columns,
                             float *out);
int32_t ek_guarded_rms_norm(ember_rms_norm_fn function, void *context, const float *x, const float *weight, float *out,
                            int64_t rows, int64_t n, float eps);
int32_t ek_guarded_layer_norm(ember_layer_norm_fn function, void *context, const float *x, const float *gamma,
                              const float *beta, float *out, int64_t rows, int64_t n, float eps);
int32_t ek_guarded_rope(ember_rope_fn function, void *context, float *x, int64_t heads, int64_t head_dim,
                        const float *angles, uint32_t mode);
int32_t ek_guarded_attention_scores(ember_attention_scores_fn function, void *context, uint32_t cache_type,
                                    const float *q, const void *keys, int64_t stride, int64_t visible,
                                    int64_t head_dim, float scale, float *scores);
int32_t ek_guarded_softmax(ember_softmax_fn function, void *context, float *x, int64_t rows, int64_t n);
int32_t ek_guarded_attention_values(ember_attention_values_fn function, void *context, uint32_t cache_type,
                                    const float *weights, const void *values, int64_t stride, int64_t visible,
                                    int64_t head_dim, float *out);
int32_t ek_guarded_attention(ember_attention_fn function, void *context, uint32_t cache_type, const float *q,
                             const void *keys, const void *values, int64_t stride, int64_t visible, int64_t head_dim,
                             float scale, float *out);
int32_t ek_guarded_sequence_attention(ember_sequence_attention_fn function, void *context, uint32_t cache_type,
                                      const float *q, const void *keys, const void *values, int64_t stride, int64_t rows,
                                      int64_t head_dim, float scale, float *out);
int32_t ek_guarded_unary(ember_unary_fn function, void *context, float *x, int64_t n);
int32_t ek_guarded_swiglu(ember_swiglu_fn function, void *context, const float *gate, const float *up, float *out,
                          int64_t n);
int32_t ek_guarded_binary(ember_binary_fn function, void *context, float *x, const float *y, int64_t n);

#endif /* EK_BACKEND_H */
