#!/usr/bin/env bash
# organ merge's peak RSS on three models of about SIZE_GIB GiB each (default 1): a
# synthetic F16 base (bench/make-big-base.py) and two seeded finetunes of it with a delta
# on every layer tensor (tests/oracle/make-finetune.py), task arithmetic, F16 out. The
# target (issue 33): under 512 MiB for three 1 GiB models, memory bounded by a few
# tensors rather than the inputs. Prints the inputs' size, organ's time and peak RSS (GNU
# time), and the load average. Needs SIZE_GIB x 4 of free disk under $TMPDIR.
# Usage: bench/merge-memory.sh [SIZE_GIB=1]
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE="${1:-1}"
source scripts/lib.sh
PY="$(scripts/setup-oracle.sh)"
bench_setup merge-memory
work=$WORK
"$PY" bench/make-big-base.py "$work/base.gguf" "$SIZE" 0
"$PY" tests/oracle/make-finetune.py "$work/base.gguf" "$work/a.gguf" 1 0.02 blk.
"$PY" tests/oracle/make-finetune.py "$work/base.gguf" "$work/b.gguf" 2 0.02 blk.
inputs=$(du -cb "$work/base.gguf" "$work/a.gguf" "$work/b.gguf" | tail -1 | cut -f1)
s=$(date +%s.%N)
rss=$( { /usr/bin/time -f '%M' "$ORGAN" merge --method task_arithmetic --base "$work/base.gguf" \
  --model "$work/a.gguf:1" --model "$work/b.gguf:0.5" --out "$work/out.gguf" > /dev/null; } 2>&1 | tail -1)
e=$(date +%s.%N)
python3 - "$inputs" "$rss" "$s" "$e" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PY'
import sys
inputs, rss, s, e = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
print(f"organ merge of three inputs, {inputs / 2**30:.2f} GiB in all: {e - s:.1f} s, peak RSS {rss / 1024:.0f} MiB "
      f"(target < 512 MiB for three 1 GiB models); load average {sys.argv[5]}")
PY
