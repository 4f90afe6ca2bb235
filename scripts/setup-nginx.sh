#!/usr/bin/env bash
# Install (once) Debian's nginx for the remote-model tests (tests/it/remote.rs): an HTTP
# server with range support that no one here wrote. The tests run it themselves, as a
# non-daemon on loopback with a config of their own. Prints the nginx binary's path.
set -euo pipefail
find_nginx() { command -v nginx || { [ -x /usr/sbin/nginx ] && echo /usr/sbin/nginx; }; }
if ! find_nginx >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  { apt-get install -y -q nginx-light || { apt-get update -q && apt-get install -y -q nginx-light; }; } >&2
  # The package starts a system-wide server; the tests want none.
  { systemctl disable --now nginx || service nginx stop || true; } >/dev/null 2>&1
fi
find_nginx
