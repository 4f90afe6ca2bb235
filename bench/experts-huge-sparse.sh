#!/usr/bin/env bash
# organ measure --experts (per-expert θ, Z-measure §6) on a synthetic >= 100 GiB sparse split
# MoE model (bench/make-sparse-model.py --seed 1: 64 experts per tensor, each with a
# non-zero block within its first 64 blocks, so the duplicate search of every tensor stops
# at its first chunk). Prints the model size, the experts measured, the bytes organ read,
# its peak RSS and the wall time; fails if the peak RSS reaches 256 MiB or if any expert is
# missing from the report. Each expert is a 100 000-value sample of its own: the sampled
# blocks cover a third of an expert, so organ reads most of the model (in 1 MiB reads).
# Usage: bench/experts-huge-sparse.sh [TOTAL_GB=100] [MEASURE_FLAGS...]
set -euo pipefail
cd "$(dirname "$0")/.."
GB="${1:-100}"
shift || true
FLAGS=("$@")
source scripts/lib.sh
bench_setup experts-sparse
dir=$WORK
paths=$(python3 bench/make-sparse-model.py "$dir/moe" "$GB" 4 --seed 1)
first=${paths%%$'\n'*}
size=$(du -cb --apparent-size "$dir"/*.gguf | tail -n1 | cut -f1)
disk=$(du -c --block-size=1 "$dir"/*.gguf | tail -n1 | cut -f1)
s=$(date +%s.%N)
"${CARGO_TARGET_DIR:-target}/release/organ" measure "$first" --experts --no-cache --summary-only --stats \
  --json "$dir/report.json" "${FLAGS[@]}" >/dev/null 2>"$dir/err" || {
  echo "organ measure --experts failed on the sparse model:" >&2
  cat "$dir/err" >&2
  exit 1
}
e=$(date +%s.%N)
stats=$(grep '^stats:' "$dir/err")
read_bytes=$(echo "$stats" | sed -E 's/.*positioned reads ([0-9]+).*/\1/')
rss_kib=$(echo "$stats" | sed -E 's/.*peak RSS ([0-9]+) KiB.*/\1/')
python3 - "$size" "$disk" "$read_bytes" "$rss_kib" "$s" "$e" "$dir/report.json" "${FLAGS[*]}" <<'PY'
import json, sys
size, disk, read, rss, s, e = (float(x) for x in sys.argv[1:7])
report = json.load(open(sys.argv[7]))
tensors = [t for t in report["models"][0]["tensors"] if "_exps" in t["name"]]
want = sum(t["shape"][2] for t in tensors)
got = sum(len(t.get("experts", [])) for t in tensors)
dups = sum(1 for t in tensors for x in t.get("experts", []) if "duplicate_of" in x)
if sys.argv[8]:
    print(f"organ measure --experts {sys.argv[8]}")
print(f"model (apparent size)  {size / 2**30:8.1f} GiB in 4 shards ({disk / 2**20:.1f} MiB on disk: sparse)")
print(f"experts measured       {got:8d} of {want} in {len(tensors)} expert tensors ({dups} duplicates)")
print(f"bytes read             {read / 2**30:8.2f} GiB  ({read / size * 100:.1f}% of the model)")
print(f"peak RSS               {rss / 1024:8.1f} MiB  (target < 256 MiB)")
print(f"wall                   {e - s:8.1f} s")
sys.exit(0 if rss < 256 * 1024 and got == want and want > 0 else 1)
PY
