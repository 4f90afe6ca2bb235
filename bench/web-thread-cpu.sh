#!/usr/bin/env bash
# CPU time per Chromium thread while the app measures SmolLM2 (RUNS runs): how the 2
# cores are shared between the workers, the page's thread and the browser's file reading.
# Usage: bench/web-thread-cpu.sh [RUNS=5]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
RUNS="${1:-5}"
tools=$(scripts/setup-web.sh)
scripts/web.sh build >/dev/null 2>&1 || scripts/web.sh build
model=$(scripts/fetch-model.sh)
out=$(ORGAN_NODE_DIR="${tools##*:}/../.." node tests/web/thread-cpu.mjs dist "$model" "$RUNS")
python3 - "$out" <<'PY'
import json, sys
runs = json.loads(sys.argv[1])
groups = {
    "workers (DedicatedWorker)": lambda n: n.startswith("renderer DedicatedWorker"),
    "page's thread": lambda n: n == "renderer chromium",
    "renderer, other threads": lambda n: n.startswith("renderer ") and n not in ("renderer chromium",) and "DedicatedWorker" not in n,
    "browser process (file reading)": lambda n: n.startswith("browser "),
    "other processes": lambda n: not n.startswith(("renderer ", "browser ")),
}
print(f"{'run':>3} {'in page':>8}  " + "  ".join(f"{g:>{len(g)}}" for g in groups) + "  total CPU")
for i, r in enumerate(runs, 1):
    cells = [sum(ms for n, ms in r["cpu_ms"].items() if f(n)) for f in groups.values()]
    print(f"{i:>3} {r['in_page_ms'] / 1000:>6.3f} s  " + "  ".join(f"{c / 1000:>{len(g) - 2}.2f} s" for g, c in zip(groups, cells))
          + f"  {sum(cells) / 1000:.2f} s")
PY
