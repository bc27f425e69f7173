/*
 * ember_request_release promises that when it returns the token callback is
 * not running and is never called again, so the host may free user_data.
 * Checked here: each round starts a long generation, waits for a few tokens,
 * releases the request, then poisons user_data; a callback seeing the poison
 * (or entered after release returned) is a failure. Also releases a request
 * from inside its own callback (no deadlock), and checks an empty prompt is
 * refused at submission.
 *
 * Built and run by Tests/HostTests/CHostTests.swift: prog <models-directory> [<cache-directory>].
 */
#define _POSIX_C_SOURCE 199309L /* nanosleep under -std=c11 */
#include "ember.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

typedef struct {
    atomic_int tokens;
    atomic_int poisoned;      /* set after release returned */
    atomic_int late_calls;    /* callbacks that saw the poison */
} watch_t;

static void on_token(const char *piece, size_t length, void *user) {
    (void)piece; (void)length;
    watch_t *watch = user;
    if (atomic_load(&watch->poisoned)) atomic_fetch_add(&watch->late_calls, 1);
    atomic_fetch_add(&watch->tokens, 1);
}

typedef struct {
    ember_request_t *request;
    atomic_int released;
} self_release_t;

static void release_myself(const char *piece, size_t length, void *user) {
    (void)piece; (void)length;
    self_release_t *self = user;
    if (atomic_exchange(&self->released, 1) == 0) ember_request_release(self->request);
}

int main(int argc, char **argv) {
    ember_runtime_options_t options;
    memset(&options, 0, sizeof options);
    options.size = sizeof options;
    options.compute_units = EMBER_UNITS_ALL;
    options.power_mode = EMBER_POWER_INJECTED;
    options.initial_power.size = sizeof options.initial_power;
    options.initial_power.battery_percent = 15; /* int4: fast tokens */
    options.initial_power.external_power = 0;
    options.initial_power.thermal = EMBER_THERMAL_NOMINAL;
    options.models_directory = argc > 1 ? argv[1] : "models";
    options.cache_directory = argc > 2 ? argv[2] : NULL;
    ember_runtime_t *runtime = NULL;
    ember_model_t *llm = NULL;
    if (ember_runtime_create(&options, &runtime) != EMBER_OK ||
        ember_model_load(runtime, "smollm2-135m-instruct", EMBER_MODEL_LANGUAGE, &llm) != EMBER_OK) {
        fprintf(stderr, "setup failed: %s\n", ember_last_error());
        return 1;
    }
    int failures = 0;

    /* Each round releases at another offset into a token (0, 0.35, 0.7, … ms after one arrived), so some
     * releases land while the next token is being computed and its callback is about to be entered. */
    int late_rounds = 0;
    for (int round = 0; round < 12; round++) {
        watch_t watch;
        atomic_init(&watch.tokens, 0);
        atomic_init(&watch.poisoned, 0);
        atomic_init(&watch.late_calls, 0);
        ember_request_t *request = NULL;
        if (ember_generate_submit(runtime, llm, "Count from one to a thousand:", 2000, EMBER_TIER_CRITICAL, on_token, &watch,
                                  &request) != EMBER_OK) {
            fprintf(stderr, "submit failed: %s\n", ember_last_error());
            return 1;
        }
        while (atomic_load(&watch.tokens) < 3) {
            struct timespec pause = {0, 100 * 1000};
            nanosleep(&pause, NULL);
        }
        struct timespec offset = {0, round * 350 * 1000};
        nanosleep(&offset, NULL);
        ember_request_release(request);
        atomic_store(&watch.poisoned, 1);
        int seen = atomic_load(&watch.tokens);
        struct timespec settle = {0, 300 * 1000 * 1000}; /* time for any stray callback to show up */
        nanosleep(&settle, NULL);
        int late = atomic_load(&watch.late_calls), after = atomic_load(&watch.tokens) - seen;
        printf("round %d: %d tokens before release, %d callbacks after\n", round, seen, after);
        if (late != 0 || after != 0) late_rounds++;
    }
    if (late_rounds > 0) {
        printf("%d round(s) had callbacks after release returned\n", late_rounds);
        failures++;
    }

    self_release_t self;
    atomic_init(&self.released, 0);
    self.request = NULL;
    {
        /* The callback may run before submit hands the handle back: it does nothing until the handle is stored. */
        ember_request_t *own = NULL;
        atomic_store(&self.released, 1);
        if (ember_generate_submit(runtime, llm, "Count from one to a thousand:", 2000, EMBER_TIER_CRITICAL, release_myself, &self,
                                  &own) != EMBER_OK) {
            return 1;
        }
        self.request = own;
        atomic_store(&self.released, 0);
        for (int waited = 0; atomic_load(&self.released) == 0 && waited < 60000; waited++) {
            struct timespec pause = {0, 1000 * 1000};
            nanosleep(&pause, NULL);
        }
        if (atomic_load(&self.released) == 0) {
            fprintf(stderr, "the callback never ran\n");
            failures++;
        } else {
            printf("released from inside its own callback\n");
        }
    }

    ember_request_t *empty = NULL;
    ember_status_t status = ember_generate_submit(runtime, llm, "", 8, EMBER_TIER_CRITICAL, NULL, NULL, &empty);
    printf("empty prompt: status %d (%s)\n", (int)status, ember_last_error());
    if (status != EMBER_ERROR_INVALID_ARGUMENT || empty != NULL) failures++;

    ember_model_release(llm);
    ember_runtime_release(runtime);
    printf(failures == 0 ? "release checks passed\n" : "release checks FAILED\n");
    return failures == 0 ? 0 : 1;
}
