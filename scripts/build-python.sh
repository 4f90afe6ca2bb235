#!/usr/bin/env bash
# Builds organ's Python wheel (python/: PyO3, abi3, one wheel for CPython >= 3.9) with
# maturin from PyPI, kept in a venv of its own under ~/.cache/organ, then installs the
# wheel into a fresh venv that holds only pip, the wheel, and what the Python tests use
# (pytest, numpy, pandas, gguf-py 0.19.0 as their oracle, mypy for its stubtest of the
# type stubs): no Rust toolchain is needed to install it. The wheel is built with cargo's release profile in the workspace's target
# directory, so only the module's crate compiles after a `cargo build --release`.
# Prints the test venv's python on stdout.
#   ORGAN_PY_VENV=DIR   where the test venv goes (default ~/.cache/organ/venv-python-test)
#   --target aarch64    instead: the wheel for Linux aarch64, cross-compiled (rustup's
#                       aarch64-unknown-linux-gnu target, Debian's gcc-aarch64-linux-gnu as
#                       linker and C compiler; each installed when missing) into
#                       target/wheels-aarch64/. Prints the wheel's path; not installed nor
#                       tested (this machine cannot load it), and not a step of test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
CACHE=$(organ_cache)
TOOLS="$CACHE/venv-maturin-$MATURIN_VERSION"
maturin_ok() { "$1/bin/maturin" --version | grep -q " $MATURIN_VERSION\$"; }
maturin_install() { pip_venv "$1" "maturin==$MATURIN_VERSION"; }
cached_install "$TOOLS" maturin_ok maturin_install
target=$(realpath "${CARGO_TARGET_DIR:-target}")
if [ "${1:-}" = --target ]; then
  [ "${2:-}" = aarch64 ] || { echo "build-python.sh: --target takes aarch64" >&2; exit 2; }
  triple=aarch64-unknown-linux-gnu
  rustup target list --installed | grep -qx "$triple" || rustup target add "$triple" >&2
  command -v aarch64-linux-gnu-gcc >/dev/null ||
    { apt-get install -y -q gcc-aarch64-linux-gnu || { apt-get update -q && apt-get install -y -q gcc-aarch64-linux-gnu; }; } >&2
  wheels="$target/wheels-aarch64"
  rm -rf "$wheels"
  CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
    CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc AR_aarch64_unknown_linux_gnu=aarch64-linux-gnu-ar \
    "$TOOLS/bin/maturin" build --quiet --release --target "$triple" --manifest-path python/Cargo.toml --out "$wheels" >&2
  ls "$wheels"/organ-*.whl
  exit 0
fi
wheels="$target/wheels"
rm -rf "$wheels"
"$TOOLS/bin/maturin" build --quiet --release --manifest-path python/Cargo.toml --out "$wheels" >&2
wheel=$(ls "$wheels"/organ-*.whl)
VENV="${ORGAN_PY_VENV:-$CACHE/venv-python-test}"
rm -rf "$VENV"
pip_venv "$VENV" "$wheel" pytest numpy pandas gguf==0.19.0 "mypy==$MYPY_VERSION" >&2
echo "$VENV/bin/python"
