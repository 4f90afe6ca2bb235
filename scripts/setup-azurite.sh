#!/usr/bin/env bash
# Install (once) Azurite 3.35.0 from npm, Microsoft's Azure Storage emulator, for the az://
# tests (tests/it/azure.rs), with the Azure SDK's @azure/storage-blob 12.32.0, by which the
# tests upload their files to it. The tests run the blob server themselves, on loopback,
# in memory, its telemetry off. (Azurite 3.36 and the SDK from 12.33 want Node 22; the
# machine has Node 20.) Prints the directory holding node_modules on stdout.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
AZURITE=3.35.0
BLOB_SDK=12.32.0
DIR="$(organ_cache)/azurite-$AZURITE"
has_azurite() {
  npm_has "$1" azurite "$AZURITE" && npm_has "$1" @azure/storage-blob "$BLOB_SDK" &&
    [ -x "$1/node_modules/.bin/azurite-blob" ]
}
install_azurite() { npm_dir "$1" "azurite@$AZURITE" "@azure/storage-blob@$BLOB_SDK"; }
cached_install "$DIR" has_azurite install_azurite
echo "$DIR"
