#!/usr/bin/env python3
"""Aggregate decode speed of N concurrent generations over HTTP against one stream's, on one server.

Usage: concurrent_generations.py BASE_URL [MODEL] [N=8] [TOKENS=64] [REPEATS=3] [TIER=critical]
       (BASE_URL such as http://127.0.0.1:8080; works against `ember serve --http` and llama-server alike)

Each request asks for exactly TOKENS tokens (temperature 0.8, ignore_eos where the server knows it, a distinct
seed). One stream alone, then N at once, REPEATS times alternating; prints the medians as JSON: tokens/s of one
stream, aggregate tokens/s of N, and their ratio, plus time to first token of a 20-token prompt (streamed).
"""
import concurrent.futures, json, statistics, sys, time, urllib.request

BASE = sys.argv[1].rstrip("/")
MODEL = sys.argv[2] if len(sys.argv) > 2 else "smollm2-135m-instruct"
N = int(sys.argv[3]) if len(sys.argv) > 3 else 8
TOKENS = int(sys.argv[4]) if len(sys.argv) > 4 else 64
REPEATS = int(sys.argv[5]) if len(sys.argv) > 5 else 3
TIER = sys.argv[6] if len(sys.argv) > 6 else "critical"


def post(body, stream=False):
    request = urllib.request.Request(BASE + "/v1/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json", "X-Ember-Tier": TIER})
    return urllib.request.urlopen(request, timeout=600)


def generate(seed):
    body = {"model": MODEL, "prompt": "Once upon a time, in a small village by the sea,", "max_tokens": TOKENS,
            "temperature": 0.8, "seed": seed, "ignore_eos": True}
    answer = json.loads(post(body).read())
    return answer["usage"]["completion_tokens"]


def first_token_seconds():
    prompt = "The weather in the small coastal town was cold and windy, and the fishermen stayed home that"
    start = time.time()
    with post({"model": MODEL, "prompt": prompt, "max_tokens": 4, "stream": True, "temperature": 0}) as response:
        for line in response:
            if line.startswith(b"data: ") and b'"text":"' in line and b'"text":""' not in line:
                return time.time() - start
    return float("nan")


def main():
    generate(0)  # warm: weights bound, caches made
    single, aggregate, ttft, produced = [], [], [], []
    for repeat in range(REPEATS):
        start = time.time()
        tokens = generate(repeat + 1)
        single.append(tokens / (time.time() - start))
        start = time.time()
        with concurrent.futures.ThreadPoolExecutor(N) as pool:
            counts = list(pool.map(generate, range(100 + repeat * N, 100 + (repeat + 1) * N)))
        aggregate.append(sum(counts) / (time.time() - start))
        produced.append(sum(counts) / len(counts))
        ttft.append(first_token_seconds())
    one, many = statistics.median(single), statistics.median(aggregate)
    print(json.dumps({"server": BASE, "model": MODEL, "concurrent": N, "tokens": TOKENS, "single_tokens_per_s": round(one, 1),
                      "aggregate_tokens_per_s": round(many, 1), "ratio": round(many / one, 2),
                      "ttft_ms_median": round(statistics.median(ttft) * 1000, 1), "repeats": REPEATS,
                      "mean_tokens_per_request": round(statistics.mean(produced), 1)}))


if __name__ == "__main__":
    main()
