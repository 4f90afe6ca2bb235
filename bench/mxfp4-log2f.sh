#!/usr/bin/env bash
# MXFP4's exponent is floor(log2f(amax)): organ's libm::log2f (core is no_std) against the
# platform's (glibc's on Linux, which ggml calls) over every positive finite f32. Prints
# how many differ in the last bit and fails if any floor differs (docs/quantize.md).
# Usage: bench/mxfp4-log2f.sh
set -euo pipefail
cd "$(dirname "$0")/.."
echo "$(ldd --version 2>&1 | head -1)"
cargo test --release -q -p organ-core --lib -- --ignored --nocapture libm_log2f_floors_as_the_platforms_everywhere 2>&1 |
  grep -E "log2f:|test result"
