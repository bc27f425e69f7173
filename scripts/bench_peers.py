#!/usr/bin/env python3
"""Ember against its peers, from one run: llama.cpp for text generation, ONNX Runtime for embeddings.

Usage: bench_peers.py --ember BIN --models DIR --llama-bin DIR --llama-files DIR --ort-python PY [--rounds 3]
                      [--threads 2] [--only text,embed] [--ort-preload LIB] [--ort-pythonpath DIR]
                      [--json FILE]

(`make bench-peers` builds the peers and runs this.) Every comparison alternates Ember and its peer for --rounds
rounds, each side reporting the median of its own repeated runs per round; a round's ratio is Ember ÷ peer from
that round, and the figure printed is the median ratio over rounds — so a noisy neighbour slows both sides of a
ratio alike.

Text generation (llama-bench's pp128 / tg64, both at --threads):
  fp32    Ember on the F32 file            vs llama.cpp on the same F32 file
  fp16    Ember on the F16 file (fp16)     vs llama.cpp on the same F16 file
  int8    Ember on the Q8_0 file           vs llama.cpp on the same Q8_0 file
  int4    Ember int4 on the Q4_1 file      vs llama.cpp's best 4-bit file, Q4_0 (repacked at load)
  int4-q4_0  Ember int4 on that Q4_0 file  vs llama.cpp on the same Q4_0 file (the same bytes a token on both sides)
  q4_k_m  Ember native on the Q4_K_M file  vs llama.cpp on the same Q4_K_M file
  int4 and q4_k_m again @ d1024: both tests after 1,024 tokens already in the context (llama-bench's -d 1024,
          Ember's --depth 1024), where attention over the KV cache joins the weights in a token's cost
Embeddings (all-MiniLM-L6-v2, the same 256 sentences, tokenization and pooling included), batch 1 and 32:
  fp32    Ember fp32 vs ONNX Runtime fp32 (transformer-optimized)
  int8    Ember int8 vs ONNX Runtime int8 (dynamic quantization, per-channel weights)
--ort-preload LIB runs ONNX Runtime with LD_PRELOAD=LIB: `make bench-peers-avx2` passes scripts/peers/cpuid_avx2.c
built, which hides AVX-512, VNNI and AMX from CPUID so that ONNX Runtime's kernels are its AVX2 ones; the features
ONNX Runtime's process saw are printed beside its figures. Where CPUID cannot fault (AMD), it passes
scripts/peers/xgetbv_avx2.c built and --ort-pythonpath DIR, a copy of ONNX Runtime and numpy made by
scripts/peers/xgetbv_avx2.py whose XGETBV instructions that library answers with an XCR0 without AVX-512 state.
"""
import argparse, json, os, statistics, subprocess, sys, tempfile

TEXT_CASES = [  # name, Ember's file, Ember's precision, llama.cpp's file, tokens in the context before each test
    ("fp32", "smollm2-135m-F32.gguf", "native", "smollm2-135m-F32.gguf", 0),
    ("fp16", "smollm2-135m-F16.gguf", "native", "smollm2-135m-F16.gguf", 0),
    ("int8", "smollm2-135m-Q8_0.gguf", "native", "smollm2-135m-Q8_0.gguf", 0),
    ("int4", None, "int4", "smollm2-135m-Q4_0.gguf", 0),
    ("int4-q4_0", "smollm2-135m-Q4_0.gguf", "int4", "smollm2-135m-Q4_0.gguf", 0),
    ("q4_k_m", "smollm2-135m-Q4_K_M.gguf", "native", "smollm2-135m-Q4_K_M.gguf", 0),
    ("int4", None, "int4", "smollm2-135m-Q4_0.gguf", 1024),
    ("q4_k_m", "smollm2-135m-Q4_K_M.gguf", "native", "smollm2-135m-Q4_K_M.gguf", 1024),
]


def run_json(command, env=None):
    """Runs `command`, returns its last stdout line parsed as JSON (llama-bench's whole output is one array)."""
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        raise SystemExit("bench-peers: %s failed (exit %d):\n%s" % (" ".join(command), result.returncode, result.stderr[-3000:]))
    text = result.stdout.strip()
    try:
        return json.loads(text if text.startswith("[") else text.splitlines()[-1])
    except (ValueError, IndexError):
        raise SystemExit("bench-peers: %s printed no JSON:\n%s" % (" ".join(command), text[-2000:]))


def ember_text(args, model, precision, depth):
    report = run_json([args.ember, "bench", "generate", "-m", model, "--precision", precision, "--threads", str(args.threads),
                       "--runs", "5", "--depth", str(depth), "--json"])
    return {"pp128": report["prefill_tokens_per_s"], "tg64": report["decode_tokens_per_s"],
            "kernel_isa": report.get("kernel_isa"), "blas_core": report.get("blas_core")}


def llama_text(args, model, depth):
    entries = run_json([os.path.join(args.llama_bin, "llama-bench"), "-m", model, "-p", "128", "-n", "64",
                        "-d", str(depth), "-t", str(args.threads), "-r", "5", "-o", "json"])
    figures = {}
    for entry in entries:
        key = "pp128" if entry.get("n_prompt", 0) > 0 else "tg64"
        samples = entry.get("samples_ts") or [entry["avg_ts"]]
        figures[key] = statistics.median(samples)
    return figures


def ember_embed(args, precision, batch):
    report = run_json([args.ember, "bench", "embed", "--precision", precision, "--batch", str(batch),
                       "--threads", str(args.threads), "--runs", "5", "--json"])
    return report["sentences_per_s"]


def ort_embed(args, variant, batch, sentences):
    env = dict(os.environ, LD_PRELOAD=args.ort_preload) if args.ort_preload else None
    if args.ort_pythonpath:
        env = dict(env or os.environ, PYTHONPATH=args.ort_pythonpath)
    report = run_json([args.ort_python, os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers", "ort_embed.py"),
                       os.path.join(args.models, "all-minilm-l6-v2"), sentences, args.ort_cache, "--variant", variant,
                       "--batch", str(batch), "--runs", "5", "--threads", str(args.threads)], env=env)
    features = report.get("cpu_features")
    if args.ort_preload and features and ("AVX512F" in features or "AVX512VNNI" in features):
        raise SystemExit("bench-peers: ONNX Runtime still saw %s under %s; its figures would not be AVX2 ones"
                         % (", ".join(features), args.ort_preload))
    return report["sentences_per_s"], "%s [%s]" % (report.get("onnxruntime"), " ".join(features or []))


def summary(rounds, ours, theirs):
    """Median of each side and of the per-round ratios."""
    a = [r[ours] for r in rounds]
    b = [r[theirs] for r in rounds]
    return statistics.median(a), statistics.median(b), statistics.median([x / y for x, y in zip(a, b)])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ember", required=True); parser.add_argument("--models", required=True)
    parser.add_argument("--llama-bin"); parser.add_argument("--llama-files")
    parser.add_argument("--ort-python"); parser.add_argument("--ort-cache", default=".build/peers/onnx")
    parser.add_argument("--rounds", type=int, default=3); parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--only", default="text,embed"); parser.add_argument("--json")
    parser.add_argument("--ort-preload"); parser.add_argument("--ort-pythonpath")
    args = parser.parse_args()
    if args.rounds < 1:
        raise SystemExit("bench-peers: --rounds %d: expected 1 or more" % args.rounds)
    only = set(args.only.split(","))
    report = {"threads": args.threads, "rounds": args.rounds, "text": [], "embed": []}
    print("Ember vs peers, %d thread(s), %d alternating rounds; ratios are Ember ÷ peer, medians over rounds" % (args.threads, args.rounds))
    if "text" in only:
        smollm2 = os.path.join(args.models, "smollm2-135m-instruct", "SmolLM2-135M-Instruct.Q4_1.gguf")
        for name, ember_file, precision, llama_file, depth in TEXT_CASES:
            ember_model = os.path.join(args.llama_files, ember_file) if ember_file else smollm2
            peer_model = os.path.join(args.llama_files, llama_file)
            rounds = []
            for round_index in range(args.rounds):
                # Alternate which side goes first, so neither always runs on a cooler or warmer machine.
                if round_index % 2 == 0:
                    ours = ember_text(args, ember_model, precision, depth); theirs = llama_text(args, peer_model, depth)
                else:
                    theirs = llama_text(args, peer_model, depth); ours = ember_text(args, ember_model, precision, depth)
                rounds.append({"ember_pp128": ours["pp128"], "ember_tg64": ours["tg64"],
                               "llama_pp128": theirs["pp128"], "llama_tg64": theirs["tg64"]})
            pp = summary(rounds, "ember_pp128", "llama_pp128")
            tg = summary(rounds, "ember_tg64", "llama_tg64")
            label = name if depth == 0 else "%s @ d%d" % (name, depth)
            print("text %-15s pp128 Ember %7.1f  llama.cpp %7.1f tok/s  ratio %.2f×   tg64 Ember %6.1f  llama.cpp %6.1f tok/s  ratio %.2f×   (%s vs %s; kernels %s, BLAS %s)"
                  % (label, pp[0], pp[1], pp[2], tg[0], tg[1], tg[2], os.path.basename(ember_model) + (" " + precision if precision != "native" else ""),
                     os.path.basename(peer_model), ours.get("kernel_isa"), ours.get("blas_core")), flush=True)
            report["text"].append({"case": name, "depth": depth, "ember_file": os.path.basename(ember_model), "ember_precision": precision,
                                   "peer_file": os.path.basename(peer_model), "rounds": rounds,
                                   "pp128": {"ember": pp[0], "peer": pp[1], "ratio": pp[2]},
                                   "tg64": {"ember": tg[0], "peer": tg[1], "ratio": tg[2]}})
    if "embed" in only:
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as handle:
            sentences = handle.name
            printed = subprocess.run([args.ember, "bench", "embed", "--print-sentences"], capture_output=True, text=True, check=True)
            handle.write(printed.stdout)
        try:
            for precision in ["fp32", "int8"]:
                for batch in [1, 32]:
                    rounds = []
                    version = None
                    for round_index in range(args.rounds):
                        if round_index % 2 == 0:
                            ours = ember_embed(args, precision, batch); theirs, version = ort_embed(args, precision, batch, sentences)
                        else:
                            theirs, version = ort_embed(args, precision, batch, sentences); ours = ember_embed(args, precision, batch)
                        rounds.append({"ember": ours, "peer": theirs})
                    figures = summary(rounds, "ember", "peer")
                    print("embed %-5s batch %-3d Ember %7.1f  ONNX Runtime %s %7.1f sentences/s  ratio %.2f×"
                          % (precision, batch, figures[0], version, figures[1], figures[2]), flush=True)
                    report["embed"].append({"precision": precision, "batch": batch, "rounds": rounds, "onnxruntime": version,
                                            "ember": figures[0], "peer": figures[1], "ratio": figures[2]})
        finally:
            os.unlink(sentences)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(report, handle, indent=1)
        print("figures: %s" % args.json)


if __name__ == "__main__":
    main()
