#!/usr/bin/env bash
# The sensitivity prediction (docs/predict.md) ranked against the measured truth of
# tests/data/sensitivity/ (SmolLM2 Q4_1, each of 77 weights alone at Q2_0): Spearman ρ of
# the weighted error, of R/Ĥ and of the calibrated prediction, overall and within each
# kind, for the data-free columns and for an importance matrix of
# tests/data/texts/calibration.txt (8 chunks of 128 tokens); and the calibrations refitted
# (the test fails when the code's constants are not this fit).
# Usage: bench/predict-vs-z2.sh   (needs the model and llama.cpp: scripts/test.sh installs them)
set -euo pipefail
cd "$(dirname "$0")/.."
CI=true cargo test --release -p organ-cli --test it -- --exact predict::predictions_rank_against_the_measured_truth \
  --nocapture 2>&1 | grep -E '^(data-free|imatrix)|test result|panicked'
