#!/usr/bin/env bash
# Build or serve the browser app (web/, Trunk from the root index.html + Trunk.toml).
#   scripts/web.sh build    -> dist/ (release, static files; host with COOP/COEP headers)
#   scripts/web.sh serve    -> http://127.0.0.1:8936 with COOP/COEP (threads on)
#   scripts/web.sh clippy   -> clippy of the web crate for wasm32
# Threads in wasm need the std library rebuilt with atomics: nightly's -Z build-std, and
# shared, imported memory. The flags are set here, for the wasm target only, so native
# commands stay on stable and untouched.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
PATH="$(scripts/setup-web.sh):$PATH"
export PATH
export RUSTUP_TOOLCHAIN=nightly
# The app is built with Cargo.toml's release profile, whatever scripts/test.sh set.
unset CARGO_PROFILE_RELEASE_LTO
export CARGO_UNSTABLE_BUILD_STD=panic_abort,std
export CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUSTFLAGS="-C target-feature=+atomics,+bulk-memory,+simd128 \
-C link-arg=--shared-memory -C link-arg=--max-memory=4294967296 -C link-arg=--import-memory \
-C link-arg=--export=__wasm_init_tls -C link-arg=--export=__tls_size -C link-arg=--export=__tls_align \
-C link-arg=--export=__tls_base"
case "${1:-build}" in
  build) trunk build --release ;;
  serve) trunk serve --release ;;
  clippy) cargo clippy -p organ-web --target wasm32-unknown-unknown -- -D warnings ;;
  *) echo "usage: $0 build|serve|clippy" >&2; exit 2 ;;
esac
