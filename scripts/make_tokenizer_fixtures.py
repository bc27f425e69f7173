#!/usr/bin/env python3
"""Token ids llama.cpp gives for hard strings, as a test fixture for Ember's tokenizers.

Usage: make_tokenizer_fixtures.py LLAMA_BIN_DIR MODEL.gguf OUT.json

Starts llama-server (the newest llama.cpp: the copy vendored in the llama-cpp-python 0.3.36 source package,
built by ../shared/peers/llama-cpp-latest.sh) on MODEL.gguf and asks its /tokenize endpoint for the ids of each
string below, with the file's BOS rule (add_special) and with special tokens parsed and not; writes
{"model": file name, "sha256": …, "cases": [{"text", "parse_special", "ids"}]}. The strings are the cases a
SentencePiece or BPE tokenizer gets wrong first: leading and repeated spaces, newlines and tabs, digits, emoji,
CJK, accents (composed and combining), text that needs byte fallback, special-token text, and code.
"""
import hashlib, json, os, sys

from llama_server import post, running

CASES = [
    "The capital of France is", " leading space", "  two leading spaces", "trailing space ", "a  b   c    d",
    "line one\nline two\n\nline four\n\n\n", "\ttab\tseparated\t\tvalues", "tabs and\n\tnewlines\r\n",
    "12345 678910 3.14159 1,000,000 2026-11-25", "emoji 😀🎉👩‍👩‍👧 and ❤️", "日本語のテキストと中文文本", "한국어 텍스트",
    "café naïve résumé", "cafe\u0301 combining accent", "Ω≈ç√∫ ∑∏ ℝ", "\u0000\u0001 control \u007f bytes",
    "<start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n", "<|im_start|>user\nHi<|im_end|>", "text </s> html <b>bold</b>",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n",
    "Once upon a time, in a small village by the sea,", "", " ", "\n", "don't won't it's I'm you're they've",
    "ＦＵＬＬＷＩＤＴＨ and ｈａｌｆ", "Ünïcödé ẞtraße", "\u200b zero width \u2028 line separator", "a" * 300,
]

def main():
    bin_dir, model, out = sys.argv[1], sys.argv[2], sys.argv[3]
    port = 18182
    cases = []
    with running(bin_dir, model, port):
        for text in CASES:
            for parse in (True, False):
                ids = post(port, "/tokenize", {"content": text, "add_special": True, "parse_special": parse})["tokens"]
                cases.append({"text": text, "parse_special": parse, "ids": ids})
    digest = hashlib.sha256(open(model, "rb").read()).hexdigest()
    with open(out, "w") as f:  # one case per line
        f.write('{"model": %s, "sha256": "%s", "cases": [\n' % (json.dumps(os.path.basename(model)), digest))
        f.write(",\n".join(json.dumps(case, ensure_ascii=False) for case in cases))
        f.write("\n]}\n")

if __name__ == "__main__":
    main()
