#!/usr/bin/env python3
"""`ember chat` at a real terminal (a pseudo-terminal): libedit line editing and history, Ctrl-C, Ctrl-D.

Usage: pty_chat.py EMBER_BINARY MODELS_DIR
Types "Hx", Left arrow, "i", Enter (the message must be "Hix"); Up arrow, Enter (history recalls "Hix"); pastes three
lines in one bracketed paste (one turn, newlines kept); asks for a
long reply and presses Ctrl-C once text streams (the reply stops, the chat goes on, the partial reply is kept);
/save, then Ctrl-D (the chat ends). Prints what it checked; exits 1 on the first failure.
"""
import atexit, json, os, pty, re, select, shutil, sys, tempfile, time

EMBER, MODELS = sys.argv[1], sys.argv[2]


def main():
    unended = []  # the screens' ends of turns that did not end with statistics and a prompt
    folder = tempfile.mkdtemp(prefix="ember-pty-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    saved = os.path.join(folder, "chat.json")
    pid, fd = pty.fork()
    if pid == 0:
        os.environ["EMBER_MODELS_DIR"] = MODELS
        os.execv(EMBER, [EMBER, "chat", "-n", "400", "--temperature", "0.7", "--seed", "1"])

    def read_until(token, timeout=60):
        """Reads until `token` (bytes, or a compiled pattern) has arrived or `timeout` seconds have passed."""
        buffer, end = b"", time.time() + timeout
        while time.time() < end:
            ready, _, _ = select.select([fd], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(fd, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                buffer += chunk
                if (token.search(buffer) if isinstance(token, re.Pattern) else token in buffer):
                    return buffer
        if turn_done is token:  # every turn ends so: one that did not waited out its timeout
            unended.append(buffer[-200:])
        return buffer

    # A reply's statistics line, then the prompt (libedit turns bracketed paste on before it) — or prompts: the Enter
    # after a paste is an empty line of its own (the paste already ended the line), which shows the prompt again.
    turn_done = re.compile(rb"\]\r\n(?:\x1b\[\?2004[hl]|> |\r\n)*> $")
    read_until(b"> ", 120)
    os.write(fd, b"Hx\x1b[Di\r")   # Left arrow moves the cursor: "Hix"
    read_until(turn_done)
    os.write(fd, b"\x1b[A\r")      # Up arrow recalls it
    read_until(turn_done)
    # A pasted message of three lines (bracketed paste, as terminals send it) is one turn, newlines kept.
    # Terminals send a pasted line break as CR; "é" checks that typed and pasted UTF-8 arrives as characters.
    os.write(fd, "\x1b[200~Line one\rligne deux \u00e9t\u00e9\rline three\x1b[201~\r".encode())
    read_until(turn_done)
    os.write(fd, b"Write a very long story about a lighthouse keeper.\r")
    # Ctrl-C once the reply streams: twelve characters of it after libedit accepted the line (its echo, then bracketed
    # paste switched off). A fixed half second after the echo was sometimes still the prompt's prefill; and any twenty
    # bytes after "keeper.\r\n" sometimes followed the terminal's own echo of the line typed ahead while the paste's
    # extra Enter was still showing a prompt — the Ctrl-C then reached the prompt, the terminal dropped the pending
    # Enter, and the message was never sent (one failure in three here).
    read_until(re.compile(rb"lighthouse keeper\.\r\n\x1b\[\?2004l[^\x1b]{12}"), 60)
    os.write(fd, b"\x03")          # Ctrl-C: stop the reply, keep the chat
    after = read_until(turn_done, 30)
    os.write(fd, ("/save %s\r" % saved).encode())
    read_until(b"> ")
    os.write(fd, b"\x04")          # Ctrl-D leaves
    deadline = time.time() + 30
    ending = read_until(b"\0", 30)  # what the chat prints until it exits (the pty closes) or 30 s pass
    # The pty closes as the process exits, a moment before it can be reaped: poll until then.
    ended, status = os.waitpid(pid, os.WNOHANG)
    while ended == 0 and time.time() < deadline:
        time.sleep(0.05)
        ended, status = os.waitpid(pid, os.WNOHANG)
    if ended == 0:                   # still running: the test fails instead of waiting for ever
        print(f"the chat did not end after Ctrl-D; the screen ended with {ending[-200:]!r}")
        os.kill(pid, 9)
        _, status = os.waitpid(pid, 0)
        status = 1 << 8
    messages = json.load(open(saved)) if os.path.exists(saved) else []  # no file: /save never ran, every check below fails
    users = [m["content"] for m in messages if m["role"] == "user"]
    checks = [
        ("Left arrow edits the line", users[:1] == ["Hix"]),
        ("Up arrow recalls the last line", users[1:2] == ["Hix"]),
        ("a multi-line paste is one turn", users[2:3] == ["Line one\nligne deux \u00e9t\u00e9\nline three"]),
        ("Ctrl-C stops the reply and the chat goes on", b"interrupted" in after and len(users) == 4),
        ("the interrupted reply is kept", messages[-1:] != [] and messages[-1]["role"] == "assistant" and messages[-1]["content"] != ""),
        ("Ctrl-D ends the chat cleanly", os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0),
        ("every turn ends with its statistics and the prompt", not unended),
    ]
    for screen in unended:
        print(f"a turn did not end; the screen ended with {screen!r}")
    for name, ok in checks:
        print(("ok    " if ok else "FAIL  ") + name)
    return 0 if all(ok for _, ok in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
