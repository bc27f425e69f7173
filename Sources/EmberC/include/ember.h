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

/* The version of this header's ABI; ember_abi_version() returns the library's.
 * ABI 2 grew ABI 1 only by appending: fields at the end of
 * ember_generate_options_t (from min_p on), new types and new functions. A
 * library of ABI 2 still takes ABI 1's ember_generate_options_t (its smaller
 * size) and gives the appended fields their defaults, so a host built against
 * ABI 1's header runs unchanged. ABI 2's second header appended
 * ember_usage_t.cached_prompt_tokens and ember_runtime_options_t.prompt_cache_bytes;
 * the first header's sizes of both are still taken (the usage filled to its
 * end, the options with the default prompt cache). Its third appended
 * ember_runtime_options_t.cache_directory; the second header's size is still
 * taken (no cache directory). */
#define EMBER_ABI_VERSION 2

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
    /* ---- appended in ABI 2's second header; the first's size (ending at
       models_directory, offsetof(ember_runtime_options_t, prompt_cache_bytes))
       is still taken, with the default for this ---- */
    int64_t prompt_cache_bytes;          /* finished generations' keys and values kept
                                            so a prompt that starts as an earlier one
                                            did computes only the rest: 0 the default
                                            (256 MB, at most a quarter of the memory
                                            budget), -1 none, else at most this      */
    /* ---- appended in ABI 2's third header; the second's size (ending at
       prompt_cache_bytes, offsetof(ember_runtime_options_t, cache_directory))
       is still taken, with no cache directory ---- */
    const char *cache_directory;         /* NULL: the backends' costs are measured at
                                            every ember_runtime_create (~1 s on 2
                                            cores) and each model's quality at int8
                                            and int4 at every ember_model_load (~2 s
                                            for SmolLM2). A directory (made if
                                            missing; the app's cache folder): both
                                            are kept there (calibration.json,
                                            quality.json) and read by later runs on
                                            the same machine, CPU path and file   */
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
    /* ---- appended in ABI 2 ---- */
    float min_p;              /* default 0.05: when sampling, drop tokens below min_p × the best
                                 one's probability; 0 off; up to 1                               */
    float repetition_penalty; /* default 1 (off); > 1 makes tokens of the last 64 less likely
                                 (llama.cpp's: positive logits divided, negative multiplied)     */
    float frequency_penalty;  /* default 0; -2…2: OpenAI's, a token's logit loses this for each
                                 time it is among the last 64 tokens                             */
    float presence_penalty;   /* default 0; -2…2: a token's logit loses this once if it is there */
    const char *const *stop;  /* stop_count UTF-8 strings (copied; none empty): the text ends
                                 before the first one that appears (finish reason STOP_STRING)  */
    size_t stop_count;        /* 0…16                                                           */
    const int32_t *logit_bias_tokens; /* logit_bias_count token ids (each < the vocabulary) …   */
    const float *logit_bias_values;   /* … and what to add to each one's logit: -100…100, where
                                         -100 bans the token and 100 all but forces it           */
    size_t logit_bias_count;  /* 0…1024                                                           */
    int32_t logprobs;         /* 1: measure each generated token's log-probability (read them with
                                 ember_request_logprobs); 0 none (default)                        */
    int32_t top_logprobs;     /* 0…20: with logprobs, also this many of each step's most likely
                                 tokens with theirs                                               */
} ember_generate_options_t;

/* One message of a conversation, for ember_chat_submit. */
typedef struct ember_chat_message {
    const char *role;     /* "system", "user" or "assistant" (copied)                       */
    const char *content;  /* UTF-8 text (copied); may be empty                              */
} ember_chat_message_t;

/* Why a generation ended (ember_usage_t). Values are never renumbered. */
typedef enum ember_finish_reason {
    EMBER_FINISH_END = 0,          /* the model's end token, or a JSON format's value is whole */
    EMBER_FINISH_STOP_STRING = 1,  /* one of options.stop appeared (it is not in the text)     */
    EMBER_FINISH_LENGTH = 2,       /* max_tokens were generated                                */
    EMBER_FINISH_CONTEXT_FULL = 3  /* the model's context is full                              */
} ember_finish_reason_t;

/* What a generation used, once it ended with EMBER_OK (ember_request_usage). */
typedef struct ember_usage {
    uint32_t size;                       /* sizeof(ember_usage_t)                        */
    int32_t prompt_tokens;               /* the prompt as the model read it              */
    int32_t generated_tokens;            /* the tokens sampled, an end token included    */
    ember_finish_reason_t finish_reason;
    double prefill_ms;                   /* reading the prompt                           */
    double decode_ms;                    /* generating the tokens                        */
    /* ---- appended in ABI 2's second header; the first's size (ending at
       decode_ms, offsetof(ember_usage_t, cached_prompt_tokens)) is still taken ---- */
    int32_t cached_prompt_tokens;        /* of prompt_tokens, the first ones restored
                                            from the runtime's prompt cache (an earlier
                                            request began the same way), not computed */
} ember_usage_t;

/* A token and its log-probability (ln p, from the model's logits at that
 * step, before penalties, temperature and a format's mask). */
typedef struct ember_token_logprob {
    int32_t token;
    float logprob;
    const char *bytes;   /* the token's bytes (a byte-level token may hold part of a
                            UTF-8 character), NUL-terminated, `length` of them        */
    size_t length;
} ember_token_logprob_t;

/* One generated token's log-probability and the step's most likely tokens. */
typedef struct ember_step_logprobs {
    ember_token_logprob_t chosen;      /* the token the sampler picked                     */
    const ember_token_logprob_t *top;  /* best first (ties: the lower id first)            */
    size_t top_count;                  /* options.top_logprobs (fewer if the vocabulary is) */
} ember_step_logprobs_t;

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
/* The token ids of `text` as the model reads it (ABI 2): a language model's
 * tokenizer with its special tokens recognised and its BOS added when the model
 * wants one; an embedding model's as it embeds the text (its longest sentence
 * at most). Writes at most
 * `capacity` ids; `*out_count` gets how many there are, and when they do not
 * fit the call gives EMBER_ERROR_BUFFER_TOO_SMALL with `*out_count` set, so a
 * host may ask with capacity 0 first. */
ember_status_t ember_model_tokenize(const ember_model_t *model, const char *text, int32_t *out_tokens, size_t capacity,
                                    size_t *out_count);
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
/* The defaults: greedy, top-k 40, top-p 0.95, min-p 0.05, no penalties, no
 * stop strings, no bias, no log-probabilities, seed 0, free text; size set. */
ember_generate_options_t ember_generate_options_default(void);
/* ember_generate_submit_with_options from `count` token ids instead of text
 * (ABI 2): the ids are the prompt as the model reads it (no BOS added), each
 * checked against the vocabulary. ember_model_tokenize makes them from text. */
ember_status_t ember_generate_tokens_submit(ember_runtime_t *runtime, ember_model_t *model, const int32_t *tokens,
                                            size_t count, int32_t max_tokens, ember_tier_t tier,
                                            const ember_generate_options_t *options, ember_token_callback on_token,
                                            void *user_data, ember_request_t **out_request);
/* A reply to a conversation (ABI 2): `count` messages formatted with the
 * model's own chat template (from its GGUF file, or the manifest's), ending
 * with the assistant's turn begun; the text is the reply alone. A model
 * without a chat template is refused with EMBER_ERROR_INVALID_ARGUMENT. */
ember_status_t ember_chat_submit(ember_runtime_t *runtime, ember_model_t *model, const ember_chat_message_t *messages,
                                 size_t count, int32_t max_tokens, ember_tier_t tier,
                                 const ember_generate_options_t *options, ember_token_callback on_token, void *user_data,
                                 ember_request_t **out_request);
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
/* A generation's token counts, finish reason and times, once it ended with
 * EMBER_OK (ABI 2); set out_usage->size first (to sizeof, or to ABI 2's first
 * size, which ends at decode_ms: nothing after it is written then). */
ember_status_t ember_request_usage(ember_request_t *request, ember_usage_t *out_usage);
/* A generation's log-probabilities (ABI 2), once it ended with EMBER_OK: one
 * step per generated token of the text (not the end token), in order, when
 * options.logprobs was 1; none otherwise. The array and its strings belong to
 * the request and stay valid until it is released. */
ember_status_t ember_request_logprobs(ember_request_t *request, const ember_step_logprobs_t **out_steps, size_t *out_count);
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
