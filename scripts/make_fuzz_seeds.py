#!/usr/bin/env python3
"""Seed inputs for the fuzz targets (Tests/Fuzz/corpus/TARGET/), small enough for libFuzzer to mutate quickly.

Usage: make_fuzz_seeds.py   (needs the `gguf` and `numpy` packages; writes into Tests/Fuzz/corpus)

gguf: one-layer decoders of each family (llama, qwen2, qwen3, gemma3) with 32-wide layers, 24 tokens of a
byte-level BPE or SentencePiece vocabulary, F32/F16/Q8_0 tensors. safetensors: a BERT-shaped header with three
small tensors. tokenizer-json: a WordPiece tokenizer.json of 30 tokens. tokenizers: the hard strings of
make_tokenizer_fixtures.py. protocol: one line of each worker-protocol request kind. Larger real seeds (the tiny
models in Tests/ModelTests/Fixtures/tiny) are passed to the fuzzer beside these.
"""
import json, os, struct, sys
import numpy as np
import gguf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_tokenizer_fixtures import CASES

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Tests", "Fuzz", "corpus")


def decoder(arch, path, spm):
    rng = np.random.default_rng(7)
    w = gguf.GGUFWriter(path, arch)
    hidden, ff, heads = 32, 64, 2
    for key, value in (("block_count", 1), ("context_length", 32), ("embedding_length", hidden), ("feed_forward_length", ff),
                       ("attention.head_count", heads), ("attention.head_count_kv", 1)):
        w.add_uint32(f"{arch}.{key}", value)
    w.add_float32(f"{arch}.attention.layer_norm_rms_epsilon", 1e-6)
    if spm:
        tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(3)] + ["▁", "▁a", "a", "b", "ab", "▁ab"] + list("cdefghijklm")
        w.add_tokenizer_model("llama"); w.add_token_list(tokens); w.add_token_scores([-float(i) for i in range(len(tokens))])
        w.add_token_types([2, 3, 3] + [6] * 3 + [1] * (len(tokens) - 6))
    else:
        tokens = ["a", "b", "c", "Ġ", "Ġa", "ab", "Ġab", "<|end|>"] + list("defghijklmnopqrs")
        w.add_tokenizer_model("gpt2"); w.add_tokenizer_pre("qwen2" if arch.startswith("qwen") else "llama-bpe")
        w.add_token_list(tokens); w.add_token_types([1] * 7 + [3] + [1] * 16); w.add_token_merges(["Ġ a", "a b", "Ġ ab"])
    w.add_bos_token_id(1); w.add_eos_token_id(2)
    vocab = len(tokens)
    def t(name, shape, dtype=np.float32):
        w.add_tensor(name, (rng.standard_normal(shape) * 0.3).astype(dtype))
    t("token_embd.weight", (vocab, hidden), np.float16); t("output_norm.weight", (hidden,))
    b = "blk.0."
    for name in ("attn_norm", "ffn_norm"): t(b + name + ".weight", (hidden,))
    t(b + "attn_q.weight", (hidden, hidden)); t(b + "attn_k.weight", (hidden // heads, hidden)); t(b + "attn_v.weight", (hidden // heads, hidden))
    t(b + "attn_output.weight", (hidden, hidden)); t(b + "ffn_gate.weight", (ff, hidden)); t(b + "ffn_up.weight", (ff, hidden))
    t(b + "ffn_down.weight", (hidden, ff))
    if arch == "qwen2":
        for name, n in (("attn_q", hidden), ("attn_k", hidden // heads), ("attn_v", hidden // heads)): t(b + name + ".bias", (n,))
    if arch in ("qwen3", "gemma3"):
        t(b + "attn_q_norm.weight", (hidden // heads,)); t(b + "attn_k_norm.weight", (hidden // heads,))
    if arch == "gemma3":
        t(b + "post_attention_norm.weight", (hidden,)); t(b + "post_ffw_norm.weight", (hidden,))
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()


def main():
    for arch, spm in (("llama", False), ("qwen2", False), ("qwen3", False), ("gemma3", True), ("llama", True)):
        decoder(arch, os.path.join(ROOT, "gguf", f"{arch}-{'spm' if spm else 'bpe'}.gguf"), spm)
    header = {"__metadata__": {"format": "pt"}}
    blobs, offset = b"", 0
    for name, shape in (("embeddings.word_embeddings.weight", [4, 2]), ("encoder.layer.0.attention.self.query.bias", [2]),
                        ("pooler.dense.weight", [2, 2])):
        data = np.arange(np.prod(shape), dtype=np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + len(data)]}
        blobs += data; offset += len(data)
    text = json.dumps(header).encode()
    open(os.path.join(ROOT, "safetensors", "bert.safetensors"), "wb").write(struct.pack("<Q", len(text)) + text + blobs)
    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", ",", "!", "un", "##ic",
                                         "##ode", "日", "本", "語", "4", "##2", "—", "a", "##b", "the", "##s", "ü", "n", "i", "c", "o",
                                         "d", "e", "##e"])}
    tokenizer = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
                 "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                                "strip_accents": None, "lowercase": True},
                 "pre_tokenizer": {"type": "BertPreTokenizer"},
                 "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                           "max_input_chars_per_word": 100, "vocab": vocab}}
    open(os.path.join(ROOT, "tokenizer-json", "wordpiece.json"), "w").write(json.dumps(tokenizer, ensure_ascii=False))
    for index, text in enumerate(CASES):
        open(os.path.join(ROOT, "tokenizers", f"case{index:02d}.txt"), "w").write(text)
    lines = [{"id": "g1", "prompt": "The capital of France is", "maxTokens": 8, "tier": "critical"},
             {"id": 2, "kind": "embed", "input": ["a", "b"], "tier": "background"},
             {"id": "s", "prompt": "Hi", "maxTokens": 4, "stream": True, "chat": True, "temperature": 0.7, "topK": 40, "topP": 0.9, "seed": 3},
             {"cancel": "g1"}, {"runOnlyWhileCharging": True}]
    for index, line in enumerate(lines):
        open(os.path.join(ROOT, "protocol", f"line{index}.json"), "w").write(json.dumps(line))


if __name__ == "__main__":
    main()
