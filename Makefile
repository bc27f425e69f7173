# Ember — the two commands are `make demo` (the main job) and `make test`.
# Every target installs what it needs first; nothing is installed by hand.

SWIFT        ?= swift
CONFIG       ?= release
BUILD_FLAGS  := -c $(CONFIG)
BIN          := .build/$(CONFIG)
EMBER        := $(BIN)/ember

# Debian packages the build and the model fetcher need. `deps` installs only
# the ones that are missing (apt-get update first), so a second run is a no-op.
APT_PACKAGES := libopenblas-dev liblapacke-dev pkg-config zlib1g-dev python3-pip
SUDO         := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all deps build test test-arm64 demo models bench bench-suite clean

all: build

deps:
	@missing=""; \
	for p in $(APT_PACKAGES); do \
	  if [ "$$p" = python3-pip ] && python3 -m pip --version >/dev/null 2>&1; then continue; fi; \
	  dpkg-query -W -f='$${Status}' "$$p" 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "deps: installing$$missing"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	else \
	  echo "deps: all present ($(APT_PACKAGES))"; \
	fi

build: deps
	$(SWIFT) build $(BUILD_FLAGS) --product ember

# Kernel tests run in release: C kernels at -O0 are too slow to test well.
# On x86 the arm64 NEON kernels are checked too, cross-compiled and run under qemu.
test: deps test-arm64
	$(SWIFT) test -c release

# The NEON kernels against the scalar oracle, from plain C, under qemu-aarch64.
ARM64_PACKAGES := gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user
ARM64_CHECK    := .build/kernel_check_arm64
test-arm64:
	@if [ "$$(uname -m)" = aarch64 ]; then echo "test-arm64: native arm64, the Swift tests run NEON"; exit 0; fi; \
	missing=""; \
	for p in $(ARM64_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' "$$p" 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "test-arm64: installing$$missing"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi; \
	mkdir -p .build && \
	aarch64-linux-gnu-gcc -O2 -std=c11 -Wall -ICKernels/include -ICKernels -o $(ARM64_CHECK) \
	  Tests/CrossCheck/kernel_check.c $$(ls CKernels/*.c) -lm && \
	for isa in neon scalar; do \
	  out=$$(qemu-aarch64 -L /usr/aarch64-linux-gnu $(ARM64_CHECK) $$isa) || { echo "$$out"; exit 1; }; \
	  echo "arm64 $$isa kernels vs the oracle: $$(echo "$$out" | tail -n 1 | sed 's/ passed, / checks passed, /; s/ failed/ checks failed/')"; \
	done

models: build
	$(EMBER) fetch --all

demo: build models
	$(EMBER) info
	$(EMBER) bench blas --quick
	$(EMBER) bench kernels --quick

bench: build
	$(EMBER) bench blas
	$(EMBER) bench kernels

# The package-benchmark suites under Benchmarks/ (statistics, allocations).
bench-suite: deps
	$(SWIFT) package --allow-writing-to-package-directory benchmark

clean:
	rm -rf .build
