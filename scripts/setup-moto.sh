#!/usr/bin/env bash
# Create (once) the Python venv that runs moto 5.2.5's server mode, an S3-compatible server
# that no one here wrote, for the s3:// tests (tests/it/store.rs); boto3 (a dependency of
# moto) uploads the test's files to it. The tests run the server themselves, on loopback.
# Prints the venv's python path on stdout.
set -euo pipefail
CACHE="${ORGAN_CACHE:-$HOME/.cache/organ}"
VERSION=5.2.5
VENV="$CACHE/venv-moto-$VERSION"
PY="$VENV/bin/python"
if [ -x "$PY" ] && "$PY" -c "import moto.server, boto3, importlib.metadata as m; assert m.version('moto') == '$VERSION'" 2>/dev/null; then
  echo "$PY"; exit 0
fi
rm -rf "$VENV"
python3 -m venv "$VENV" >&2
"$PY" -m pip install --quiet --disable-pip-version-check "moto[server]==$VERSION" >&2
echo "$PY"
