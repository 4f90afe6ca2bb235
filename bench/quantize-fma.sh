#!/usr/bin/env bash
# Does a CPU-tuned llama.cpp build quantize differently? organ quantize matches the llama-quantize
# that scripts/build-llama.sh builds (-DGGML_NATIVE=OFF). This builds llama-quantize three more times
# from the same source, on this machine: "native" (-DGGML_NATIVE=ON, what a plain cmake build
# does by default), "march" (-DGGML_NATIVE=ON and CFLAGS=CXXFLAGS=-march=native, so every
# library, ggml-base too, may use FMA, and GCC, in its default -ffp-contract=fast for gnu11,
# contracts a*b + c into it) and "nocontract" (as "march" plus -ffp-contract=off). Then it
# quantizes an F16 to each TYPE, without and with an importance matrix, with the deterministic
# llama-quantize, organ and the three tuned builds, and compares each file with the
# deterministic one: identical bytes, or the quantized tensors and blocks (type_size bytes of
# the tensor's type) that differ, and how much larger the RMS error against the F16 is on
# those blocks; then, per file that differs, the blocks differing per tensor type. Last, it
# checks that "march" gives the same bytes when run again.
# Inputs: "dq": SmolLM2-135M-Instruct Q4_1 requantized to F16 by organ, i.e. a dequantized
# Q4_1 whose weights sit on Q4_1's grid; "noisy": the same F16 plus seeded Gaussian noise of 5%
# of each tensor's standard deviation, off that grid. 576-wide rows take no K-quant, only
# ffn_down's 1536-wide rows do. The importance matrix (used for both) is the deterministic
# llama-imatrix's on "dq", 8 chunks of 128 tokens of tests/data/texts/calibration.txt.
# Also prints the CPU's FMA/AVX2/AVX-512 flags, each build's compile flags for ggml-quants.c
# (ggml-base, where the quantizers live), ggml-cpu.c and llama-quant.cpp, the FMA instructions
# in its ggml-quants.c.o, and whether its libggml-base.a is the deterministic build's.
# Time on 2 cores: the first run builds the three llama-quantize, 7-9 min each (cached in
# ORGAN_CACHE beside scripts/build-llama.sh's build); then about 23 min, half of it IQ4_XS
# (llama-quantize takes about 30 s per IQ4_XS file). The F16s and the imatrix are cached in
# ${CARGO_TARGET_DIR:-target}/quantize-fma. Exits 1 if organ's file differs from the
# deterministic llama-quantize's.
# Usage: bench/quantize-fma.sh [TYPES="Q4_K_M Q5_K_M Q6_K Q4_0 IQ4_XS"] [THREADS=nproc]
set -euo pipefail
cd "$(dirname "$0")/.."
TYPES="${1:-Q4_K_M Q5_K_M Q6_K Q4_0 IQ4_XS}"
THREADS="${2:-$(nproc)}"
source scripts/lib.sh
t_start=$SECONDS
PY="$(scripts/setup-oracle.sh)"
det="$(scripts/build-llama.sh)"           # .../llama.cpp-VERSION/bin
root="$(dirname "$det")"                  # .../llama.cpp-VERSION (src/, build/, bin/)
CMAKE="$(organ_cache)/venv-tools/bin/cmake" # installed by scripts/build-llama.sh

# tuned_build NAME CFLAGS: llama-quantize configured as scripts/build-llama.sh does but with
# -DGGML_NATIVE=ON and CFLAGS (may be empty) for C and C++, in ROOT-NAME/{build,bin}. Cached:
# a finished build (its binary in bin/) is reused.
tuned_build() {
  local dir="$root-$1" flags=$2
  if [ ! -x "$dir/bin/llama-quantize" ]; then
    mkdir -p "$dir"
    local t0=$SECONDS
    echo "building llama-quantize ($1: -DGGML_NATIVE=ON${flags:+, CFLAGS=CXXFLAGS=$flags}; log: $dir/build.log)" >&2
    if ! { CFLAGS="$flags" CXXFLAGS="$flags" "$CMAKE" -S "$root/src" -B "$dir/build" \
             -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
             -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
             -DLLAMA_OPENSSL=OFF -DGGML_NATIVE=ON -DGGML_OPENMP=OFF &&
           "$CMAKE" --build "$dir/build" --config Release -j 2 --target llama-quantize; } > "$dir/build.log" 2>&1; then
      tail -n 40 "$dir/build.log" >&2
      echo "llama.cpp build failed; full log: $dir/build.log" >&2
      exit 1
    fi
    mkdir -p "$dir/bin"
    cp "$dir/build/bin/llama-quantize" "$dir/bin/.llama-quantize.tmp"
    mv "$dir/bin/.llama-quantize.tmp" "$dir/bin/llama-quantize"
    echo "built $1 in $((SECONDS - t0)) s" >&2
  fi
}
# The builds compared: name, then its directory (holding build/ and bin/).
declare -A dir=([det]="$root" [native]="$root-native" [march]="$root-march-native"
                [nocontract]="$root-march-native-nocontract")
tuned_build native ""
tuned_build march-native "-march=native"
tuned_build march-native-nocontract "-march=native -ffp-contract=off"
bench_organ

scratch="${CARGO_TARGET_DIR:-target}/quantize-fma"
mkdir -p "$scratch"
f16="$scratch/f16.gguf" noisy="$scratch/f16-noisy.gguf" im="$scratch/imatrix.gguf"
if [ ! -f "$f16" ]; then
  "$ORGAN" quantize --allow-requantize "$(scripts/fetch-model.sh)" "$scratch/f16.tmp.gguf" F16 > /dev/null
  mv "$scratch/f16.tmp.gguf" "$f16"
fi
if [ ! -f "$noisy" ]; then
  "$PY" bench/quantize-fma-compare.py perturb "$f16" "$scratch/f16-noisy.tmp.gguf" 0.05
  mv "$scratch/f16-noisy.tmp.gguf" "$noisy"
fi
if [ ! -f "$im" ]; then
  "$det/llama-imatrix" -m "$f16" -f tests/data/texts/calibration.txt -o "$scratch/imatrix.tmp.gguf" \
    -c 128 --chunks 8 -t "$THREADS" --no-ppl > "$scratch/imatrix.log" 2>&1
  mv "$scratch/imatrix.tmp.gguf" "$im"
fi

echo "CPU: $(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) threads"
cpu_flags=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n')
has() { grep -qx "$1" <<< "$cpu_flags" && echo yes || echo no; }
echo "CPU flags: fma $(has fma), avx2 $(has avx2), avx512f $(has avx512f), f16c $(has f16c)"
echo "compiler: $(cc --version | head -n1)"
echo
echo "Compile flags (-m*, -std, -O, -f*) from each build's compile_commands.json:"
for b in det native march nocontract; do
  "$PY" - "$b" "${dir[$b]}/build/compile_commands.json" <<'PY'
import json, sys
name, path = sys.argv[1], sys.argv[2]
want = {"ggml/src/ggml-quants.c": "ggml-base ggml-quants.c", "ggml-cpu/ggml-cpu.c": "ggml-cpu  ggml-cpu.c",
        "src/llama-quant.cpp": "llama     llama-quant.cpp"}
for e in json.load(open(path)):
    for suffix, label in want.items():
        if e["file"].endswith(suffix):
            flags = [w for w in e["command"].split() if w.startswith(("-m", "-std", "-O", "-f"))]
            print(f"  {name:<11} {label:<26} {' '.join(flags)}")
PY
done
for b in det native march nocontract; do
  base="${dir[$b]}/build/ggml/src"
  if cmp -s "$root/build/ggml/src/libggml-base.a" "$base/libggml-base.a"; then same=identical; else same=different; fi
  fma=n/a # objdump (binutils) counts them where it is installed
  if command -v objdump > /dev/null; then
    fma=$(objdump -d "$base/CMakeFiles/ggml-base.dir/ggml-quants.c.o" | grep -cE '\svfn?m(add|sub)' || true)
  fi
  echo "  $b: $fma FMA instructions in ggml-quants.c.o; libggml-base.a vs det's: $same"
done
echo
echo "Each file compared with the deterministic llama-quantize's: quantized tensors with differing"
echo "data, blocks differing of all their blocks, and on those blocks the change of the RMS error"
echo "against the input F16. Inputs: dq = SmolLM2-135M F16 that is a dequantized Q4_1; noisy = dq"
echo "plus 5% noise. 576-wide rows take no K-quant, only ffn_down (1536-wide rows) does."
row() { printf '%-6s %-7s %-5s %-10s %-10s %-50s %s\n' "$@"; }
row input type imat organ native "march (-march=native everywhere)" "nocontract (march + -ffp-contract=off)"
log="$scratch/differing-tensors.txt"
: > "$log"
status=0
for input in dq noisy; do
  src=$f16; [ "$input" = noisy ] && src=$noisy
  for ty in $TYPES; do
    for im_arg in "" "--imatrix $im"; do
      label=no; [ -n "$im_arg" ] && label=yes
      # shellcheck disable=SC2086 # $im_arg is words
      "${dir[det]}/bin/llama-quantize" $im_arg "$src" "$scratch/det.gguf" "$ty" "$THREADS" > /dev/null 2>&1
      # shellcheck disable=SC2086
      "$ORGAN" quantize $im_arg --force "$src" "$scratch/organ.gguf" "$ty" "$THREADS" > /dev/null
      for b in native march nocontract; do
        # shellcheck disable=SC2086
        "${dir[$b]}/bin/llama-quantize" $im_arg "$src" "$scratch/$b.gguf" "$ty" "$THREADS" > /dev/null 2>&1
      done
      cells=()
      for who in organ native march nocontract; do
        echo "== $input $ty imatrix=$label: $who" >> "$log"
        cells+=("$("$PY" bench/quantize-fma-compare.py compare "$scratch/det.gguf" "$scratch/$who.gguf" "$src" "$log")")
      done
      [ "${cells[0]}" = identical ] || status=1
      row "$input" "$ty" "$label" "${cells[@]}"
      rm -f "$scratch"/{det,organ,native,march,nocontract}.gguf
    done
  done
done
echo
rerun=$(set -- $TYPES; echo "$1")
for run in 1 2; do "${dir[march]}/bin/llama-quantize" "$f16" "$scratch/march$run.gguf" "$rerun" "$THREADS" > /dev/null 2>&1; done
if cmp -s "$scratch/march1.gguf" "$scratch/march2.gguf"; then same=identical; else same=different; fi
echo "march run twice (dq $rerun, no imatrix): $same bytes"
rm -f "$scratch"/march{1,2}.gguf
echo "Blocks differing per tensor type, over the tensors of that type that differ (each tensor: $log):"
"$PY" bench/quantize-fma-compare.py summary "$log"
echo "total time: $((SECONDS - t_start)) s"
exit $status
