// What llama.cpp (libllama) computes on one GGUF file, for scripts/make_tiny_models.py.
//
// Build: cc -O2 -I LLAMA/include -I LLAMA/ggml/include scripts/tiny_reference.c -L LLAMA/build/bin -lllama
// Usage: tiny_reference MODEL.gguf < commands
//
// One command per line, text always as hex (so any bytes pass):
//   T P HEX          tokenize with the file's BOS rule, special tokens parsed (P=1) or not (P=0)
//                    -> "ids 1 2 3"
//   G N HEX          tokenize (BOS rule, specials parsed), run the prompt as one batch, then N greedy steps
//                    -> "ids …", then N+1 lines "logits f0 f1 …" (after the prompt, after each generated token)
//                       and "gen id1 id2 …"
//   C A R1 H1 R2 H2… apply the file's chat template (llama_chat_apply_template) to role/content pairs
//                    (roles as words, contents as hex), with the assistant prompt if A=1 -> "hex …"
// CPU, 2 threads, flash attention off, f16 KV cache (llama.cpp's defaults otherwise).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "llama.h"

static void quiet(enum ggml_log_level level, const char *text, void *data) { (void)level; (void)text; (void)data; }

static int unhex(const char *hex, char *out) {
    int n = 0;
    if (strcmp(hex, "-") == 0) { out[0] = 0; return 0; }  // "-" is the empty text
    for (; hex[0] && hex[1]; hex += 2) { unsigned v; sscanf(hex, "%2x", &v); out[n++] = (char)v; }
    out[n] = 0;
    return n;
}

static int tokenize(const struct llama_vocab *vocab, const char *text, int len, int parse, llama_token *ids, int max) {
    int n = llama_tokenize(vocab, text, len, ids, max, true, parse != 0);
    if (n < 0) { fprintf(stderr, "tokenize: needs %d ids\n", -n); exit(1); }
    return n;
}

static void print_ids(const char *tag, const llama_token *ids, int n) {
    printf("%s", tag);
    for (int i = 0; i < n; i++) printf(" %d", ids[i]);
    printf("\n");
}

static void print_logits(const float *logits, int n) {
    printf("logits");
    for (int i = 0; i < n; i++) printf(" %.9g", logits[i]);
    printf("\n");
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: %s MODEL.gguf < commands\n", argv[0]); return 2; }
    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) { fprintf(stderr, "cannot load %s\n", argv[1]); return 1; }
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    int vocab_size = llama_vocab_n_tokens(vocab);
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 256; cp.n_batch = 256; cp.n_ubatch = 256; cp.n_threads = 2; cp.n_threads_batch = 2;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) { fprintf(stderr, "cannot make a context\n"); return 1; }

    static char line[1 << 20], text[1 << 19], word[1 << 19];
    static llama_token ids[4096];
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\n")] = 0;
        char *save = NULL, *cmd = strtok_r(line, " ", &save);
        if (!cmd) continue;
        if (strcmp(cmd, "T") == 0) {
            int parse = atoi(strtok_r(NULL, " ", &save));
            int len = unhex(strtok_r(NULL, " ", &save), text);
            print_ids("ids", ids, tokenize(vocab, text, len, parse, ids, 4096));
        } else if (strcmp(cmd, "G") == 0) {
            int steps = atoi(strtok_r(NULL, " ", &save));
            int len = unhex(strtok_r(NULL, " ", &save), text);
            int n = tokenize(vocab, text, len, 1, ids, 4096);
            print_ids("ids", ids, n);
            llama_memory_clear(llama_get_memory(ctx), true);
            if (llama_decode(ctx, llama_batch_get_one(ids, n)) != 0) { fprintf(stderr, "decode failed\n"); return 1; }
            llama_token generated[256];
            for (int step = 0; step <= steps; step++) {
                const float *logits = llama_get_logits_ith(ctx, -1);
                print_logits(logits, vocab_size);
                if (step == steps) break;
                int best = 0;
                for (int i = 1; i < vocab_size; i++) if (logits[i] > logits[best]) best = i;
                generated[step] = best;
                if (llama_decode(ctx, llama_batch_get_one(&generated[step], 1)) != 0) { fprintf(stderr, "decode failed\n"); return 1; }
            }
            print_ids("gen", generated, steps);
        } else if (strcmp(cmd, "C") == 0) {
            int assistant = atoi(strtok_r(NULL, " ", &save));
            struct llama_chat_message messages[16];
            static char contents[16][1 << 14], roles[16][32];
            int count = 0;
            char *role;
            while (count < 16 && (role = strtok_r(NULL, " ", &save))) {
                snprintf(roles[count], sizeof roles[count], "%s", role);
                unhex(strtok_r(NULL, " ", &save), contents[count]);
                messages[count].role = roles[count];
                messages[count].content = contents[count];
                count++;
            }
            const char *tmpl = llama_model_chat_template(model, NULL);
            int n = llama_chat_apply_template(tmpl, messages, count, assistant != 0, word, sizeof word);
            if (n < 0 || n >= (int)sizeof word) { fprintf(stderr, "chat template failed (%d)\n", n); return 1; }
            printf("hex ");
            for (int i = 0; i < n; i++) printf("%02x", (unsigned char)word[i]);
            printf("\n");
        } else {
            fprintf(stderr, "unknown command %s\n", cmd);
            return 2;
        }
        fflush(stdout);
    }
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}
