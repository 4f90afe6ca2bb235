#!/usr/bin/env bash
# The browser app's end-to-end test in headless Chromium (tests/web/e2e.mjs): builds the
# app, the CLI and the test models, then drives the page. Screenshots and exports go to
# $CARGO_TARGET_DIR/web-e2e. With ORGAN_WEB_BENCH=N, times N runs instead (bench/web-vs-cli.sh).
# Compare mode runs on two pairs: SmolLM2 against a graft of its Q8_0 requantization's
# feed-forward tensors in layers 5-20, written as a split model of two shards
# (llama-quantize, then organ graft: different types, many identical tensors, B a split
# set), and two small synthetic files with every other case (tests/web/make-pair.py).
# A third pair (issue 50): SmolLM2 against a copy organ layers --drop 1,2 cut and organ meta
# edited (a key removed, one changed), whose blocks line up by organ.layers.dropped.
# All are built once and kept in the output directory. ORGAN_WEB_E2E=compare runs compare
# mode only, on the synthetic pair and the cut one (no llama.cpp, no oracle venv). Check mode runs on SmolLM2 and on
# broken copies of a small llama (tests/oracle/make-family-models.py, with the oracle venv):
# a NaN block scale, a copied layer.
# Then tests/web/e2e-experts-url.mjs: per-expert θ on a small MoE (tests/web/make-moe.py)
# and models at URLs, served by Debian's nginx (scripts/setup-nginx.sh) with and without
# CORS headers. ORGAN_WEB_E2E=experts-url runs only that part (and builds nothing else).
# Then tests/web/e2e-adapter.mjs: a LoRA adapter of SmolLM2 (tests/oracle/make-lora.py,
# rank 8 on attn_q, attn_k and ffn_up of layers 0 and 1), alone and with its base, and
# one with half a pair; ORGAN_WEB_E2E=adapter runs only that part.
# Then tests/web/e2e-inspect.mjs: inspect mode on SmolLM2 (memory against organ inspect
# --memory, the metadata editor's download against organ meta's output, bad edits), the
# chimera's shards and the big sparse file when built; ORGAN_WEB_E2E=inspect runs only that.
# Then tests/web/e2e-quantize.mjs: quantize mode on SmolLM2's F16 requant (made by organ
# quantize), the files against organ quantize's; ORGAN_WEB_E2E=quantize runs only that.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
tools=$(scripts/setup-web.sh)
scripts/web.sh build >/dev/null 2>&1 || scripts/web.sh build
cargo build --release -q -p organ-cli
model=$(scripts/fetch-model.sh)
out="${CARGO_TARGET_DIR:-target}/web-e2e"
mkdir -p "$out"
organ="${CARGO_TARGET_DIR:-target}/release/organ"
extra=()
only="${ORGAN_WEB_E2E:-}"
# SmolLM2 cut by organ layers and edited by organ meta (issue 50).
cut="$out/smollm2-cut-1-2-edited.gguf"
if [ ! -f "$cut" ]; then
  rm -f "$out/smollm2-cut-1-2.gguf" "$cut.partial.gguf"
  "$organ" layers "$model" --drop 1,2 --out "$out/smollm2-cut-1-2.gguf" >/dev/null
  "$organ" meta "$out/smollm2-cut-1-2.gguf" --rm general.license --set general.name=cut \
    --out "$cut.partial.gguf" >/dev/null
  mv "$cut.partial.gguf" "$cut"
  rm -f "$out/smollm2-cut-1-2.gguf"
fi
if [ "$only" = compare ]; then
  [ -f "$out/pair-b.gguf" ] || python3 tests/web/make-pair.py "$out/pair-a.gguf" "$out/pair-b.gguf"
  extra=(--pair "$out/pair-a.gguf" "$out/pair-b.gguf" --pair "$model" "$cut")
fi
if [ -z "${ORGAN_WEB_BENCH:-}" ] && [ -z "$only" ]; then
  big="$out/big-sparse.gguf"
  [ -f "$big" ] || python3 tests/web/make-big.py "$big" >/dev/null
  chimera="$out/smollm2-chimera"
  if [ ! -d "$chimera" ]; then
    llama=$(scripts/build-llama.sh)
    rm -rf "$out/smollm2-q8_0.gguf" "$chimera.partial"
    mkdir "$chimera.partial"
    "$llama/llama-quantize" --allow-requantize "$model" "$out/smollm2-q8_0.gguf" Q8_0 >/dev/null 2>&1
    "$organ" graft --donor "$out/smollm2-q8_0.gguf" --recipient "$model" --layers 5-20 --type organ \
      --split-max-size 60M --out "$chimera.partial/chimera.gguf" >/dev/null
    mv "$chimera.partial" "$chimera"
    rm -f "$out/smollm2-q8_0.gguf"
  fi
  [ -f "$out/pair-b.gguf" ] || python3 tests/web/make-pair.py "$out/pair-a.gguf" "$out/pair-b.gguf"
  families="$out/families"
  if [ ! -f "$families/families.json" ]; then
    rm -rf "$families.partial"
    "$(scripts/setup-oracle.sh)" tests/oracle/make-family-models.py "$model" "$families.partial" >/dev/null
    mv "$families.partial" "$families"
  fi
  shards=$(ls "$chimera"/chimera-*-of-*.gguf | paste -sd, -)
  extra=("$big" --pair "$model" "$shards" --pair "$out/pair-a.gguf" "$out/pair-b.gguf" --pair "$model" "$cut"
    --check "$model" --check "$families/llama-nan-q4_1.gguf" --check "$families/llama-dup-layer.gguf")
fi
status=0
if [ -z "$only" ] || [ "$only" = compare ]; then
  ORGAN_NODE_DIR="${tools##*:}/../.." node tests/web/e2e.mjs dist "$model" "$organ" "$out" "${extra[@]}" || status=$?
fi
if [ -z "${ORGAN_WEB_BENCH:-}" ] && { [ -z "$only" ] || [ "$only" = inspect ]; }; then
  inspect=()
  split=$(ls "$out"/smollm2-chimera/chimera-*-of-*.gguf 2>/dev/null | paste -sd, - || true)
  [ -z "$split" ] || inspect+=(--split "$split")
  [ ! -f "$out/big-sparse.gguf" ] || inspect+=(--big "$out/big-sparse.gguf")
  ORGAN_NODE_DIR="${tools##*:}/../.." node tests/web/e2e-inspect.mjs dist "$organ" "$out" "$model" "${inspect[@]}" ||
    status=$?
fi
if [ -z "${ORGAN_WEB_BENCH:-}" ] && { [ -z "$only" ] || [ "$only" = quantize ]; }; then
  # SmolLM2's F16 requant (a dequantized Q4_1), made by organ itself.
  f16="$out/smollm2-f16.gguf"
  [ -f "$f16" ] || { "$organ" quantize --allow-requantize "$model" "$f16.partial" F16 >/dev/null && mv "$f16.partial" "$f16"; }
  # Its importance matrix, by llama-imatrix (4 chunks of 128 tokens of the calibration text).
  im="$out/smollm2-f16-imatrix.gguf"
  [ -f "$im" ] || { "$(scripts/build-llama.sh)/llama-imatrix" -m "$f16" -f tests/data/texts/calibration.txt -o "$im.partial.gguf" \
    -c 128 --chunks 4 --no-ppl >/dev/null 2>&1 && mv "$im.partial.gguf" "$im"; }
  ORGAN_NODE_DIR="${tools##*:}/../.." node tests/web/e2e-quantize.mjs dist "$organ" "$out" "$f16" "$im" || status=$?
fi
if [ -z "${ORGAN_WEB_BENCH:-}" ] && { [ -z "$only" ] || [ "$only" = adapter ]; }; then
  lora="$out/smollm2-lora-r8.gguf"
  half="$out/smollm2-lora-half.gguf"
  if [ ! -f "$half" ]; then
    py=$(scripts/setup-oracle.sh)
    lora_args=(--rank 8 --layers 0,1 --targets attn_q,attn_k,ffn_up --seed 31)
    "$py" tests/oracle/make-lora.py "$model" "$lora.partial" "${lora_args[@]}" >/dev/null && mv "$lora.partial" "$lora"
    "$py" tests/oracle/make-lora.py "$model" "$half.partial" "${lora_args[@]}" --break half >/dev/null &&
      mv "$half.partial" "$half"
  fi
  ORGAN_NODE_DIR="${tools##*:}/../.." node tests/web/e2e-adapter.mjs dist "$organ" "$out" "$lora" "$model" "$half" ||
    status=$?
fi
if [ -z "${ORGAN_WEB_BENCH:-}" ] && [ "$only" != adapter ] && [ "$only" != inspect ] && [ "$only" != quantize ] &&
  [ "$only" != compare ]; then
  moe="$out/browser-moe.gguf"
  [ -f "$moe" ] || { python3 tests/web/make-moe.py "$moe.partial" && mv "$moe.partial" "$moe"; }
  # A split model at a URL: the chimera's shards, when built above (or by an earlier run).
  split=$(ls "$out"/smollm2-chimera/chimera-*-of-*.gguf 2>/dev/null | paste -sd, - || true)
  ORGAN_NODE_DIR="${tools##*:}/../.." node tests/web/e2e-experts-url.mjs dist "$organ" "$out" "$moe" "$model" \
    "$(scripts/setup-nginx.sh)" $split || status=$?
fi
exit "$status"
