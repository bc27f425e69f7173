"""llama.cpp's llama-server for the scripts that compare with it: start it on a GGUF file, wait until it answers,
POST JSON to it, stop it. Used by greedy_vs_llamacpp.py, teacher_forced_vs_llamacpp.py and make_tokenizer_fixtures.py.
"""
import contextlib, json, os, subprocess, time, urllib.request

def post(port, path, body, timeout=300):
    """POSTs `body` as JSON to the server on `port` and returns its JSON answer."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    return json.loads(urllib.request.urlopen(request, timeout=timeout).read())

@contextlib.contextmanager
def running(bin_dir, model, port, extra_args=()):
    """llama-server on `model` (context 512, 2 threads unless `extra_args` say otherwise) until the block ends. It loads
    the libraries of its own build (`bin_dir`), whatever LD_LIBRARY_PATH the caller has, so two builds can be compared."""
    env = dict(os.environ, LD_LIBRARY_PATH=bin_dir)
    server = subprocess.Popen([os.path.join(bin_dir, "llama-server"), "-m", model, "--port", str(port), "-t", "2",
                               "-c", "512", *extra_args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except Exception:
                time.sleep(0.1)
        yield port
    finally:
        server.terminate()
        server.wait()

def ember_generate(ember, model, precision, n, prompt, token_ids=None, logprobs=0):
    """`ember generate --json`'s report for `prompt` (greedy by the CLI's default temperature 0) — or for `token_ids`,
    fed as they are, when given; with each step's `logprobs` most likely tokens when asked — or None after printing its
    error."""
    given = ["--token-ids", ",".join(map(str, token_ids))] if token_ids is not None else [prompt]
    asked = ["--logprobs", str(logprobs)] if logprobs else []
    out = subprocess.run([ember, "generate", "-m", model, "--precision", precision, "-n", str(n), "--json", *asked,
                          *given], capture_output=True, text=True)
    if out.returncode != 0:
        print(f"  {os.path.basename(model)} ERROR {out.stderr.strip()[:300]}")
        return None
    return json.loads(out.stdout)
