/*
 * What the C host test programs share: a runtime on injected mains power (so
 * the policy never defers them) with SmolLM2 loaded, its failures counted, and the check that a
 * call was refused with a message naming what was wrong.
 */
#ifndef EMBER_HOST_TEST_H
#define EMBER_HOST_TEST_H

#include "ember.h"

#include <stdio.h>
#include <string.h>

static int failures = 0;

/* The cache directory the runtimes below keep their calibration and quality measurements in: the program's second
 * argument (the test run's shared one, so that only its first runtime measures), NULL without one. */
static const char *host_cache_directory = NULL;

/* ember_runtime_create for a runtime reading models from `models_directory`, plugged in at nominal temperature,
 * its options structure saying it is `size` bytes, with `prompt_cache_bytes` (and host_cache_directory, which a
 * smaller structure than ABI 2's third header's does not hold). */
static inline ember_status_t plugged_in_runtime_with(const char *models_directory, uint32_t size, int64_t prompt_cache_bytes,
                                                     ember_runtime_t **out_runtime) {
    ember_runtime_options_t options = {0};
    options.size = size;
    options.power_mode = EMBER_POWER_INJECTED;
    options.initial_power.size = sizeof options.initial_power;
    options.initial_power.battery_percent = -1;
    options.initial_power.charging = 1;
    options.initial_power.external_power = 1;
    options.models_directory = models_directory;
    options.prompt_cache_bytes = prompt_cache_bytes;
    options.cache_directory = host_cache_directory;
    return ember_runtime_create(&options, out_runtime);
}

/* A runtime reading models from `models_directory`, plugged in at nominal temperature; NULL (and a FAIL line) on failure. */
static inline ember_runtime_t *plugged_in_runtime(const char *models_directory) {
    ember_runtime_t *runtime = NULL;
    if (plugged_in_runtime_with(models_directory, sizeof(ember_runtime_options_t), 0, &runtime) != EMBER_OK) {
        printf("FAIL create: %s\n", ember_last_error());
        return NULL;
    }
    return runtime;
}

/* SmolLM2 loaded in `runtime` (NULL when `runtime` is NULL or loading fails, with a FAIL line). */
static inline ember_model_t *smollm2(ember_runtime_t *runtime) {
    ember_model_t *model = NULL;
    if (runtime == NULL || ember_model_load(runtime, "smollm2-135m-instruct", EMBER_MODEL_LANGUAGE, &model) != EMBER_OK) {
        printf("FAIL set-up: %s\n", ember_last_error());
        return NULL;
    }
    return model;
}

/* Counts a failure unless `status` is `expected` and the last error contains `needle` (NULL: any message). */
static inline void expect(ember_status_t status, ember_status_t expected, const char *what, const char *needle) {
    const char *message = ember_last_error();
    if (status != expected || (needle != NULL && strstr(message, needle) == NULL)) {
        printf("FAIL %s: status %d (expected %d): %s\n", what, (int)status, (int)expected, message);
        failures++;
    } else {
        printf("ok %s: status %d%s%s\n", what, (int)status, needle ? ": " : "", needle ? message : "");
    }
}

/* expect() for EMBER_ERROR_INVALID_ARGUMENT. */
static inline void expect_refusal(ember_status_t status, const char *what, const char *needle) {
    expect(status, EMBER_ERROR_INVALID_ARGUMENT, what, needle);
}

#endif /* EMBER_HOST_TEST_H */
