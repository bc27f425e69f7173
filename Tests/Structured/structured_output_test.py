#!/usr/bin/env python3
"""Structured output through every interface, every output checked with the `jsonschema` package.

Usage: structured_output_test.py EMBER_BINARY MODELS_DIR PER_SCHEMA   (run with a Python that has `openai` and
       `jsonschema`: `make test` makes .build/venv-openai for it)

Over HTTP with the official `openai` client: PER_SCHEMA generations for each of the 10 schemas in schemas.json
(response_format json_schema, SmolLM2, temperature 0.8, a different seed each) must all parse and validate
(format checks included); json_object outputs must parse as objects; an unsupported keyword is a 400 naming it.
The JSON-lines protocol (jsonSchema) and the CLI (--json-schema, --json-object) are checked the same way.
`make check-structured` runs 20 per schema (200 generations); `make test` a short run. Exits 1 on any failure.
"""
import json, os, re, subprocess, sys, tempfile, time, urllib.request

import jsonschema
import openai

BINARY, MODELS, PER_SCHEMA = sys.argv[1], sys.argv[2], int(sys.argv[3])
MODEL = "smollm2-135m-instruct"
HERE = os.path.dirname(os.path.abspath(__file__))
CASES = json.load(open(os.path.join(HERE, "schemas.json")))
failures = []


def check(name, condition, detail=""):
    print(("ok    " if condition else "FAIL  ") + name + (": " + detail if detail else ""))
    if not condition:
        failures.append(name)


def validator(schema):
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def valid(schema, text):
    """None when `text` parses and validates against `schema`, else why not."""
    try:
        value = json.loads(text)
    except ValueError as error:
        return "not JSON (%s): %r" % (error, text[:200])
    problems = [e.message for e in validator(schema).iter_errors(value)]
    return ("invalid: %s in %r" % ("; ".join(problems), text[:200])) if problems else None


def start_server():
    env = dict(os.environ, EMBER_MODELS_DIR=MODELS)
    server = subprocess.Popen([BINARY, "serve", "--http", "127.0.0.1:0"], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    port = None
    deadline = time.time() + 120
    while time.time() < deadline and port is None:
        line = server.stderr.readline()
        if not line:
            raise SystemExit("ember serve --http ended before listening (exit %s)" % server.wait())
        found = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        port = int(found.group(1)) if found else None
    if port is None:
        raise SystemExit("ember serve --http did not say where it listens within 120 s")
    base = "http://127.0.0.1:%d" % port
    for _ in range(600):
        health = json.loads(urllib.request.urlopen(base + "/health").read())
        if health["models"].get(MODEL) == "ready":
            break
        time.sleep(0.2)
    return server, base


server, base = start_server()
try:
    client = openai.OpenAI(base_url=base + "/v1", api_key="unused")
    total = passed = 0
    for case in CASES:
        for round in range(PER_SCHEMA):
            reply = client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": case["request"]}], temperature=0.8, seed=1000 + round,
                max_tokens=256, response_format={"type": "json_schema",
                                                 "json_schema": {"name": case["name"], "schema": case["schema"], "strict": True}})
            text = reply.choices[0].message.content
            problem = valid(case["schema"], text)
            total += 1
            if problem is None:
                passed += 1
            else:
                check("%s #%d" % (case["name"], round), False, problem)
        print("      %s: e.g. %s" % (case["name"], text.replace("\n", " ")[:160]))
    check("HTTP json_schema: %d of %d generations over %d schemas parse and validate" % (passed, total, len(CASES)), passed == total)

    objects = 0
    for round in range(max(2, PER_SCHEMA)):
        reply = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "List three fruits and their colours."}],
                                               temperature=0.8, seed=round, max_tokens=128, response_format={"type": "json_object"})
        try:
            objects += isinstance(json.loads(reply.choices[0].message.content), dict)
        except ValueError:
            pass
    check("HTTP json_object: %d of %d outputs are JSON objects (128-token limit)" % (objects, max(2, PER_SCHEMA)), objects == max(2, PER_SCHEMA))

    try:
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "x"}], response_format={
            "type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object", "minProperties": 1}}})
        check("HTTP unsupported keyword is refused", False, "no error")
    except openai.BadRequestError as error:
        check("HTTP unsupported keyword is a 400 naming it", "minProperties" in str(error), str(error)[:200])
finally:
    server.terminate()
    server.wait()

# The JSON-lines protocol: jsonSchema on a generate request.
person = CASES[0]
request = {"id": "j1", "prompt": "<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n" % person["request"],
           "jsonSchema": person["schema"], "temperature": 0.8, "seed": 3, "maxTokens": 200}
bad = {"id": "j2", "prompt": "x", "jsonSchema": {"type": "string", "format": "hostname"}}
worker = subprocess.run([BINARY, "serve", "--stdio"], input=json.dumps(request) + "\n" + json.dumps(bad) + "\n", text=True,
                        capture_output=True, env=dict(os.environ, EMBER_MODELS_DIR=MODELS), timeout=300)
# A response longer than the protocol's chunk size comes as ordered chunks (docs/PROTOCOL.md): their outputs joined.
lines = [line for line in map(json.loads, worker.stdout.splitlines()) if "id" in line]
answers = {line["id"]: dict(line, output="".join(part.get("output", "") for part in lines if part["id"] == line["id"]))
           for line in lines if "ok" in line}
check("worker protocol jsonSchema output validates", "j1" in answers and valid(person["schema"], answers["j1"].get("output", "")) is None,
      str(answers.get("j1"))[:200])
check("worker protocol refuses an unsupported format naming it", "j2" in answers and "format" in answers["j2"].get("error", ""),
      str(answers.get("j2"))[:200])

# The CLI: --json-schema FILE and --json-object.
with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
    json.dump(CASES[1]["schema"], handle)
env = dict(os.environ, EMBER_MODELS_DIR=MODELS)
prompt = "<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n" % CASES[1]["request"]
cli = subprocess.run([BINARY, "generate", "--json-schema", handle.name, "--temperature", "0.8", "--json", "-n", "100", prompt],
                     capture_output=True, text=True, env=env, timeout=300)
text = json.loads(cli.stdout)["text"] if cli.returncode == 0 else ""
check("CLI --json-schema output validates", valid(CASES[1]["schema"], text) is None, text or cli.stderr[-300:])
cli = subprocess.run([BINARY, "generate", "--json-object", "-n", "100", prompt], capture_output=True, text=True, env=env, timeout=300)
try:
    check("CLI --json-object prints a JSON object", isinstance(json.loads(cli.stdout), dict), cli.stdout[:200])
except ValueError:
    check("CLI --json-object prints a JSON object", False, cli.stdout[:200])
with open(handle.name, "w") as bad_schema:
    bad_schema.write('{"type": "object", "properties": {"a": {"type": "number", "multipleOf": 2}}}')
cli = subprocess.run([BINARY, "generate", "--json-schema", handle.name, "hi"], capture_output=True, text=True, env=env, timeout=300)
check("CLI refuses an unsupported keyword naming it and where", cli.returncode != 0 and "multipleOf" in cli.stderr
      and "#/properties/a" in cli.stderr, cli.stderr.strip()[-200:])
os.unlink(handle.name)

if failures:
    print("%d check(s) failed: %s" % (len(failures), ", ".join(failures)))
    sys.exit(1)
print("structured output: all checks passed")
