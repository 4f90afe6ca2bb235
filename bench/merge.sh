#!/usr/bin/env bash
# organ merge against the NumPy oracle (tests/oracle/merge_ref.py --time) on the same
# inputs, in the same run: SmolLM2 requantized to F16 and two seeded finetunes of it with
# a delta on every layer tensor (tests/oracle/make-finetune.py), task arithmetic with
# weights 1 and 0.5, F16 out (organ writes its file; the oracle only computes each tensor,
# reading and dequantizing included). Page cache warm. Prints min and median seconds of
# RUNS runs each, their ratio, organ's peak RSS (GNU time), and the load average.
# Target: organ >= 3x the oracle's speed.
# Usage: bench/merge.sh [MODEL.gguf] [RUNS=3]
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL="${1:-$(scripts/fetch-model.sh)}"
RUNS="${2:-3}"
source scripts/lib.sh
bin="$(scripts/build-llama.sh)"
PY="$(scripts/setup-oracle.sh)"
bench_setup merge
work=$WORK
"$bin/llama-quantize" --allow-requantize "$MODEL" "$work/base.gguf" F16 > /dev/null 2>&1
"$PY" tests/oracle/make-finetune.py "$work/base.gguf" "$work/a.gguf" 1 0.02 blk.
"$PY" tests/oracle/make-finetune.py "$work/base.gguf" "$work/b.gguf" 2 0.02 blk.
cat "$work/base.gguf" "$work/a.gguf" "$work/b.gguf" > /dev/null
cat > "$work/checks.json" <<JSON
[{"method": "task_arithmetic", "base": "$work/base.gguf",
  "models": [{"path": "$work/a.gguf", "weight": 1.0, "density": 1.0},
             {"path": "$work/b.gguf", "weight": 0.5, "density": 1.0}],
  "normalize": false, "rescale": false, "lambda": 1.0, "t": 0.0, "seed": 0}]
JSON
organ_args=(merge --method task_arithmetic --base "$work/base.gguf" --model "$work/a.gguf:1" --model "$work/b.gguf:0.5" --out "$work/out.gguf")
t_organ=""
for _ in $(seq "$RUNS"); do
  rm -f "$work/out.gguf"
  s=$(date +%s.%N); "$ORGAN" "${organ_args[@]}" > /dev/null; e=$(date +%s.%N)
  t_organ="$t_organ $(python3 -c "print($e - $s)")"
done
rm -f "$work/out.gguf"
rss=$( { /usr/bin/time -f '%M' "$ORGAN" "${organ_args[@]}" > /dev/null; } 2>&1 | tail -1)
rm -f "$work/out.gguf"
t_ref=""
for _ in $(seq "$RUNS"); do
  "$PY" tests/oracle/merge_ref.py --time "$work/checks.json" "$work/ref.json"
  t_ref="$t_ref $(python3 -c "import json; print(json.load(open('$work/ref.json'))[0]['seconds'])")"
done
python3 - "$t_ref" "$t_organ" "$rss" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PY'
import statistics, sys
ref, organ = ([float(x) for x in a.split()] for a in sys.argv[1:3])
for name, t in (("merge_ref.py", ref), ("organ merge", organ)):
    print(f"{name:<13} min {min(t):.3f} s  median {statistics.median(t):.3f} s  ({len(t)} runs)")
ratio = statistics.median(ref) / statistics.median(organ)
print(f"organ is {ratio:.2f}x the oracle's speed (medians; target >= 3x); peak RSS {int(sys.argv[3]) / 1024:.0f} MiB; load average {sys.argv[4]}")
PY
