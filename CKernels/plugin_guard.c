/*
 * plugin_guard.c — calls into a plugin's functions that survive the plugin
 * crashing. Each guarded call sets a per-thread jump target; a fault
 * (SIGSEGV, SIGBUS, SIGILL, SIGFPE) raised on that thread while the call
 * runs jumps back out of it and the call returns EK_GUARD_CRASHED. Ember
 * then disables the plugin and never calls it again (its state is unknown).
 * A fault anywhere else goes to the handler installed before ours.
 *
 * The handler is installed with SA_NODEFER, so jumping out of it leaves the
 * signal unblocked and sigsetjmp need not save the mask (no system call per
 * guarded call). A stack overflow inside a plugin is not caught.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include "ek_backend.h"

static const int guarded_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE};
#define GUARDED_SIGNAL_COUNT (sizeof guarded_signals / sizeof guarded_signals[0])
static struct sigaction previous[GUARDED_SIGNAL_COUNT];
static pthread_once_t installed = PTHREAD_ONCE_INIT;

/* initial-exec: reading them in the handler never allocates (a dlopen'ed library gets them from the static TLS
   surplus); `active` says whether any thread is inside a guarded call at all. */
static _Thread_local sigjmp_buf *volatile guard_target __attribute__((tls_model("initial-exec")));
static _Thread_local volatile int guard_signal __attribute__((tls_model("initial-exec")));
static int active;

static void on_fault(int signal, siginfo_t *info, void *ucontext) {
    sigjmp_buf *target = __atomic_load_n(&active, __ATOMIC_ACQUIRE) > 0 ? guard_target : NULL;
    if (target != NULL) {
        guard_target = NULL;
        guard_signal = signal;
        siglongjmp(*target, 1);
    }
    for (size_t i = 0; i < GUARDED_SIGNAL_COUNT; i++) {
        if (guarded_signals[i] != signal) continue;
        struct sigaction *before = &previous[i];
        if ((before->sa_flags & SA_SIGINFO) && before->sa_sigaction != NULL) {
            before->sa_sigaction(signal, info, ucontext);
            return;
        }
        if (!(before->sa_flags & SA_SIGINFO) && before->sa_handler != SIG_DFL && before->sa_handler != SIG_IGN) {
            before->sa_handler(signal);
            return;
        }
    }
    /* The default action: restore it; returning re-runs the faulting instruction, which then ends the process. */
    struct sigaction fallback;
    memset(&fallback, 0, sizeof fallback);
    fallback.sa_handler = SIG_DFL;
    sigemptyset(&fallback.sa_mask);
    sigaction(signal, &fallback, NULL);
}

static void install_once(void) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = on_fault;
    action.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    for (size_t i = 0; i < GUARDED_SIGNAL_COUNT; i++) sigaction(guarded_signals[i], &action, &previous[i]);
}

void ek_guard_install(void) { pthread_once(&installed, install_once); }

int ek_guard_last_signal(void) { return guard_signal; }

/* Runs CALL (an expression assigning `result`) under the guard; a fault makes the result FAILED. */
#define EK_GUARDED(RESULT_TYPE, FAILED, CALL)                 \
    RESULT_TYPE result = FAILED;                              \
    sigjmp_buf target;                                        \
    sigjmp_buf *volatile outer = guard_target;                \
    guard_signal = 0;                                         \
    __atomic_add_fetch(&active, 1, __ATOMIC_ACQ_REL);         \
    if (sigsetjmp(target, 0) != 0) {                          \
        guard_target = outer;                                 \
        __atomic_sub_fetch(&active, 1, __ATOMIC_ACQ_REL);     \
        return FAILED;                                        \
    }                                                         \
    guard_target = &target;                                   \
    CALL;                                                     \
    guard_target = outer;                                     \
    __atomic_sub_fetch(&active, 1, __ATOMIC_ACQ_REL);         \
    return result;

int32_t ek_guarded_plugin_entry(ember_plugin_entry_fn entry, const ember_plugin **out) {
    *out = NULL;
    EK_GUARDED(int32_t, EK_GUARD_CRASHED, (*out = entry(), result = 0))
}

static int32_t release_weights(void (*function)(void *, void *), void *context, void *bound) {
    function(context, bound);
    return 0;
}

int32_t ek_guarded_release_weights(void (*function)(void *, void *), void *context, void *bound) {
    EK_GUARDED(int32_t, EK_GUARD_CRASHED, result = release_weights(function, context, bound))
}

__attribute__((noinline)) static int32_t copy_bytes(void *destination, const void *source, size_t bytes) {
    const volatile unsigned char *from = source;
    unsigned char *to = destination;
    for (size_t i = 0; i < bytes; i++) to[i] = from[i];
    return 0;
}

__attribute__((noinline)) static int32_t copy_string(char *destination, const char *source, size_t capacity, int64_t *length) {
    const volatile char *from = source;
    size_t i = 0;
    for (; i + 1 < capacity && from[i] != 0; i++) destination[i] = from[i];
    destination[i] = 0;
    *length = from[i] == 0 ? (int64_t)i : -1;
    return 0;
}

__attribute__((noinline)) static int32_t guarded_copy_string(char *destination, const char *source, size_t capacity, int64_t *length) {
    EK_GUARDED(int32_t, EK_GUARD_CRASHED, result = copy_string(destination, source, capacity, length))
}

int64_t ek_guarded_read_string(char *destination, const char *source, size_t capacity) {
    if (destination == NULL || source == NULL || capacity == 0) return -2;
    int64_t length = -2;
    return guarded_copy_string(destination, source, capacity, &length) == 0 ? length : -2;
}

int32_t ek_guarded_read(void *destination, const void *source, size_t bytes) {
    if (destination == NULL || (source == NULL && bytes > 0)) return 1;
    EK_GUARDED(int32_t, EK_GUARD_CRASHED, result = copy_bytes(destination, source, bytes))
}

int32_t ek_guarded_self_test(int32_t (*function)(void *), void *context) {
    EK_GUARDED(int32_t, EK_GUARD_CRASHED, result = function(context))
}

int32_t ek_guarded_bind_weights(int32_t (*function)(void *, uint32_t, int64_t, int64_t, const void *, size_t, void **),
                                void *context, uint32_t type, int64_t rows, int64_t columns, const void *data,
                                size_t bytes, void **bound) {
    EK_GUARDED(int32_t, EK_GUARD_CRASHED, result = function(context, type, rows, columns, data, bytes, bound))
}

size_t ek_guarded_activation_bytes(ember_activation_bytes_fn function, void *context, uint32_t weight_type, int64_t m,
                                   int64_t k) {
    EK_GUARDED(size_t, 0, result = function(context, weight_type, m, k))
}

int32_t ek_guarded_quantize_activations(ember_quantize_activations_fn function, void *context, uint32_t weight_type,
                                        const float *x, int64_t m, int64_t k, void *out, size_t capacity) {
    EK_GUARDED(int32_t, EK_GUARD_CRASHED, result = function(context, weight_type, x, m, k, out, capacity))
}

int32_t ek_guarded_matmul(ember_matmul_fn function, void *context, const void *weights, uint32_t type, int64_t n,
                          int64_t k, const float *x, const void *prepared, int64_t m, float *y, int64_t ldy,
                          int64_t row_begin, int64_t row_end) {
    EK_GUARDED(int32_t, EK_GUARD_CRASHED,
               result = function(context, weights, type, n, k, x, prepared, m, y, ldy, row_begin, row_end))
}

int32_t ek_guarded_embedding(ember_embedding_fn function, void *context, uint32_t type, const void *row, int64_t columns,
                             float *out) {
    EK_GUARDED(int32_t, EK_GUARD_CRASHED, result = function(context, type, row, columns, out))
}

int32_t ek_guarded_rms_norm(ember_rms_norm_fn function, void *context, const float *x, const float *weight, float *out,
                            int64_t rows, int64_t n, float eps) {
    EK_GUARDED(int32_t, EK_GUARD_CRASHED, result = function(context, x, weight, out, rows, n, eps))
}

int32_t ek_guarded_layer_norm(ember_layer_norm_fn function, void *context, const float *x, const float *gamma,
                              const float *beta, float *out, int64_t rows, int64_t n, float eps) {
    EK_GUARDED(int32_t, EK_GUARD_CRASHED, result = function(context, x, gamma, beta, out, rows, n, eps))
}

int32_t ek_guarded_rope(ember_rope_fn function, void *context, float *x, int64_t heads, int64_t head_dim,
                        const float *angles, uint32_t mode) {
    EK_GUARDED(int32_t, EK_GUARD_CRASHED, result = function(context, x, heads, head_dim, angles, mode))
}

int32_t ek_guarded_attention_scores(ember_attention_scores_fn function, void *context, uint32_t cache_type,
                                    const float *q, const void *keys, int64_t stride, int64_t visible,
                                    int64_t head_dim, float scale, float *scores) {
    EK_GUARDED(int32_t, EK_GUARD_CRASHED,
               result = function(context, cache_type, q, keys, stride, visible, head_dim, scale, scores))
}

int32_t ek_guarded_softmax(ember_softmax_fn function, void *context, float *x, int64_t rows, int64_t n) {
    EK_GUARDED(int32_t, EK_GUARD_CRASHED, result = function(context, x, rows, n))
}

int32_t ek_guarded_attention_values(ember_attention_values_fn function, void *context, uint32_t cache_type,
                                    const float *weights, const void *values, int64_t stride, int64_t visible,
                                    int64_t head_dim, float *out) {
    EK_GUARDED(int32_t, EK_GUARD_CRASHED,
               result = function(context, cache_type, weights, values, stride, visible, head_dim, out))
}

int32_t ek_guarded_attention(ember_attention_fn function, void *context, uint32_t cache_type, const float *q,
                             const void *keys, const void *values, int64_t stride, int64_t visible, int64_t head_dim,
                             float scale, float *out) {
    EK_GUARDED(int32_t, EK_GUARD_CRASHED,
               result = function(context, cache_type, q, keys, values, stride, visible, head_dim, scale, out))
}

int32_t ek_guarded_sequence_attention(ember_sequence_attention_fn function, void *context, uint32_t cache_type,
                                      const float *q, const void *keys, const void *values, int64_t stride, int64_t rows,
                                      int64_t head_dim, float scale, float *out) {
    EK_GUARDED(int32_t, EK_GUARD_CRASHED,
               result = function(context, cache_type, q, keys, values, stride, rows, head_dim, scale, out))
}

int32_t ek_guarded_unary(ember_unary_fn function, void *context, float *x, int64_t n) {
    EK_GUARDED(int32_t, EK_GUARD_CRASHED, result = function(context, x, n))
}

int32_t ek_guarded_swiglu(ember_swiglu_fn function, void *context, const float *gate, const float *up, float *out,
                          int64_t n) {
    EK_GUARDED(int32_t, EK_GUARD_CRASHED, result = function(context, gate, up, out, n))
}

int32_t ek_guarded_binary(ember_binary_fn function, void *context, float *x, const float *y, int64_t n) {
    EK_GUARDED(int32_t, EK_GUARD_CRASHED, result = function(context, x, y, n))
}
