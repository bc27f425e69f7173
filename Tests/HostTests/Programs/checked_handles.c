/*
 * A careless host: releases every kind of handle twice, uses a request after
 * releasing it, hands a request where a model is expected, and forges a
 * handle. Each must give EMBER_ERROR_INVALID_HANDLE with a message — never a
 * crash, never a stale success. Built with AddressSanitizer by
 * Tests/HostTests/CHostTests.swift: prog <models-directory> [<cache-directory>].
 */
#include "host_test.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    host_cache_directory = argc > 2 ? argv[2] : NULL;
    ember_runtime_t *runtime = plugged_in_runtime(argv[1]);
    ember_model_t *model = smollm2(runtime);
    if (model == NULL) return 1;
    ember_request_t *request = NULL;
    expect(ember_generate_submit(runtime, model, "Hello", 2, EMBER_TIER_CRITICAL, NULL, NULL, &request), EMBER_OK, "submit", NULL);
    expect(ember_request_wait(request), EMBER_OK, "wait", NULL);

    /* A request handle where a model is expected, and the reverse. */
    size_t dimension = 0;
    expect(ember_model_embedding_dimension((ember_model_t *)request, &dimension), EMBER_ERROR_INVALID_HANDLE, "request as model",
           "a request handle, expected a model handle");
    expect(ember_request_wait((ember_request_t *)model), EMBER_ERROR_INVALID_HANDLE, "model as request", "expected a request handle");
    expect(ember_model_release((ember_model_t *)runtime), EMBER_ERROR_INVALID_HANDLE, "runtime released as model", NULL);

    /* Use after release and double release of a request. */
    expect(ember_request_release(request), EMBER_OK, "release request", NULL);
    const char *text = NULL;
    expect(ember_request_text(request, &text), EMBER_ERROR_INVALID_HANDLE, "text after release", "no longer live");
    expect(ember_request_release(request), EMBER_ERROR_INVALID_HANDLE, "release request twice", "no longer live");
    expect(ember_request_cancel(request), EMBER_ERROR_INVALID_HANDLE, "cancel after release", NULL);

    /* A forged handle and a made-up pointer. */
    expect(ember_request_wait((ember_request_t *)(uintptr_t)0xdeadbeef), EMBER_ERROR_INVALID_HANDLE, "forged handle", NULL);
    int on_the_stack = 0;
    expect(ember_model_release((ember_model_t *)&on_the_stack), EMBER_ERROR_INVALID_HANDLE, "stack pointer as handle", NULL);
    expect(ember_request_release(NULL), EMBER_OK, "release NULL", NULL);

    /* Double release of a model and of a runtime; a released runtime used again. */
    expect(ember_model_release(model), EMBER_OK, "release model", NULL);
    expect(ember_model_release(model), EMBER_ERROR_INVALID_HANDLE, "release model twice", NULL);
    expect(ember_runtime_release(runtime), EMBER_OK, "release runtime", NULL);
    expect(ember_runtime_release(runtime), EMBER_ERROR_INVALID_HANDLE, "release runtime twice", NULL);
    ember_power_state_t state = {0};
    state.size = sizeof state;
    state.battery_percent = -1;
    state.charging = 1;
    state.external_power = 1;
    expect(ember_runtime_set_power_state(runtime, &state), EMBER_ERROR_INVALID_HANDLE, "runtime after release", NULL);

    printf(failures == 0 ? "handle checks passed\n" : "%d handle checks failed\n", failures);
    return failures == 0 ? 0 : 1;
}
