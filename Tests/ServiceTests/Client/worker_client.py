#!/usr/bin/env python3
"""A real client of `ember serve --socket PATH`, for the ServiceTests.

Usage: worker_client.py SOCKET SCENARIO
Runs one scenario against the worker and prints a JSON report (one object) on
stdout; the Swift test checks the report. Exits 2 on a protocol violation it
can see by itself (a line that is not JSON, a chunk out of order).
"""
import json
import socket
import sys
import time
import uuid


class Client:
    def __init__(self, path, timeout=120.0):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        deadline = time.time() + 30
        while True:
            try:
                self.sock.connect(path)
                break
            except (FileNotFoundError, ConnectionRefusedError):
                if time.time() > deadline:
                    raise
                time.sleep(0.05)
        self.buffer = b""
        self.longest_line = 0
        self.statuses = []

    def send(self, obj_or_bytes):
        data = obj_or_bytes if isinstance(obj_or_bytes, bytes) else json.dumps(obj_or_bytes).encode()
        self.sock.sendall(data + b"\n")

    def line(self):
        while b"\n" not in self.buffer:
            data = self.sock.recv(65536)
            if not data:
                raise EOFError("the worker closed the connection")
            self.buffer += data
        line, self.buffer = self.buffer.split(b"\n", 1)
        self.longest_line = max(self.longest_line, len(line))
        try:
            message = json.loads(line)
        except ValueError:
            print("not JSON: %r" % line[:200], file=sys.stderr)
            sys.exit(2)
        if "modelState" in message:
            self.statuses.append(message)
        return message

    def until(self, predicate):
        while True:
            message = self.line()
            if predicate(message):
                return message

    def answer(self, request_id):
        """The response to `request_id`, reassembled from chunks if chunked, and how many chunks and pieces came."""
        chunks, pieces = [], []
        while True:
            message = self.line()
            if message.get("id") != request_id:
                continue
            if "piece" in message:
                pieces.append(message["piece"])
                continue
            if "chunk" in message:
                if message["chunk"] != len(chunks):
                    print("chunk %s out of order" % message["chunk"], file=sys.stderr)
                    sys.exit(2)
                chunks.append(message)
                if not message["last"]:
                    continue
                whole = dict(chunks[-1])
                if "count" in whole:
                    # Embeddings: numbers placed at vectors[index][offset…]; never text to join and re-parse.
                    vectors = [[] for _ in range(whole["count"])]
                    for chunk in chunks[:-1]:
                        if "output" in chunk or len(vectors[chunk["index"]]) != chunk["offset"]:
                            print("embedding chunk %s: text, or a slice out of place" % chunk["chunk"], file=sys.stderr)
                            sys.exit(2)
                        vectors[chunk["index"]] += chunk["values"]
                    whole["output"] = vectors
                else:
                    whole["output"] = "".join(c["output"] for c in chunks)
                return whole, len(chunks), pieces
            return message, 0, pieces

    def request(self, **fields):
        request_id = str(uuid.uuid4())
        self.send(dict(id=request_id, **fields))
        return self.answer(request_id)

    def close(self):
        self.sock.close()


def wait_ready(client):
    if client.statuses and client.statuses[-1].get("modelState") == "ready":
        return
    client.until(lambda m: m.get("modelState") == "ready")


def scenario_protocol(path):
    report = {}
    a = Client(path)
    first = a.line()
    report["first_message_keys"] = sorted(first.keys())
    report["first_model_state"] = first.get("modelState")
    wait_ready(a)
    report["model_states_seen"] = [s["modelState"] for s in a.statuses]

    response, chunks, _ = a.request(prompt="The capital of France is", maxTokens=8, tier="critical")
    report["generate"] = response
    report["generate_chunks"] = chunks

    response, chunks, pieces = a.request(prompt="The capital of France is", maxTokens=8, tier="critical", stream=True)
    report["stream_pieces"] = pieces
    report["stream_output"] = response.get("output")
    report["stream_decision"] = response.get("decision")

    response, chunks, _ = a.request(kind="embed", input=["A man is playing a guitar.", "Someone plays music on a guitar."])
    vectors = response["output"]
    report["embed_chunks"] = chunks
    report["embed_ok"] = response.get("ok")
    report["embed_shape"] = [len(vectors), len(vectors[0]) if vectors else 0]
    report["embed_cosine"] = sum(x * y for x, y in zip(vectors[0], vectors[1]))
    report["embed_decision"] = response.get("decision")

    # Bad input: each gets an error and the connection goes on.
    errors = {}
    a.send(b"{this is not json")
    errors["malformed"] = a.until(lambda m: m.get("ok") is False)
    a.send({"id": "wrong-type", "prompt": "hi", "maxTokens": "lots"})
    errors["wrong_type"] = a.until(lambda m: m.get("ok") is False)
    a.send({"id": 42, "prompt": "hi"})
    errors["number_id"] = a.until(lambda m: m.get("ok") is False)
    a.send(b"[1, 2, 3]")
    errors["array"] = a.until(lambda m: m.get("ok") is False)
    a.send({"id": "no-prompt"})
    errors["no_prompt"] = a.until(lambda m: m.get("ok") is False)
    a.send({"id": "bad-tier", "prompt": "hi", "tier": "urgent"})
    errors["bad_tier"] = a.until(lambda m: m.get("ok") is False)
    a.send(b'{"id": "huge", "prompt": "' + b"x" * (2 * 1024 * 1024) + b'"}')
    errors["oversized"] = a.until(lambda m: m.get("ok") is False)
    a.send({"id": "no-model", "prompt": "hi", "model": "no-such-model"})
    errors["unknown_model"] = a.until(lambda m: m.get("ok") is False)
    report["errors"] = errors
    response, _, _ = a.request(prompt="The capital of France is", maxTokens=4, tier="critical")
    report["after_errors"] = response
    report["statuses_naming_unknown_model"] = sum("no-such-model" in s.get("models", {}) for s in a.statuses)

    # Cancel by message.
    long_id = str(uuid.uuid4())
    a.send({"id": long_id, "prompt": "Tell me a very long story about a dragon and a knight.", "maxTokens": 2000,
            "tier": "standard", "stream": True, "chat": True})
    report["cancel_saw_piece"] = "piece" in a.until(lambda m: m.get("id") == long_id)
    a.send({"cancel": long_id})
    report["cancelled"] = a.until(lambda m: m.get("id") == long_id and "ok" in m)

    # A client that leaves mid-stream: its request is cancelled, the others go on.
    b = Client(path)
    leaving_id = str(uuid.uuid4())
    b.send({"id": leaving_id, "prompt": "Tell me a very long story about a dragon and a knight.", "maxTokens": 2000,
            "tier": "standard", "stream": True, "chat": True})
    report["leaver_saw_piece"] = "piece" in b.until(lambda m: m.get("id") == leaving_id)
    b.close()
    time.sleep(0.3)

    # Two clients at once.
    c, d = Client(path), Client(path)
    c_id, d_id = str(uuid.uuid4()), str(uuid.uuid4())
    c.send({"id": c_id, "prompt": "The capital of France is", "maxTokens": 4, "tier": "critical"})
    d.send({"id": d_id, "kind": "embed", "input": "a cat"})
    report["concurrent"] = [c.answer(c_id)[0].get("ok"), d.answer(d_id)[0].get("ok")]
    report["longest_line"] = max(x.longest_line for x in (a, c, d))
    for x in (a, c, d):
        x.close()
    return report


def scenario_charging(path):
    """With a power timeline that is unplugged first and on the charger later."""
    report = {}
    a = Client(path)
    first = a.line()
    report["first"] = first
    a.send({"runOnlyWhileCharging": True})
    report["setting"] = a.until(lambda m: "modelState" in m and m.get("runOnlyWhileCharging") is True)
    request_id = str(uuid.uuid4())
    a.send({"id": request_id, "kind": "embed", "input": "a cat"})
    report["refusal_status"] = a.until(lambda m: "modelState" in m and m.get("refused") == request_id)
    report["refusal"] = a.until(lambda m: m.get("id") == request_id)
    # With the setting off, a standard request on a low battery is deferred (and said to be), then runs on the charger.
    a.send({"runOnlyWhileCharging": False})
    waiting_id = str(uuid.uuid4())
    a.send({"id": waiting_id, "kind": "embed", "input": "a cat", "tier": "standard"})
    report["deferred"] = a.until(lambda m: m.get("id") == waiting_id)
    report["charging_status"] = a.until(lambda m: "modelState" in m and m.get("charging") is True)
    waited, _, _ = a.answer(waiting_id)
    report["deferred_answer"] = {"ok": waited.get("ok"), "precision": (waited.get("decision") or {}).get("precision"),
                                 "waitMs": waited.get("waitMs")}
    a.send({"runOnlyWhileCharging": True})
    response, _, _ = a.request(kind="embed", input="a cat")
    report["after_charging"] = {"ok": response.get("ok"), "error": response.get("error")}
    a.close()
    return report


def scenario_limits(path):
    """Against `ember serve --max-connections 3 --max-requests-per-connection 2 --max-queued-bytes 65536`."""
    report = {}
    first = [Client(path) for _ in range(3)]
    for client in first:
        client.line()
    extra = Client(path)
    try:
        report["fourth_connection"] = extra.line()
        extra.line()  # the server closes it: EOF
        report["fourth_closed"] = False
    except EOFError:
        report["fourth_closed"] = True
    a = first[0]
    wait_ready(a)
    ids = [str(uuid.uuid4()) for _ in range(5)]
    for request_id in ids:
        a.send({"id": request_id, "prompt": "Once upon a time", "maxTokens": 300})
    answers = {}
    while len(answers) < len(ids):
        message = a.line()
        if message.get("id") in ids and "piece" not in message and "deferred" not in message:
            if "chunk" in message and not message.get("last"):
                continue  # a long answer comes in chunks; the last carries ok
            answers[message["id"]] = message
    report["per_connection"] = [{"ok": answers[i].get("ok"), "error": answers[i].get("error")} for i in ids]
    # A slow reader: asks for large answers and reads none; the server drops it instead of buffering.
    slow = first[1]
    slow.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sentences = ["a sentence about cats number %d" % n for n in range(64)]
    for n in range(2):
        slow.send({"id": "big%d" % n, "kind": "embed", "input": sentences})
    deadline, closed = time.time() + 60, False
    time.sleep(5)
    slow.sock.settimeout(1.0)
    while time.time() < deadline and not closed:
        try:
            data = slow.sock.recv(1 << 20)
            if not data:
                closed = True
        except socket.timeout:
            continue
        except OSError:
            closed = True
    report["slow_reader_dropped"] = closed
    # The others are served as before.
    response, _, _ = first[2].request(kind="embed", input="still here")
    report["others_served"] = response.get("ok")
    for client in first:
        client.close()
    return report


if __name__ == "__main__":
    scenarios = {"protocol": scenario_protocol, "charging": scenario_charging, "limits": scenario_limits}
    print(json.dumps(scenarios[sys.argv[2]](sys.argv[1])))
