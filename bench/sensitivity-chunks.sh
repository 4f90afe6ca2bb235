#!/usr/bin/env bash
# How long a whole sensitivity sweep takes, and how well its ranking repeats (docs/
# sensitivity.md, How long it takes): every 2-D weight of SmolLM2's F16 (made from the
# Q4_1, so a dequantized Q4_1) requantized alone to Q2_0, at --ctx 128, --chunks K and
# --jobs JOBS, on tests/data/texts/sensitivity.txt and again on repeat.txt (disjoint), each
# text a sweep of its own, timed: wall seconds and CPU seconds (user + sys, organ and every
# llama-perplexity it ran; other jobs on the machine disturb them less than the wall), with
# the load average at each sweep's end. Then the repeat ρ (Spearman between the two texts'
# KL divergences over the tensors) at K chunks, the report's, and at every k < K from each
# evaluation's running KL divergence after chunk k (llama-perplexity's table, which
# --stats keeps): what a sweep of k chunks would have measured, to 5 decimals.
# Figures only; long (two sweeps). Usage: bench/sensitivity-chunks.sh [K=6] [MODEL.gguf] [JOBS=nproc]
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-6}"
MODEL="${2:-$(scripts/fetch-model.sh)}"
JOBS="${3:-$(nproc)}"
source scripts/lib.sh
bench_setup sensitivity-chunks
LLAMA="$(scripts/build-llama.sh)"
TEXT=tests/data/texts/sensitivity.txt
REPEAT=tests/data/texts/repeat.txt
F16="$WORK/smollm2-f16.gguf"
"$LLAMA/llama-quantize" --allow-requantize "$MODEL" "$F16" F16 >/dev/null 2>&1
# One cache for both texts: the donor is made once (by the first sweep, and timed there).
sens() { # NAME ARGS...: WORK/NAME.json, stderr's events in WORK/NAME.jsonl, times in WORK/NAME.time
  local name=$1; shift
  /usr/bin/time -f "%e %U %S" -o "$WORK/$name.time" \
    "$ORGAN" --progress jsonl sensitivity "$F16" --to q2_0 --ctx 128 --chunks "$N" --jobs "$JOBS" \
    --llama-cpp "$LLAMA" --cache "$WORK/cache" --json "$WORK/$name.json" --stats "$@" \
    >/dev/null 2>"$WORK/$name.jsonl"
  read -r wall user sys <"$WORK/$name.time"
  local n; n=$(grep -c '"evaluation_stats"' "$WORK/$name.jsonl" || true)
  echo "$name: $n evaluations of $N chunks, $JOBS jobs: wall $wall s, CPU $(python3 -c "print(round($user + $sys, 1))") s" \
    "(user $user, sys $sys); load average $(cut -d' ' -f1-3 /proc/loadavg)"
}
sens text --text "$TEXT"
# The second text alone is measured (the first's results are read back from the cache);
# its report holds both, and the repeat ρ.
sens repeat --text "$TEXT" --repeat-text "$REPEAT"
python3 - "$WORK" "$N" <<'EOF'
import json, sys
work, n = sys.argv[1], int(sys.argv[2])
sys.path.insert(0, "bench")
from validity import spearman  # one Spearman for the benches (ties at their mean rank)
report = json.load(open(f"{work}/repeat.json"))
rows = report["tensors"]
print(f"{len(rows)} tensors; repeat rho at {n} chunks (the report's): {report['repeat_rho']:+.3f}")
def by_chunk(name):
    out = {}
    for line in open(f"{work}/{name}.jsonl"):
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if e.get("event") == "evaluation_stats":
            out[e["tensor"]] = e.get("kld_by_chunk", [])
    return out
a, b = by_chunk("text"), by_chunk("repeat")
names = [r["name"] for r in rows]
missing = [t for t in names if len(a.get(t, [])) < n or len(b.get(t, [])) < n]
if missing:
    sys.exit(f"no running KL divergence for {len(missing)} tensors (e.g. {missing[0]}): measured before?")
# The last row is the report's mean to 5 decimals (a check that the rows are the figures).
worst = max(abs(a[r["name"]][n - 1][0] - r["kld"]["value"]) for r in rows)
print(f"row {n} vs the report's mean KLD: largest difference {worst:.6f}")
print("chunks  repeat rho  median of +-/KLD")
for k in range(1, n + 1):
    rho = spearman([a[t][k - 1][0] for t in names], [b[t][k - 1][0] for t in names])
    rel = sorted(a[t][k - 1][1] / a[t][k - 1][0] for t in names if a[t][k - 1][0] > 0)
    print(f"{k:6d}  {rho:+.3f}       {rel[len(rel) // 2]:.3f}")
EOF
