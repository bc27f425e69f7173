#!/usr/bin/env bash
# The README's Swift program as a newcomer builds it: a package of its own in a folder outside the checkout that
# depends on this checkout by path (`.package(path:)`, the `Ember` product), built in release and run there. Its
# models: a `models` link in that folder to the checkout's (a folder with models/manifest.json is where Ember looks
# first), so the user's own cache is neither read nor filled. Builds Ember's modules anew: a minute or more.
# Usage: scripts/check_swift_package.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
app=$(mktemp -d /tmp/ember-newcomer-app-XXXXXX)
trap 'rm -rf "$app"' EXIT
mkdir -p "$app/Sources/App"
ln -s "$root/models" "$app/models"
cat > "$app/Package.swift" <<SWIFT
// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "NewcomerApp",
    platforms: [.macOS(.v14)],
    dependencies: [.package(path: "$root")],
    targets: [.executableTarget(name: "App", dependencies: [.product(name: "Ember", package: "$(basename "$root")")])]
)
SWIFT
python3 - "$root/README.md" "$app/Sources/App/main.swift" <<'PY'
import re, sys
blocks = re.findall(r"^```swift\n(.*?)^```", open(sys.argv[1], encoding="utf-8").read(), re.S | re.M)
program = next(b for b in blocks if "loadLanguageModel" in b)
open(sys.argv[2], "w", encoding="utf-8").write(program)
PY
cd "$app"
echo "== building the README's program as a package in $app (Ember compiled anew)"
swift build -c release 2>&1 | tail -n 3
echo "== running it there"
output=$(.build/release/App) || { echo "$output"; echo "check-swift-package: the program failed" >&2; exit 1; }
echo "$output"
echo "$output" | head -n 1 | grep -q "^ Paris" || { echo "check-swift-package: expected the reply to start with \" Paris\"" >&2; exit 1; }
echo "$output" | python3 -c 'import sys; c = next(float(l) for l in sys.stdin.read().split("\n") if l.replace(".", "", 1).isdigit()); sys.exit(0 if abs(c - 0.81) < 0.03 else "check-swift-package: cosine %.3f, the README says 0.81" % c)'
echo "check-swift-package: the README's Swift program builds as a package outside the checkout and runs"
