#!/usr/bin/env bash
# Every benchmark, each against its peer in the same run, with the arguments the figures in
# docs/performance.md come from. Not part of scripts/test.sh (CI runs only the short targets
# there): the 100 GiB models alone take 15 minutes and 200 GiB of sparse disk.
#   bench/all.sh            everything
#   HUGE_GB=N bench/all.sh  the sparse models at N GiB instead of 100 (0 skips them)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
HUGE_GB=${HUGE_GB:-100}
t_all=$SECONDS
if [ "$HUGE_GB" -gt 0 ]; then
  step "bench: measure a $HUGE_GB GiB sparse split model in < 256 MiB" bench/huge-sparse.sh "$HUGE_GB"
  step "bench: diff two $HUGE_GB GiB sparse models in < 256 MiB" bench/diff-huge-sparse.sh "$HUGE_GB"
  step "bench: per-expert θ (--experts) of a $HUGE_GB GiB sparse MoE in < 256 MiB" bench/experts-huge-sparse.sh "$HUGE_GB"
fi
step "bench: organ measure vs zref.py (figure only)" bench/measure-vs-zref.sh "" 5
step "bench: organ diff within 2.5x of measure, >= 15x faster than compare_ref.py" bench/diff-vs-ref.sh "" 5 2
step "bench: --sigma within 8x of measure, --exact >= 5x faster than zref --exact, --sigma --stream on $HUGE_GB GiB in < 256 MiB" bench/sigma.sh "" 5 2 "$HUGE_GB"
step "bench: dissect/assemble vs cp (figure only)" bench/dissect-vs-cp.sh "" 5
step "bench: organ moe of 4 SmolLM2 donors >= 0.5x cp of the output size" bench/moe-vs-cp.sh "" 5
step "bench: organ.measure from Python within 1.1x of the CLI, organ.tensor for every tensor >= 5x gguf-py" bench/python.sh "" 5
step "bench: measure of SmolLM2 over HTTP (nginx, loopback) vs local, and of the $HUGE_GB GiB model" bench/remote.sh 3 "$HUGE_GB"
step "bench: purify throughput (figure only)" bench/purify.sh "" 1
step "bench: organ lora merge >= 1.0x llama-export-lora (SmolLM2 F16, rank 16 on every linear weight)" bench/lora-merge.sh "" 5
step "bench: organ merge (task arithmetic of three SmolLM2 F16) >= 3x the NumPy oracle" bench/merge.sh "" 3
step "bench: organ merge of three 1 GiB models: peak RSS < 512 MiB" bench/merge-memory.sh 1
step "bench: lora extract --rank 16 of SmolLM2 >= 5x np.linalg.svd of the same ΔWs" bench/lora-extract.sh "" 3
step "bench: organ check >= 0.5x cat on a 1.1 GB dense model" bench/check-vs-cat.sh 1100 5
step "bench: browser vs native CLI on SmolLM2 (figure only)" bench/web-vs-cli.sh 5
step "bench: the core's measure in wasm (Node) vs native, one thread (figure only)" bench/wasm-vs-native.sh 5
step "bench: what reading SmolLM2 through the File API costs Chromium (figure only)" bench/web-read-cost.sh 7
echo "all benchmarks done in $((SECONDS - t_all)) s"
