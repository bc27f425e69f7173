/*
 * A C host asking for JSON: ember_generate_submit_with_options with a JSON
 * Schema at temperature 0.8, then the refusals a host meets (an unsupported
 * keyword, a wrong options.size, schema and object both set). Prints the
 * output between "json: " and a line "--". Built by Tests/HostTests/CHostTests.swift:
 * prog <models-directory> [<cache-directory>].
 */
#include "host_test.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    host_cache_directory = argc > 2 ? argv[2] : NULL;
    ember_runtime_t *runtime = plugged_in_runtime(argv[1]);
    ember_model_t *model = smollm2(runtime);
    if (model == NULL) return 1;
    const char *prompt = "<|im_start|>user\nGive the capital of France and its population as JSON.<|im_end|>\n<|im_start|>assistant\n";
    ember_generate_options_t generate = ember_generate_options_default();
    generate.temperature = 0.8f;
    generate.seed = 7;
    generate.json_schema =
        "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"maxLength\": 30},"
        " \"population\": {\"type\": \"integer\", \"minimum\": 0}}, \"required\": [\"city\", \"population\"]}";
    ember_request_t *request = NULL;
    ember_status_t status = ember_generate_submit_with_options(runtime, model, prompt, 80, EMBER_TIER_CRITICAL, &generate, NULL,
                                                               NULL, &request);
    const char *text = NULL;
    if (status != EMBER_OK || ember_request_wait(request) != EMBER_OK || ember_request_text(request, &text) != EMBER_OK) {
        printf("FAIL generate: %s\n", ember_last_error());
        return 1;
    }
    printf("json: %s\n--\n", text);
    ember_request_release(request);

    ember_generate_options_t unsupported = ember_generate_options_default();
    unsupported.json_schema = "{\"type\": \"object\", \"minProperties\": 1}";
    request = NULL;
    expect_refusal(ember_generate_submit_with_options(runtime, model, prompt, 8, EMBER_TIER_CRITICAL, &unsupported, NULL, NULL, &request),
                   "unsupported keyword", "minProperties");
    if (request != NULL) { printf("FAIL unsupported keyword: a request handle was returned\n"); failures++; }

    ember_generate_options_t wrong_size = ember_generate_options_default();
    wrong_size.size = 4;
    expect_refusal(ember_generate_submit_with_options(runtime, model, prompt, 8, EMBER_TIER_CRITICAL, &wrong_size, NULL, NULL, &request),
                   "wrong size", "options.size");

    ember_generate_options_t both = ember_generate_options_default();
    both.json_schema = "{}";
    both.json_object = 1;
    expect_refusal(ember_generate_submit_with_options(runtime, model, prompt, 8, EMBER_TIER_CRITICAL, &both, NULL, NULL, &request),
                   "schema and object", "both");

    ember_model_release(model);
    ember_runtime_release(runtime);
    if (failures == 0) printf("structured output checks passed\n");
    return failures == 0 ? 0 : 1;
}
