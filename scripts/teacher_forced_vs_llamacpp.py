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

The count is a threshold on a dozen or so events, which any last-bit change moves by a few; each line therefore also
gives a continuous distance over all positions: the mean |Δgap|, where gap is the log-probability of llama.cpp's first
token minus that of its second, on llama.cpp's side and on the other (Ember asked for its five most likely tokens;
positions where either token is not among them, or where the other side gives none — Ember reports no
log-probabilities for an end-of-generation token — are left out of the mean, and counted).

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

TOP = 5

def top_pairs(probabilities):
    """[(token id, log-probability)] of one step of llama-server's `completion_probabilities`, most likely first."""
    return [(t["id"], t["logprob"]) for t in probabilities.get("top_logprobs", [])]

def gap_change(reference, other):
    """How much the log-probability gap between `reference`'s first two tokens moved on the `other` side (both lists of
    (id, log-probability)), or None when `other` does not have both tokens."""
    if len(reference) < 2:
        return None
    first, second, seen = reference[0][0], reference[1][0], dict(other)
    if first not in seen or second not in seen:
        return None
    return abs((seen[first] - seen[second]) - (reference[0][1] - reference[1][1]))

def llama_positions(bin_dir, path, port=18190):
    """(prompt ids + llama.cpp's tokens before the position, that text, llama.cpp's token there, its top five as
    (id, log-probability))."""
    cases = []
    with running(bin_dir, path, port):
        for prompt in PROMPTS:
            ids = post(port, "/tokenize", {"content": prompt, "add_special": True, "parse_special": True})["tokens"]
            r = post(port, "/completion", {"prompt": ids, "n_predict": max(POSITIONS) + 1, "temperature": 0, "top_k": 1,
                                           "samplers": ["top_k"], "cache_prompt": False, "return_tokens": True,
                                           "n_probs": TOP, "special": True})
            generated = r["tokens"]
            tops = [top_pairs(c) for c in r.get("completion_probabilities", [])]
            for k in POSITIONS:
                if k < len(generated) and k < len(tops):
                    text = post(port, "/detokenize", {"tokens": ids + generated[:k]})["content"]
                    cases.append((ids + generated[:k], text, generated[k], tops[k]))
    return cases

def llama_next_tokens(bin_dir, path, cases, port=18191):
    """Another llama.cpp build's greedy token after each case's ids and its top five (as `next_token` gives Ember's)."""
    reports = []
    with running(bin_dir, path, port):
        for ids, _, _, _ in cases:
            r = post(port, "/completion", {"prompt": ids, "n_predict": 1, "temperature": 0, "top_k": 1,
                                           "samplers": ["top_k"], "cache_prompt": False, "return_tokens": True,
                                           "n_probs": TOP})
            steps = r.get("completion_probabilities", [])
            reports.append({"prompt_token_ids": ids, "token_ids": r["tokens"], "top": top_pairs(steps[0]) if steps else []})
    return reports

def next_token(ember, path, ids, text):
    """Ember's report for one case: its greedy token after `ids` and its top five, or None after its error."""
    report = ember_generate(ember, path, "native", 1, text, token_ids=ids, logprobs=TOP)
    if report is not None:
        steps = report.get("logprobs") or []
        report["top"] = [(t["id"], t["logprob"]) for t in steps[0]["top"]] if steps else []
    return report

def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    bin_dir, ember, files = sys.argv[1], sys.argv[2], sys.argv[3:]
    total = mismatches = 0
    changes, unmeasured = [], 0
    for path in files:
        bad = ties = skipped = 0
        file_changes = []
        cases = llama_positions(bin_dir, path)
        other = llama_next_tokens(ember, path, cases) if os.path.isdir(ember) else None
        for i, (ids, text, want, top) in enumerate(cases):
            report = other[i] if other is not None else next_token(ember, path, ids, text)
            if report is None:
                bad += 1
                continue
            if report["prompt_token_ids"] != ids:
                skipped += 1
                continue
            change = gap_change(top, report["top"])
            if change is None:
                unmeasured += 1
            else:
                file_changes.append(change)
            got = report["token_ids"][0] if report["token_ids"] else -1
            if got != want:
                gap = abs(top[0][1] - top[1][1]) if len(top) >= 2 else float("inf")
                if gap <= TIE_NATS:
                    ties += 1
                else:
                    bad += 1
                    print(f"  {os.path.basename(path)} MISMATCH (gap {gap:.3f} nats) after {text[-40:]!r}")
        total += len(cases) - skipped
        mismatches += bad
        changes += file_changes
        mean = sum(file_changes) / len(file_changes) if file_changes else float("nan")
        print(f"{os.path.basename(path):28s} positions {len(cases) - skipped:3d}  near-ties {ties:2d}  mismatches {bad:2d}"
              f"  mean |Δgap| {mean:.4f}"
              + (f"  (skipped {skipped}: Ember read other prompt ids than it was given)" if skipped else ""), flush=True)
    mean = sum(changes) / len(changes) if changes else float("nan")
    print(f"total: {mismatches} mismatches beyond a near-tie in {total} positions; mean |Δgap| {mean:.4f} nats over "
          f"{len(changes)} positions ({unmeasured} without both of llama.cpp's first two tokens in the other's top {TOP})")
    sys.exit(1 if mismatches else 0)

if __name__ == "__main__":
    main()
