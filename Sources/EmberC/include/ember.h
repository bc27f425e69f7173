/*
 * ember.h — Ember's C API for C and C++ hosts.
 *
 * Link libEmberC.so (built by `swift build -c release --product EmberC`).
 * Every request goes through Ember's scheduler: the power policy picks the
 * precision, compute units, QoS and threads from the request's tier and the
 * device's power state — or defers or refuses the request.
 *
 * Rules every function follows:
 *  - It returns an ember_status_t (EMBER_OK on success) unless it reports a
 *    version or the last error.
 *  - On failure, ember_last_error() returns a message naming what was wrong
 *    (the file, the field, the value found and expected). The message belongs
 *    to the calling thread and stays valid until that thread's next failing
 *    call.
 *  - No Swift error, exception or crash crosses this boundary; NULL handles
 *    and NULL out-pointers give EMBER_ERROR_INVALID_ARGUMENT.
 *  - Handles are opaque ids, checked on every call: a handle already
 *    released (a double release, a use after release), one Ember never made,
 *    or one of another kind (a request handle where a model is expected)
 *    gives EMBER_ERROR_INVALID_HANDLE and a message — never a crash. Release
 *    each with its own function; releasing NULL does nothing.
 *  - Functions that block (loading, waiting, embedding) must not be called
 *    from inside a token callback.
 *
 * Threading: a runtime, its models and requests may be used from any thread.
 * Token callbacks run on an Ember thread, one at a time per request, in order.
 *
 * Lifetimes: strings passed in (prompts, names, texts) are copied before the
 * call returns. A model may outlive the runtime that loaded it. Release a
 * request once you no longer need its text; releasing a runtime cancels its
 * unfinished requests but does not release them.
 *
 * Structures start with a `size` field: set it to sizeof the structure as this
 * header declares it. A library of another ABI version refuses a size it does
 * not know with EMBER_ERROR_INVALID_ARGUMENT rather than guess at the layout.
 */
#ifndef EMBER_H
#define EMBER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this header's ABI; ember_abi_version() returns the library's. */
#define EMBER_ABI_VERSION 1

/* ---- Status codes ------------------------------------------------------ */

typedef enum ember_status {
    EMBER_OK = 0,
    EMBER_ERROR_INVALID_ARGUMENT = 1, /* NULL handle, bad enum value, bad size   */
    EMBER_ERROR_MODEL_NOT_FOUND = 2,  /* no such name in the manifest or path    */
    EMBER_ERROR_MODEL_FILE = 3,       /* the file is truncated, hostile or unsupported */
    EMBER_ERROR_WRONG_MODEL_KIND = 4, /* an embedding model asked to generate, or the reverse */
    EMBER_ERROR_DROPPED = 5,          /* the power policy refused the request     */
    EMBER_ERROR_CANCELLED = 6,        /* ember_request_cancel, or the runtime went away */
    EMBER_ERROR_BUFFER_TOO_SMALL = 7, /* the output buffer cannot hold the result */
    EMBER_ERROR_PENDING = 8,          /* the request has not finished yet         */
    EMBER_ERROR_INVALID_HANDLE = 9,   /* released already, never made by Ember, or of another kind */
    EMBER_ERROR_INTERNAL = 99         /* anything else; see ember_last_error()   */
} ember_status_t;

/* ---- Enumerations -------------------------------------------------------- */

/* A request's priority tier: the policy decides from it. */
typedef enum ember_tier {
    EMBER_TIER_CRITICAL = 0,   /* the user is waiting                       */
    EMBER_TIER_STANDARD = 1,   /* foreground, not blocking                  */
    EMBER_TIER_BACKGROUND = 2  /* not user-visible (indexing, prefetching)  */
} ember_tier_t;

/* The compute units a runtime may use at most (Core ML's MLComputeUnits). */
typedef enum ember_compute_units {
    EMBER_UNITS_ALL = 0,
    EMBER_UNITS_CPU_ONLY = 1,
    EMBER_UNITS_CPU_AND_GPU = 2,
    EMBER_UNITS_CPU_AND_NEURAL_ENGINE = 3
} ember_compute_units_t;

/* Where a runtime's power state comes from. */
typedef enum ember_power_mode {
    EMBER_POWER_SYSTEM = 0,   /* the OS (Linux sysfs), or EMBER_POWER when set         */
    EMBER_POWER_INJECTED = 1  /* the host sets it with ember_runtime_set_power_state() */
} ember_power_mode_t;

typedef enum ember_thermal {
    EMBER_THERMAL_NOMINAL = 0,
    EMBER_THERMAL_FAIR = 1,
    EMBER_THERMAL_SERIOUS = 2,
    EMBER_THERMAL_CRITICAL = 3
} ember_thermal_t;

typedef enum ember_model_kind {
    EMBER_MODEL_LANGUAGE = 0,  /* a GGUF text model (SmolLM2)                   */
    EMBER_MODEL_EMBEDDING = 1  /* a sentence-transformers folder (MiniLM)        */
} ember_model_kind_t;

/* The precision a request ran at. Values are never renumbered and new ones
 * are added at the end (FP16: 16-bit float weights, fp32 arithmetic, came
 * after the first three): a host should treat a value it does not know as
 * "another precision", not as an error. */
typedef enum ember_precision {
    EMBER_PRECISION_FP32 = 0,
    EMBER_PRECISION_INT8 = 1,
    EMBER_PRECISION_INT4 = 2,
    EMBER_PRECISION_FP16 = 3
} ember_precision_t;

/* ---- Structures (each starts with its size: set it to sizeof) ------------ */

/* The device's power state, as a host injects it. */
typedef struct ember_power_state {
    uint32_t size;              /* sizeof(ember_power_state_t)                 */
    int32_t battery_percent;    /* 0…100, or -1 when there is no battery level */
    int32_t charging;           /* 1 charging or full, 0 not                   */
    int32_t external_power;     /* 1 on mains or USB power, 0 not, -1 unknown  */
    int32_t low_power_mode;     /* 1 on, 0 off                                 */
    ember_thermal_t thermal;
} ember_power_state_t;

/* How to set a runtime up; NULL for ember_runtime_create gives the defaults. */
typedef struct ember_runtime_options {
    uint32_t size;                       /* sizeof(ember_runtime_options_t)           */
    ember_compute_units_t compute_units; /* default EMBER_UNITS_ALL                    */
    ember_power_mode_t power_mode;       /* default EMBER_POWER_SYSTEM                 */
    ember_power_state_t initial_power;   /* used with EMBER_POWER_INJECTED             */
    const char *models_directory;        /* NULL: "models" (or EMBER_MODELS_DIR)       */
} ember_runtime_options_t;

/* What the policy decided for a request that ran. */
typedef struct ember_decision {
    uint32_t size;                       /* sizeof(ember_decision_t)                      */
    ember_precision_t precision;
    ember_compute_units_t compute_units;
    uint32_t qos_class;                  /* Apple's raw QoS value (0x19 userInitiated …) */
    int32_t threads;
    double wait_ms;                      /* submission to start (deferral included)      */
    double run_ms;
    double energy_joules;                /* -1 when not reported                         */
    int32_t energy_measured;             /* 1 measured (RAPL), 0 modelled                */
} ember_decision_t;

/* How tokens are chosen and what the text must be, for
 * ember_generate_submit_with_options. Start from ember_generate_options_default(). */
typedef struct ember_generate_options {
    uint32_t size;            /* sizeof(ember_generate_options_t)                              */
    float temperature;        /* 0 greedy (default); up to 2                                    */
    int32_t top_k;            /* default 40; 0 keeps every token                                */
    float top_p;              /* default 0.95; in (0, 1]                                        */
    uint64_t seed;            /* the same seed and inputs give the same text                    */
    const char *json_schema;  /* NULL: free text; else a JSON Schema (JSON text, copied): the
                                 output is JSON valid against it, ending when the value is whole */
    int32_t json_object;      /* 1: the output is one JSON object (any keys); 0 otherwise       */
} ember_generate_options_t;

/* ---- Handles ----------------------------------------------------------------- */

typedef struct ember_runtime ember_runtime_t;  /* loads models, owns the scheduler   */
typedef struct ember_model ember_model_t;      /* a loaded model                    */
typedef struct ember_request ember_request_t;  /* a submitted generation or embedding */

/* Called with each piece of generated text (UTF-8, `length` bytes, also
 * NUL-terminated) as it is decoded. Runs on an Ember thread. `piece` is valid
 * only during the call: copy what you keep. `user_data` is what was passed to
 * ember_generate_submit; it must stay valid until ember_request_release returns
 * for that request — after that the callback is never called again. */
typedef void (*ember_token_callback)(const char *piece, size_t length, void *user_data);

/* ---- Library ------------------------------------------------------------------ */

uint32_t ember_abi_version(void);
/* The message of this thread's last failing call ("" if none). */
const char *ember_last_error(void);

/* ---- Runtime ------------------------------------------------------------------- */

ember_status_t ember_runtime_create(const ember_runtime_options_t *options, ember_runtime_t **out_runtime);
/* Cancels the runtime's unfinished requests and releases it. */
ember_status_t ember_runtime_release(ember_runtime_t *runtime);
/* Only for a runtime created with EMBER_POWER_INJECTED. */
ember_status_t ember_runtime_set_power_state(ember_runtime_t *runtime, const ember_power_state_t *state);

/* ---- Models -------------------------------------------------------------------- */

/* Loads a model by manifest name ("smollm2-135m-instruct", "all-minilm-l6-v2")
 * or by path. Blocks until loaded. */
ember_status_t ember_model_load(ember_runtime_t *runtime, const char *name_or_path, ember_model_kind_t kind,
                                ember_model_t **out_model);
/* The length of the vectors an embedding model produces. */
ember_status_t ember_model_embedding_dimension(const ember_model_t *model, size_t *out_dimension);
ember_status_t ember_model_release(ember_model_t *model);

/* ---- Text generation ----------------------------------------------------------- */

/* Starts generating up to `max_tokens` tokens from `prompt` (greedy) as a
 * request of `tier`; returns at once. `on_token` (may be NULL) receives the
 * text as it is decoded. An empty prompt or max_tokens < 1 is refused here.
 * Generation also stops at the end of the model's context. */
ember_status_t ember_generate_submit(ember_runtime_t *runtime, ember_model_t *model, const char *prompt,
                                     int32_t max_tokens, ember_tier_t tier, ember_token_callback on_token,
                                     void *user_data, ember_request_t **out_request);
/* ember_generate_submit with sampling and an output format. A schema Ember
 * cannot enforce (an unsupported keyword, a wrong value) is refused here with
 * EMBER_ERROR_INVALID_ARGUMENT; ember_last_error() names the keyword and where.
 * `options` may be NULL (greedy, free text). */
ember_status_t ember_generate_submit_with_options(ember_runtime_t *runtime, ember_model_t *model, const char *prompt,
                                                  int32_t max_tokens, ember_tier_t tier,
                                                  const ember_generate_options_t *options, ember_token_callback on_token,
                                                  void *user_data, ember_request_t **out_request);
/* The defaults: greedy, top-k 40, top-p 0.95, seed 0, free text; size set. */
ember_generate_options_t ember_generate_options_default(void);
/* Blocks until the request ends; returns how it ended (EMBER_OK, _DROPPED, _CANCELLED, …).
 * A request the policy defers (STANDARD or BACKGROUND on a low battery, say)
 * waits until the power state allows it: CRITICAL requests are never deferred. */
ember_status_t ember_request_wait(ember_request_t *request);
/* Asks the request to stop; it ends within a token with EMBER_ERROR_CANCELLED.
 * The callback may still be called until then. */
ember_status_t ember_request_cancel(ember_request_t *request);
/* The whole generated text once the request ended with EMBER_OK; valid until the request is released. */
ember_status_t ember_request_text(ember_request_t *request, const char **out_text);
/* The decision the request ran under, once it ended with EMBER_OK. */
ember_status_t ember_request_decision(ember_request_t *request, ember_decision_t *out_decision);
/* Stops the callback, cancels the request if it still runs, and releases it.
 * When it returns, the callback is not running and will not be called again
 * (it waits for a call in progress on another thread; do not call it from a
 * thread that callback is waiting for). It may be called from the callback. */
ember_status_t ember_request_release(ember_request_t *request);

/* ---- Embeddings ------------------------------------------------------------------ */

/* Embeds `count` UTF-8 texts as one request of `tier` and blocks until done.
 * Writes count × dimension floats (one L2-normalised vector per text, in
 * order) to `out_vectors`, which holds `capacity` floats. `out_decision` may
 * be NULL. A deferred request blocks here until the power state allows it
 * (another thread's ember_runtime_set_power_state, or the OS's state
 * changing): embed at EMBER_TIER_CRITICAL when the caller cannot wait, or use
 * ember_embed_submit, which can be cancelled. */
ember_status_t ember_embed(ember_runtime_t *runtime, ember_model_t *model, const char *const *texts, size_t count,
                           ember_tier_t tier, float *out_vectors, size_t capacity, ember_decision_t *out_decision);

/* Starts embedding `count` texts as one request of `tier` and returns at once
 * (the texts are copied). Wait with ember_request_wait, stop with
 * ember_request_cancel, read the vectors with ember_request_embeddings and the
 * decision with ember_request_decision; release with ember_request_release. */
ember_status_t ember_embed_submit(ember_runtime_t *runtime, ember_model_t *model, const char *const *texts, size_t count,
                                  ember_tier_t tier, ember_request_t **out_request);
/* Copies the vectors of an embedding request that ended with EMBER_OK into
 * `out_vectors` (`capacity` floats): count × dimension floats, one
 * L2-normalised vector per text, in order. `*out_count` (may be NULL) gets the
 * number of floats written. A generation request gives
 * EMBER_ERROR_WRONG_MODEL_KIND (and ember_request_text an embedding request). */
ember_status_t ember_request_embeddings(ember_request_t *request, float *out_vectors, size_t capacity, size_t *out_count);

#ifdef __cplusplus
}
#endif

#endif /* EMBER_H */
