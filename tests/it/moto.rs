//! moto's S3 server (moto 5.2.5 from PyPI, made once by scripts/setup-moto.sh) on a
//! loopback port, for the tests of `s3://` models (store.rs) and of fleet results in a
//! bucket (fleet_store.rs): boto3 to put files in it, `organ` with its endpoint and
//! credentials in the environment; the checks of store.rs through its [`Server`] side.

use crate::common::*;
use crate::store::{free_port, s, start_server, Server};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// moto's S3 server, on a free loopback port, killed when dropped. It logs one line per
/// request to stderr; [`Server::requests`] counts them.
pub struct Moto {
    child: Child,
    port: u16,
    python: PathBuf,
    requests: Arc<AtomicUsize>,
}

impl Moto {
    #[track_caller]
    pub fn start(python: &Path) -> Moto {
        let port = free_port();
        let mut c = Command::new(python);
        c.args(["-m", "moto.server", "-H", "127.0.0.1", "-p", &port.to_string()]);
        let (child, requests) = start_server(c, port, false);
        Moto { child, port, python: python.to_owned(), requests }
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Runs boto3 `code` with `s3`, a client of this server, and `args` as `sys.argv[1:]`:
    /// what it prints.
    #[track_caller]
    pub fn boto3(&self, code: &str, args: &[&str]) -> String {
        let script = format!(
            "import sys, boto3\ns3 = boto3.client('s3', endpoint_url='{}', region_name='us-east-1', \
             aws_access_key_id='test', aws_secret_access_key='test')\n{code}\n",
            self.endpoint()
        );
        let mut c = Command::new(&self.python);
        c.arg("-c").arg(script).args(args);
        String::from_utf8(ok(c).stdout).unwrap()
    }

    /// Puts credentials and endpoint for this server in `c`'s environment.
    pub fn env(&self, c: &mut Command) {
        env_at(c, self.port);
    }
}

/// Credentials for moto, and its endpoint at loopback's `port` (its own or a proxy's).
fn env_at(c: &mut Command, port: u16) {
    c.env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{port}"))
        .env("AWS_ALLOW_HTTP", "true");
}

impl Server for Moto {
    const SCHEME: &'static str = "s3";

    fn bucket(&self, bucket: &str) {
        self.boto3("s3.create_bucket(Bucket=sys.argv[1])", &[bucket]);
    }

    fn put(&self, bucket: &str, key: &str, file: &Path) {
        self.boto3("s3.upload_file(sys.argv[3], sys.argv[1], sys.argv[2])", &[bucket, key, s(file)]);
    }

    fn port(&self) -> u16 {
        self.port
    }

    fn organ_at(&self, port: u16) -> Command {
        let mut c = organ();
        env_at(&mut c, port);
        c
    }

    fn requests(&self) -> usize {
        self.requests.load(Ordering::Relaxed)
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
