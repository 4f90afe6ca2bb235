#!/usr/bin/env bash
# Shows that a restructure changed no behaviour: runs the organ built at BASE (a git
# revision, default the last commit before issue 15's restructure) and the organ of this
# work tree on SmolLM2, and compares everything they write byte for byte:
#   inspect --json, measure --json/--csv/--html, dissect, assemble (whole and split),
#   graft (GGUF and organ directory), purify (fractal, spectral --only-if-improves, --json).
# Only hash fields may differ (issue 15, decision 6): keys named *sha256*/*blake3* in
# manifest.json, and organ.graft.*_sha256/_blake3 in a graft's metadata. Anything else
# that differs is printed and fails the script.
#   scripts/behaviour-unchanged.sh [BASE]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
BASE=${1:-960b5ae}
base_rev=$(git rev-parse --short=12 "$BASE^{commit}")
cache=${ORGAN_CACHE:-$HOME/.cache/organ}/behaviour
model=$(scripts/fetch-model.sh)
py=$(scripts/setup-oracle.sh)

# The base binary: built once per revision in a worktree of its own, then kept.
base_bin=$cache/organ-$base_rev
if [ ! -x "$base_bin" ]; then
  wt=$cache/wt-$base_rev
  rm -rf "$wt"; git worktree prune
  git worktree add -q --detach "$wt" "$base_rev"
  (cd "$wt" && CARGO_TARGET_DIR=$cache/target cargo build -q --release -p organ-cli)
  mkdir -p "$cache" && cp "$cache/target/release/organ" "$base_bin.tmp" && mv "$base_bin.tmp" "$base_bin"
  git worktree remove --force "$wt"
fi
cargo build -q --release -p organ-cli
head_bin=${CARGO_TARGET_DIR:-target}/release/organ

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run_all() { # BIN OUT: every command, every output under OUT
  local bin=$1 out=$2
  mkdir -p "$out"
  "$bin" inspect --json "$model" >"$out/inspect.json"
  "$bin" measure --no-cache --summary-only --json "$out/measure.json" --csv "$out/measure.csv" --html "$out/measure.html" "$model" >"$out/measure.txt"
  "$bin" dissect --out "$out/organs" "$model" >/dev/null
  "$bin" assemble --out "$out/assembled.gguf" "$out/organs" >/dev/null
  "$bin" assemble --split-max-size 40M --out "$out/split.gguf" "$out/organs" >/dev/null
  "$bin" purify --method fractal --layers 0-3 --type organ --out "$out/purified.gguf" --json "$out/purify.json" "$model" >/dev/null
  "$bin" purify --method spectral --layers 4 --only-if-improves --out "$out/purified-kept" --json "$out/purify-kept.json" "$out/organs" >/dev/null
  "$bin" graft --donor "$out/purified.gguf" --recipient "$model" --layers 1-2 --type organ --out "$out/graft.gguf" >/dev/null
  "$bin" graft --donor "$out/purified.gguf" --recipient "$out/organs" --name 'blk.3.*' --out "$out/graft-organs" >/dev/null
}
step "base organ ($base_rev)" run_all "$base_bin" "$work/base"
step "this work tree's organ" run_all "$head_bin" "$work/head"
# The HTML embeds the JSON; the text and JSON name the model by path, which is the same.
"$py" tests/oracle/same_outputs.py "$work/base" "$work/head"
