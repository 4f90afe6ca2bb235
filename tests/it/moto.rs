//! moto's S3 server (moto 5.2.5 from PyPI, made once by scripts/setup-moto.sh) on a
//! loopback port, for the tests of `s3://` models (store.rs) and of fleet results in a
//! bucket (fleet_store.rs): boto3 to put files in it, `organ` with its endpoint and
//! credentials in the environment, and a proxy that answers some requests 503.

use crate::common::*;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// moto's S3 server, on a free loopback port, killed when dropped. It logs one line per
/// request to stderr; [`Moto::requests`] counts them.
pub struct Moto {
    child: Child,
    port: u16,
    python: PathBuf,
    pub requests: Arc<AtomicUsize>,
}

impl Moto {
    #[track_caller]
    pub fn start(python: &Path) -> Moto {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut child = Command::new(python)
            .args(["-m", "moto.server", "-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let requests = Arc::new(AtomicUsize::new(0));
        let (err, n) = (child.stderr.take().unwrap(), requests.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if line.contains("GET /") || line.contains("HEAD /") {
                    n.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        let mut m = Moto { child, port, python: python.to_owned(), requests };
        let t0 = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(m.child.try_wait().unwrap().is_none(), "moto's server exited");
            assert!(t0.elapsed() < Duration::from_secs(60), "moto's server did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        m
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

    /// Uploads `file` as `s3://BUCKET/key`.
    #[track_caller]
    pub fn put(&self, bucket: &str, key: &str, file: &Path) {
        self.boto3("s3.upload_file(sys.argv[3], sys.argv[1], sys.argv[2])", &[bucket, key, s(file)]);
    }

    /// `organ`, with credentials and endpoint for this server in its environment.
    pub fn organ(&self) -> Command {
        let mut c = organ();
        self.env(&mut c);
        c
    }

    /// Puts credentials and endpoint for this server in `c`'s environment.
    pub fn env(&self, c: &mut Command) {
        c.env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ENDPOINT_URL", self.endpoint())
            .env("AWS_ALLOW_HTTP", "true");
    }

    /// A proxy of the test's own in front of this server, on a free loopback port: request
    /// 1, 4, 7 … is answered 503 with `Retry-After: 0` (counted in the returned counter),
    /// every other is passed to moto with `Connection: close` and its answer passed back.
    /// Runs until the test process ends.
    pub fn flaky(&self) -> (u16, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (moto, refused) = (self.port, Arc::new(AtomicUsize::new(0)));
        let count = refused.clone();
        std::thread::spawn(move || {
            for (k, conn) in listener.incoming().enumerate() {
                let Ok(mut conn) = conn else { continue };
                let count = count.clone();
                std::thread::spawn(move || {
                    let mut head = String::new();
                    for line in BufReader::new(conn.try_clone().unwrap()).lines().map_while(Result::ok) {
                        if line.is_empty() {
                            break;
                        }
                        if !line.to_ascii_lowercase().starts_with("connection:") {
                            head.push_str(&line);
                            head.push_str("\r\n");
                        }
                    }
                    if k % 3 == 1 {
                        count.fetch_add(1, Ordering::Relaxed);
                        let busy =
                            "HTTP/1.1 503 Busy\r\nRetry-After: 0\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
                        let _ = conn.write_all(busy.as_bytes());
                        return;
                    }
                    let Ok(mut up) = TcpStream::connect(("127.0.0.1", moto)) else { return };
                    let _ = up.write_all(format!("{head}Connection: close\r\n\r\n").as_bytes());
                    let _ = std::io::copy(&mut up, &mut conn);
                });
            }
        });
        (port, refused)
    }

    /// `organ ARGS`, which must succeed: stdout and stderr.
    #[track_caller]
    pub fn run(&self, args: &[&str]) -> (Vec<u8>, String) {
        let mut c = self.organ();
        c.args(args);
        let o = ok(c);
        (o.stdout, String::from_utf8(o.stderr).unwrap())
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}
