#!/usr/bin/env bash
# Create (once) the Python venv that runs moto 5.2.5's server mode, an S3-compatible server
# that no one here wrote, for the s3:// tests (tests/it/store.rs); boto3 (a dependency of
# moto) uploads the test's files to it. The tests run the server themselves, on loopback.
# Prints the venv's python path on stdout.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
VERSION=5.2.5
VENV="$(organ_cache)/venv-moto-$VERSION"
has_moto() {
  "$1/bin/python" -c "import moto.server, boto3, importlib.metadata as m; assert m.version('moto') == '$VERSION'"
}
make_venv() { pip_venv "$1" "moto[server]==$VERSION"; }
cached_install "$VENV" has_moto make_venv
echo "$VENV/bin/python"
