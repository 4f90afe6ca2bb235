#!/usr/bin/env bash
# Browser vs native: wall time to measure SmolLM2 in the app (headless Chromium, worker
# pool, from file chosen to report done, best of N) over `organ measure`'s (best of N), in
# the same run. Target: <= 1.5x. Usage: bench/web-vs-cli.sh [N=3]
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-3}"
model=$(scripts/fetch-model.sh)
web=$(ORGAN_WEB_BENCH="$N" scripts/web-e2e.sh 2>/dev/null | tail -n1)
organ="${CARGO_TARGET_DIR:-target}/release/organ"
python3 - "$web" "$organ" "$model" "$N" <<'PY'
import json, subprocess, sys, time
web, organ, model, n = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
cli = []
for _ in range(n):
    t = time.perf_counter()
    subprocess.run([organ, "measure", model, "--summary-only"], check=True, capture_output=True)
    cli.append(time.perf_counter() - t)
page = min(r["in_page_ms"] for r in web["runs"]) / 1000
wall = min(r["wall_ms"] for r in web["runs"]) / 1000
best = min(cli)
print(f"organ measure (native, 2 threads)   {best:7.3f} s  (best of {n})")
print(f"browser, in page ({web['threads']} worker threads) {page:7.3f} s  (file chosen -> report built, best of {n})")
print(f"browser, as the test driver saw it  {wall:7.3f} s  (includes rendering the report)")
print(f"browser / native                    {page / best:7.2f}x  (target <= 1.5x)")
PY
