#!/usr/bin/env bash
# The sensitivity prediction (docs/predict.md) ranked against the measured truth of
# tests/data/sensitivity/smollm2-f16-{q2_0,q4_0}.json (SmolLM2 F16, each of its 210 block
# weights alone at Q2_0 and at Q4_0, organ sensitivity on tests/data/texts/sensitivity.txt):
# Spearman ρ of the calibrated prediction, overall and within each kind, for the data-free
# columns and for an importance matrix of tests/data/texts/calibration.txt (16 chunks of
# 128 tokens); the calibrations refitted (the test fails when the code's constants are not
# this fit); and the data-free one out of sample, on the older Q4_1 study. Then the weaker
# predictor (the weighted error alone, one factor for every kind: what weights outside the
# residual model take) on every block weight of the same model, against the same truth.
# Usage: bench/predict-vs-truth.sh   (needs the model and llama.cpp: scripts/test.sh installs them)
set -euo pipefail
cd "$(dirname "$0")/.."
CI=true cargo test --release -p organ-cli --test it -- --exact predict::predictions_rank_against_the_measured_truth \
  predict::weighted_error_ranks_against_the_measured_truth --test-threads 1 \
  --nocapture 2>&1 | grep -E '^(data-free|imatrix)|test result|panicked'
