#!/usr/bin/env bash
# The browser's Quantize mode on a large model: a 2 GiB synthetic llama-shaped F16
# (bench/make-big-base.py: rows of 2048, so every K-quant applies; seeded normal values,
# not a model llama.cpp runs) quantized to Q4_K_M in headless Chromium, written through
# the File System Access API. Checks the file against organ quantize's bytes and that the
# page's memory (its JS heap's peak, sampled every 50 ms, plus the wasm memory) stays
# under 512 MiB; prints the page's time and the CLI's. About 5 minutes on 2 cores, 6 GB
# of disk under $CARGO_TARGET_DIR/web-quantize-big.
#   bench/web-quantize-big.sh [SIZE_GIB=2]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
size="${1:-2}"
tools=$(scripts/setup-web.sh)
scripts/web.sh build >/dev/null 2>&1 || scripts/web.sh build
cargo build --release -q -p organ-cli
out="${CARGO_TARGET_DIR:-target}/web-quantize-big"
mkdir -p "$out"
big="$out/big-f16-${size}g.gguf"
[ -f "$big" ] || { "$(scripts/setup-oracle.sh)" bench/make-big-base.py "$big.partial" "$size" && mv "$big.partial" "$big"; }
ORGAN_NODE_DIR="${tools##*:}/../.." node tests/web/e2e-quantize.mjs dist "${CARGO_TARGET_DIR:-target}/release/organ" \
  "$out" "$big" --big
