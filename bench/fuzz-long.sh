#!/usr/bin/env bash
# Long fuzzing, on demand (CI runs the core's targets 10 s each, unoptimized, in scripts/test.sh): every
# cargo-fuzz target, the core's (core/fuzz: parse, dequant, manifest) and the API's
# (native-cli/fuzz: api), for SECONDS each (default 600), from its seeds plus a kept corpus
# (DIR/corpus/TARGET, gitignored, so a later run resumes). Prints one line per target:
# runs, execs/s, corpus size, and whether it was clean; a crash leaves its input in
# DIR/artifacts/TARGET/ and makes the script exit 1.
#   Usage: bench/fuzz-long.sh [SECONDS=600] [TARGET...]
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
SECONDS_EACH=${1:-600}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(parse dequant manifest api)
ensure_cargo_fuzz || exit 1
status=0
summary=()
for t in "${targets[@]}"; do
  dir=core/fuzz
  [ "$t" = api ] && dir=native-cli/fuzz
  corpus=$dir/corpus/$t
  mkdir -p "$corpus"
  log=$(mktemp)
  t0=$SECONDS
  (cd "$dir" && cargo +nightly fuzz run "$t" "corpus/$t" "seeds/$t" -- \
    -max_total_time="$SECONDS_EACH" -max_len=65536 -print_final_stats=1) >"$log" 2>&1
  rc=$?
  runs=$(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}')
  speed=$(grep -E '^stat::average_exec_per_sec' "$log" | awk '{print $2}')
  if [ $rc -eq 0 ]; then verdict=clean; else verdict="FAILED (exit $rc)"; status=1; fi
  line=$(printf '%-9s %12s runs %8s exec/s %6s corpus files %5s s  %s' "$t" "${runs:-?}" "${speed:-?}" \
    "$(find "$corpus" -type f | wc -l)" "$((SECONDS - t0))" "$verdict")
  echo "$line"
  summary+=("$line")
  if [ $rc -ne 0 ]; then
    grep -E 'panicked|SUMMARY|ERROR|Test unit written' "$log" | head -20
  fi
  rm -f "$log"
done
echo "fuzz-long: ${SECONDS_EACH}s per target"
printf '  %s\n' "${summary[@]}"
exit $status
