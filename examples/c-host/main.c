/*
 * A C host for Ember: generates text with SmolLM2 (tokens streamed through a
 * callback), cancels a request, shows the typed errors, injects a power state,
 * and embeds sentences with MiniLM, blocking and as a request it can cancel.
 *
 * From the repository's root, after `swift build -c release --product EmberC`:
 *
 *   cc -std=c11 -I Sources/EmberC/include examples/c-host/main.c -L .build/release -lEmberC -lm \
 *      -Wl,-rpath,"$PWD/.build/release" -o c-host
 *   ./c-host models
 *
 * Prints what happened; exits 0 only if every step behaved as the API promises.
 */
#include "ember.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "c-host: FAILED: %s (last error: %s)\n", what, ember_last_error());
        failures++;
    }
}

/* The text streamed so far, gathered by the token callback. */
typedef struct {
    char text[8192];
    size_t length;
    int pieces;
} stream_t;

static void on_token(const char *piece, size_t length, void *user_data) {
    stream_t *stream = user_data;
    if (stream->length + length < sizeof stream->text) {
        memcpy(stream->text + stream->length, piece, length);
        stream->length += length;
        stream->text[stream->length] = '\0';
    }
    stream->pieces++;
}

/* Prints `text` on one line, with newlines and quotes escaped. */
static void print_escaped(const char *label, const char *text) {
    printf("%s: \"", label);
    for (const char *c = text; *c; c++) {
        if (*c == '\n') fputs("\\n", stdout);
        else if (*c == '"' || *c == '\\') printf("\\%c", *c);
        else putchar(*c);
    }
    printf("\"\n");
}

static const char *precision_name(ember_precision_t precision) {
    switch (precision) {
    case EMBER_PRECISION_FP32: return "fp32";
    case EMBER_PRECISION_FP16: return "fp16";
    case EMBER_PRECISION_INT8: return "int8";
    case EMBER_PRECISION_INT4: return "int4";
    }
    return "?";
}

static double cosine(const float *a, const float *b, size_t n) {
    double dot = 0, na = 0, nb = 0;
    for (size_t i = 0; i < n; i++) {
        dot += (double)a[i] * b[i];
        na += (double)a[i] * a[i];
        nb += (double)b[i] * b[i];
    }
    return dot / sqrt(na * nb);
}

int main(int argc, char **argv) {
    printf("ember ABI %u (header %d)\n", ember_abi_version(), EMBER_ABI_VERSION);
    check(ember_abi_version() == EMBER_ABI_VERSION, "library and header ABI agree");

    /* A runtime whose power state the host sets: on the charger at 80%. */
    ember_runtime_options_t options = {0};
    options.size = sizeof options;
    options.compute_units = EMBER_UNITS_ALL;
    options.power_mode = EMBER_POWER_INJECTED;
    options.initial_power = (ember_power_state_t){sizeof(ember_power_state_t), 80, 1, 1, 0, EMBER_THERMAL_NOMINAL};
    options.models_directory = argc > 1 ? argv[1] : NULL;
    ember_runtime_t *runtime = NULL;
    if (ember_runtime_create(&options, &runtime) != EMBER_OK) {
        fprintf(stderr, "c-host: cannot create a runtime: %s\n", ember_last_error());
        return 1;
    }

    /* Typed errors: a model that does not exist, a NULL argument, a bad enum. */
    ember_model_t *missing = NULL;
    ember_status_t status = ember_model_load(runtime, "no-such-model", EMBER_MODEL_LANGUAGE, &missing);
    printf("missing model: status %d (%s)\n", status, ember_last_error());
    check(status == EMBER_ERROR_MODEL_NOT_FOUND && missing == NULL, "an unknown model is EMBER_ERROR_MODEL_NOT_FOUND");
    status = ember_model_load(runtime, NULL, EMBER_MODEL_LANGUAGE, &missing);
    printf("NULL name: status %d (%s)\n", status, ember_last_error());
    check(status == EMBER_ERROR_INVALID_ARGUMENT, "a NULL name is EMBER_ERROR_INVALID_ARGUMENT");
    ember_power_state_t hot = {sizeof hot, 50, 0, 0, 0, (ember_thermal_t)7};
    status = ember_runtime_set_power_state(runtime, &hot);
    printf("bad thermal value: status %d (%s)\n", status, ember_last_error());
    check(status == EMBER_ERROR_INVALID_ARGUMENT, "thermal 7 is EMBER_ERROR_INVALID_ARGUMENT");

    /* Text generation, streamed. */
    ember_model_t *llm = NULL;
    status = ember_model_load(runtime, "smollm2-135m-instruct", EMBER_MODEL_LANGUAGE, &llm);
    check(status == EMBER_OK, "load smollm2-135m-instruct");
    if (status != EMBER_OK) return 1;

    stream_t stream = {0};
    ember_request_t *request = NULL;
    status = ember_generate_submit(runtime, llm, "The capital of France is", 8, EMBER_TIER_CRITICAL, on_token, &stream, &request);
    check(status == EMBER_OK, "submit a generation");
    status = ember_request_wait(request);
    check(status == EMBER_OK, "the generation ends with EMBER_OK");
    const char *text = NULL;
    check(ember_request_text(request, &text) == EMBER_OK && text != NULL, "read the generated text");
    ember_decision_t decision = {0};
    decision.size = sizeof decision;
    check(ember_request_decision(request, &decision) == EMBER_OK, "read the decision");
    print_escaped("generated", text ? text : "");
    printf("streamed: %d pieces, same text: %s\n", stream.pieces, text && strcmp(text, stream.text) == 0 ? "yes" : "no");
    check(text && strcmp(text, stream.text) == 0 && stream.pieces > 0, "the streamed pieces make up the text");
    printf("decision: precision=%s units=%d qos=0x%x threads=%d run_ms=%.1f energy_j=%.4f (%s)\n",
           precision_name(decision.precision), decision.compute_units, decision.qos_class, decision.threads,
           decision.run_ms, decision.energy_joules, decision.energy_measured ? "measured" : "modelled");
    ember_request_release(request);

    /* Cancelling: a long background generation, cancelled right away. */
    stream_t ignored = {0};
    status = ember_generate_submit(runtime, llm, "Once upon a time", 2000, EMBER_TIER_BACKGROUND, on_token, &ignored, &request);
    check(status == EMBER_OK, "submit a long generation");
    check(ember_request_cancel(request) == EMBER_OK, "cancel it");
    status = ember_request_wait(request);
    printf("cancelled: status %d (%s) after %d pieces\n", status, ember_last_error(), ignored.pieces);
    check(status == EMBER_ERROR_CANCELLED, "a cancelled request ends with EMBER_ERROR_CANCELLED");
    check(ember_request_text(request, &text) == EMBER_ERROR_CANCELLED, "a cancelled request has no text");
    ember_request_release(request);

    /* The wrong kind of model. */
    float unused[4];
    const char *one[] = {"a"};
    status = ember_embed(runtime, llm, one, 1, EMBER_TIER_STANDARD, unused, 4, NULL);
    printf("embed with a language model: status %d (%s)\n", status, ember_last_error());
    check(status == EMBER_ERROR_WRONG_MODEL_KIND, "embedding with a language model is EMBER_ERROR_WRONG_MODEL_KIND");

    /* Embeddings, after unplugging the charger: battery at 60%. */
    ember_power_state_t unplugged = {sizeof unplugged, 60, 0, 0, 0, EMBER_THERMAL_NOMINAL};
    check(ember_runtime_set_power_state(runtime, &unplugged) == EMBER_OK, "inject a power state");
    ember_model_t *minilm = NULL;
    status = ember_model_load(runtime, "all-minilm-l6-v2", EMBER_MODEL_EMBEDDING, &minilm);
    check(status == EMBER_OK, "load all-minilm-l6-v2");
    if (status != EMBER_OK) return 1;
    size_t dimension = 0;
    check(ember_model_embedding_dimension(minilm, &dimension) == EMBER_OK && dimension > 0, "read the dimension");
    const char *sentences[] = {"A man is playing a guitar.", "Someone plays music on a guitar.", "The stock market fell today."};
    float *vectors = calloc(3 * dimension, sizeof(float));
    status = ember_embed(runtime, minilm, sentences, 2, EMBER_TIER_STANDARD, vectors, 2 * dimension - 1, NULL);
    printf("small buffer: status %d (%s)\n", status, ember_last_error());
    check(status == EMBER_ERROR_BUFFER_TOO_SMALL, "a short buffer is EMBER_ERROR_BUFFER_TOO_SMALL");
    ember_decision_t embed_decision = {0};
    embed_decision.size = sizeof embed_decision;
    status = ember_embed(runtime, minilm, sentences, 3, EMBER_TIER_STANDARD, vectors, 3 * dimension, &embed_decision);
    check(status == EMBER_OK, "embed three sentences");
    double related = cosine(vectors, vectors + dimension, dimension);
    double unrelated = cosine(vectors, vectors + 2 * dimension, dimension);
    printf("embedding: dimension %zu, precision=%s, norm %.4f\n", dimension, precision_name(embed_decision.precision),
           sqrt(cosine(vectors, vectors, dimension)));
    printf("cosine(guitar, guitar music) = %.3f, cosine(guitar, stock market) = %.3f\n", related, unrelated);
    check(related > 0.5 && unrelated < 0.3, "related sentences are closer than unrelated ones");

    /* The same as a request that returns at once. At 15% a standard request is deferred: it waits
     * for power, so the host cancels it; at the critical tier it runs. */
    ember_power_state_t low = {sizeof low, 15, 0, 0, 0, EMBER_THERMAL_NOMINAL};
    check(ember_runtime_set_power_state(runtime, &low) == EMBER_OK, "inject 15% battery");
    ember_request_t *waiting = NULL;
    check(ember_embed_submit(runtime, minilm, sentences, 3, EMBER_TIER_STANDARD, &waiting) == EMBER_OK, "submit a standard embedding");
    check(ember_request_embeddings(waiting, vectors, 3 * dimension, NULL) == EMBER_ERROR_PENDING, "a waiting request has no vectors yet");
    ember_request_cancel(waiting);
    status = ember_request_wait(waiting);
    printf("deferred embedding, cancelled: status %d (%s)\n", status, ember_last_error());
    check(status == EMBER_ERROR_CANCELLED, "a deferred embedding request can be cancelled");
    ember_request_release(waiting);
    ember_request_t *urgent = NULL;
    check(ember_embed_submit(runtime, minilm, sentences, 3, EMBER_TIER_CRITICAL, &urgent) == EMBER_OK, "submit a critical embedding");
    check(ember_request_wait(urgent) == EMBER_OK, "a critical embedding runs at 15%");
    float *again = calloc(3 * dimension, sizeof(float));
    size_t written = 0;
    check(ember_request_embeddings(urgent, again, 3 * dimension, &written) == EMBER_OK && written == 3 * dimension,
          "read the vectors of an embedding request");
    check(ember_request_text(urgent, &text) == EMBER_ERROR_WRONG_MODEL_KIND, "an embedding request has no text");
    ember_decision_t urgent_decision = {0};
    urgent_decision.size = sizeof urgent_decision;
    check(ember_request_decision(urgent, &urgent_decision) == EMBER_OK, "read its decision");
    printf("submitted embedding: precision=%s, cosine to the blocking call's (precision=%s) %.3f\n",
           precision_name(urgent_decision.precision), precision_name(embed_decision.precision), cosine(vectors, again, dimension));
    check(cosine(vectors, again, dimension) > 0.95, "the submitted embedding agrees with the blocking one");
    ember_request_release(urgent);
    free(again);
    free(vectors);

    ember_model_release(minilm);
    ember_model_release(llm);
    ember_runtime_release(runtime);
    if (failures) {
        printf("c-host: %d check(s) failed\n", failures);
        return 1;
    }
    printf("c-host: all checks passed\n");
    return 0;
}
