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
source scripts/lib.sh
bench_setup predict-vs-truth
LLAMA="$(scripts/build-llama.sh)"
F16="$WORK/smollm2-f16.gguf"
"$LLAMA/llama-quantize" --allow-requantize "$(scripts/fetch-model.sh)" "$F16" F16 >/dev/null 2>&1
"$LLAMA/llama-imatrix" -m "$F16" -f tests/data/texts/calibration.txt -o "$WORK/cal.imatrix.gguf" -c 128 \
  --chunks 16 -t 1 --no-ppl >/dev/null 2>&1
for ty in q2_0 q4_0; do
  "$ORGAN" sensitivity "$F16" --to "$ty" --predict --json "$WORK/data-free-$ty.json" >/dev/null
  "$ORGAN" sensitivity "$F16" --to "$ty" --predict --imatrix "$WORK/cal.imatrix.gguf" --json "$WORK/imatrix-$ty.json" >/dev/null
done
python3 - "$WORK" <<'PY'
import json, sys
sys.path.insert(0, "bench")
from validity import spearman
work = sys.argv[1]
q2 = json.load(open("tests/data/sensitivity/smollm2-f16-q2_0.json"))["tensors"]
q4 = {t["name"]: t["kld"]["value"] for t in json.load(open("tests/data/sensitivity/smollm2-f16-q4_0.json"))["tensors"]}
kind = {t["name"]: t["kind"] for t in q2}
names = [t["name"] for t in q2 if t["name"] in q4 and t["kind"] != "token_embd"]
q2_repeat = {t["name"]: t["repeat_kld"]["value"] for t in q2}
def score(pred, truth):
    kinds = sorted({kind[n] for n in names})
    within = [spearman([pred[n] for n in names if kind[n] == k], [truth[n] for n in names if kind[n] == k]) for k in kinds]
    return f"{spearman([pred[n] for n in names], [truth[n] for n in names]):+.3f} overall, {sum(within) / len(within):+.3f} within kind"
print(f"measured scale ({len(names)} block weights):")
print(f"  Q2_0 measured alone (repeat.txt) as Q4_0's ranking (sensitivity.txt): {score(q2_repeat, q4)}")
for source in ("data-free", "imatrix"):
    p = {ty: json.load(open(f"{work}/{source}-{ty}.json")) for ty in ("q2_0", "q4_0")}
    b = p["q2_0"]["calibration"]["exponent"]
    e = {ty: {t["name"]: t["weighted_error"] for t in p[ty]["tensors"]} for ty in p}
    to_q4 = {n: q2_repeat[n] * (e["q4_0"][n] / e["q2_0"][n]) ** b for n in names}
    to_q2 = {n: q4[n] * (e["q2_0"][n] / e["q4_0"][n]) ** b for n in names}
    print(f"  {source}: Q2_0 measured -> Q4_0: {score(to_q4, q4)}; Q4_0 measured -> Q2_0: {score(to_q2, q2_repeat)}")
PY
