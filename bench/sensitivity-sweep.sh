#!/usr/bin/env bash
# The disk a sensitivity sweep takes (docs/sensitivity.md, Disk): every 2-D weight of
# SmolLM2 requantized alone to Q4_0 and scored on tests/data/perplexity.txt (--ctx 128),
# with --stats: the sweep's time, what staging the model wrote once, and the bytes each
# evaluation wrote (its changed tensor's shard, the rest linked). Then layer 0's seven
# weights again with --keep-models, which writes each changed model whole (a copy of the
# model, as every evaluation did before the staging): its bytes per evaluation, and its
# figures, which must equal the sweep's to the last digit. The donor is made once, by the
# sweep, and lent to the second run. Figures only.
# Usage: bench/sensitivity-sweep.sh [MODEL.gguf] [JOBS=nproc] [CHUNKS=2]
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL="${1:-$(scripts/fetch-model.sh)}"
JOBS="${2:-$(nproc)}"
CHUNKS="${3:-2}"
source scripts/lib.sh
bench_setup sensitivity-sweep
LLAMA="$(scripts/build-llama.sh)"
sens() { # CACHE NAME ARGS...: the report in WORK/NAME.json, stderr's events in WORK/NAME.jsonl
  local cache=$1 name=$2; shift 2
  "$ORGAN" --progress jsonl sensitivity "$MODEL" --text tests/data/perplexity.txt --ctx 128 --chunks "$CHUNKS" \
    --jobs "$JOBS" --llama-cpp "$LLAMA" --to q4_0 --cache "$cache" --json "$WORK/$name.json" --stats "$@" \
    >/dev/null 2>"$WORK/$name.jsonl"
}
t0=$SECONDS
sens "$WORK/cache-sweep" sweep
t1=$SECONDS
# The same donor (by hard link), a new cache: nothing measured yet.
mkdir -p "$WORK/cache-whole/sensitivity"
cp -rl "$WORK/cache-sweep/sensitivity/"* "$WORK/cache-whole/sensitivity/"
find "$WORK/cache-whole" -mindepth 3 -maxdepth 3 -type d -exec rm -rf {} +
mkdir -p "$WORK/kept"
sens "$WORK/cache-whole" whole --layers 0 --keep-models "$WORK/kept"
t2=$SECONDS
python3 - "$WORK" "$((t1 - t0))" "$((t2 - t1))" "$(stat -c %s "$MODEL")" <<'EOF'
import json, statistics, sys
work, t_sweep, t_whole, model_bytes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def events(name):
    out = []
    for line in open(f"{work}/{name}.jsonl"):
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out
def summary(name, seconds):
    ev = events(name)
    per = [e for e in ev if e.get("event") == "evaluation_stats"]
    end = next(e for e in ev if e.get("event") == "sensitivity_stats")
    written = [e["bytes_written"] for e in per]
    over = [e["bytes_written"] - e["changed_bytes"] for e in per]
    staged = f"staging wrote {end['staged_bytes']} bytes once" if end["staged_bytes"] else "nothing staged (--keep-models)"
    print(f"{name}: {len(per)} evaluations in {seconds} s; {staged}"
          f"{', shards linked by ' + end['linked'] if end['linked'] else ''}")
    print(f"  bytes written per evaluation: median {statistics.median(written):.0f}, max {max(written)}, "
          f"total {sum(written)}; beyond the changed tensor's bytes: max {max(over)}")
    return {e["tensor"]: e for e in per}
print(f"model: {model_bytes} bytes")
summary("sweep", t_sweep)
summary("whole", t_whole)
sweep = {r["name"]: r for r in json.load(open(f"{work}/sweep.json"))["tensors"]}
whole = json.load(open(f"{work}/whole.json"))["tensors"]
same = sum(sweep[r["name"]] == r for r in whole)
print(f"figures of the {len(whole)} tensors measured both ways: {same} equal (--keep-models vs staged)")
sys.exit(0 if same == len(whole) else 1)
EOF
