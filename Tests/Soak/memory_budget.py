#!/usr/bin/env python3
"""Many long generations at once against `ember serve --memory-budget MB`: RSS stays within the budget.

Usage: memory_budget.py EMBER_BINARY MODELS_DIR BUDGET_MB [REQUESTS] [MAX_TOKENS] [SECONDS]
       (defaults: 80 requests of 4096 tokens, watched for 30 s)

Sends REQUESTS critical generations of MAX_TOKENS tokens on one connection, samples the server's RSS every
0.25 s for SECONDS, then cancels them all and checks that every one ends (an answer or "cancelled") and that RSS
comes back. Prints one JSON line: the RSS before, the peak and after (MiB), the budget, and how many ended.
Exits 1 when the peak exceeds the RSS before plus the budget plus 64 MiB of slack, or a request never ends.
"""
import json, os, signal, socket, subprocess, sys, tempfile, time

BINARY, MODELS, BUDGET = sys.argv[1], sys.argv[2], int(sys.argv[3])
REQUESTS = int(sys.argv[4]) if len(sys.argv) > 4 else 80
MAX_TOKENS = int(sys.argv[5]) if len(sys.argv) > 5 else 4096
SECONDS = float(sys.argv[6]) if len(sys.argv) > 6 else 30


def rss_mib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0


def main():
    path = os.path.join(tempfile.mkdtemp(prefix="ember-budget-"), "worker.sock")
    server = subprocess.Popen([BINARY, "serve", "--socket", path, "--memory-budget", str(BUDGET),
                               "--max-requests-per-connection", str(REQUESTS + 8)],
                              env=dict(os.environ, EMBER_MODELS_DIR=MODELS), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    for _ in range(600):
        try:
            sock.connect(path)
            break
        except OSError:
            time.sleep(0.1)
    reader = sock.makefile("rb")
    while json.loads(reader.readline()).get("modelState") != "ready":
        pass
    # One short generation first: the model's weights are bound at their first use, and they are not per request.
    sock.sendall(b'{"id":"warm","prompt":"Hi","maxTokens":4,"tier":"critical"}\n')
    while True:
        message = json.loads(reader.readline())
        if message.get("id") == "warm" and ("chunk" not in message or message.get("last")) and "piece" not in message:
            break
    time.sleep(0.5)
    before = rss_mib(server.pid)
    ids = ["r%d" % n for n in range(REQUESTS)]
    for request_id in ids:
        sock.sendall((json.dumps({"id": request_id, "prompt": "Once upon a time", "maxTokens": MAX_TOKENS,
                                  "tier": "critical"}) + "\n").encode())
    peak, start = before, time.time()
    sock.setblocking(False)
    pending = b""
    ended = {}
    while time.time() - start < SECONDS:
        peak = max(peak, rss_mib(server.pid))
        time.sleep(0.25)
        try:
            pending += sock.recv(1 << 20)
        except BlockingIOError:
            pass
    sock.setblocking(True)
    sock.settimeout(300)
    for request_id in ids:
        sock.sendall((json.dumps({"cancel": request_id}) + "\n").encode())
    deadline = time.time() + 300
    while len(ended) < len(ids) and time.time() < deadline:
        peak = max(peak, rss_mib(server.pid))
        while b"\n" not in pending:
            pending += sock.recv(1 << 20)
        line, pending = pending.split(b"\n", 1)
        message = json.loads(line)
        request_id = message.get("id")
        if request_id in ids and "piece" not in message and "deferred" not in message and \
                ("chunk" not in message or message.get("last")) and "cancel: no running" not in str(message.get("error", "")):
            ended[request_id] = message.get("ok")
    time.sleep(2)
    after = rss_mib(server.pid)
    sock.close()
    server.send_signal(signal.SIGTERM)
    log = server.communicate(timeout=60)[1].decode()
    report = {"requests": REQUESTS, "max_tokens": MAX_TOKENS, "budget_mb": BUDGET, "rss_before_mib": round(before),
              "rss_peak_mib": round(peak), "rss_after_mib": round(after), "ended": len(ended),
              "completed": sum(1 for ok in ended.values() if ok)}
    print(json.dumps(report))
    ok = len(ended) == REQUESTS and peak <= before + BUDGET * 1e6 / 2**20 + 64
    if not ok:
        print(log[-2000:], file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
