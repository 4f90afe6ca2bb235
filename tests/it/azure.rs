//! Models in Azure Blob Storage (docs/remote.md, "az://"): the checks of tests/it/store.rs
//! run against Azurite, Microsoft's storage emulator (from npm, scripts/setup-azurite.sh),
//! started on loopback, in memory; the files are uploaded by the Azure SDK for JS.
//! organ finds it as a user would, by object_store's `AZURE_STORAGE_USE_EMULATOR` and
//! `AZURITE_BLOB_STORAGE_URL`.

use crate::common::*;
use crate::store::{free_port, reads_as_the_local_file, replaced_or_missing_is_an_error, start_server, Server};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Uploads `process.argv[4]` (a file) as blob `argv[3]` of container `argv[2]` (made if
/// need be) at the emulator's blob endpoint `argv[1]`, as devstoreaccount1 with the
/// emulator's published key (the connection string Microsoft documents for Azurite).
const PUT: &str = r#"
const { BlobServiceClient } = require('@azure/storage-blob');
const [endpoint, container, blob, file] = process.argv.slice(1);
const key = 'Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==';
const conn = `DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=${key};BlobEndpoint=${endpoint}/devstoreaccount1;`;
(async () => {
  const c = BlobServiceClient.fromConnectionString(conn).getContainerClient(container);
  await c.createIfNotExists();
  if (blob) await c.getBlockBlobClient(blob).uploadFile(file);
})().catch((e) => { console.error(e.message); process.exit(1); });
"#;

/// Azurite's blob server on a free loopback port, data in memory, telemetry off; killed
/// when dropped. It logs one line per request to stdout, which [`Server::requests`] counts.
struct Azurite {
    child: Child,
    port: u16,
    dir: PathBuf,
    requests: Arc<AtomicUsize>,
}

impl Azurite {
    #[track_caller]
    fn start(dir: &Path) -> Azurite {
        let port = free_port();
        let mut c = Command::new(dir.join("node_modules/.bin/azurite-blob"));
        c.args(["--blobHost", "127.0.0.1", "--blobPort", &port.to_string()]);
        c.args(["--inMemoryPersistence", "--disableTelemetry", "--skipApiVersionCheck"]);
        // It writes nothing with its data in memory; a scratch directory all the same.
        let cwd = tmp(&format!("azurite-{port}"));
        std::fs::create_dir_all(&cwd).unwrap();
        c.current_dir(cwd);
        let (child, requests) = start_server(c, port, true);
        Azurite { child, port, dir: dir.to_owned(), requests }
    }

    #[track_caller]
    fn node(&self, args: &[&str]) {
        let mut c = Command::new("node");
        c.env("NODE_PATH", self.dir.join("node_modules")).arg("-e").arg(PUT).arg(self.endpoint()).args(args);
        ok(c);
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Server for Azurite {
    const SCHEME: &'static str = "az";

    fn bucket(&self, bucket: &str) {
        self.node(&[bucket]);
    }

    fn put(&self, bucket: &str, key: &str, file: &Path) {
        self.node(&[bucket, key, file.to_str().unwrap()]);
    }

    fn port(&self) -> u16 {
        self.port
    }

    fn organ_at(&self, port: u16) -> Command {
        let mut c = organ();
        // No account, key or endpoint: object_store's emulator mode knows Azurite's.
        for (k, _) in std::env::vars_os().filter(|(k, _)| k.to_str().is_some_and(|k| k.starts_with("AZURE_"))) {
            c.env_remove(k);
        }
        c.env("AZURE_STORAGE_USE_EMULATOR", "true").env("AZURITE_BLOB_STORAGE_URL", format!("http://127.0.0.1:{port}"));
        c
    }

    fn requests(&self) -> usize {
        self.requests.load(Ordering::Relaxed)
    }
}

impl Drop for Azurite {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// SmolLM2 and a split SmolLM2 as blobs: `inspect` and `measure` of their `az://` URLs
/// give the local files' output, `--stats` counts Azurite's requests, a proxy's 503s are
/// retried and counted.
#[test]
fn a_model_in_azure_reads_as_the_local_file() {
    let Some(model) = need::smollm2_and_llama() else { return };
    let Some(dir) = need::azurite() else { return };
    reads_as_the_local_file(&Azurite::start(&dir), &model);
}

/// A blob replaced mid-read (its ETag pinned by `If-Match`), a missing blob or container,
/// a malformed URL: each a clear error naming the URL, no report written.
#[test]
fn a_replaced_or_missing_blob_is_an_error() {
    let Some(model) = need::smollm2() else { return };
    let Some(dir) = need::azurite() else { return };
    replaced_or_missing_is_an_error(&Azurite::start(&dir), &model);
}
