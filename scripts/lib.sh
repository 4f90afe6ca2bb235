# Shared by the repo's scripts: timed steps and idempotent installs.
# shellcheck shell=bash

# step NAME CMD...: run CMD, print how long it took.
step() {
  local name=$1; shift
  local t0=$SECONDS
  echo "==> $name" >&2
  "$@"
  echo "<== $name: $((SECONDS - t0)) s" >&2
}

# The pinned tools. Bump here, nowhere else.
CARGO_FUZZ_VERSION=0.13.2
TRUNK_VERSION=0.21.14
WASM_BINDGEN_VERSION=0.2.130 # must equal wasm-bindgen in Cargo.lock (web/Cargo.toml pins it)
BINARYEN_VERSION=132.0.0
PLAYWRIGHT_VERSION=1.64.1
MATURIN_VERSION=1.16.0 # builds the Python wheel (scripts/build-python.sh)
MYPY_VERSION=1.15.0    # stubtest checks the wheel's type stubs (tests/python/)

ensure_wasm_target() { # the core must build for wasm32 (the browser app's target)
  rustup target list --installed | grep -qx wasm32-unknown-unknown || rustup target add wasm32-unknown-unknown
}

ensure_cargo_fuzz() {
  if ! cargo fuzz --version 2>/dev/null | grep -q "$CARGO_FUZZ_VERSION"; then
    cargo install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked
  fi
  rustup toolchain list | grep -q '^nightly' || { echo "a nightly toolchain is needed for cargo fuzz" >&2; return 1; }
}

# ggml_harness SRC EXE: compiles a C harness (tests/oracle/*.c) against the
# libggml-base.a of the llama.cpp that scripts/build-llama.sh builds (built first if need be).
ggml_harness() {
  local bin; bin=$(scripts/build-llama.sh)
  gcc -O2 -o "$2" "$1" "$(dirname "$bin")/build/ggml/src/libggml-base.a" -lm -lpthread -lstdc++
}

# keep_or_check MODE GOT WANT MSG: with MODE --check, GOT must equal the checked-in WANT
# (then MSG is printed); otherwise GOT becomes WANT.
keep_or_check() {
  if [ "$1" = --check ]; then
    cmp "$2" "$3"
    echo "$4"
  else
    cp "$2" "$3"
  fi
}

# bench_organ: builds the release organ and sets ORGAN, its absolute path.
bench_organ() {
  cargo build --release -q -p organ-cli
  ORGAN="$(realpath "${CARGO_TARGET_DIR:-target}")/release/organ"
}

# bench_setup NAME: most benches' start. bench_organ, and WORK: a new temp directory named
# after NAME, removed when the script exits.
bench_setup() {
  bench_organ
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/organ-$1.XXXXXX")
  # shellcheck disable=SC2064 # WORK is expanded now, on purpose
  trap "rm -rf '$WORK'" EXIT
}

# The cache the installers fill (docs/testing.md).
organ_cache() { echo "${ORGAN_CACHE:-$HOME/.cache/organ}"; }

# cached_install DIR CHECK INSTALL: a pinned tool kept in DIR (its version in the name),
# installed by `INSTALL DIR` unless `CHECK DIR` passes already. DIR starts empty; a failed
# install removes it, so a half-made DIR is never taken for a good one. What the install
# prints goes to stderr (the setup scripts print only a path on stdout).
cached_install() {
  local dir=$1 check=$2 install=$3
  "$check" "$dir" 2>/dev/null && return 0
  rm -rf "$dir" && mkdir -p "$dir"
  if ! "$install" "$dir" >&2; then
    rm -rf "$dir"
    return 1
  fi
  "$check" "$dir"
}

# pip_venv DIR SPEC...: a Python venv in DIR with SPECs installed.
pip_venv() {
  local dir=$1; shift
  python3 -m venv "$dir" && "$dir/bin/python" -m pip install --quiet --disable-pip-version-check "$@"
}

# npm_dir DIR PKG@VERSION...: the packages in DIR/node_modules, at exactly those versions.
npm_dir() {
  local dir=$1; shift
  (cd "$dir" && echo '{"private":true}' >package.json && npm install --silent --no-audit --no-fund --save-exact "$@")
}

# npm_has DIR PKG VERSION: DIR/node_modules holds PKG at VERSION.
npm_has() {
  [ "$(node -p "require('$1/node_modules/$2/package.json').version" 2>/dev/null)" = "$3" ]
}
