#!/usr/bin/env python3
"""all-MiniLM-L6-v2 sentence embeddings in ONNX Runtime, timed like `ember bench embed`.

Usage: ort_embed.py MODEL_DIR SENTENCES_FILE CACHE_DIR --variant fp32|int8 --batch B --runs R --threads T

fp32: the model exported from transformers and fused by ONNX Runtime's transformer optimizer (attention, GELU,
LayerNorm, bias). int8: the exported model quantized by ONNX Runtime's dynamic quantizer, int8 weights per channel.
Each timed pass tokenizes and embeds every sentence in calls of B (mean pooling over the attention mask, L2
normalised — what Ember returns), after one untimed pass. Prints one JSON line: variant, batch, threads,
sentences_per_s (the median), runs (every pass), and cpu_features: the vector extensions this process sees (as
numpy reads them from CPUID) — under scripts/peers/cpuid_avx2.c they show that ONNX Runtime was held to AVX2.
"""
import argparse, json, os, statistics, sys, time


def exported(model_dir, cache):
    """The fp32 ONNX export of the encoder (last hidden state), made once into `cache`."""
    path = os.path.join(cache, "minilm-fp32.onnx")
    if os.path.exists(path):
        return path
    import torch
    from transformers import AutoModel, AutoTokenizer
    encoder = AutoModel.from_pretrained(model_dir).eval()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)

    class LastHiddenState(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.inner(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state

    sample = tokenizer(["an example sentence"], return_tensors="pt")
    names = ["input_ids", "attention_mask", "token_type_ids"]
    axes = {name: {0: "batch", 1: "sequence"} for name in names + ["last_hidden_state"]}
    os.makedirs(cache, exist_ok=True)
    torch.onnx.export(LastHiddenState(encoder), tuple(sample[name] for name in names), path + ".partial",
                      input_names=names, output_names=["last_hidden_state"], dynamic_axes=axes, opset_version=17,
                      dynamo=False)
    os.replace(path + ".partial", path)
    return path


def variant_file(variant, model_dir, cache):
    base = exported(model_dir, cache)
    if variant == "fp32":
        path = os.path.join(cache, "minilm-fp32-optimized.onnx")
        if not os.path.exists(path):
            from onnxruntime.transformers import optimizer
            optimizer.optimize_model(base, model_type="bert", num_heads=12, hidden_size=384).save_model_to_file(path)
        return path
    path = os.path.join(cache, "minilm-int8-per-channel.onnx")
    if not os.path.exists(path):
        from onnxruntime.quantization import QuantType, quantize_dynamic
        quantize_dynamic(base, path, weight_type=QuantType.QInt8, per_channel=True)
    return path


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("model_dir"); parser.add_argument("sentences"); parser.add_argument("cache")
    parser.add_argument("--variant", choices=["fp32", "int8"], required=True)
    parser.add_argument("--batch", type=int, default=32); parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    import numpy
    import onnxruntime
    from transformers import AutoTokenizer
    texts = [line for line in open(args.sentences, encoding="utf-8").read().split("\n") if line]
    tokenizer = AutoTokenizer.from_pretrained(args.model_dir)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = args.threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = onnxruntime.InferenceSession(variant_file(args.variant, args.model_dir, args.cache), options,
                                           providers=["CPUExecutionProvider"])
    inputs = {i.name for i in session.get_inputs()}

    def embed(batch):
        encoded = tokenizer(batch, padding=True, truncation=True, max_length=256, return_tensors="np")
        feed = {name: encoded[name].astype(numpy.int64) for name in encoded if name in inputs}
        hidden = session.run(None, feed)[0]
        mask = encoded["attention_mask"][..., None].astype(numpy.float32)
        pooled = (hidden * mask).sum(1) / mask.sum(1)
        return pooled / numpy.linalg.norm(pooled, axis=1, keepdims=True)

    def one_pass():
        start = time.perf_counter()
        for i in range(0, len(texts), args.batch):
            embed(texts[i:i + args.batch])
        return len(texts) / (time.perf_counter() - start)

    one_pass()
    rates = [one_pass() for _ in range(args.runs)]
    print(json.dumps({"variant": args.variant, "batch": args.batch, "threads": args.threads,
                      "onnxruntime": onnxruntime.__version__, "sentences_per_s": statistics.median(rates),
                      "runs": rates, "cpu_features": seen_features()}))


def seen_features():
    """The widest vector extensions CPUID reports to this process, e.g. ["AVX2", "FMA3", "AVX512F", "AVX512VNNI"]."""
    try:
        from numpy._core._multiarray_umath import __cpu_features__
    except ImportError:
        return None
    names = ["AVX2", "FMA3", "AVX512F", "AVX512VNNI", "AVX512BF16", "AVX512FP16"]
    return [name for name in names if __cpu_features__.get(name)]


if __name__ == "__main__":
    sys.exit(main())
