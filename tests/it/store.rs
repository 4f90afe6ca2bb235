//! Models in an object store (docs/remote.md, "s3://"): `inspect` and `measure` of
//! `s3://` URLs served by moto's S3 server (from PyPI, scripts/setup-moto.sh) on loopback,
//! the files uploaded by boto3, compared with the same commands on the local files.
//!
//! The checks are written once, for any [`Server`]: `az://` (tests/it/azure.rs) runs the
//! same ones against Azurite.

use crate::common::*;
use crate::moto::Moto;
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// An object store's server that a test started on loopback (moto's S3, Azurite): what
/// the checks shared by the store tests ask of it.
pub trait Server {
    /// The scheme organ reads its objects by: `s3`, `az`.
    const SCHEME: &'static str;
    /// Makes the bucket (container) `bucket`.
    fn bucket(&self, bucket: &str);
    /// Uploads `file` as `BUCKET/key`, replacing what is there.
    fn put(&self, bucket: &str, key: &str, file: &Path);
    /// The server's loopback port.
    fn port(&self) -> u16;
    /// `organ`, with this server's credentials in its environment and its endpoint at
    /// loopback's `port`: the server's own, or that of a proxy in front of it.
    fn organ_at(&self, port: u16) -> Command;
    /// The GET and HEAD requests the server has logged so far.
    fn requests(&self) -> usize;

    /// `organ`, for this server.
    fn organ(&self) -> Command {
        self.organ_at(self.port())
    }

    /// `organ ARGS`, which must succeed: stdout and stderr.
    #[track_caller]
    fn run(&self, args: &[&str]) -> (Vec<u8>, String) {
        let mut c = self.organ();
        c.args(args);
        let o = ok(c);
        (o.stdout, String::from_utf8(o.stderr).unwrap())
    }
}

/// Starts `c`, a server that is to listen on loopback's `port`, and waits until it does.
/// Each line of its log (stderr, or stdout with `log_on_stdout`) that shows a GET or HEAD
/// is counted in the returned counter; the others go to the test's output.
#[track_caller]
pub fn start_server(mut c: Command, port: u16, log_on_stdout: bool) -> (Child, Arc<AtomicUsize>) {
    let what = format!("{:?}", c.get_program());
    let (out, err) = if log_on_stdout { (Stdio::piped(), Stdio::null()) } else { (Stdio::null(), Stdio::piped()) };
    let mut child = c.stdin(Stdio::null()).stdout(out).stderr(err).spawn().unwrap();
    let log: Box<dyn Read + Send> = match log_on_stdout {
        true => Box::new(child.stdout.take().unwrap()),
        false => Box::new(child.stderr.take().unwrap()),
    };
    let requests = Arc::new(AtomicUsize::new(0));
    let (n, name) = (requests.clone(), what.clone());
    std::thread::spawn(move || {
        for line in BufReader::new(log).lines().map_while(Result::ok) {
            if line.contains("GET /") || line.contains("HEAD /") {
                n.fetch_add(1, Ordering::Relaxed);
            } else {
                eprintln!("{name}: {line}");
            }
        }
    });
    let t0 = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(child.try_wait().unwrap().is_none(), "{what} exited");
        assert!(t0.elapsed() < Duration::from_secs(60), "{what} did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    (child, requests)
}

/// A free port on loopback.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A proxy of the test's own in front of the server at loopback's `upstream`, on a free
/// loopback port: request 1, 4, 7 … is answered 503 with `Retry-After: 0` (counted in the
/// returned counter), every other is passed on with `Connection: close` and its answer
/// passed back. Runs until the test process ends.
pub fn flaky(upstream: u16) -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let refused = Arc::new(AtomicUsize::new(0));
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
                    let busy = "HTTP/1.1 503 Busy\r\nRetry-After: 0\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
                    let _ = conn.write_all(busy.as_bytes());
                    return;
                }
                let Ok(mut up) = TcpStream::connect(("127.0.0.1", upstream)) else { return };
                let _ = up.write_all(format!("{head}Connection: close\r\n\r\n").as_bytes());
                let _ = std::io::copy(&mut up, &mut conn);
            });
        }
    });
    (port, refused)
}

pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `--stats`' remote line: bytes fetched, requests, retries.
fn remote_stats(stderr: &str) -> (u64, u64, u64) {
    let line = stderr.lines().find_map(|l| l.strip_prefix("stats: remote bytes fetched ")).expect(stderr);
    let n: Vec<u64> =
        line.split(|c: char| !c.is_ascii_digit()).filter(|s| !s.is_empty()).map(|s| s.parse().unwrap()).collect();
    (n[0], n[1], n[2])
}

/// [`reads_as_the_local_file`] over moto.
#[test]
fn a_model_in_s3_reads_as_the_local_file() {
    let Some(model) = need::smollm2_and_llama() else { return };
    let Some(python) = need::moto() else { return };
    reads_as_the_local_file(&Moto::start(&python), &model);
}

/// [`replaced_or_missing_is_an_error`] over moto.
#[test]
fn a_replaced_or_missing_object_is_an_error() {
    let Some(model) = need::smollm2() else { return };
    let Some(python) = need::moto() else { return };
    replaced_or_missing_is_an_error(&Moto::start(&python), &model);
}

/// SmolLM2 and a split SmolLM2 (llama-gguf-split) in a bucket of `srv`:
/// `inspect` and `measure` of their URLs give the local files' output byte for byte (a
/// split's `inspect --json` but for `shards`, URLs where the local one has paths);
/// `--stats` counts what the server served, and the retries of 503s a proxy injects.
#[track_caller]
pub fn reads_as_the_local_file<S: Server>(srv: &S, model: &Path) {
    let scheme = S::SCHEME;
    srv.bucket("models");
    let name = model.file_name().unwrap().to_str().unwrap();
    srv.put("models", &format!("smol/{name}"), model);
    let url = format!("{scheme}://models/smol/{name}");

    let (local, _) = srv.run(&["inspect", "--json", s(model)]);
    let (remote, _) = srv.run(&["inspect", "--json", &url]);
    assert!(local == remote, "inspect --json differs");
    let (local, _) = srv.run(&["inspect", s(model)]);
    let (remote, _) = srv.run(&["inspect", &url]);
    assert!(local == remote, "inspect differs");

    let (lj, rj) = (tmp(&format!("{scheme}-local.json")), tmp(&format!("{scheme}-remote.json")));
    let (local_text, _) = srv.run(&["measure", s(model), "--json", s(&lj)]);
    let before = srv.requests();
    let (remote_text, err) = srv.run(&["measure", &url, "--json", s(&rj), "--stats"]);
    assert!(std::fs::read(&lj).unwrap() == std::fs::read(&rj).unwrap(), "measure --json differs");
    assert!(local_text == remote_text, "measure's text differs");
    let (fetched, requests, retries) = remote_stats(&err);
    let size = std::fs::metadata(model).unwrap().len();
    assert!(fetched <= size + (4 << 20) && fetched >= size / 2, "{fetched} of {size}");
    assert_eq!(retries, 0, "{err}");
    // Servers log their lines as they answer; give the last a moment.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(requests as usize, srv.requests() - before, "{err}");
    eprintln!("{scheme} measure of SmolLM2 ({size} bytes): {fetched} bytes fetched in {requests} requests");

    // The split model, by its second shard's URL; siblings by name.
    let dir = tmp(&format!("{scheme}-split"));
    std::fs::create_dir_all(&dir).unwrap();
    let mut c = llama_tool("llama-gguf-split");
    c.args(["--split", "--split-max-tensors", "80"]).arg(model).arg(dir.join("sm"));
    ok(c);
    let n = SMOLLM2_TENSORS.div_ceil(80);
    let shard = |i: usize| format!("sm-{i:05}-of-{n:05}.gguf");
    for i in 1..=n {
        srv.put("models", &format!("split/{}", shard(i)), &dir.join(shard(i)));
    }
    let url = format!("{scheme}://models/split/{}", shard(2));
    let json = |args: &[&str]| -> Value { serde_json::from_slice(&srv.run(args).0).unwrap() };
    let mut local = json(&["inspect", "--json", s(&dir.join(shard(2)))]);
    let mut remote = json(&["inspect", "--json", &url]);
    let (_, rs) = (local["shards"].take(), remote["shards"].take());
    assert_eq!(local, remote);
    let want: Vec<String> = (1..=n).map(|i| format!("{scheme}://models/split/{}", shard(i))).collect();
    assert_eq!(rs, serde_json::json!(want));
    // Measured through a proxy that answers every third request 503: each is retried and
    // counted, and the report is the local split's.
    let (lj, rj) = (tmp(&format!("{scheme}-split-local.json")), tmp(&format!("{scheme}-split-remote.json")));
    srv.run(&["measure", s(&dir.join(shard(2))), "--json", s(&lj)]);
    let (proxy, refused) = flaky(srv.port());
    let mut c = srv.organ_at(proxy);
    c.args(["measure", &url, "--json", s(&rj), "--stats"]);
    let err = String::from_utf8(ok(c).stderr).unwrap();
    assert!(std::fs::read(&lj).unwrap() == std::fs::read(&rj).unwrap(), "split measure --json differs");
    let (fetched, requests, retries) = remote_stats(&err);
    assert!(retries > 0 && retries as usize == refused.load(Ordering::Relaxed), "{err}");
    assert!(err.contains("503") && err.contains("retry 1 of 5"), "{err}");
    eprintln!(
        "{scheme} measure of a {n}-shard SmolLM2: {fetched} bytes fetched in {requests} requests, {retries} retries"
    );
}

/// The object replaced in `srv` while measure reads it one small range at a time: a
/// clear error naming the URL, no report written. A missing key, a missing bucket, a
/// malformed URL: each a clear error naming the URL, exit 1, nothing written.
#[track_caller]
pub fn replaced_or_missing_is_an_error<S: Server>(srv: &S, model: &Path) {
    let scheme = S::SCHEME;
    srv.bucket("models");
    srv.put("models", "swap.gguf", model);
    let other = tmp(&format!("{scheme}-other.gguf"));
    let mut bytes = std::fs::read(model).unwrap();
    *bytes.last_mut().unwrap() ^= 1;
    std::fs::write(&other, bytes).unwrap();

    let url = format!("{scheme}://models/swap.gguf");
    let out = tmp(&format!("{scheme}-swap.json"));
    let mut c = srv.organ();
    c.args(["measure", &url, "--json", s(&out), "--remote-gap", "0", "--remote-concurrency", "1"]);
    let child = c.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let t0 = Instant::now();
    let start = srv.requests();
    while srv.requests() < start + 10 {
        assert!(t0.elapsed() < Duration::from_secs(60), "measure made too few requests");
        std::thread::sleep(Duration::from_millis(5));
    }
    srv.put("models", "swap.gguf", &other);
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8(o.stderr).unwrap();
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains(&url) && err.contains("changed in the store"), "{err}");
    assert!(!out.exists());

    let cases = [
        (format!("{scheme}://models/missing.gguf"), "no such object"),
        (format!("{scheme}://no-such-bucket/m.gguf"), "no such object"),
        (format!("{scheme}://models"), "not a valid object URL"),
    ];
    for (u, says) in cases {
        for cmd in ["inspect", "measure"] {
            let mut c = srv.organ();
            c.arg(cmd).arg(&u);
            if cmd == "measure" {
                c.arg("--json").arg(&out);
            }
            let err = fails(c);
            assert!(err.contains(&u) && err.contains(says), "{cmd} {u}: {err}");
            assert!(!out.exists());
        }
    }
}
