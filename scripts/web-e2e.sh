#!/usr/bin/env bash
# The browser app's end-to-end test in headless Chromium (tests/web/e2e.mjs): builds the
# app, the CLI and the test models, then drives the page. Screenshots and exports go to
# $CARGO_TARGET_DIR/web-e2e. With ORGAN_WEB_BENCH=N, times N runs instead (bench/web-vs-cli.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
tools=$(scripts/setup-web.sh)
scripts/web.sh build >/dev/null 2>&1 || scripts/web.sh build
cargo build --release -q -p organ-cli
model=$(scripts/fetch-model.sh)
out="${CARGO_TARGET_DIR:-target}/web-e2e"
mkdir -p "$out"
big=""
if [ -z "${ORGAN_WEB_BENCH:-}" ]; then
  big="$out/big-sparse.gguf"
  [ -f "$big" ] || python3 tests/web/make-big.py "$big" >/dev/null
fi
ORGAN_NODE_DIR="${tools##*:}/../.." node tests/web/e2e.mjs dist "$model" "${CARGO_TARGET_DIR:-target}/release/organ" "$out" $big
