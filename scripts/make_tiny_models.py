#!/usr/bin/env python3
"""Tiny random-weight Llama 3, Qwen2 and Qwen3 GGUF files, and what llama.cpp computes on them, as test fixtures.

Usage: make_tiny_models.py LLAMA_CPP_DIR OUT_DIR

LLAMA_CPP_DIR is the newest llama.cpp source (vendored in the llama-cpp-python 0.3.36 source package, built by
../shared/peers/llama-cpp-latest.sh or `cmake --build build --target llama`). Its vocabulary-only files
models/ggml-vocab-llama-bpe.gguf (Llama 3's tokenizer) and models/ggml-vocab-qwen2.gguf (Qwen2's, which Qwen3 uses
too) give each tiny model the first KEEP tokens of the real vocabulary (the 256 byte symbols and the first merges),
every merge among them, and the family's special tokens renumbered after them — so the real pre-tokenizer and BPE
run on a vocabulary small enough to commit. The weights are random (fixed seed), F32, with each family's parts:

- tiny-llama3: GQA, adjacent-pair RoPE base 500,000 with Llama 3's per-pair frequency factors (rope_freqs.weight),
  tied output, BOS added, a Llama 3 chat template;
- tiny-qwen2: Q/K/V biases, NeoX RoPE base 1,000,000, tied output, no BOS, a ChatML template;
- tiny-qwen3: per-head Q/K RMSNorm, head width 32 with a hidden width of 64 (attention.key_length), NeoX RoPE,
  a separate output matrix, no BOS, a ChatML template.

Then scripts/tiny_reference.c, built against libllama, records for each model: the ids of the hard strings of
make_tokenizer_fixtures.py (specials parsed and not), the logits after each of four prompts and after each of 8
greedy steps (CPU, 2 threads, flash attention off, f16 KV cache), and llama_chat_apply_template on two
conversations. Writes OUT_DIR/tiny-FAMILY.gguf and OUT_DIR/tiny-FAMILY.json.
"""
import hashlib, json, os, subprocess, sys
import numpy as np
import gguf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_tokenizer_fixtures import CASES

KEEP = 768
HIDDEN, FEED_FORWARD, LAYERS, HEADS, KV_HEADS, CONTEXT = 64, 128, 2, 4, 2, 256
PROMPTS = ["The capital of France is", "Once upon a time, in a small village by the sea,",
           "def fibonacci(n):\n    return n", "12345 678910 emoji 😀 café"]
STEPS = 8
CONVERSATIONS = [
    [("system", "You are terse."), ("user", "Hello there"), ("assistant", " Hi! "), ("user", "Add 2 and 3\n")],
    [("system", "Rules:\n- short"), ("user", "<|im_start|> is not a marker here")],
]

FAMILIES = {
    "llama3": dict(arch="llama", vocab="ggml-vocab-llama-bpe.gguf", pre="llama-bpe", add_bos=True,
                   specials=["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"],
                   bos="<|begin_of_text|>", eos="<|eot_id|>", rope_base=500000.0, eps=1e-5, head_dim=16,
                   template="{{ bos_token }}{% for m in messages %}{{ '<|start_header_id|>' + m['role'] + '<|end_header_id|>\\n\\n' "
                            "+ m['content'] | trim + '<|eot_id|>' }}{% endfor %}"
                            "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"),
    "qwen2": dict(arch="qwen2", vocab="ggml-vocab-qwen2.gguf", pre="qwen2", add_bos=False,
                  specials=["<|endoftext|>", "<|im_start|>", "<|im_end|>"], bos="<|endoftext|>", eos="<|im_end|>",
                  rope_base=1000000.0, eps=1e-6, head_dim=16, template=None),
    "qwen3": dict(arch="qwen3", vocab="ggml-vocab-qwen2.gguf", pre="qwen2", add_bos=False,
                  specials=["<|endoftext|>", "<|im_start|>", "<|im_end|>"], bos="<|endoftext|>", eos="<|im_end|>",
                  rope_base=1000000.0, eps=1e-6, head_dim=32, template=None),
}
CHATML = ("{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def vocabulary(path, specials):
    """The first KEEP tokens, the merges among them, then the special tokens (control type) renumbered."""
    reader = gguf.GGUFReader(path)
    tokens = reader.fields["tokenizer.ggml.tokens"].contents()[:KEEP]
    kept = set(tokens)
    merges = [m for m in reader.fields["tokenizer.ggml.merges"].contents()
              if all(part in kept for part in m.split(" ")) and m.replace(" ", "") in kept]
    types = [gguf.TokenType.NORMAL] * KEEP + [gguf.TokenType.CONTROL] * len(specials)
    return tokens + specials, types, merges


def weights(family, rng):
    """Random F32 tensors by GGUF name, numpy shape (rows, columns) = (outputs, inputs)."""
    f = FAMILIES[family]
    head_dim, vocab = f["head_dim"], KEEP + len(f["specials"])
    q_width, kv_width = HEADS * head_dim, KV_HEADS * head_dim
    def matrix(rows, cols):
        return (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float32)
    def branch_output(rows, cols):  # larger than the embeddings, so a tied output does not just echo the last token
        return 4 * matrix(rows, cols)
    def norm(n):
        return (1 + 0.1 * rng.standard_normal(n)).astype(np.float32)
    t = {"token_embd.weight": rng.standard_normal((vocab, HIDDEN)).astype(np.float32), "output_norm.weight": norm(HIDDEN)}
    if family == "qwen3":
        t["output.weight"] = matrix(vocab, HIDDEN)
    if family == "llama3":  # Llama 3.1+ stores per-pair frequency divisors; these span 1 to 8 as its scaling does
        t["rope_freqs.weight"] = np.linspace(1, 8, head_dim // 2).astype(np.float32)
    for layer in range(LAYERS):
        b = f"blk.{layer}."
        t[b + "attn_norm.weight"] = norm(HIDDEN)
        t[b + "attn_q.weight"] = matrix(q_width, HIDDEN)
        t[b + "attn_k.weight"] = matrix(kv_width, HIDDEN)
        t[b + "attn_v.weight"] = matrix(kv_width, HIDDEN)
        t[b + "attn_output.weight"] = branch_output(HIDDEN, q_width)
        if family == "qwen2":
            for name, width in (("attn_q", q_width), ("attn_k", kv_width), ("attn_v", kv_width)):
                t[b + name + ".bias"] = (0.5 * rng.standard_normal(width)).astype(np.float32)
        if family == "qwen3":
            t[b + "attn_q_norm.weight"] = norm(head_dim)
            t[b + "attn_k_norm.weight"] = norm(head_dim)
        t[b + "ffn_norm.weight"] = norm(HIDDEN)
        t[b + "ffn_gate.weight"] = matrix(FEED_FORWARD, HIDDEN)
        t[b + "ffn_up.weight"] = matrix(FEED_FORWARD, HIDDEN)
        t[b + "ffn_down.weight"] = branch_output(HIDDEN, FEED_FORWARD)
    return t


def write_model(family, llama_dir, path, seed):
    f = FAMILIES[family]
    tokens, types, merges = vocabulary(os.path.join(llama_dir, "models", f["vocab"]), f["specials"])
    writer = gguf.GGUFWriter(path, f["arch"])
    arch = f["arch"]
    writer.add_name(f"tiny-{family} (random weights, Ember test fixture)")
    writer.add_uint32(f"{arch}.block_count", LAYERS)
    writer.add_uint32(f"{arch}.context_length", CONTEXT)
    writer.add_uint32(f"{arch}.embedding_length", HIDDEN)
    writer.add_uint32(f"{arch}.feed_forward_length", FEED_FORWARD)
    writer.add_uint32(f"{arch}.attention.head_count", HEADS)
    writer.add_uint32(f"{arch}.attention.head_count_kv", KV_HEADS)
    writer.add_float32(f"{arch}.rope.freq_base", f["rope_base"])
    writer.add_float32(f"{arch}.attention.layer_norm_rms_epsilon", f["eps"])
    if f["head_dim"] * HEADS != HIDDEN:
        writer.add_uint32(f"{arch}.attention.key_length", f["head_dim"])
        writer.add_uint32(f"{arch}.attention.value_length", f["head_dim"])
    writer.add_uint32(f"{arch}.rope.dimension_count", f["head_dim"])
    writer.add_uint32(f"{arch}.vocab_size", len(tokens))
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(f["pre"])
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(tokens.index(f["bos"]))
    writer.add_eos_token_id(tokens.index(f["eos"]))
    writer.add_add_bos_token(f["add_bos"])
    writer.add_chat_template(f["template"] or CHATML)
    for name, array in weights(family, np.random.default_rng(seed)).items():
        writer.add_tensor(name, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def reference(tool, model):
    """Runs tiny_reference on `model` with every command; returns the fixture's cases."""
    hexed = lambda s: s.encode().hex() or "-"
    commands = [f"T {int(p)} {hexed(text)}" for text in CASES for p in (True, False)]
    commands += [f"G {STEPS} {hexed(prompt)}" for prompt in PROMPTS]
    commands += ["C 1 " + " ".join(f"{role} {hexed(content)}" for role, content in chat) for chat in CONVERSATIONS]
    out = subprocess.run([tool, model], input="\n".join(commands) + "\n", capture_output=True, text=True, check=True)
    lines = iter(out.stdout.splitlines())
    tokenization = [{"text": text, "parse_special": p, "ids": [int(x) for x in next(lines).split()[1:]]}
                    for text in CASES for p in (True, False)]
    generations = []
    for prompt in PROMPTS:
        ids = [int(x) for x in next(lines).split()[1:]]
        logits = [[float(x) for x in next(lines).split()[1:]] for _ in range(STEPS + 1)]
        gen = [int(x) for x in next(lines).split()[1:]]
        generations.append({"prompt": prompt, "prompt_ids": ids, "gen_ids": gen,
                            "prompt_logits": [round(x, 6) for x in logits[0]],
                            # after each generated token: the top five (id, logit), enough to check greedy decoding
                            "step_top5": [[[i, round(step[i], 6)] for i in np.argsort(step)[::-1][:5].tolist()]
                                          for step in logits[1:]]})
    chats = [{"messages": [{"role": r, "content": c} for r, c in chat], "text": bytes.fromhex(next(lines).split()[1]).decode()}
             for chat in CONVERSATIONS]
    return tokenization, generations, chats


def main():
    llama_dir, out_dir = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    os.makedirs(out_dir, exist_ok=True)
    tool = os.path.join(out_dir, ".tiny_reference")
    here = os.path.dirname(os.path.abspath(__file__))
    lib = os.path.join(llama_dir, "build", "bin")
    subprocess.run(["cc", "-O2", "-I", os.path.join(llama_dir, "include"), "-I", os.path.join(llama_dir, "ggml", "include"),
                    os.path.join(here, "tiny_reference.c"), "-L", lib, "-lllama", "-Wl,-rpath," + lib, "-o", tool], check=True)
    for seed, family in enumerate(FAMILIES):
        model = os.path.join(out_dir, f"tiny-{family}.gguf")
        write_model(family, llama_dir, model, seed)
        tokenization, generations, chats = reference(tool, model)
        digest = hashlib.sha256(open(model, "rb").read()).hexdigest()
        with open(os.path.join(out_dir, f"tiny-{family}.json"), "w") as f:
            f.write('{"model": "tiny-%s.gguf", "sha256": "%s",\n"tokenization": [\n' % (family, digest))
            f.write(",\n".join(json.dumps(case, ensure_ascii=False) for case in tokenization))
            f.write('\n],\n"chats": [\n' + ",\n".join(json.dumps(c, ensure_ascii=False) for c in chats))
            f.write('\n],\n"generations": [\n' + ",\n".join(json.dumps(g) for g in generations) + "\n]}\n")
        print(family, os.path.getsize(model), "bytes", digest[:12])
    os.remove(tool)


if __name__ == "__main__":
    main()
