#!/usr/bin/env python3
"""`ember serve --http` driven by the official `openai` Python package, unmodified, and by curl for raw SSE.

Usage: openai_client_test.py EMBER_BINARY MODELS_DIR   (run with a Python that has `openai`: `make test` makes
       .build/venv-openai for it)

Checks: models.list; chat.completions.create plain and streamed (the streamed pieces join to the plain text at
temperature 0, every chunk's system_fingerprint naming the pinned precision); completions.create plain and streamed; embeddings.create as floats and base64 (the client's
default) agreeing; prompts as token ids; several prompts and n choices; log-probabilities (chat, streamed, completions with a stop string) joining to the text;
logit_bias, the additive penalties and llama-server's filters taken; tools and bad logit_bias refused naming the
field; 16 concurrent chats all complete; an unknown model is a 404 and the server lives on; max_tokens
beyond the context, bad JSON and a body over the limit are 400/400/413 in OpenAI's error shape; a deferred request
gets 503 with Retry-After once X-Ember-Max-Wait passes; a client that leaves mid-stream has its generation
cancelled; /health and /metrics answer. Prints one line per check; exits 1 at the first failure.
"""
import base64, concurrent.futures, json, math, os, re, struct, subprocess, sys, time, urllib.request, urllib.error

import openai

BINARY, MODELS = sys.argv[1], sys.argv[2]
CHAT_MODEL, EMBED_MODEL = "smollm2-135m-instruct", "all-minilm-l6-v2"


def start_server(extra_env=None, args=()):
    env = dict(os.environ, EMBER_MODELS_DIR=MODELS, **(extra_env or {}))
    server = subprocess.Popen([BINARY, "serve", "--http", "127.0.0.1:0", *args], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline:
        line = server.stderr.readline()
        if not line:
            raise SystemExit("ember serve --http ended before listening (exit %s)" % server.wait())
        found = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        if found:
            port = int(found.group(1))
            break
    else:
        raise SystemExit("ember serve --http did not say where it listens within 120 s")
    base = "http://127.0.0.1:%d" % port
    for _ in range(600):  # the models load in the background: wait until both are ready
        health = json.loads(urllib.request.urlopen(base + "/health").read())
        if all(state == "ready" for state in health["models"].values()):
            break
        time.sleep(0.2)
    return server, base


def raw(base, path, body=None, headers=None, method=None):
    """(status, headers, body text) of one plain HTTP request."""
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, headers=dict({"Content-Type": "application/json"}, **(headers or {})),
                                     method=method)
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, response.headers, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read().decode()


def check(name, condition, detail=""):
    print(("ok    " if condition else "FAIL  ") + name + (": " + detail if detail else ""))
    if not condition:
        raise SystemExit(1)


def main():
    # The checks below compare texts of separate requests at temperature 0, which match only when the requests run at
    # one precision. The policy learns from the times it measures and on a noisy machine may move the next request
    # to int8, which writes "New Haven" where int4 writes "Nova Haven", or to int4 on the GPU route, which computes
    # from fp32 weights: the precision is pinned and the GPU route left out (the policy still decides the rest), and
    # the answers' system_fingerprint must say so.
    server, base = start_server(args=("--precision", "int4", "--units", "cpuAndNeuralEngine"))
    try:
        run_checks(base)
    finally:
        server.terminate()
        server.wait(timeout=60)
    deferred_checks()
    return 0


def run_checks(base):
    client = openai.OpenAI(base_url=base + "/v1", api_key="not-needed")
    ids = [model.id for model in client.models.list()]
    check("models.list", CHAT_MODEL in ids and EMBER_MODEL_IN(ids), str(ids))
    check("models.retrieve", client.models.retrieve(CHAT_MODEL).id == CHAT_MODEL)
    try:
        client.models.retrieve("no-such-model")
        check("models.retrieve of an unknown model is refused", False)
    except openai.NotFoundError as error:
        check("models.retrieve of an unknown model is a 404 naming the served ones", CHAT_MODEL in str(error), str(error)[:160])

    messages = [{"role": "user", "content": "What is the capital of France?"}]
    plain = client.chat.completions.create(model=CHAT_MODEL, messages=messages, max_tokens=24, temperature=0)
    text = plain.choices[0].message.content
    check("chat.completions.create", bool(text) and plain.usage.completion_tokens > 0
          and plain.choices[0].finish_reason in ("stop", "length"), repr(text))
    ember = (plain.model_extra or {}).get("ember", {})
    check("chat answer carries the ember decision and energy", "decision" in ember and "energy_joules" in ember, json.dumps(ember))

    check("the answer's system_fingerprint names the precision it ran at",
          plain.system_fingerprint and plain.system_fingerprint.startswith("ember-") and "-int4-" in plain.system_fingerprint,
          repr(plain.system_fingerprint))
    pieces, finish, usage, fingerprints = [], None, None, set()
    for chunk in client.chat.completions.create(model=CHAT_MODEL, messages=messages, max_tokens=24, temperature=0,
                                                stream=True, stream_options={"include_usage": True}):
        if chunk.usage:
            usage = chunk.usage
        fingerprints.add(chunk.system_fingerprint)  # every chunk's, the role chunk's and the usage chunk's too
        for choice in chunk.choices:
            if choice.delta.content:
                pieces.append(choice.delta.content)
            finish = choice.finish_reason or finish
    check("chat stream=True joins to the plain text, every chunk on the answer's fingerprint",
          "".join(pieces) == text and fingerprints == {plain.system_fingerprint}, "%r %s" % ("".join(pieces), fingerprints))
    check("chat stream ends with a finish reason and usage", finish == plain.choices[0].finish_reason
          and usage is not None and usage.completion_tokens == plain.usage.completion_tokens, "%s %s" % (finish, usage))

    # The prompt cache: the first request computed its whole prompt; the same prompt again restored all but its last
    # token; the conversation's next turn, sent whole as OpenAI clients send it, restores the last turn's prompt and
    # reply and computes only the rest.
    check("a first prompt is computed whole (usage.prompt_tokens_details.cached_tokens 0)",
          plain.usage.prompt_tokens_details is not None and plain.usage.prompt_tokens_details.cached_tokens == 0,
          repr(plain.usage.model_dump()))
    check("the same prompt again restores all but its last token", usage.prompt_tokens_details is not None
          and usage.prompt_tokens_details.cached_tokens == usage.prompt_tokens - 1, repr(usage.model_dump()))
    follow = messages + [{"role": "assistant", "content": text}, {"role": "user", "content": "And of Italy?"}]
    turn = client.chat.completions.create(model=CHAT_MODEL, messages=follow, max_tokens=8, temperature=0)
    cached = turn.usage.prompt_tokens_details.cached_tokens
    check("the next turn restores the last turn's prompt and reply", plain.usage.prompt_tokens < cached < turn.usage.prompt_tokens,
          "%d of %d (the first turn's prompt: %d)" % (cached, turn.usage.prompt_tokens, plain.usage.prompt_tokens))
    check("/metrics counts the prompt cache's hits, tokens and bytes", scheduler_count(base, "ember_prompt_cache_hits_total") >= 2
          and scheduler_count(base, "ember_prompt_cache_tokens_total") >= cached
          and scheduler_count(base, "ember_prompt_cache_bytes") > 0)

    completion = client.completions.create(model=CHAT_MODEL, prompt="Once upon a time", max_tokens=16, temperature=0)
    streamed = "".join(c.choices[0].text for c in client.completions.create(model=CHAT_MODEL, prompt="Once upon a time",
                                                                           max_tokens=16, temperature=0, stream=True) if c.choices)
    check("completions.create plain and streamed agree", bool(completion.choices[0].text) and streamed == completion.choices[0].text,
          repr(completion.choices[0].text))
    echoed = client.completions.create(model=CHAT_MODEL, prompt="Once upon a time", max_tokens=16, temperature=0, echo=True)
    streamed_echo = "".join(c.choices[0].text for c in client.completions.create(
        model=CHAT_MODEL, prompt="Once upon a time", max_tokens=16, temperature=0, echo=True, stream=True) if c.choices)
    check("echo puts the prompt before the completion, plain and streamed",
          echoed.choices[0].text == "Once upon a time" + completion.choices[0].text == streamed_echo,
          "%r %r" % (echoed.choices[0].text, streamed_echo))
    ids = json.loads(subprocess.run([BINARY, "generate", "-m", CHAT_MODEL, "-n", "1", "--json", "Once upon a time"],
                                    env=dict(os.environ, EMBER_MODELS_DIR=MODELS), capture_output=True, text=True,
                                    check=True).stdout)["prompt_token_ids"]
    from_ids = client.completions.create(model=CHAT_MODEL, prompt=ids, max_tokens=16, temperature=0)
    nested = client.completions.create(model=CHAT_MODEL, prompt=[ids], max_tokens=16, temperature=0, echo=True)
    check("a prompt of token ids continues as its text does; echo gives the text back", from_ids.choices[0].text
          == completion.choices[0].text and nested.choices[0].text == "Once upon a time" + completion.choices[0].text
          and from_ids.usage.prompt_tokens == len(ids), repr(from_ids.choices[0].text))
    for body, field in (({"best_of": 3}, "best_of"), ({"suffix": "end."}, "suffix"), ({"echo": True, "logprobs": 1}, "echo"),
                        ({"prompt": [1, 2, 99999999]}, "prompt[2]"), ({"prompt": [[1], [2, 99999999]]}, "prompt[1][1]"),
                        ({"prompt": [1, "a"]}, "prompt[1]"), ({"prompt": ["a", [1]]}, "prompt[1]"),
                        ({"prompt": ["a"] * 9, "n": 2}, "prompt")):
        status, _, answer = raw(base, "/v1/completions", dict({"model": CHAT_MODEL, "prompt": "Hi", "max_tokens": 2}, **body))
        check("%s is a 400 naming %s" % (json.dumps(body), field), status == 400 and json.loads(answer)["error"]["param"] == field,
              answer[:200])
    # Several prompts in one request: a choice each (n each), numbered prompt by prompt; the usage counts every prompt.
    # (Choices decode together, so their text is compared by its start: batched products round differently, and a
    # near-tie late in a greedy text may turn.)
    batch = client.completions.create(model=CHAT_MODEL, prompt=["Once upon a time", "Count: 1, 2, 3,"], max_tokens=16,
                                      temperature=0, echo=True)
    counted = client.completions.create(model=CHAT_MODEL, prompt="Count: 1, 2, 3,", max_tokens=16, temperature=0)
    by_index = [c.text for c in sorted(batch.choices, key=lambda c: c.index)]
    check("two prompts: a choice each, in order, each its own prompt's greedy text (echoed)", len(by_index) == 2
          and by_index[0].startswith("Once upon a time" + completion.choices[0].text[:12])
          and by_index[1].startswith("Count: 1, 2, 3," + counted.choices[0].text[:6])
          and batch.usage.prompt_tokens == completion.usage.prompt_tokens + counted.usage.prompt_tokens, repr(by_index))
    streamed_batch = {}
    for chunk in client.completions.create(model=CHAT_MODEL, prompt=[ids, ids], max_tokens=16, temperature=0, n=2, stream=True):
        for choice in chunk.choices:
            streamed_batch[choice.index] = streamed_batch.get(choice.index, "") + choice.text
    check("two token-id prompts × n=2 streamed: four choices, each the greedy text, a prompt's two the same (one run)",
          sorted(streamed_batch) == [0, 1, 2, 3] and streamed_batch[0] == streamed_batch[1] and streamed_batch[2] == streamed_batch[3]
          and all(text.startswith(completion.choices[0].text[:12]) for text in streamed_batch.values()), repr(streamed_batch))
    stopped = client.completions.create(model=CHAT_MODEL, prompt="Count: 1, 2, 3,", max_tokens=24, temperature=0, stop=["6"])
    check("stop strings end the text before them", "6" not in stopped.choices[0].text and stopped.choices[0].finish_reason == "stop",
          repr(stopped.choices[0].text))

    # n choices: each from its own seed, decoded together; usage counts the prompt once; streamed, chunks carry the index.
    several = client.chat.completions.create(model=CHAT_MODEL, messages=messages, max_tokens=12, temperature=1.0, seed=5, n=3)
    texts = [c.message.content for c in sorted(several.choices, key=lambda c: c.index)]
    check("n=3: three choices, indices 0-2, not all the same text at temperature 1", [c.index for c in several.choices] == [0, 1, 2]
          and len(set(texts)) > 1 and all(texts), repr(texts))
    single = client.chat.completions.create(model=CHAT_MODEL, messages=messages, max_tokens=12, temperature=1.0, seed=5)
    check("n=3's first choice is the n=1 answer of the same seed (its start: batched products round differently)",
          single.choices[0].message.content[:10] == texts[0][:10],
          repr((single.choices[0].message.content, texts[0])))
    check("n=3's usage: the prompt once, every choice's tokens", several.usage.prompt_tokens == single.usage.prompt_tokens
          and several.usage.completion_tokens >= 3 and several.usage.completion_tokens <= 36, repr(several.usage.model_dump()))
    pieces, finishes, unnamed = {0: "", 1: ""}, {}, 0
    for chunk in client.chat.completions.create(model=CHAT_MODEL, messages=messages, max_tokens=12, temperature=1.0, seed=5, n=2,
                                                stream=True):
        for choice in chunk.choices:
            pieces[choice.index] += choice.delta.content or ""
            if choice.finish_reason:
                finishes[choice.index] = choice.finish_reason
            if not chunk.system_fingerprint:
                unnamed += 1  # a choice's chunks, its role chunk too, go out once its run has started: each names it
    check("n=2 streamed: each index's chunks join to that choice's text, every chunk with a fingerprint",
          pieces[0][:10] == texts[0][:10] and pieces[1][:10] == texts[1][:10] and len(finishes) == 2 and unnamed == 0,
          repr((pieces, texts[:2], finishes, unnamed)))
    for n in (0, 17):
        status, _, answer = raw(base, "/v1/chat/completions", {"model": CHAT_MODEL, "messages": messages, "n": n, "max_tokens": 2})
        check("n=%d is a 400 naming n" % n, status == 400 and json.loads(answer)["error"]["param"] == "n", answer[:200])

    # Log-probabilities, as OpenAI's clients ask for them: the tokens join to the text, each is ≤ 0, greedy picks the best.
    scored = client.chat.completions.create(model=CHAT_MODEL, messages=messages, max_tokens=24, temperature=0, logprobs=True,
                                            top_logprobs=3)
    content = scored.choices[0].logprobs.content if scored.choices[0].logprobs else []
    check("chat logprobs: one entry a token, joining to the text", content and "".join(t.token for t in content) == text
          and b"".join(bytes(t.bytes) for t in content).decode() == text, repr([t.token for t in content]))
    check("chat logprobs: ≤ 0, three alternatives best first, greedy took the best", all(
        t.logprob <= 0 and len(t.top_logprobs) == 3 and t.top_logprobs[0].token == t.token
        and abs(t.top_logprobs[0].logprob - t.logprob) < 1e-6
        and all(a.logprob >= b.logprob for a, b in zip(t.top_logprobs, t.top_logprobs[1:])) for t in content))
    streamed_logprobs, chunk_mismatches, chunks_with_logprobs = [], [], 0
    for chunk in client.chat.completions.create(model=CHAT_MODEL, messages=messages, max_tokens=24, temperature=0,
                                                logprobs=True, stream=True):
        for choice in chunk.choices:
            if choice.logprobs and choice.logprobs.content:
                streamed_logprobs += choice.logprobs.content
                chunks_with_logprobs += 1
                # Live, as OpenAI streams them: a chunk's tokens spell that chunk's text.
                if b"".join(bytes(t.bytes) for t in choice.logprobs.content).decode(errors="replace") != (choice.delta.content or ""):
                    chunk_mismatches.append((choice.delta.content, [t.token for t in choice.logprobs.content]))
    check("chat stream logprobs equal the plain answer's", [t.token for t in streamed_logprobs] == [t.token for t in content]
          and all(abs(a.logprob - b.logprob) < 1e-6 for a, b in zip(streamed_logprobs, content)))
    check("chat stream logprobs come with the chunk whose text they spell", chunks_with_logprobs > 1 and not chunk_mismatches,
          repr((chunks_with_logprobs, chunk_mismatches[:3])))
    scored = client.completions.create(model=CHAT_MODEL, prompt="Count: 1, 2, 3,", max_tokens=24, temperature=0, stop=["6"],
                                       logprobs=2)
    lp = scored.choices[0].logprobs
    check("completion logprobs: tokens up to the stop string, offsets, top entries", lp is not None
          and "".join(lp.tokens).startswith(scored.choices[0].text) and len("".join(lp.tokens[:-1])) < len(scored.choices[0].text)
          and len(lp.token_logprobs) == len(lp.tokens) == len(lp.top_logprobs) == len(lp.text_offset)
          and lp.text_offset[0] == 0 and all(len(top) == 2 for top in lp.top_logprobs)
          and all(lp.text_offset[i + 1] == lp.text_offset[i] + len(lp.tokens[i]) for i in range(len(lp.tokens) - 1)),
          json.dumps(lp.model_dump() if lp else None)[:300])
    streamed = {"tokens": [], "token_logprobs": [], "text_offset": []}
    for chunk in client.completions.create(model=CHAT_MODEL, prompt="Count: 1, 2, 3,", max_tokens=24, temperature=0, stop=["6"],
                                           logprobs=2, stream=True):
        for choice in chunk.choices:
            if choice.logprobs:
                for key in streamed:
                    streamed[key] += getattr(choice.logprobs, key) or []
    check("completion stream logprobs (held back before the stop string, offsets across chunks) equal the plain answer's",
          lp is not None and streamed["tokens"] == lp.tokens and streamed["text_offset"] == lp.text_offset
          and all(abs(a - b) < 1e-6 for a, b in zip(streamed["token_logprobs"], lp.token_logprobs)),
          json.dumps(streamed)[:300])
    try:
        client.chat.completions.create(model=CHAT_MODEL, messages=messages, max_tokens=4, top_logprobs=2)
        check("top_logprobs without logprobs is refused", False)
    except openai.BadRequestError as error:
        check("top_logprobs without logprobs is a 400 naming it", "top_logprobs" in str(error), str(error)[:160])

    # logit_bias bans the greedy first token (its id from the CLI's JSON); OpenAI's penalties and the llama-server
    # filters are taken; tools are refused rather than ignored.
    first = json.loads(subprocess.run([BINARY, "generate", "-m", CHAT_MODEL, "-n", "1", "--json", "Once upon a time"],
                                      env=dict(os.environ, EMBER_MODELS_DIR=MODELS), capture_output=True, text=True,
                                      check=True).stdout)["token_ids"][0]
    plain = client.completions.create(model=CHAT_MODEL, prompt="Once upon a time", max_tokens=1, temperature=0, logprobs=1)
    banned = client.completions.create(model=CHAT_MODEL, prompt="Once upon a time", max_tokens=1, temperature=0, logprobs=1,
                                       logit_bias={str(first): -100})
    check("logit_bias -100 bans a token: the second best comes instead", banned.choices[0].text
          and banned.choices[0].text != plain.choices[0].text
          and banned.choices[0].logprobs.token_logprobs[0] < plain.choices[0].logprobs.token_logprobs[0],
          "%r -> %r" % (plain.choices[0].text, banned.choices[0].text))
    repeated = client.completions.create(model=CHAT_MODEL, prompt="Count: 1, 2, 3,", max_tokens=12, temperature=0,
                                         presence_penalty=2, frequency_penalty=2, extra_body={"top_k": 20, "min_p": 0.1})
    check("presence/frequency penalties and top_k/min_p are taken and change the text", repeated.choices[0].text
          != client.completions.create(model=CHAT_MODEL, prompt="Count: 1, 2, 3,", max_tokens=12, temperature=0).choices[0].text,
          repr(repeated.choices[0].text))
    for body, field in (({"logit_bias": {"abc": 1}}, "logit_bias.abc"), ({"logit_bias": {"10": 500}}, "logit_bias.10"),
                        ({"logit_bias": {"99999999": 1}}, "logit_bias.99999999"),
                        ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]}, "tools")):
        status, _, answer = raw(base, "/v1/chat/completions", dict({"model": CHAT_MODEL, "messages": messages, "max_tokens": 2}, **body))
        check("%s is a 400 naming %s" % (json.dumps(body)[:60], field), status == 400
              and json.loads(answer)["error"]["param"] == field, answer[:200])

    sentences = ["The cat sat on the mat.", "A dog slept on the rug.", "Stock markets fell sharply today."]
    floats = client.embeddings.create(model=EMBED_MODEL, input=sentences, encoding_format="float")
    encoded = client.embeddings.create(model=EMBED_MODEL, input=sentences)  # the client asks for base64 and decodes it
    same_size = client.embeddings.create(model=EMBED_MODEL, input=sentences[:1], dimensions=384)
    check("embeddings dimensions equal to the model's are taken", len(same_size.data[0].embedding) == 384)
    try:
        client.embeddings.create(model=EMBED_MODEL, input=sentences[:1], dimensions=128)
        check("embeddings dimensions 128 is refused (MiniLM is not a Matryoshka model)", False)
    except openai.BadRequestError as error:
        check("embeddings dimensions 128 is a 400 naming dimensions and the model's size",
              "dimensions" in str(error) and "384" in str(error), str(error)[:200])
    vectors = [item.embedding for item in floats.data]
    check("embeddings.create: one unit vector per input", len(vectors) == 3 and all(len(v) == 384 for v in vectors)
          and all(abs(math.sqrt(sum(x * x for x in v)) - 1) < 1e-3 for v in vectors))
    check("embeddings base64 equals float", all(max(abs(a - b) for a, b in zip(v, e.embedding)) < 1e-6
                                                for v, e in zip(vectors, encoded.data)))
    def cosine(a, b):
        return sum(x * y for x, y in zip(a, b))
    check("embeddings are meaningful", cosine(vectors[0], vectors[1]) > cosine(vectors[0], vectors[2]),
          "%.3f vs %.3f" % (cosine(vectors[0], vectors[1]), cosine(vectors[0], vectors[2])))

    def one_chat(n):
        answer = client.chat.completions.create(model=CHAT_MODEL, messages=[{"role": "user", "content": "Name a color. %d" % n}],
                                                max_tokens=16, temperature=0.7, seed=n)
        return answer.choices[0].message.content
    start = time.time()
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(one_chat, range(16)))
    check("16 concurrent chats all complete", len(answers) == 16 and all(answers), "%.1f s" % (time.time() - start))

    try:
        client.chat.completions.create(model="no-such-model", messages=messages, max_tokens=4)
        check("an unknown model is refused", False)
    except openai.NotFoundError as error:
        check("an unknown model is a 404 in OpenAI's shape", error.status_code == 404 and "not served" in str(error), str(error)[:120])
    try:
        client.chat.completions.create(model=CHAT_MODEL, messages=messages, max_tokens=10 ** 6)
        check("max_tokens beyond the context is refused", False)
    except openai.BadRequestError as error:
        check("max_tokens beyond the context is a 400", "context" in str(error), str(error)[:160])
    status, _, body = raw(base, "/v1/chat/completions", b"{not json")
    check("bad JSON is a 400 with an error object", status == 400 and "error" in json.loads(body), body[:120])
    status, _, body = raw(base, "/v1/completions", b'{"prompt":"' + b"a" * (5 << 20) + b'"}')
    check("a body over the limit is a 413", status == 413 and "limit" in json.loads(body)["error"]["message"], body[:120])
    status, _, body = raw(base, "/v1/chat/completions", {"model": CHAT_MODEL, "messages": messages, "temperature": "hot"})
    check("a field of the wrong type names itself", status == 400 and "temperature" in body, body[:160])
    check("the server lives on after errors", client.models.list() is not None)

    # Raw SSE through curl, as the README shows it.
    curl = subprocess.run(["curl", "-sN", base + "/v1/chat/completions", "-H", "Content-Type: application/json", "-d",
                           json.dumps({"model": CHAT_MODEL, "messages": messages, "max_tokens": 8, "stream": True})],
                          capture_output=True, text=True, timeout=120)
    events = [line for line in curl.stdout.split("\n") if line]
    check("curl sees Server-Sent Events ending in [DONE]", events and all(line.startswith("data: ") for line in events)
          and events[-1] == "data: [DONE]", "%d events" % len(events))

    # A client that leaves mid-stream: its generation is cancelled (the scheduler counts it), the server goes on.
    before = scheduler_count(base, "ember_scheduler_cancellations_total")
    stream = client.chat.completions.create(model=CHAT_MODEL, messages=[{"role": "user", "content": "Write a long story."}],
                                            max_tokens=4000, temperature=0.8, stream=True)
    for index, _ in enumerate(stream):
        if index == 3:
            break
    stream.close()
    cancelled = False
    for _ in range(100):
        if scheduler_count(base, "ember_scheduler_cancellations_total") > before:
            cancelled = True
            break
        time.sleep(0.1)
    check("a client leaving mid-stream cancels its generation", cancelled)
    status, _, metrics = raw(base, "/metrics", method="GET")
    check("/metrics is Prometheus text with requests, tokens and decisions", status == 200
          and "ember_http_requests_total" in metrics and "ember_generated_tokens_total" in metrics
          and "ember_decisions_total" in metrics and "ember_energy_joules_total" in metrics)
    # Generations ran: the model holds its route's weight copies (SmolLM2's Q4_1 interleaved for the SIMD kernels),
    # which the memory budget counts.
    copies, budget = scheduler_count(base, "ember_weight_copy_bytes"), scheduler_count(base, "ember_memory_budget_bytes")
    check("/metrics reports the weight copies held and the memory budget they count against", 0 < copies < budget,
          "copies %s, budget %s" % (copies, budget))


    doc_snippets(base)


def doc_snippets(base):
    """The Python blocks of the README and docs/HTTP.md, as written, run against this server (their base URL's
    port replaced by this server's): each exits 0 and prints something."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for document in ["README.md", "docs/HTTP.md"]:
        text = open(os.path.join(root, document), encoding="utf-8").read()
        blocks = re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)
        check("%s has Python blocks" % document, bool(blocks))
        for index, block in enumerate(blocks):
            program = block.replace("http://127.0.0.1:8080", base)
            run = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300)
            check("%s python block %d runs against the server" % (document, index + 1),
                  run.returncode == 0 and run.stdout.strip() != "", (run.stdout + run.stderr)[-500:])


def EMBER_MODEL_IN(ids):
    return EMBED_MODEL in ids


def scheduler_count(base, name):
    _, _, metrics = raw(base, "/metrics", method="GET")
    for line in metrics.split("\n"):
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


def deferred_checks():
    """On battery in low-power mode the policy defers standard work: 503 with Retry-After after X-Ember-Max-Wait."""
    server, base = start_server({"EMBER_POWER": "battery=0.1,lowpower=true"})
    try:
        body = {"model": CHAT_MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}
        start = time.time()
        status, headers, text = raw(base, "/v1/chat/completions", body, {"X-Ember-Max-Wait": "1"})
        waited = time.time() - start
        check("a deferred request gets 503 with Retry-After after X-Ember-Max-Wait", status == 503 and headers.get("Retry-After")
              and "low-power" in text and 0.9 < waited < 10, "%d after %.1f s: %s" % (status, waited, text[:160]))
        status, _, text = raw(base, "/v1/chat/completions", body, {"X-Ember-Tier": "critical"})
        check("a critical request runs in the same state", status == 200 and json.loads(text)["ember"]["tier"] == "critical", text[:120])
        client = openai.OpenAI(base_url=base + "/v1", api_key="x", max_retries=0)
        try:
            client.chat.completions.create(model=CHAT_MODEL, messages=body["messages"], max_tokens=4,
                                           extra_headers={"X-Ember-Max-Wait": "0.5"})
            check("the openai client sees the deferral as an error", False)
        except openai.APIStatusError as error:
            check("the openai client sees the deferral as a 503", error.status_code == 503, str(error)[:120])
    finally:
        server.terminate()
        server.wait(timeout=60)


if __name__ == "__main__":
    sys.exit(main())
