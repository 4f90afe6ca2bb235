#!/usr/bin/env bash
# Builds organ's Python wheel (python/: PyO3, abi3, one wheel for CPython >= 3.9) with
# maturin from PyPI, kept in a venv of its own under ~/.cache/organ, then installs the
# wheel into a fresh venv that holds only pip, the wheel, and what the Python tests use
# (pytest, numpy, pandas, gguf-py 0.19.0 as their oracle, mypy for its stubtest of the
# type stubs): no Rust toolchain is needed to install it. The wheel is built with cargo's release profile in the workspace's target
# directory, so only the module's crate compiles after a `cargo build --release`.
# Prints the test venv's python on stdout.
#   ORGAN_PY_VENV=DIR   where the test venv goes (default ~/.cache/organ/venv-python-test)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
CACHE=$(organ_cache)
TOOLS="$CACHE/venv-maturin-$MATURIN_VERSION"
maturin_ok() { "$1/bin/maturin" --version | grep -q " $MATURIN_VERSION\$"; }
maturin_install() { pip_venv "$1" "maturin==$MATURIN_VERSION"; }
cached_install "$TOOLS" maturin_ok maturin_install
target=$(realpath "${CARGO_TARGET_DIR:-target}")
wheels="$target/wheels"
rm -rf "$wheels"
"$TOOLS/bin/maturin" build --quiet --release --manifest-path python/Cargo.toml --out "$wheels" >&2
wheel=$(ls "$wheels"/organ-*.whl)
VENV="${ORGAN_PY_VENV:-$CACHE/venv-python-test}"
rm -rf "$VENV"
pip_venv "$VENV" "$wheel" pytest numpy pandas gguf==0.19.0 "mypy==$MYPY_VERSION" >&2
echo "$VENV/bin/python"
