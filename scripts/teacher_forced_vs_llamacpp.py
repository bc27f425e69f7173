#!/usr/bin/env python3
"""Ember's next token against llama.cpp's at teacher-forced positions (the "every GGUF type" goal, measured without
the compounding of free-running greedy decoding).

Usage: teacher_forced_vs_llamacpp.py LLAMA_BIN_DIR EMBER_BINARY FILE.gguf [FILE.gguf ...]
       teacher_forced_vs_llamacpp.py LLAMA_BIN_DIR OTHER_LLAMA_BIN_DIR FILE.gguf [FILE.gguf ...]

For each file: starts llama-server (2 threads), lets it continue 25 prompts greedily for 13 tokens with the top two
log-probabilities, and takes positions 0, 4, 8 and 12 of each continuation: the prompt plus llama.cpp's tokens before
the position is given to `ember generate -n 1 --token-ids` as llama.cpp's token ids, and Ember's token is compared with
llama.cpp's. A different pick is a near-tie (allowed by the goal) when
llama.cpp's top two are within 0.15 nats, a mismatch otherwise. Every position starts from the same context on both
sides, so one early difference does not decide the rest. Prints one line per file and the total; exits 1 on any
mismatch. scripts/greedy_vs_llamacpp.py is the free-running form.

With a directory holding another llama.cpp build (say one built for AVX2 only) in place of Ember, that build answers
each position instead (its llama-server, the same prompt ids, one token): llama.cpp against itself under the same rule,
the floor that its own rounding sets for the count.
"""
import os, sys

from llama_server import ember_generate, post, running

TIE_NATS = 0.15
POSITIONS = [0, 4, 8, 12]
SUBJECTS = ["the ocean", "a small robot", "the history of Rome", "photosynthesis", "a rainy morning", "the stock market",
            "an old lighthouse", "quantum computers", "my grandmother's kitchen", "the moon landing", "a jazz concert",
            "the Sahara desert", "machine learning", "a lost cat", "the French revolution", "volcanoes", "a chess game",
            "coffee", "the internet", "a winter forest"]
PROMPTS = ([f"Write one sentence about {s}:" for s in SUBJECTS[:10]]
           + [f"<|im_start|>user\nTell me about {s}.<|im_end|>\n<|im_start|>assistant\n" for s in SUBJECTS[10:]]
           + ["The quick brown fox", "In 1492, Columbus", "import numpy as np\n", "Once upon a time there was",
              "The capital of Germany is"])

def llama_positions(bin_dir, path, port=18190):
    """(prompt ids + llama.cpp's tokens before the position, that text, llama.cpp's token there, its top two)."""
    cases = []
    with running(bin_dir, path, port):
        for prompt in PROMPTS:
            ids = post(port, "/tokenize", {"content": prompt, "add_special": True, "parse_special": True})["tokens"]
            r = post(port, "/completion", {"prompt": ids, "n_predict": max(POSITIONS) + 1, "temperature": 0, "top_k": 1,
                                           "samplers": ["top_k"], "cache_prompt": False, "return_tokens": True,
                                           "n_probs": 2, "special": True})
            generated = r["tokens"]
            top2 = [[t["logprob"] for t in c.get("top_logprobs", [])] for c in r.get("completion_probabilities", [])]
            for k in POSITIONS:
                if k < len(generated) and k < len(top2):
                    text = post(port, "/detokenize", {"tokens": ids + generated[:k]})["content"]
                    cases.append((ids + generated[:k], text, generated[k], top2[k]))
    return cases

def llama_next_tokens(bin_dir, path, cases, port=18191):
    """Another llama.cpp build's greedy token after each case's ids (as ember_generate's report, for main)."""
    reports = []
    with running(bin_dir, path, port):
        for ids, _, _, _ in cases:
            r = post(port, "/completion", {"prompt": ids, "n_predict": 1, "temperature": 0, "top_k": 1,
                                           "samplers": ["top_k"], "cache_prompt": False, "return_tokens": True})
            reports.append({"prompt_token_ids": ids, "token_ids": r["tokens"]})
    return reports

def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    bin_dir, ember, files = sys.argv[1], sys.argv[2], sys.argv[3:]
    total = mismatches = 0
    for path in files:
        bad = ties = skipped = 0
        cases = llama_positions(bin_dir, path)
        other = llama_next_tokens(ember, path, cases) if os.path.isdir(ember) else None
        for i, (ids, text, want, top2) in enumerate(cases):
            report = other[i] if other is not None else ember_generate(ember, path, "native", 1, text, token_ids=ids)
            if report is None:
                bad += 1
                continue
            if report["prompt_token_ids"] != ids:
                skipped += 1
                continue
            got = report["token_ids"][0] if report["token_ids"] else -1
            if got != want:
                gap = abs(top2[0] - top2[1]) if len(top2) == 2 else float("inf")
                if gap <= TIE_NATS:
                    ties += 1
                else:
                    bad += 1
                    print(f"  {os.path.basename(path)} MISMATCH (gap {gap:.3f} nats) after {text[-40:]!r}")
        total += len(cases) - skipped
        mismatches += bad
        print(f"{os.path.basename(path):28s} positions {len(cases) - skipped:3d}  near-ties {ties:2d}  mismatches {bad:2d}"
              + (f"  (skipped {skipped}: Ember read other prompt ids than it was given)" if skipped else ""), flush=True)
    print(f"total: {mismatches} mismatches beyond a near-tie in {total} positions")
    sys.exit(1 if mismatches else 0)

if __name__ == "__main__":
    main()
