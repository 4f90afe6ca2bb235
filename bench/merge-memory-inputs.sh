#!/usr/bin/env bash
# organ merge's peak RSS against the number of inputs (issue 46): a base of one 4096 x
# 1024 F16 tensor (16 MiB as f32) and up to 32 finetunes of it, each with its own delta,
# merged by linear, task_arithmetic and ties at 2, 8 and 32 inputs. Memory should not grow
# with the number of inputs (the models are read a span of rows at a time); before, each
# input added an f32 copy of the tensor. Needs about 300 MB of free disk under $TMPDIR.
# Usage: bench/merge-memory-inputs.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
PY="$(scripts/setup-oracle.sh)"
bench_setup merge-memory-inputs
work=$WORK
"$PY" - "$work" 32 <<'PY'
import sys
import numpy as np
from gguf import GGUFWriter
work, n = sys.argv[1], int(sys.argv[2])
base = np.random.default_rng(0).standard_normal((1024, 4096)).astype(np.float32) * 0.02
for i in range(n + 1):
    w = GGUFWriter(f"{work}/m{i}.gguf", "llama")
    w.add_block_count(1)
    delta = np.random.default_rng(i).standard_normal(base.shape).astype(np.float32) * 0.001 if i else 0
    w.add_tensor("blk.0.ffn_up.weight", (base + delta).astype(np.float16))
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
PY
for method in linear task_arithmetic ties; do
  for n in 2 8 32; do
    args=(merge --method "$method" --out "$work/out.gguf" --force)
    [ "$method" = linear ] || args+=(--base "$work/m0.gguf")
    for i in $(seq 1 "$n"); do
      if [ "$method" = linear ]; then args+=(--model "$work/m$i.gguf:1"); else args+=(--model "$work/m$i.gguf:1,density=0.5"); fi
    done
    rss=$( { /usr/bin/time -f '%M' "$ORGAN" "${args[@]}" > /dev/null; } 2>&1 | tail -1)
    printf '%-16s %2d inputs: peak RSS %4d MiB\n' "$method" "$n" $((rss / 1024))
  done
done
