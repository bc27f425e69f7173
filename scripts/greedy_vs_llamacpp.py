#!/usr/bin/env python3
"""Greedy tokens of Ember against llama.cpp's on the same GGUF files (the "every GGUF type" goal).

Usage: greedy_vs_llamacpp.py [--precision P] LLAMA_BIN_DIR EMBER_BINARY N_TOKENS FILE.gguf [FILE.gguf ...]

--precision (default native) runs Ember at another precision: fp32 (the file's weights dequantized, no
activation quantization) tells a difference in llama.cpp's arithmetic from one in Ember's.

For each file: starts llama-server (2 threads), asks it for greedy continuations with the top two
log-probabilities of every prompt below, runs `ember generate --precision native --json` on the same
prompt, and compares token by token. A different pick counts as a near-tie (allowed) when llama.cpp's
top two candidates at that position are within 0.15 nats; the comparison stops at the first difference
(the contexts differ after it). Prints one line per file and prompt, and exits 1 on any real mismatch.
"""
import os, sys

from llama_server import ember_generate, post, running

PROMPTS = [
    "The capital of France is",
    "<|im_start|>user\nWhat is the largest planet in our solar system?<|im_end|>\n<|im_start|>assistant\n",
    "Once upon a time, in a small village by the sea,",
    "def fibonacci(n):",
]
TIE_NATS = 0.15

def llama_refs(bin_dir, path, n, port=18181):
    refs = []
    with running(bin_dir, path, port, os.environ.get("LLAMA_ARGS", "").split()):
        for prompt in PROMPTS:
            ids = post(port, "/tokenize", {"content": prompt, "add_special": True, "parse_special": True})["tokens"]
            r = post(port, "/completion", {"prompt": ids, "n_predict": n, "temperature": 0, "top_k": 1, "samplers": ["top_k"],
                                           "cache_prompt": False, "return_tokens": True, "n_probs": 2, "special": True})
            top2 = [[(t["id"], t["logprob"]) for t in c.get("top_logprobs", [])] for c in r.get("completion_probabilities", [])]
            refs.append((ids, r["tokens"], top2))
    return refs

def main():
    args, precision = sys.argv[1:], "native"
    if args[:1] == ["--precision"]:
        precision, args = args[1], args[2:]
    bin_dir, ember, n, files = args[0], args[1], int(args[2]), args[3:]
    failures = 0
    for path in files:
        refs = llama_refs(bin_dir, path, n)
        for prompt, (prompt_ids, gen_ids, top2) in zip(PROMPTS, refs):
            report = ember_generate(ember, path, precision, n, prompt)
            if report is None:
                failures += 1
                continue
            ours = report["token_ids"]
            verdict, same = "identical", 0
            if report["prompt_token_ids"] != prompt_ids:
                verdict = "prompt tokens differ"
            else:
                for i, (a, b) in enumerate(zip(ours, gen_ids)):
                    if a != b:
                        gap = abs(top2[i][0][1] - top2[i][1][1]) if i < len(top2) and len(top2[i]) == 2 else float("inf")
                        verdict = f"near-tie at {i} ({gap:.3f} nats)" if gap <= TIE_NATS else f"MISMATCH at {i} (gap {gap:.3f} nats)"
                        break
                    same += 1
                else:
                    if len(ours) != len(gen_ids) and min(len(ours), len(gen_ids)) < n:
                        verdict = f"lengths differ ({len(ours)} vs {len(gen_ids)})"
            if verdict.startswith(("MISMATCH", "prompt", "lengths")):
                failures += 1
            print(f"{os.path.basename(path):28s} {same:3d}/{len(gen_ids):3d} same  {verdict:34s} "
                  f"decode {report['timings']['decode_tokens_per_s']:.0f} tok/s  {prompt[:30]!r}")
    sys.exit(1 if failures else 0)

if __name__ == "__main__":
    main()
