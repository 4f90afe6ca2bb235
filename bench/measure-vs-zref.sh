#!/usr/bin/env bash
# Wall time of `organ measure` against the reference `zref.py` (NumPy + gguf-py) on the
# same model in the same run; prints both and the ratio. Target: >= 20x on 2 cores.
# Usage: bench/measure-vs-zref.sh [MODEL.gguf] [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL="${1:-$(scripts/fetch-model.sh)}"
RUNS="${2:-5}"
PY="$(scripts/setup-oracle.sh)"
cargo build --release -q -p organ-cli
ORGAN="${CARGO_TARGET_DIR:-target}/release/organ"
ZREF=../shared/reference/zref.py
# Best of RUNS for each (page cache warm for both: one untimed run each first).
"$ORGAN" measure "$MODEL" --summary-only >/dev/null
"$PY" "$ZREF" "$MODEL" >/dev/null
best() { # best wall seconds of RUNS runs of "$@"
  local b=""
  for _ in $(seq "$RUNS"); do
    local s e
    s=$(date +%s.%N); "$@" >/dev/null 2>&1; e=$(date +%s.%N)
    b=$(python3 -c "import sys; t=$e-$s; b='$b'; print(t if not b else min(t, float(b)))")
  done
  echo "$b"
}
t_organ=$(best "$ORGAN" measure "$MODEL" --summary-only)
t_zref=$(best "$PY" "$ZREF" "$MODEL")
python3 - "$t_organ" "$t_zref" "$(nproc)" "$(basename "$MODEL")" <<'PY'
import sys
o, z, cores, name = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4]
print(f"model            {name}")
print(f"cores            {cores}")
print(f"organ measure    {o:.3f} s (best of runs)")
print(f"zref.py (numpy)  {z:.3f} s (best of runs)")
print(f"ratio            {z / o:.1f}x faster (target >= 20x)")
PY
