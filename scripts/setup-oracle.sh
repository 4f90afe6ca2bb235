#!/usr/bin/env bash
# Create (once) the Python venv that runs the reference reader gguf-py 0.19.0 and numpy:
# the oracle for tests and the peer for benchmarks. Prints the venv's python path on stdout.
set -euo pipefail
CACHE="${ORGAN_CACHE:-$HOME/.cache/organ}"
VENV="$CACHE/venv-gguf-0.19.0"
PY="$VENV/bin/python"
if [ -x "$PY" ] && "$PY" -c 'import gguf, numpy, jsonschema, importlib.metadata as m; assert m.version("gguf") == "0.19.0"' 2>/dev/null; then
  echo "$PY"; exit 0
fi
rm -rf "$VENV"
python3 -m venv "$VENV" >&2
"$PY" -m pip install --quiet --disable-pip-version-check gguf==0.19.0 numpy jsonschema >&2
echo "$PY"
