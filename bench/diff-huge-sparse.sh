#!/usr/bin/env bash
# organ diff on two synthetic >= 100 GiB sparse split MoE models (bench/make-sparse-model.py
# --seed 1 and --seed 2: every tensor and every expert differs within its first 64 blocks,
# so each byte comparison stops in its first MiB). Prints the models' size, bytes compared,
# bytes read, peak RSS and wall time; fails if the peak RSS reaches 256 MiB or if diff does
# not find every pair changed. Usage: bench/diff-huge-sparse.sh [TOTAL_GB=100]
set -euo pipefail
cd "$(dirname "$0")/.."
GB="${1:-100}"
source scripts/lib.sh
bench_setup diff-sparse
dir=$WORK
# The first shard of each (the whole list is read: `| head -n1` could close the pipe
# before the writer is done, a BrokenPipeError under pipefail).
a=$(python3 bench/make-sparse-model.py "$dir/s1" "$GB" 4 --seed 1)
a=${a%%$'\n'*}
b=$(python3 bench/make-sparse-model.py "$dir/s2" "$GB" 4 --seed 2)
b=${b%%$'\n'*}
size=$(du -cb --apparent-size "$dir"/s1-*.gguf | tail -n1 | cut -f1)
disk=$(du -c --block-size=1 "$dir"/*.gguf | tail -n1 | cut -f1)
s=$(date +%s.%N)
# --fail-on-change: status 1 is the expected answer (every pair differs), 2 an error.
status=0
"${CARGO_TARGET_DIR:-target}/release/organ" diff "$a" "$b" --stats --fail-on-change >"$dir/out" 2>"$dir/err" || status=$?
e=$(date +%s.%N)
if [ "$status" != 1 ]; then
  echo "organ diff exited $status on the sparse models (expected 1: changed):" >&2
  cat "$dir/out" "$dir/err" >&2
  exit 1
fi
counts=$(grep '^comparable' "$dir/out")
stats=$(grep '^stats:' "$dir/err")
compared=$(echo "$stats" | sed -E 's/.*bytes compared ([0-9]+).*/\1/')
read_bytes=$(echo "$stats" | sed -E 's/.*positioned reads ([0-9]+).*/\1/')
rss_kib=$(echo "$stats" | sed -E 's/.*peak RSS ([0-9]+) KiB.*/\1/')
python3 - "$size" "$disk" "$compared" "$read_bytes" "$rss_kib" "$s" "$e" "$counts" <<'PY'
import re, sys
size, disk, compared, read, rss, s, e = (float(x) for x in sys.argv[1:8])
counts = sys.argv[8]
comparable, identical = (int(re.search(rf"{k} (\d+)", counts).group(1)) for k in ("comparable", "identical"))
print(f"models (apparent size) 2 x {size / 2**30:.1f} GiB in 4 shards each ({disk / 2**20:.1f} MiB on disk: sparse)")
print(f"pairs                  {counts}")
print(f"bytes compared         {compared / 2**20:8.1f} MiB  ({compared / (2 * size) * 100:.2f}% of both models)")
print(f"bytes read             {read / 2**30:8.1f} GiB  ({read / (2 * size) * 100:.1f}% of both models)")
print(f"peak RSS               {rss / 1024:8.1f} MiB  (target < 256 MiB)")
print(f"wall                   {e - s:8.1f} s")
sys.exit(0 if rss < 256 * 1024 and comparable > 0 and identical == 0 else 1)
PY
