#!/usr/bin/env bash
# Install (once, cached under $ORGAN_CACHE/web-tools) what building and testing the browser
# app needs: nightly's wasm32 target + rust-src (build-std for threads), trunk, the
# wasm-bindgen CLI matching Cargo.lock, binaryen's wasm-opt and playwright-core from npm,
# and Debian's chromium. Every step is skipped when the right version is already there.
# Prints the directories to put first on PATH, colon-separated, on stdout (not with
# --downloads, below).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
CACHE="${ORGAN_CACHE:-$HOME/.cache/organ}"
TOOLS="$CACHE/web-tools"
mkdir -p "$TOOLS"

nightly_wasm() {
  rustup toolchain list | grep -q '^nightly' || { echo "the nightly toolchain is needed (build-std)" >&2; return 1; }
  rustup +nightly target list --installed | grep -qx wasm32-unknown-unknown ||
    rustup target add wasm32-unknown-unknown --toolchain nightly
  rustup +nightly component list --installed | grep -q '^rust-src' ||
    rustup component add rust-src --toolchain nightly
}

# The two tools are organ's build tools, not its product: how fast they run hardly matters
# (trunk waits on cargo and wasm-opt; wasm-bindgen takes seconds on the app), how long
# they take to compile on a clean machine does (CI). So they build unoptimized (opt-level
# 0: measured here, trunk compiles in 134 s instead of 371 s at opt-level 1 and
# wasm-bindgen in 54 s instead of 165 s, and wasm-bindgen then takes 2.0 s on the app
# instead of 0.6 s, writing the same bytes), no LTO, 16 codegen units, into one target
# directory, so that the crates both use with the same features compile once. The
# directory goes when both are installed.
light_install() {
  CARGO_PROFILE_RELEASE_OPT_LEVEL=0 CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
    CARGO_PROFILE_RELEASE_DEBUG=false CARGO_TARGET_DIR="$TOOLS/build" cargo +stable install "$@"
}

trunk_tool() {
  local root="$TOOLS/trunk-$TRUNK_VERSION"
  [ -x "$root/bin/trunk" ] && "$root/bin/trunk" --version | grep -q "$TRUNK_VERSION" && return 0
  # Without its default features (TLS for downloading tools, the update check): this
  # script gives it wasm-bindgen and wasm-opt on PATH, and it serves nothing over TLS here.
  light_install trunk --version "$TRUNK_VERSION" --locked --no-default-features --root "$root"
}

wasm_bindgen_tool() {
  local root="$TOOLS/wasm-bindgen-$WASM_BINDGEN_VERSION"
  [ -x "$root/bin/wasm-bindgen" ] && "$root/bin/wasm-bindgen" --version | grep -q "$WASM_BINDGEN_VERSION" && return 0
  # Not --locked: a locked dependency version is missing from the registry mirror.
  light_install wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION" --root "$root"
}

node_tools() {
  local dir="$TOOLS/node"
  local want="binaryen@$BINARYEN_VERSION playwright-core@$PLAYWRIGHT_VERSION"
  [ -f "$dir/.installed" ] && [ "$(cat "$dir/.installed")" = "$want" ] && return 0
  rm -rf "$dir" && mkdir -p "$dir"
  (cd "$dir" && echo '{"private":true}' >package.json && npm install --silent --no-audit --no-fund $want >&2)
  echo "$want" >"$dir/.installed"
}

chromium_browser() {
  command -v chromium >/dev/null && return 0
  local sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >&2
}

# --downloads: only what is fetched rather than built (the toolchain, npm packages,
# chromium), for scripts/test.sh to run in the background while it compiles.
downloads_only=false
[ "${1:-}" = --downloads ] && downloads_only=true
step "nightly wasm32 + rust-src" nightly_wasm >&2
if ! $downloads_only; then
  step "trunk $TRUNK_VERSION" trunk_tool >&2
  step "wasm-bindgen-cli $WASM_BINDGEN_VERSION" wasm_bindgen_tool >&2
  rm -rf "$TOOLS/build"
fi
step "npm binaryen $BINARYEN_VERSION, playwright-core $PLAYWRIGHT_VERSION" node_tools >&2
step "chromium (Debian)" chromium_browser >&2
$downloads_only && exit 0
echo "$TOOLS/trunk-$TRUNK_VERSION/bin:$TOOLS/wasm-bindgen-$WASM_BINDGEN_VERSION/bin:$TOOLS/node/node_modules/.bin"
