#!/usr/bin/env bash
# What reading SmolLM2 through the File API costs headless Chromium, without measuring
# anything: wall time and the machine's CPU time (median of RUNS) for several read sizes,
# two reads in flight as the app reads. On 2 cores this CPU is taken from the workers, so
# it bounds how close the browser can get to `organ measure`. Usage:
# bench/web-read-cost.sh [RUNS=7]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
RUNS="${1:-7}"
tools=$(scripts/setup-web.sh)
scripts/web.sh build >/dev/null 2>&1 || scripts/web.sh build
model=$(scripts/fetch-model.sh)
out=$(ORGAN_NODE_DIR="${tools##*:}/../.." node tests/web/read-cost.mjs dist "$model" "$RUNS" 1 4 16 64)
python3 - "$out" "$RUNS" <<'PY'
import json, sys
r, runs = json.loads(sys.argv[1]), sys.argv[2]
print(f"reading {r['bytes'] / 1e6:.0f} MB through Blob.slice().arrayBuffer(), 2 reads in flight, median of {runs}")
print(f"{'read size':>10} {'wall':>9} {'CPU (all processes)':>20}")
for row in r["rows"]:
    print(f"{row['read_mb']:>7} MB {row['wall_ms'] / 1000:>7.3f} s {row['cpu_ms'] / 1000:>12.3f} s")
PY
