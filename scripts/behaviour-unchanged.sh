#!/usr/bin/env bash
# Shows that a restructure changed no behaviour: runs the organ built at BASE (a git
# revision, default the last commit before issue 15's restructure) and the organ of this
# work tree on SmolLM2, and compares everything they write byte for byte:
#   inspect --json, measure --json/--csv/--html, dissect, assemble (whole and split),
#   graft (GGUF and organ directory), purify (fractal, spectral --only-if-improves, --json),
#   diff, check, moe, measure --experts, experts extract and prune, and the HTTP API's
#   answers (inspect; check and diff jobs' results).
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
head_bin=$(realpath "${CARGO_TARGET_DIR:-target}/release/organ")

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
  "$bin" diff --json "$out/diff.json" --csv "$out/diff.csv" --html "$out/diff.html" "$model" "$out/graft.gguf" >"$out/diff.txt"
  "$bin" check --json "$out/check.json" --exit-zero "$model" >"$out/check.txt"
  # Run where it writes: its report names the output as given, the same for both.
  (cd "$out" && "$bin" moe --base "$model" --expert "$model" --expert purified.gguf --out moe.gguf --json moe.json >/dev/null)
  "$bin" measure --no-cache --summary-only --experts --json "$out/experts.json" "$out/moe.gguf" >/dev/null
  "$bin" experts extract "$out/moe.gguf" --expert 1 --out "$out/extracted.gguf" >/dev/null
  "$bin" experts prune "$out/moe.gguf" --keep 0 --out "$out/pruned.gguf" >/dev/null
  api "$bin" "$out"
}
api() { # BIN OUT: the HTTP API's answers for inspect, check and diff of the same files
  local bin=$1 out=$2 root="$2/api-root" port line
  mkdir -p "$root" "$out/api"
  cp "$model" "$root/model.gguf" && cp "$out/graft.gguf" "$root/graft.gguf"
  # exec: the coprocess is the server itself, so the kill below stops it (without exec it
  # stopped only the subshell, and the server lived on holding the script's stdout).
  coproc SERVE { exec "$bin" serve --root "$root" --addr 127.0.0.1:0 --web "$root/no-web"; }
  read -r line <&"${SERVE[0]}"
  port=${line##*http://}; port=${port%% *}
  curl -sf "http://$port/api/inspect?path=model.gguf" >"$out/api/inspect.json"
  for req in 'check {"path":"model.gguf"}' 'diff {"a":"model.gguf","b":"graft.gguf"}'; do
    local op=${req%% *} body=${req#* } id
    id=$(curl -sf -X POST -H 'Content-Type: application/json' -d "$body" "http://$port/api/$op" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
    curl -sfN "http://$port/api/jobs/$id/events" >/dev/null
    curl -sf "http://$port/api/jobs/$id/result" >"$out/api/$op.json"
  done
  kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null || true
  rm -rf "$root"
}
step "base organ ($base_rev)" run_all "$base_bin" "$work/base"
step "this work tree's organ" run_all "$head_bin" "$work/head"
# The HTML embeds the JSON; the text and JSON name the model by path, which is the same.
"$py" tests/oracle/same_outputs.py "$work/base" "$work/head"
