# Ember — the two commands are `make demo` (the main job) and `make test`.
# Every target installs what it needs first; nothing is installed by hand.

SWIFT        ?= swift
CONFIG       ?= release
BUILD_FLAGS  := -c $(CONFIG)
BIN          := .build/$(CONFIG)
EMBER        := $(BIN)/ember

# Debian packages the build and the model fetcher need. `deps` installs only
# the ones that are missing (apt-get update first), so a second run is a no-op.
APT_PACKAGES := libopenblas-dev liblapacke-dev pkg-config zlib1g-dev python3-pip gcc g++ libc6-dev curl libedit-dev
SUDO         := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all deps build test-build test bench-int8-ceiling bench-peers bench-peers-avx2 check-llamacpp-tokens check-llamacpp-tokens-floor check-swift-package check-structured openai-venv test-arm64 demo models examples bench bench-suite docs clean fuzz fuzz-build fuzz-kernels fuzz-short soak sanitize sanitize-kernels sanitized-kernels

all: build

# $(call apt_install_missing,PACKAGES): apt-get install the ones not installed (apt-get update first).
define apt_install_missing
	@missing=""; \
	for p in $(1); do \
	  if [ "$$p" = python3-pip ] && python3 -m pip --version >/dev/null 2>&1; then continue; fi; \
	  dpkg-query -W -f='$${Status}' "$$p" 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing$$missing"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	else \
	  echo "all present: $(1)"; \
	fi
endef

deps:
	$(call apt_install_missing,$(APT_PACKAGES))

build: deps
	$(SWIFT) build $(BUILD_FLAGS) --product ember

# One build serves `make test` and `make docs`: the test bundle, `ember` and libEmberC.so (what the tests run) in
# release with testable imports (`swift test --skip-build` then runs it as is) and each module's public symbol
# graph (what `make docs` checks). A plain `swift build` in between would rebuild every module without those flags,
# so `make test` fetches the models with this build's `ember` instead of depending on `build`. (One build instead
# of three: `ember`, the tests and the documentation each compiled the modules before, ~3 min each on 2 cores.)
# The package-benchmark suites (Benchmarks/, `make bench-suite`) are left out: they and their dependencies were
# part of every clean build, and their plugin rebuilt them on every later one (41 s of `make docs`; now 11 s).
# Clean CI on a 2-core Xeon: 24.9 min before (build 604 s), 18.2 min after (build 524 s, with swift-crypto gone).
SYMBOL_GRAPHS := .build/symbol-graphs
TEST_PRODUCTS := ember EmberPackageTests EmberC
test-build: deps
	@for product in $(TEST_PRODUCTS); do \
	  echo "$(SWIFT) build -c release --product $$product (testable, symbol graphs)"; \
	  $(SWIFT) build -c release --product $$product -Xswiftc -enable-testing \
	    -Xswiftc -emit-symbol-graph -Xswiftc -emit-symbol-graph-dir -Xswiftc $(CURDIR)/$(SYMBOL_GRAPHS) || exit 1; \
	done

# Kernel tests run in release: C kernels at -O0 are too slow to test well.
# On x86 the arm64 NEON kernels are checked too, cross-compiled and run under qemu.
# The model tests compare against llama.cpp's outputs on the real files: fetched first.
# The host tests compile examples/c-host against libEmberC.so and drive `ember serve`: the test build made both.
test: deps test-arm64 fuzz-short sanitize-kernels openai-venv test-build
	$(EMBER) fetch --all
	$(SWIFT) test -c release --skip-build
	$(OPENAI_PYTHON) Tests/HTTP/openai_client_test.py $(EMBER) models
	$(OPENAI_PYTHON) Tests/Structured/structured_output_test.py $(EMBER) models $(STRUCTURED_SHORT_PER_SCHEMA)
	python3 Tests/HostTests/Programs/pty_chat.py $(EMBER) models
	python3 Tests/Soak/soak.py $(EMBER) models $(SOAK_SHORT_SECONDS)
	python3 Tests/Soak/memory_budget.py $(EMBER) models 1000 40 4096 10
	python3 Tests/Soak/memory_budget.py $(EMBER) models cgroup=1200 80 4096 10

# The official `openai` Python package and `jsonschema` (the validator structured output is checked with), in a
# virtual environment of the project's own (as users would install them), for the HTTP API's tests
# (Tests/HTTP/openai_client_test.py, Tests/Structured/structured_output_test.py). Debian's python3 needs python3-venv.
OPENAI_VENV   := .build/venv-openai
OPENAI_PYTHON := $(OPENAI_VENV)/bin/python
OPENAI_READY  := $(OPENAI_VENV)/.installed-openai-jsonschema
openai-venv: $(OPENAI_READY)
$(OPENAI_READY):
	test -x $(OPENAI_PYTHON) || python3 -m venv $(OPENAI_VENV) || { rm -rf $(OPENAI_VENV); $(SUDO) apt-get install -y -qq python3-venv && python3 -m venv $(OPENAI_VENV); }
	$(OPENAI_VENV)/bin/pip install -q openai jsonschema
	touch $@

# Structured output at length: 20 generations for each of the 10 schemas of Tests/Structured/schemas.json (200,
# SmolLM2, temperature 0.8) over HTTP, each validated with `jsonschema`, plus the worker protocol and the CLI; then
# decode speed with a schema against free text on SmolLM2 (49k tokens) and Gemma 3 (262k). `make test` runs 1 a schema
# (2 until 2026-11-29: a clean-clone CI on a Zen 3 reached 1,168 s of its 1,200, 57 s of them here).
STRUCTURED_SHORT_PER_SCHEMA ?= 1
check-structured: openai-venv build
	$(EMBER) fetch --all
	$(OPENAI_PYTHON) Tests/Structured/structured_output_test.py $(EMBER) models 20
	$(EMBER) bench structured --model smollm2-135m-instruct --json-schema Tests/Structured/person.schema.json --runs 10
	$(EMBER) bench structured --model gemma-3-270m --json-schema Tests/Structured/person.schema.json --runs 10

# Soak: `ember serve` under SOAK_CLIENTS clients (default 8) for SOAK_SECONDS (default 600) while a scripted power timeline flips
# charger / battery / low power / thermal every 3 s — generate and embed requests of every tier, streamed or
# not, cancels, clients leaving mid-request. Every request ends exactly once, file descriptors and RSS come back
# to their baseline, a watchdog catches a deadlock (Tests/Soak/soak.py). Then 80 generations of 4096 tokens at
# once under `--memory-budget 2000`: RSS stays within the budget and comes back when they are cancelled
# (Tests/Soak/memory_budget.py), and again with no --memory-budget inside a new memory cgroup of 1200 MiB: the
# server takes half the cgroup's limit as its budget and its OOM killer never runs (skipped, saying why, where no
# cgroup can be made). `make test` runs them shorter (25 s — 40 until a clean-clone CI on a Zen 3 reached 1,168 s of its
# 1,200 —; 40 and 80 generations for 10 s).
SOAK_SECONDS       ?= 600
SOAK_SHORT_SECONDS ?= 25
SOAK_CLIENTS       ?= 8
soak: build models
	python3 Tests/Soak/soak.py $(EMBER) models $(SOAK_SECONDS) $(SOAK_CLIENTS)
	python3 Tests/Soak/memory_budget.py $(EMBER) models 2000 80 4096 30
	python3 Tests/Soak/memory_budget.py $(EMBER) models cgroup=1200 80 4096 30

# Sanitizers. `sanitize-kernels` (in `make test`): the C kernels and their checks against the scalar oracle
# under AddressSanitizer + UBSan, for every ISA this CPU runs. `sanitize` adds the Swift tests under
# AddressSanitizer and the scheduler, thread and QoS tests under ThreadSanitizer (separate builds, ~15 min).
# The kernels are compiled once under ASan + UBSan (with libFuzzer's coverage hooks, which cost the cross-check
# little), a file per job on every core, and linked into both the cross-check and the kernels fuzzer: one
# instrumented compile instead of two serial ones. At -O0 (the default) the AVX-512 interleaved kernels take ~50 s a
# file (one per ISA, so they compile side by side; in one file they took 143 s and held `make test` up) and the row
# kernels ~30 s: these go first, the rest packs in around them. -O1 would be slower to compile still, which `make
# test` cannot afford — long fuzzing runs may want the faster code: `make fuzz SANITIZE_OPT=-O1` (objects and
# programs are kept apart per level). At -O0 UBSan's pointer-overflow check (pointer arithmetic that wraps the address
# space) is left out: it was 30 % of the compile (x86_interleaved_avx512.c 50 → 34 s), and an address outside a buffer
# is AddressSanitizer's to find when it is used; other levels (long fuzzing runs) keep it.
SANITIZE_OPT      ?= -O0
SANITIZE_CHECK    := .build/kernel_check_sanitized$(SANITIZE_OPT)
SANITIZED_DIR     := .build/sanitized-kernels$(SANITIZE_OPT)
SANITIZED_SLOWEST := CKernels/x86_interleaved_avx512.c CKernels/x86_interleaved_avx512_novnni.c CKernels/x86_rows.c \
                     CKernels/x86_interleaved.c
SANITIZED_OBJECTS := $(patsubst CKernels/%.c,$(SANITIZED_DIR)/%.o,$(SANITIZED_SLOWEST) \
                       $(filter-out $(SANITIZED_SLOWEST),$(wildcard CKernels/*.c)))
SANITIZE_CFLAGS   := $(SANITIZE_OPT) -g -std=c11 -fsanitize=address,undefined $(if $(filter -O0,$(SANITIZE_OPT)),-fno-sanitize=pointer-overflow) \
                     -fno-sanitize-recover=all -fno-omit-frame-pointer \
                     -ICKernels/include -ICKernels
CORES             := $(shell nproc 2>/dev/null || echo 2)
$(SANITIZED_DIR)/%.o: CKernels/%.c $(wildcard CKernels/*.h CKernels/include/*.h)
	@mkdir -p $(SANITIZED_DIR)
	@$(SWIFT_CLANG) $(SANITIZE_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@
sanitized-kernels:
	@$(MAKE) --no-print-directory -s -j$(CORES) $(SANITIZED_OBJECTS)
$(SANITIZE_CHECK): Tests/CrossCheck/kernel_check.c $(SANITIZED_OBJECTS)
	@$(SWIFT_CLANG) $(SANITIZE_CFLAGS) -fsanitize=fuzzer-no-link -fuse-ld=lld -o $@ $^ -lm 2>&1 | grep -v "Cannot export" || true
	@test -x $@
# The check is one thread: the ISAs run side by side, a core each (~17 s an ISA at -O0), and report in order.
# avx512-noamx is avx512 without AMX's tiles: on a CPU without AMX the two run the same kernels, checked once.
SANITIZE_HAS_AMX := $(shell grep -qw amx_int8 /proc/cpuinfo 2>/dev/null && echo yes)
SANITIZE_HAS_AVX512 := $(shell grep -qw avx512f /proc/cpuinfo 2>/dev/null && echo yes)
SANITIZE_ISAS := scalar avx2 avx2-novnni avx512 $(if $(SANITIZE_HAS_AMX),avx512-noamx) avx512-novnni
sanitize-kernels: sanitized-kernels
	@$(MAKE) --no-print-directory $(SANITIZE_CHECK)
	@mkdir -p .build/sanitize-kernels-out
	@echo $(SANITIZE_ISAS) | tr ' ' '\n' | xargs -P $(CORES) -I ISA sh -c \
	  '$(SANITIZE_CHECK) ISA > .build/sanitize-kernels-out/ISA.log 2>&1; echo $$? > .build/sanitize-kernels-out/ISA.status'
	@for isa in $(SANITIZE_ISAS); do \
	  out=.build/sanitize-kernels-out/$$isa; \
	  if grep -q "not supported" $$out.log; then continue; fi; \
	  [ "$$(cat $$out.status)" -eq 0 ] || { tail -30 $$out.log; exit 1; }; \
	  echo "kernels under ASan+UBSan, $$isa: $$(tail -n 1 $$out.log)"; \
	done
	@$(if $(or $(SANITIZE_HAS_AMX),$(if $(SANITIZE_HAS_AVX512),,no-avx512)),true,echo "kernels under ASan+UBSan, avx512-noamx: the avx512 kernels (no AMX on this CPU)")

# The host tests are skipped under ASan: their C programs load an instrumented libEmberC.so without the ASan
# runtime, which it cannot start without; the C API has its own ASan host test in `make test` (CHostTests).
sanitize: deps models sanitize-kernels
	$(SWIFT) build -c release --product EmberC --scratch-path .build/asan --sanitize=address
	$(SWIFT) test -c release --scratch-path .build/asan --sanitize=address --skip HostTests
	$(SWIFT) test -c release --scratch-path .build/tsan --sanitize=thread \
	  --filter "SchedulerTests|ThreadTests|MemoryBudget|Priority|QoS|Region|Scheduler"

# Fuzzing (libFuzzer, from the Swift toolchain's clang). `make fuzz` runs every target for FUZZ_SECONDS each
# (default 60) under AddressSanitizer: the readers of GGUF, safetensors and tokenizer.json, the tokenizers, the
# worker-protocol parser (Sources/EmberFuzzTargets), and the C kernels against their scalar oracle
# (Tests/Fuzz/kernels_fuzz.c, with UBSan too). The corpus grows in .build/fuzz-corpus; a crash leaves its input
# in .build/fuzz-crashes — copy it to Tests/Fuzz/crashers/TARGET/ and `make test` replays it from then on.
# Leak detection is off for the Swift targets: Foundation's own readBytesFromFile (FileManager.contents) leaks a
# 4 KiB buffer when it reads an empty file, found by the first run; a leak of ours would show as RSS growth in
# `make soak`. The kernels fuzzer keeps it on.
# `make test` runs the short pass: the kernels fuzzer for FUZZ_SHORT_SECONDS, and every Swift target over its
# seeds, the crashers and a few thousand seeded mutations (FuzzReplayTests, no instrumentation).
FUZZ_SECONDS       ?= 60
FUZZ_SHORT_SECONDS ?= 10
FUZZ_TARGETS       := gguf safetensors tokenizer-json tokenizers protocol http json-schema
SWIFT_CLANG        := $(dir $(realpath $(shell command -v $(SWIFT))))clang
KERNELS_FUZZ       := .build/kernels_fuzz$(SANITIZE_OPT)
FUZZ_EXTRA_SEEDS_gguf := Tests/ModelTests/Fixtures/tiny

$(KERNELS_FUZZ): Tests/Fuzz/kernels_fuzz.c $(SANITIZED_OBJECTS)
	@$(SWIFT_CLANG) $(SANITIZE_CFLAGS) -fsanitize=fuzzer -fuse-ld=lld -o $@ $^ -lm 2>&1 | grep -v "Cannot export" || true
	@test -x $@

fuzz-kernels: sanitized-kernels
	@$(MAKE) --no-print-directory $(KERNELS_FUZZ)
	@mkdir -p .build/fuzz-corpus/kernels .build/fuzz-crashes
	@echo "== kernels ($(FUZZ_SECONDS) s)"
	@$(KERNELS_FUZZ) .build/fuzz-corpus/kernels -max_total_time=$(FUZZ_SECONDS) -artifact_prefix=.build/fuzz-crashes/kernels- \
	  -print_final_stats=1 > .build/fuzz-kernels.log 2>&1 || { tail -40 .build/fuzz-kernels.log; exit 1; }
	@grep -E "^(Done|stat::number_of_executed_units|stat::peak_rss_mb)|cov: .* corp:" .build/fuzz-kernels.log | tail -4

fuzz-short: sanitized-kernels
	@$(MAKE) --no-print-directory $(KERNELS_FUZZ)
	@mkdir -p .build/fuzz-corpus/kernels .build/fuzz-crashes
	@$(KERNELS_FUZZ) .build/fuzz-corpus/kernels -max_total_time=$(FUZZ_SHORT_SECONDS) -artifact_prefix=.build/fuzz-crashes/kernels- \
	  > .build/fuzz-kernels.log 2>&1 || { tail -40 .build/fuzz-kernels.log; exit 1; }
	@echo "kernels fuzz ($(FUZZ_SHORT_SECONDS) s): $$(grep -E '^Done' .build/fuzz-kernels.log), no mismatch, ASan and UBSan clean"

fuzz-build: deps
	$(SWIFT) build -c release --product ember-fuzz --scratch-path .build/fuzz --sanitize=address \
	  -Xswiftc -sanitize=fuzzer -Xswiftc -DEMBER_LIBFUZZER -Xswiftc -use-ld=lld

fuzz: fuzz-build fuzz-kernels
	@for target in $(FUZZ_TARGETS); do \
	  mkdir -p .build/fuzz-corpus/$$target .build/fuzz-crashes; \
	  extra=""; [ "$$target" = gguf ] && extra="$(FUZZ_EXTRA_SEEDS_gguf)"; \
	  echo "== $$target ($(FUZZ_SECONDS) s)"; \
	  ASAN_OPTIONS=detect_leaks=0 EMBER_FUZZ_TARGET=$$target .build/fuzz/release/ember-fuzz .build/fuzz-corpus/$$target Tests/Fuzz/corpus/$$target $$extra \
	    -max_total_time=$(FUZZ_SECONDS) -max_len=1048576 -rss_limit_mb=4096 -timeout=30 -print_final_stats=1 -detect_leaks=0 \
	    -artifact_prefix=.build/fuzz-crashes/$$target- > .build/fuzz-$$target.log 2>&1 \
	    || { tail -60 .build/fuzz-$$target.log; exit 1; }; \
	  grep -E "^(Done|stat::number_of_executed_units|stat::peak_rss_mb)|cov: .* corp:" .build/fuzz-$$target.log | tail -4; \
	done

# The NEON kernels against the scalar oracle, from plain C, under qemu-aarch64.
ARM64_PACKAGES := gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user
ARM64_CHECK    := .build/kernel_check_arm64
test-arm64:
ifeq ($(shell uname -m),aarch64)
	@echo "test-arm64: native arm64, the Swift tests run NEON"
else
	$(call apt_install_missing,$(ARM64_PACKAGES))
	@mkdir -p .build && \
	aarch64-linux-gnu-gcc -O2 -std=c11 -Wall -ICKernels/include -ICKernels -o $(ARM64_CHECK) \
	  Tests/CrossCheck/kernel_check.c $$(ls CKernels/*.c) -lm && \
	for isa in neon scalar; do \
	  out=$$(qemu-aarch64 -L /usr/aarch64-linux-gnu $(ARM64_CHECK) $$isa) || { echo "$$out"; exit 1; }; \
	  echo "arm64 $$isa kernels vs the oracle: $$(echo "$$out" | tail -n 1 | sed 's/ passed, / checks passed, /; s/ failed/ checks failed/')"; \
	done
endif

models: build
	$(EMBER) fetch --all

# The examples, built against the public headers: the backend plugin (examples/plugins/, ABI 2 of
# CKernels/include/ember_plugin.h) and the C host (examples/c-host/, against libEmberC.so).
PLUGINS := .build/plugins
examples: deps
	@mkdir -p $(PLUGINS)
	cc -std=c11 -O2 -Wall -Wextra -Werror -pedantic -shared -fPIC -ICKernels/include \
	  examples/plugins/example_backend.c -o $(PLUGINS)/libexample_backend.so -lm
	$(SWIFT) build $(BUILD_FLAGS) --product EmberC
	cc -std=c11 -Wall -Wextra -Werror -pedantic -ISources/EmberC/include examples/c-host/main.c \
	  -L$(BIN) -lEmberC -lm -Wl,-rpath,$(CURDIR)/$(BIN) -o $(BIN)/c-host
	@echo "plugin: $(PLUGINS)/libexample_backend.so — EMBER_PLUGIN_PATH=$(CURDIR)/$(PLUGINS)/libexample_backend.so $(EMBER) plan"
	@echo "C host: $(BIN)/c-host"

demo: build models
	$(EMBER) info
	$(EMBER) demo
	$(EMBER) bench blas --quick
	$(EMBER) bench kernels --quick
	$(EMBER) bench qos --repetitions 60
	$(EMBER) policy --state battery=15%,thermal=serious

# The DocC archives of the public modules (Ember with its catalog, Sources/Ember/Ember.docc; the others from
# their doc comments), after checking that every public symbol of each has a doc comment. A DocC warning (a ``link``
# to a symbol that is not there, or not public, or in another module) fails it: `make docs` had printed 13 unseen.
DOCS_SCRATCH := .build/docs
DOC_MODULES  := EmberCore EmberModels Ember EmberServer EmberBenchmarks
docs: deps test-build
	@for module in $(DOC_MODULES); do \
	  rm -rf $(DOCS_SCRATCH)/graphs-$$module && mkdir -p $(DOCS_SCRATCH)/graphs-$$module && \
	  cp $(SYMBOL_GRAPHS)/$$module.symbols.json $(DOCS_SCRATCH)/graphs-$$module/ && \
	  (cp $(SYMBOL_GRAPHS)/$$module@*.symbols.json $(DOCS_SCRATCH)/graphs-$$module/ 2>/dev/null || true) && \
	  python3 scripts/undocumented_symbols.py $(DOCS_SCRATCH)/graphs-$$module $$module Sources/$$module || exit 1; \
	done
	docc convert Sources/Ember/Ember.docc --additional-symbol-graph-dir $(DOCS_SCRATCH)/graphs-Ember \
	  --fallback-display-name Ember --fallback-bundle-identifier org.ember.Ember \
	  --output-path .build/Ember.doccarchive --analyze --warnings-as-errors
	@for module in EmberCore EmberModels EmberServer EmberBenchmarks; do \
	  docc convert --additional-symbol-graph-dir $(DOCS_SCRATCH)/graphs-$$module \
	    --fallback-display-name $$module --fallback-bundle-identifier org.ember.$$module \
	    --output-path .build/$$module.doccarchive --warnings-as-errors || exit 1; \
	done
	@echo "documentation: $(foreach module,$(DOC_MODULES),.build/$(module).doccarchive)"

bench: build
	$(EMBER) bench blas
	$(EMBER) bench kernels

# What one AVX2 core without VNNI can do with 8-bit integers at most, against its own FMA peak
# (scripts/avx2_int8_ceiling.c: hot register loops of the forms the AVX2 kernels use; docs/KERNELS.md).
bench-int8-ceiling: deps
	@[ "$$(uname -m)" = x86_64 ] || { echo "bench-int8-ceiling: an x86-64 harness; this machine is $$(uname -m)"; exit 2; }
	@mkdir -p .build
	$(CC) -O2 -mavx2 -mfma -o .build/avx2_int8_ceiling scripts/avx2_int8_ceiling.c
	.build/avx2_int8_ceiling

# The README's Swift program built as a newcomer builds it: a package of its own outside the checkout depending on
# it by path, run there (scripts/check_swift_package.sh; Ember's modules compiled anew, a minute or more).
# `make test` runs the short version: the same program compiled against the test build and run outside the checkout
# (Tests/HostTests/DocBlockTests.swift).
check-swift-package: build models
	bash scripts/check_swift_package.sh

# Ember against its peers in one run (scripts/bench_peers.py): llama.cpp — the newest, vendored in the
# llama-cpp-python source package on PyPI, built here once (~10 min) with the SmolLM2 files it is compared on — for
# text generation at every precision, and ONNX Runtime (a venv of its own, fp32 transformer-optimized and int8
# per-channel) for embeddings at batch 1 and 32. Alternating rounds, medians, ratios from one run; PEER_ROUNDS
# rounds (default 3), figures also in .build/peers/figures.json.
PEERS_DIR   := .build/peers
PEER_ROUNDS ?= 3
bench-peers: build models
	@llama_bin=$$(bash scripts/peers/llama_cpp.sh $(PEERS_DIR) models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf | tail -n 1) && \
	ort_python=$$(bash scripts/peers/onnxruntime_venv.sh $(PEERS_DIR)/venv-onnxruntime | tail -n 1) && \
	python3 scripts/bench_peers.py --ember $(EMBER) --models models --llama-bin "$$llama_bin" --llama-files $(PEERS_DIR) \
	  --ort-python "$$ort_python" --ort-cache $(PEERS_DIR)/onnx --rounds $(PEER_ROUNDS) --json $(PEERS_DIR)/figures.json

# The AVX2 + FMA machine kind (Zen 3: no AVX-512, no VNNI) on any x86 machine, ISA for ISA: Ember's
# EMBER_ISA=avx2-novnni path (OpenBLAS held to its Haswell core) against llama.cpp built a second time for AVX2 + FMA
# only, and ONNX Runtime held to its AVX2 kernels: where the CPU can fault on CPUID (`cpuid_fault` in /proc/cpuinfo:
# Intel, and KVM guests on it) under scripts/peers/cpuid_avx2.c, which hides AVX-512, VNNI and AMX from CPUID;
# elsewhere (AMD) from a copy of ONNX Runtime and numpy whose XGETBV instructions scripts/peers/xgetbv_avx2.c answers
# with an XCR0 without AVX-512 state (scripts/peers/xgetbv_avx2.py makes the copy once).
# Figures in .build/peers/figures-avx2.json.
bench-peers-avx2: build models
	@llama_bin=$$(LLAMA_CPP_ISA=avx2 bash scripts/peers/llama_cpp.sh $(PEERS_DIR) models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf | tail -n 1) && \
	ort_python=$$(bash scripts/peers/onnxruntime_venv.sh $(PEERS_DIR)/venv-onnxruntime | tail -n 1) && \
	if grep -qw cpuid_fault /proc/cpuinfo; then \
	  $(CC) -O2 -shared -fPIC -o $(PEERS_DIR)/cpuid_avx2.so scripts/peers/cpuid_avx2.c -ldl && \
	  ort_hold="--ort-preload $$(pwd)/$(PEERS_DIR)/cpuid_avx2.so"; \
	else \
	  ort_copy=$$(python3 scripts/peers/xgetbv_avx2.py "$$ort_python" $(PEERS_DIR)/ort-xgetbv-avx2 | tail -n 1) && \
	  $(CC) -O2 -shared -fPIC -o $(PEERS_DIR)/xgetbv_avx2.so scripts/peers/xgetbv_avx2.c -ldl && \
	  ort_hold="--ort-preload $$(pwd)/$(PEERS_DIR)/xgetbv_avx2.so --ort-pythonpath $$(pwd)/$$ort_copy"; \
	fi && \
	EMBER_ISA=avx2-novnni OPENBLAS_CORETYPE=Haswell python3 scripts/bench_peers.py --ember $(EMBER) --models models \
	  --llama-bin "$$llama_bin" --llama-files $(PEERS_DIR) --ort-python "$$ort_python" --ort-cache $(PEERS_DIR)/onnx $$ort_hold \
	  --rounds $(PEER_ROUNDS) --json $(PEERS_DIR)/figures-avx2.json

# Issue 15's token goal: Ember's next token against llama.cpp's on SmolLM2 re-quantized by llama-quantize to every
# GGUF type Ember runs (--pure: the type wherever the row length allows it) and to the common mixes, at teacher-forced
# positions of 25 prompts (scripts/teacher_forced_vs_llamacpp.py; a pick may differ only where llama.cpp's top two are
# within 0.15 nats), and per file the mean |Δgap|: how far the gap between llama.cpp's first two tokens moves on
# Ember's side, a continuous distance where the count thresholds a dozen events. About 20 minutes once llama.cpp is
# built; files in .build/peers/types/.
TOKEN_CHECK_TYPES ?= F16 BF16 Q8_0 Q5_0 Q5_1 Q4_0 Q4_1 Q2_K Q3_K Q4_K Q5_K Q6_K IQ4_NL IQ4_XS
TOKEN_CHECK_MIXES ?= Q3_K_M Q4_K_M Q5_K_M
check-llamacpp-tokens: build models
	@llama_bin=$$(bash scripts/peers/llama_cpp.sh $(PEERS_DIR) models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf | tail -n 1) && \
	mkdir -p $(PEERS_DIR)/types && files="" && \
	for type in $(TOKEN_CHECK_TYPES) $(TOKEN_CHECK_MIXES); do \
	  out=$(PEERS_DIR)/types/smollm2-135m-$$type.gguf; pure=$$(case " $(TOKEN_CHECK_MIXES) " in *" $$type "*) ;; *) echo --pure;; esac); \
	  [ -s $$out ] || "$$llama_bin/llama-quantize" $$pure $(PEERS_DIR)/smollm2-135m-F32.gguf $$out $$type >/dev/null 2>&1 \
	    || { echo "llama-quantize could not write $$out"; exit 1; }; \
	  files="$$files $$out"; \
	done && \
	candidate=$(EMBER) && \
	if [ "$(TOKEN_CHECK_CANDIDATE)" = llama-avx2 ]; then \
	  candidate=$$(LLAMA_CPP_ISA=avx2 bash scripts/peers/llama_cpp.sh $(PEERS_DIR) models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf | tail -n 1); \
	fi && \
	python3 scripts/teacher_forced_vs_llamacpp.py "$$llama_bin" "$$candidate" $$files

# The floor of that count: llama.cpp's AVX2-only build in Ember's place, against its native (AVX-512) build — how far
# llama.cpp's own rounding on another ISA moves its picks under the same rule. Only where the native build is not the
# AVX2 one.
check-llamacpp-tokens-floor:
	@if ! grep -qw avx512f /proc/cpuinfo; then \
	  echo "check-llamacpp-tokens-floor: this CPU has no AVX-512, so llama.cpp's native build is its AVX2 build: nothing to compare"; \
	else $(MAKE) --no-print-directory check-llamacpp-tokens TOKEN_CHECK_CANDIDATE=llama-avx2; fi

# The package-benchmark suites under Benchmarks/ (statistics, allocations).
bench-suite: deps
	$(SWIFT) package --allow-writing-to-package-directory benchmark

clean:
	rm -rf .build
