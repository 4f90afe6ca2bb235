#!/usr/bin/env bash
# organ measure on a synthetic >= 100 GB sparse split MoE model (bench/make-sparse-model.py):
# prints the model size, the bytes organ read, its peak RSS and the wall time, and fails
# if the peak RSS reaches 256 MiB. Further arguments go to `organ measure` (`--sigma`).
# Usage: bench/huge-sparse.sh [TOTAL_GB=100] [MEASURE_FLAGS...]
set -euo pipefail
cd "$(dirname "$0")/.."
GB="${1:-100}"
shift || true
FLAGS=("$@")
source scripts/lib.sh
bench_setup sparse
dir=$WORK
paths=$(python3 bench/make-sparse-model.py "$dir/moe" "$GB" 4)
first=${paths%%$'\n'*}
size=$(du -cb --apparent-size "$dir"/*.gguf | tail -n1 | cut -f1)
disk=$(du -c --block-size=1 "$dir"/*.gguf | tail -n1 | cut -f1)
s=$(date +%s.%N)
out=$("${CARGO_TARGET_DIR:-target}/release/organ" measure "$first" --summary-only --stats "${FLAGS[@]}" 2>&1 >/dev/null) || {
  echo "organ measure failed on the sparse model: $out" >&2
  exit 1
}
stats=$(echo "$out" | grep '^stats:')
e=$(date +%s.%N)
read_bytes=$(echo "$stats" | sed -E 's/.*positioned reads ([0-9]+).*/\1/')
rss_kib=$(echo "$stats" | sed -E 's/.*peak RSS ([0-9]+) KiB.*/\1/')
python3 - "$size" "$disk" "$read_bytes" "$rss_kib" "$s" "$e" "${FLAGS[*]}" <<'PY'
import sys
size, disk, read, rss, s, e = (float(x) for x in sys.argv[1:7])
if sys.argv[7]:
    print(f"organ measure          {sys.argv[7]}")
print(f"model (apparent size)  {size / 2**30:8.1f} GiB in 4 shards ({disk / 2**10:.0f} KiB on disk: sparse)")
print(f"bytes read             {read / 2**20:8.1f} MiB  ({read / size * 100:.3f}% of the model)")
print(f"peak RSS               {rss / 1024:8.1f} MiB  (target < 256 MiB)")
print(f"wall                   {e - s:8.1f} s")
sys.exit(0 if rss < 256 * 1024 else 1)
PY
