/*
 * A C host using ABI 2's generation options and reports: tokenizing, a prompt
 * as token ids, log-probabilities, usage and finish reasons, logit bias, stop
 * strings, a conversation through the model's chat template, ABI 1's smaller
 * options structure, the prompt cache's count and ABI 2's first usage
 * structure, the cache directory for the runtime's measurements, and the
 * refusals a host meets. Greedy throughout, so
 * every comparison is exact. Built by Tests/HostTests/CHostTests.swift:
 * prog <models-directory> [<cache-directory>].
 */
#define _POSIX_C_SOURCE 200809L /* stat's nanosecond times, rmdir, getpid under -std=c11 */
#include "host_test.h"

#include <sys/stat.h>
#include <unistd.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check(int ok, const char *what) {
    if (!ok) { printf("FAIL %s (last error: %s)\n", what, ember_last_error()); failures++; }
    else printf("ok %s\n", what);
}

/* Runs one request to its end; its text copied (caller frees), NULL on failure. `request` is read after the call
 * that submitted it (C evaluates arguments in no set order). */
static char *run(ember_status_t submitted, ember_request_t *const *request) {
    const char *text = NULL;
    if (submitted != EMBER_OK || ember_request_wait(*request) != EMBER_OK || ember_request_text(*request, &text) != EMBER_OK) return NULL;
    char *copy = malloc(strlen(text) + 1);
    strcpy(copy, text);
    return copy;
}

/* A runtime as plugged_in_runtime_with makes, keeping its measurements in `cache` (NULL: none). */
static ember_status_t runtime_with_cache_directory(const char *models, uint32_t size, const char *cache, ember_runtime_t **out) {
    const char *shared = host_cache_directory;
    host_cache_directory = cache;
    ember_status_t status = plugged_in_runtime_with(models, size, 0, out);
    host_cache_directory = shared;
    return status;
}

/* `directory`/`name`'s modification time in nanoseconds; -1 when it does not exist. */
static long long modified_ns(const char *directory, const char *name) {
    char path[4096];
    struct stat status;
    snprintf(path, sizeof path, "%s/%s", directory, name);
    if (stat(path, &status) != 0) return -1;
    return (long long)status.st_mtim.tv_sec * 1000000000LL + status.st_mtim.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    host_cache_directory = argc > 2 ? argv[2] : NULL;
    check(ember_abi_version() == EMBER_ABI_VERSION && EMBER_ABI_VERSION == 2, "library and header at ABI 2");
    ember_runtime_t *runtime = plugged_in_runtime(argv[1]);
    ember_model_t *model = smollm2(runtime);
    if (model == NULL) return 1;
    const char *prompt = "The capital of France is";

    /* Tokenize: ask the count first, then fill. */
    size_t count = 0;
    check(ember_model_tokenize(model, prompt, NULL, 0, &count) == EMBER_ERROR_BUFFER_TOO_SMALL && count > 0, "tokenize with capacity 0 gives the count");
    int32_t tokens[64];
    check(count <= 64 && ember_model_tokenize(model, prompt, tokens, 64, &count) == EMBER_OK, "tokenize");

    /* Greedy from text, with log-probabilities and the 3 best tokens of each step. */
    ember_generate_options_t generate = ember_generate_options_default();
    generate.logprobs = 1;
    generate.top_logprobs = 3;
    ember_request_t *request = NULL;
    char *greedy = run(ember_generate_submit_with_options(runtime, model, prompt, 12, EMBER_TIER_CRITICAL, &generate, NULL, NULL, &request), &request);
    check(greedy != NULL && strlen(greedy) > 4, "greedy generation");
    if (greedy == NULL) return 1;
    printf("greedy: \"%s\"\n", greedy);
    ember_usage_t usage = {0};
    usage.size = sizeof usage;
    check(ember_request_usage(request, &usage) == EMBER_OK, "usage");
    printf("usage: prompt %d, generated %d, finish %d, prefill %.1f ms, decode %.1f ms\n", usage.prompt_tokens,
           usage.generated_tokens, (int)usage.finish_reason, usage.prefill_ms, usage.decode_ms);
    check(usage.prompt_tokens == (int32_t)count, "usage counts the prompt's tokens as ember_model_tokenize does");
    check(usage.generated_tokens == 12 && usage.finish_reason == EMBER_FINISH_LENGTH, "12 tokens, finish reason LENGTH");
    const ember_step_logprobs_t *steps = NULL;
    size_t step_count = 0;
    check(ember_request_logprobs(request, &steps, &step_count) == EMBER_OK && step_count == 12, "one log-probability step per token");
    char joined[1024] = {0};
    size_t used = 0;
    int ordered = 1;
    for (size_t i = 0; i < step_count; i++) {
        const ember_step_logprobs_t *step = &steps[i];
        if (step->top_count != 3 || step->chosen.logprob > 0 || !isfinite(step->chosen.logprob)) ordered = 0;
        if (step->top_count > 0 && step->top[0].token != step->chosen.token) ordered = 0; /* greedy picks the best */
        for (size_t k = 1; k < step->top_count; k++) if (step->top[k].logprob > step->top[k - 1].logprob) ordered = 0;
        if (used + step->chosen.length < sizeof joined) { memcpy(joined + used, step->chosen.bytes, step->chosen.length); used += step->chosen.length; }
    }
    printf("first step: token %d \"%s\" %.4f; runner-up %d %.4f\n", steps[0].chosen.token, steps[0].chosen.bytes,
           steps[0].chosen.logprob, steps[0].top[1].token, steps[0].top[1].logprob);
    check(ordered, "greedy picks are each step's best; top tokens best first; ln p <= 0");
    check(strcmp(joined, greedy) == 0, "the chosen tokens' bytes spell the text");
    int32_t first_token = steps[0].chosen.token;

    /* The same prompt as token ids: the same first token and prompt length; the same text when the policy chose the
     * same precision for both runs (it may not: under load its measured costs move, and greedy text can differ between
     * precisions after a few tokens). */
    ember_decision_t greedy_decision = {0}, ids_decision = {0};
    greedy_decision.size = ids_decision.size = sizeof greedy_decision;
    ember_request_decision(request, &greedy_decision);
    ember_request_t *ids_request = NULL;
    ember_generate_options_t scored = ember_generate_options_default();
    scored.logprobs = 1;
    char *from_ids = run(ember_generate_tokens_submit(runtime, model, tokens, count, 12, EMBER_TIER_CRITICAL, &scored, NULL, NULL,
                                                      &ids_request), &ids_request);
    usage.size = sizeof usage;
    check(from_ids != NULL && ember_request_usage(ids_request, &usage) == EMBER_OK && usage.prompt_tokens == (int32_t)count &&
          ember_request_logprobs(ids_request, &steps, &step_count) == EMBER_OK && step_count > 0 &&
          steps[0].chosen.token == first_token, "token ids: the same prompt length and first token as the text");
    ember_request_decision(ids_request, &ids_decision);
    printf("from ids: \"%s\" (precision %d, units %d; the text's %d, %d)\n", from_ids ? from_ids : "(failed)",
           (int)ids_decision.precision, (int)ids_decision.compute_units, (int)greedy_decision.precision,
           (int)greedy_decision.compute_units);
    /* Precisions and routes round differently (int4 on the GPU route computes from fp32 weights): the texts are
       compared when the policy chose the same for both. */
    if (from_ids != NULL && ids_decision.precision == greedy_decision.precision
        && ids_decision.compute_units == greedy_decision.compute_units) {
        check(strcmp(from_ids, greedy) == 0, "token ids give the text's greedy output at the same precision and units");
    } else {
        printf("the policy chose another precision or units for the token ids: texts not compared\n");
    }
    ember_request_release(ids_request);
    ember_request_release(request);

    /* The prompt cache: the same prompt again restores all but its last token when it runs at the same precision
     * and units (what the cache keys by); ABI 2's first, smaller ember_usage_t is still filled, and nothing past it. */
    const char *story = "Write a short story about a lighthouse keeper who finds a message in a bottle one morning.";
    ember_request_t *first_story = NULL, *second_story = NULL;
    char *told = run(ember_generate_submit(runtime, model, story, 4, EMBER_TIER_CRITICAL, NULL, NULL, &first_story), &first_story);
    char *retold = run(ember_generate_submit(runtime, model, story, 4, EMBER_TIER_CRITICAL, NULL, NULL, &second_story), &second_story);
    ember_usage_t told_usage = {0}, retold_usage = {0};
    told_usage.size = retold_usage.size = sizeof told_usage;
    check(told != NULL && retold != NULL && ember_request_usage(first_story, &told_usage) == EMBER_OK
          && ember_request_usage(second_story, &retold_usage) == EMBER_OK && told_usage.cached_prompt_tokens == 0
          && retold_usage.prompt_tokens == told_usage.prompt_tokens && told_usage.prompt_tokens > 8, "a new prompt is computed whole");
    ember_decision_t told_decision = {0}, retold_decision = {0};
    told_decision.size = retold_decision.size = sizeof told_decision;
    ember_request_decision(first_story, &told_decision);
    ember_request_decision(second_story, &retold_decision);
    printf("prompt cache: %d of %d prompt tokens restored the second time\n", retold_usage.cached_prompt_tokens, retold_usage.prompt_tokens);
    if (told_decision.precision == retold_decision.precision && told_decision.compute_units == retold_decision.compute_units) {
        check(retold_usage.cached_prompt_tokens == retold_usage.prompt_tokens - 1, "the same prompt again restores all but its last token");
    } else {
        printf("the policy chose another precision or units the second time: the cache not checked\n");
    }
    ember_usage_t first_header = {0};
    first_header.size = offsetof(ember_usage_t, cached_prompt_tokens);
    first_header.cached_prompt_tokens = -7;
    check(ember_request_usage(second_story, &first_header) == EMBER_OK && first_header.prompt_tokens == retold_usage.prompt_tokens
          && first_header.decode_ms == retold_usage.decode_ms && first_header.cached_prompt_tokens == -7
          && first_header.size == offsetof(ember_usage_t, cached_prompt_tokens),
          "ABI 2's first ember_usage_t is filled to its end and no further");
    ember_request_release(first_story);
    ember_request_release(second_story);
    free(told); free(retold);

    /* prompt_cache_bytes: -1 keeps no cache (the same prompt again computes it whole); another negative value is
     * refused naming the field; ABI 2's first, smaller options structure is taken without reading the field. */
    ember_runtime_t *uncached = NULL, *refused = NULL, *first_size = NULL;
    expect_refusal(plugged_in_runtime_with(argv[1], sizeof(ember_runtime_options_t), -5, &refused), "a negative prompt cache size",
                   "options.prompt_cache_bytes: found -5");
    check(plugged_in_runtime_with(argv[1], offsetof(ember_runtime_options_t, prompt_cache_bytes), -5, &first_size) == EMBER_OK && first_size != NULL,
          "ABI 2's first ember_runtime_options_t is taken, the field after it unread");
    ember_runtime_release(first_size);
    check(plugged_in_runtime_with(argv[1], sizeof(ember_runtime_options_t), -1, &uncached) == EMBER_OK, "a runtime without a prompt cache");
    ember_model_t *plain_model = smollm2(uncached);
    ember_request_t *plain_first = NULL, *plain_second = NULL;
    char *plain_told = run(ember_generate_submit(uncached, plain_model, story, 2, EMBER_TIER_CRITICAL, NULL, NULL, &plain_first), &plain_first);
    char *plain_retold = run(ember_generate_submit(uncached, plain_model, story, 2, EMBER_TIER_CRITICAL, NULL, NULL, &plain_second), &plain_second);
    ember_usage_t plain_usage = {0};
    plain_usage.size = sizeof plain_usage;
    check(plain_told != NULL && plain_retold != NULL && ember_request_usage(plain_second, &plain_usage) == EMBER_OK
          && plain_usage.cached_prompt_tokens == 0 && plain_usage.prompt_tokens == retold_usage.prompt_tokens,
          "without a prompt cache the same prompt again is computed whole");
    ember_request_release(plain_first);
    ember_request_release(plain_second);
    free(plain_told); free(plain_retold);
    ember_model_release(plain_model);
    ember_runtime_release(uncached);

    /* cache_directory: the runtimes above kept the backends' costs and SmolLM2's quality in the shared one; a later
     * runtime on this machine reads both and measures neither (neither file is written again); a folder that does not
     * exist is made; an empty string or a file is refused naming the field; ABI 2's second header's size is taken
     * without reading the field. */
    if (host_cache_directory != NULL) {
        long long calibration = modified_ns(host_cache_directory, "calibration.json");
        long long quality = modified_ns(host_cache_directory, "quality.json");
        check(calibration > 0 && quality > 0, "the calibration and the model's quality kept in cache_directory");
        ember_runtime_t *again = NULL;
        check(runtime_with_cache_directory(argv[1], sizeof(ember_runtime_options_t), host_cache_directory, &again) == EMBER_OK,
              "a runtime reading the cache directory");
        ember_model_t *again_model = smollm2(again);
        check(again_model != NULL && modified_ns(host_cache_directory, "calibration.json") == calibration
              && modified_ns(host_cache_directory, "quality.json") == quality,
              "a later runtime and model load read them: neither file written again");
        ember_model_release(again_model);
        ember_runtime_release(again);

        char parent[2048], made[3072], file[4096];
        snprintf(parent, sizeof parent, "%s/made-%ld", host_cache_directory, (long)getpid());
        snprintf(made, sizeof made, "%s/here", parent);
        ember_runtime_t *fresh = NULL;
        check(runtime_with_cache_directory(argv[1], sizeof(ember_runtime_options_t), made, &fresh) == EMBER_OK
              && modified_ns(made, "calibration.json") > 0, "a cache directory that did not exist is made and written");
        ember_runtime_release(fresh);
        snprintf(file, sizeof file, "%s/calibration.json", made);
        remove(file);
        rmdir(made);
        rmdir(parent);

        ember_runtime_t *refused_cache = NULL, *second_size = NULL;
        expect_refusal(runtime_with_cache_directory(argv[1], sizeof(ember_runtime_options_t), "", &refused_cache),
                       "an empty cache directory", "options.cache_directory: found an empty string");
        expect_refusal(runtime_with_cache_directory(argv[1], sizeof(ember_runtime_options_t), argv[0], &refused_cache),
                       "a file as the cache directory", "which is not a folder");
        check(runtime_with_cache_directory(argv[1], offsetof(ember_runtime_options_t, cache_directory), "", &second_size) == EMBER_OK
              && second_size != NULL, "ABI 2's second ember_runtime_options_t is taken, cache_directory unread");
        ember_runtime_release(second_size);
    } else {
        printf("no cache directory given: its checks not run\n");
    }

    /* Logit bias -100 on the first greedy token: another first token. */
    ember_generate_options_t biased = ember_generate_options_default();
    float minus = -100;
    biased.logit_bias_tokens = &first_token;
    biased.logit_bias_values = &minus;
    biased.logit_bias_count = 1;
    biased.logprobs = 1;
    request = NULL;
    char *other = run(ember_generate_submit_with_options(runtime, model, prompt, 4, EMBER_TIER_CRITICAL, &biased, NULL, NULL, &request), &request);
    check(ember_request_logprobs(request, &steps, &step_count) == EMBER_OK && step_count > 0 && steps[0].chosen.token != first_token,
          "a banned token is not picked");
    printf("banned %d: \"%s\"\n", first_token, other ? other : "(failed)");
    ember_request_release(request);

    /* A stop string from the middle of the greedy text: the text ends before it. */
    char stop_word[8] = {0};
    memcpy(stop_word, greedy + 3, 3);
    const char *stops[] = {"never appears \x01", stop_word};
    ember_generate_options_t stopping = ember_generate_options_default();
    stopping.stop = stops;
    stopping.stop_count = 2;
    request = NULL;
    char *stopped = run(ember_generate_submit_with_options(runtime, model, prompt, 12, EMBER_TIER_CRITICAL, &stopping, NULL, NULL, &request), &request);
    usage.size = sizeof usage;
    check(stopped != NULL && ember_request_usage(request, &usage) == EMBER_OK && usage.finish_reason == EMBER_FINISH_STOP_STRING,
          "finish reason STOP_STRING");
    check(stopped != NULL && strlen(stopped) == (size_t)(strstr(greedy, stop_word) - greedy) && strncmp(stopped, greedy, strlen(stopped)) == 0,
          "the text ends before the stop string");
    printf("stop \"%s\": \"%s\"\n", stop_word, stopped ? stopped : "(failed)");
    ember_request_release(request);

    /* ABI 1's structure: its size is taken, the appended fields are not read (min_p here is out of range). */
    ember_generate_options_t abi1 = ember_generate_options_default();
    abi1.size = (uint32_t)((offsetof(ember_generate_options_t, json_object) + sizeof(int32_t) + 7) / 8 * 8);
    abi1.min_p = 123;
    request = NULL;
    char *old = run(ember_generate_submit_with_options(runtime, model, prompt, 12, EMBER_TIER_CRITICAL, &abi1, NULL, NULL, &request), &request);
    check(old != NULL && strncmp(old, " Paris", 6) == 0, "an ABI 1 options structure still works");
    ember_request_release(request);

    /* A conversation through the model's chat template. */
    ember_chat_message_t messages[] = {{"system", "You are a terse assistant."}, {"user", "What is the capital of France?"}};
    request = NULL;
    char *reply = run(ember_chat_submit(runtime, model, messages, 2, 24, EMBER_TIER_CRITICAL, NULL, NULL, NULL, &request), &request);
    usage.size = sizeof usage;
    check(reply != NULL && strlen(reply) > 0 && strstr(reply, "<|im_") == NULL && ember_request_usage(request, &usage) == EMBER_OK &&
          usage.prompt_tokens > 10, "a chat reply");
    printf("chat: \"%s\" (finish %d)\n", reply ? reply : "(failed)", (int)usage.finish_reason);
    ember_request_release(request);

    /* Refusals. */
    ember_generate_options_t bad = ember_generate_options_default();
    bad.logprobs = 1;
    bad.top_logprobs = 21;
    request = NULL;
    expect_refusal(ember_generate_submit_with_options(runtime, model, prompt, 4, EMBER_TIER_CRITICAL, &bad, NULL, NULL, &request),
                   "top_logprobs 21", "options.top_logprobs");
    if (request != NULL) { printf("FAIL a refused request got a handle\n"); failures++; }
    bad = ember_generate_options_default();
    int32_t beyond = 1000000;
    float plus = 5;
    bad.logit_bias_tokens = &beyond;
    bad.logit_bias_values = &plus;
    bad.logit_bias_count = 1;
    expect_refusal(ember_generate_submit_with_options(runtime, model, prompt, 4, EMBER_TIER_CRITICAL, &bad, NULL, NULL, &request),
                   "bias beyond the vocabulary", "options.logit_bias_tokens[0]: found 1000000");
    bad = ember_generate_options_default();
    bad.stop_count = 1;
    expect_refusal(ember_generate_submit_with_options(runtime, model, prompt, 4, EMBER_TIER_CRITICAL, &bad, NULL, NULL, &request),
                   "stop_count without strings", "options.stop: found NULL");
    const char *empty_stop[] = {""};
    bad.stop = empty_stop;
    expect_refusal(ember_generate_submit_with_options(runtime, model, prompt, 4, EMBER_TIER_CRITICAL, &bad, NULL, NULL, &request),
                   "an empty stop string", "options.stop[0]: found an empty string");
    bad = ember_generate_options_default();
    bad.frequency_penalty = 3;
    expect_refusal(ember_generate_submit_with_options(runtime, model, prompt, 4, EMBER_TIER_CRITICAL, &bad, NULL, NULL, &request),
                   "frequency_penalty 3", "options.frequency_penalty: found 3");
    int32_t negative = -1;
    expect_refusal(ember_generate_tokens_submit(runtime, model, &negative, 1, 4, EMBER_TIER_CRITICAL, NULL, NULL, NULL, &request),
                   "a negative token id", "tokens[0]: found -1");
    ember_chat_message_t robot[] = {{"robot", "hello"}};
    expect_refusal(ember_chat_submit(runtime, model, robot, 1, 4, EMBER_TIER_CRITICAL, NULL, NULL, NULL, &request),
                   "an unknown role", "messages[0].role: found \"robot\"");
    expect_refusal(ember_chat_submit(runtime, model, messages, 0, 4, EMBER_TIER_CRITICAL, NULL, NULL, NULL, &request),
                   "no messages", "messages: found count 0");
    usage.size = 4;
    request = NULL;
    run(ember_generate_submit(runtime, model, prompt, 2, EMBER_TIER_CRITICAL, NULL, NULL, &request), &request);
    expect_refusal(ember_request_usage(request, &usage), "a wrong usage size", "out_usage->size");
    ember_request_release(request);

    free(greedy); free(from_ids); free(other); free(stopped); free(old); free(reply);
    ember_model_release(model);
    ember_runtime_release(runtime);
    if (failures == 0) printf("generation option checks passed\n");
    return failures == 0 ? 0 : 1;
}
