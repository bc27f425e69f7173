#!/usr/bin/env bash
# Builds the newest llama.cpp we can reach — the copy vendored in the llama-cpp-python source package on PyPI —
# into DIR (once; later runs reuse it), and writes the SmolLM2 files it is compared on beside it, re-quantized by its
# own llama-quantize from the Q4_1 file Ember ships with: F32, F16, Q8_0, Q4_0 and Q4_K_M. llama-server is built too, for
# the token checks (scripts/greedy_vs_llamacpp.py, scripts/teacher_forced_vs_llamacpp.py).
# Usage: scripts/peers/llama_cpp.sh DIR SMOLLM2_Q4_1.gguf     Prints the folder of the binaries on its last line.
# LLAMA_CPP_ISA=avx2 builds a second copy (build-avx2/) for the AVX2 + FMA machine kind, without AVX-512 or VNNI
# of either width: on an AVX-512 machine it runs the code a Zen 3 machine would, to compare with Ember's
# EMBER_ISA=avx2-novnni path ISA for ISA.
set -euo pipefail
dir=$1; model=$2
version=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
mkdir -p "$dir"; dir=$(cd "$dir" && pwd)
src="$dir/llama_cpp_python-$version/vendor/llama.cpp"
if [ ! -d "$src" ]; then
  python3 -m pip download --no-deps --no-binary llama-cpp-python -q -d "$dir" "llama-cpp-python==$version" >&2
  tar -xzf "$dir/llama_cpp_python-$version.tar.gz" -C "$dir"
fi
if ! command -v cmake >/dev/null; then
  sudo=$([ "$(id -u)" = 0 ] || echo sudo)
  $sudo apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends cmake >&2
fi
case "${LLAMA_CPP_ISA:-native}" in
  native) build="$src/build"; isa_flags=(-DGGML_NATIVE=ON) ;;
  avx2) build="$src/build-avx2"
        isa_flags=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
                   -DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_BF16=OFF) ;;
  *) echo "LLAMA_CPP_ISA=${LLAMA_CPP_ISA} is not a build this script makes: use native (the default) or avx2" >&2; exit 2 ;;
esac
bin="$build/bin"
if [ ! -x "$bin/llama-bench" ] || [ ! -x "$bin/llama-quantize" ] || [ ! -x "$bin/llama-server" ]; then
  echo "building llama.cpp $version's vendored copy, ${LLAMA_CPP_ISA:-native} (about 10 minutes on 2 cores)" >&2
  cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release "${isa_flags[@]}" -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF >&2
  cmake --build "$build" -j "$(nproc)" --target llama-bench llama-quantize llama-server >&2
fi
for type in F32 F16 Q8_0 Q4_0 Q4_K_M; do
  out="$dir/smollm2-135m-$type.gguf"
  [ -s "$out" ] || "$bin/llama-quantize" --allow-requantize "$model" "$out" "$type" >/dev/null 2>&1 \
    || { echo "llama-quantize could not write $out" >&2; exit 1; }
done
# A native build compiles llama.cpp's AMX kernels where the CPU has AMX; on an Intel Xeon (Emerald Rapids, KVM guest)
# those died with SIGILL on the Q8_0 file (`tilezero` before any tile configuration). There the comparison uses a
# second build with AMX left out — llama.cpp's AVX-512 VNNI kernels, the best of its code that runs — and says so.
if [ "${LLAMA_CPP_ISA:-native}" = native ] && ! "$bin/llama-bench" -m "$dir/smollm2-135m-Q8_0.gguf" -p 8 -n 1 -r 1 >/dev/null 2>&1; then
  build="$src/build-noamx"; bin="$build/bin"
  echo "llama.cpp's native build failed on smollm2-135m-Q8_0.gguf here (its AMX kernels fault on some machines):" \
       "using a build without AMX, $bin" >&2
  if [ ! -x "$bin/llama-bench" ] || [ ! -x "$bin/llama-server" ]; then
    no_amx="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
    cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF \
          -DGGML_AMX_BF16=OFF -DCMAKE_C_FLAGS="$no_amx" -DCMAKE_CXX_FLAGS="$no_amx" -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
          -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF >&2
    cmake --build "$build" -j "$(nproc)" --target llama-bench llama-quantize llama-server >&2
  fi
  "$bin/llama-bench" -m "$dir/smollm2-135m-Q8_0.gguf" -p 8 -n 1 -r 1 >/dev/null \
    || { echo "llama.cpp without AMX fails on smollm2-135m-Q8_0.gguf too: see $bin/llama-bench's error" >&2; exit 1; }
fi
echo "$bin"
