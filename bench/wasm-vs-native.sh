#!/usr/bin/env bash
# The core's compute in wasm against native, with no browser around it: every SmolLM2
# tensor sampled and measured on one thread, by the same core functions the browser's
# workers call, as wasm (+simd128, run by Node) and as a native binary; best of RUNS each.
# It separates the cost of wasm code from what the page adds (file reading, and sharing
# 2 cores with the page and Chromium). Usage: bench/wasm-vs-native.sh [RUNS=5]
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${1:-5}"
model=$(scripts/fetch-model.sh)
target="${CARGO_TARGET_DIR:-$PWD/target}/wasm-core-bench"
cd bench/wasm-core
RUSTFLAGS="-C target-feature=+simd128" cargo build -q --release --target wasm32-unknown-unknown --target-dir "$target"
cargo build -q --release --example native --target-dir "$target"
wasm=$(node run.mjs "$target/wasm32-unknown-unknown/release/organ_wasm_core_bench.wasm" "$model" "$RUNS")
native=$("$target/release/examples/native" "$model" "$RUNS")
python3 - "$wasm" "$native" "$RUNS" <<'PY'
import json, sys
w, n, runs = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
print(f"tensors measured        {n['tensors']} (wasm {w['tensors']})")
print(f"native, one thread      {n['best_s']:7.3f} s  (best of {runs})")
print(f"wasm in Node, one thread {w['best_s']:6.3f} s  (best of {runs}, +simd128)")
print(f"wasm / native           {w['best_s'] / n['best_s']:7.2f}x")
PY
