#!/usr/bin/env bash
# The specs, vectors and reference scripts this repo copies from ../shared
# (docs/shared-copies.sha256): each copy must have the recorded sha256, and, where
# ../shared is beside the repo, so must its source there. Nothing else reaches ../shared.
set -euo pipefail
cd "$(dirname "$0")/.."
shared=../shared
fail=0
[ -d "$shared" ] || echo "../shared is not beside the repo: checking the copies against their recorded sums only"
while read -r sum copy source; do
  case "$sum" in ''|'#'*) continue ;; esac
  got=$(sha256sum "$copy" | cut -d' ' -f1)
  if [ "$got" != "$sum" ]; then echo "FAIL $copy: sha256 $got, recorded $sum"; fail=1; continue; fi
  if [ -d "$shared" ]; then
    src=$(sha256sum "$shared/$source" 2>/dev/null | cut -d' ' -f1 || true)
    if [ "$src" != "$sum" ]; then
      echo "FAIL $copy: ../shared/$source has changed (sha256 ${src:-missing}); copy it again and record its sum"; fail=1; continue
    fi
    echo "ok   $copy = ../shared/$source"
  else
    echo "ok   $copy (recorded sum)"
  fi
done < docs/shared-copies.sha256
exit $fail
