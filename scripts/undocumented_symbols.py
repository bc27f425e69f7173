#!/usr/bin/env python3
"""Lists the public symbols of a module that have no doc comment.

Usage: undocumented_symbols.py SYMBOL_GRAPH_DIR MODULE SOURCE_PREFIX
Reads MODULE*.symbols.json (swiftc -emit-symbol-graph), keeps public and open
symbols declared under SOURCE_PREFIX (not synthesized, not inherited), and
prints those without a doc comment. Exits 1 if there is any.
"""
import glob
import json
import os
import sys

directory, module, prefix = sys.argv[1], sys.argv[2], os.path.join(os.path.abspath(sys.argv[3]), "")
missing, total = [], 0
for path in sorted(glob.glob(os.path.join(directory, module + ".symbols.json"))
                   + glob.glob(os.path.join(directory, module + "@*.symbols.json"))):
    for symbol in json.load(open(path))["symbols"]:
        if symbol["accessLevel"] not in ("public", "open"):
            continue
        location = symbol.get("location", {}).get("uri", "").replace("file://", "")
        if not location.startswith(prefix):
            continue
        total += 1
        if symbol.get("docComment"):
            continue
        line = symbol["location"]["position"]["line"] + 1
        missing.append("%s:%d: %s %s" % (os.path.relpath(location), line,
                                          symbol["kind"]["identifier"].replace("swift.", ""),
                                          ".".join(symbol["pathComponents"])))
for entry in sorted(missing):
    print(entry)
print("%d of %d public symbols of %s have a doc comment" % (total - len(missing), total, module))
sys.exit(1 if missing else 0)
