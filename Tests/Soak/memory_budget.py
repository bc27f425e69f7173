#!/usr/bin/env python3
"""Many long generations at once against `ember serve --memory-budget MB`: RSS stays within the budget.

Usage: memory_budget.py EMBER_BINARY MODELS_DIR BUDGET_MB [REQUESTS] [MAX_TOKENS] [SECONDS]
       memory_budget.py EMBER_BINARY MODELS_DIR cgroup=LIMIT_MB [REQUESTS] [MAX_TOKENS] [SECONDS]
       (defaults: 80 requests of 4096 tokens, watched for 30 s)

With cgroup=LIMIT_MB the server runs in a new memory cgroup (v1 or v2) limited to LIMIT_MB, without
--memory-budget: it must find the limit itself, take half of it as its budget (it says so on standard error) and
never be killed by the cgroup's OOM killer. Where no cgroup can be made (not root, no memory controller
delegated), the script says so and exits 0 without running: the fake-tree tests in MemoryLimitTests still
check how limits are read.

Sends REQUESTS critical generations of MAX_TOKENS tokens on one connection, samples the server's RSS every
0.25 s for SECONDS, then cancels them all and checks that every one ends (an answer or "cancelled") and that RSS
comes back. Prints one JSON line: the RSS before, the peak and after (MiB), the budget, and how many ended.
Exits 1 when the peak exceeds the RSS before plus the budget plus 64 MiB of slack, or a request never ends.
"""
import atexit, json, os, re, shutil, signal, socket, subprocess, sys, tempfile, time

BINARY, MODELS = sys.argv[1], sys.argv[2]
CGROUP_LIMIT = int(sys.argv[3][len("cgroup="):]) if sys.argv[3].startswith("cgroup=") else None
BUDGET = CGROUP_LIMIT * 2**20 // 2 // 10**6 if CGROUP_LIMIT else int(sys.argv[3])
REQUESTS = int(sys.argv[4]) if len(sys.argv) > 4 else 80
MAX_TOKENS = int(sys.argv[5]) if len(sys.argv) > 5 else 4096
SECONDS = float(sys.argv[6]) if len(sys.argv) > 6 else 30


def rss_mib(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:  # the server has ended (a cgroup's OOM killer): the checks below report it
        pass
    return 0


def own_cgroup(controller_line):
    for line in open("/proc/self/cgroup"):
        fields = line.rstrip("\n").split(":", 2)
        if controller_line(fields):
            return fields[2]
    return None


def make_cgroup(limit_bytes):
    """A new memory cgroup under this process's own, limited to limit_bytes: (folder, kind), or (None, why not)."""
    name = "ember-budget-%d" % os.getpid()
    v1 = own_cgroup(lambda f: len(f) == 3 and "memory" in f[1].split(","))
    v2 = own_cgroup(lambda f: len(f) == 3 and f[0] == "0" and f[1] == "")
    attempts = []
    if v1 is not None:
        attempts.append(("/sys/fs/cgroup/memory" + v1.rstrip("/"), "memory.limit_in_bytes", "v1"))
    if v2 is not None and os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        attempts.append(("/sys/fs/cgroup" + v2.rstrip("/"), "memory.max", "v2"))
    reasons = []
    for parent, limit_file, kind in attempts:
        folder = os.path.join(parent, name)
        try:
            os.mkdir(folder)
        except OSError as error:
            reasons.append("%s: cannot make %s (%s)" % (kind, folder, error.strerror))
            continue
        try:
            with open(os.path.join(folder, limit_file), "w") as f:
                f.write(str(limit_bytes))
            return folder, kind
        except OSError as error:
            os.rmdir(folder)
            reasons.append("%s: cannot set %s (%s)" % (kind, limit_file, error.strerror))
    return None, "; ".join(reasons) or "no cgroup hierarchy in /proc/self/cgroup"


def oom_kills(folder):
    """How many times the cgroup's OOM killer ran (v1 memory.oom_control or v2 memory.events)."""
    for file, key in (("memory.events", "oom_kill"), ("memory.oom_control", "oom_kill")):
        try:
            for line in open(os.path.join(folder, file)):
                if line.split()[0] == key:
                    return int(line.split()[1])
        except OSError:
            pass
    return 0


def cgroup_peak_mib(folder):
    """The most memory the cgroup was charged (v1 memory.max_usage_in_bytes, v2 memory.peak), in MiB."""
    for file in ("memory.max_usage_in_bytes", "memory.peak"):
        try:
            return round(int(open(os.path.join(folder, file)).read()) / 2**20)
        except (OSError, ValueError):
            pass
    return None


def main():
    folder = tempfile.mkdtemp(prefix="ember-budget-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    path = os.path.join(folder, "worker.sock")
    command = [BINARY, "serve", "--socket", path, "--max-requests-per-connection", str(REQUESTS + 8)]
    cgroup = None
    if CGROUP_LIMIT:
        cgroup, kind = make_cgroup(CGROUP_LIMIT * 2**20)
        if cgroup is None:
            print(json.dumps({"skipped": "no memory cgroup could be made here: " + kind}))
            return 0
        # Join the cgroup in the child, then become the server.
        command = ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', cgroup] + command
    else:
        command += ["--memory-budget", str(BUDGET)]
    log_file = tempfile.TemporaryFile()
    server = subprocess.Popen(command, env=dict(os.environ, EMBER_MODELS_DIR=MODELS),
                              stdout=subprocess.DEVNULL, stderr=log_file)
    try:
        return run(server, path, log_file, cgroup)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        if cgroup:
            for _ in range(50):
                try:
                    os.rmdir(cgroup)
                    break
                except OSError:
                    time.sleep(0.1)


def server_log(log_file):
    log_file.seek(0)
    return log_file.read().decode(errors="replace")


def run(server, path, log_file, cgroup):
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
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            break
    sock.setblocking(True)
    sock.settimeout(300)
    try:
        for request_id in ids:
            sock.sendall((json.dumps({"cancel": request_id}) + "\n").encode())
    except OSError as error:
        print("cannot cancel: %s (server exit status %s)" % (error, server.poll()), file=sys.stderr)
    deadline = time.time() + 300
    while len(ended) < len(ids) and time.time() < deadline:
        peak = max(peak, rss_mib(server.pid))
        while b"\n" not in pending:
            try:
                received = sock.recv(1 << 20)
            except OSError:
                received = b""
            if not received:
                break
            pending += received
        if b"\n" not in pending:
            print("the server closed the connection (exit status %s)" % server.poll(), file=sys.stderr)
            break
        line, pending = pending.split(b"\n", 1)
        message = json.loads(line)
        request_id = message.get("id")
        if request_id in ids and "piece" not in message and "deferred" not in message and \
                ("chunk" not in message or message.get("last")) and "cancel: no running" not in str(message.get("error", "")):
            ended[request_id] = message.get("ok")
    time.sleep(2)
    after = rss_mib(server.pid)
    alive = server.poll() is None
    sock.close()
    server.send_signal(signal.SIGTERM)
    server.wait(timeout=60)
    log = server_log(log_file)
    report = {"requests": REQUESTS, "max_tokens": MAX_TOKENS, "budget_mb": BUDGET, "rss_before_mib": round(before),
              "rss_peak_mib": round(peak), "rss_after_mib": round(after), "ended": len(ended),
              "completed": sum(1 for ok in ended.values() if ok)}
    report["server_alive"] = alive
    ok = alive and len(ended) == REQUESTS and peak <= before + BUDGET * 1e6 / 2**20 + 64
    if cgroup:
        said = re.search(r"working-memory budget (\d+) MB", log)
        report.update(cgroup_limit_mib=CGROUP_LIMIT, budget_said_mb=int(said.group(1)) if said else None,
                      oom_kills=oom_kills(cgroup), cgroup_peak_mib=cgroup_peak_mib(cgroup))
        # The limit is rounded down to a page by the kernel: allow 1 MB either way.
        ok = ok and said is not None and abs(int(said.group(1)) - BUDGET) <= 1 and report["oom_kills"] == 0
    print(json.dumps(report))
    if not ok:
        print(log[-2000:], file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
