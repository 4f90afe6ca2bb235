//! Remote models (docs/remote.md): `inspect` and `measure` of http:// URLs served by
//! Debian's nginx on loopback (its own range support and ETags), compared with the same
//! commands on the local files; and a lying server of the test's own, for the answers
//! nginx never gives.

use crate::common::*;
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

/// nginx as the test runs it: in the foreground, one process, its config, logs and files
/// in a directory of its own, on a free loopback port. Killed when dropped.
pub(crate) struct Nginx {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl Nginx {
    /// Serves `DIR/www`; under `/norange/`, Range is ignored (`max_ranges 0`: 200 and the
    /// whole body); under `/one/`, a request for many ranges is (`max_ranges 1`); under
    /// `/forbidden/`, every request gets 403; under `/cdn/`, a request with an
    /// Authorization header is refused (403), as by a CDN that must never see the Hub's
    /// token (tests/it/hub.rs). The access log has each request's status and body bytes.
    #[track_caller]
    pub(crate) fn start(nginx: &Path, name: &str) -> Nginx {
        let dir = tmp(name);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("www/norange")).unwrap();
        std::fs::create_dir_all(dir.join("www/one")).unwrap();
        std::fs::create_dir_all(dir.join("tmp")).unwrap();
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let d = dir.display();
        let conf = format!(
            r#"daemon off;
master_process off;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log;
events {{ worker_connections 64; }}
http {{
  log_format organ '$status $body_bytes_sent';
  access_log {d}/access.log organ;
  client_body_temp_path {d}/tmp;
  proxy_temp_path {d}/tmp;
  fastcgi_temp_path {d}/tmp;
  uwsgi_temp_path {d}/tmp;
  scgi_temp_path {d}/tmp;
  default_type application/octet-stream;
  server {{
    listen 127.0.0.1:{port};
    root {d}/www;
    location /norange/ {{ max_ranges 0; }}
    location /one/ {{ max_ranges 1; }}
    location /forbidden/ {{ return 403; }}
    location /cdn/ {{ if ($http_authorization) {{ return 403; }} }}
  }}
}}
"#
        );
        std::fs::write(dir.join("nginx.conf"), conf).unwrap();
        let child = Command::new(nginx)
            .arg("-p")
            .arg(&dir)
            .arg("-c")
            .arg(dir.join("nginx.conf"))
            .arg("-e")
            .arg(dir.join("error.log"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut n = Nginx { child, port, dir };
        let t0 = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Some(s) = n.child.try_wait().unwrap() {
                panic!("nginx exited ({s}): {}", std::fs::read_to_string(n.dir.join("error.log")).unwrap_or_default());
            }
            assert!(t0.elapsed() < Duration::from_secs(20), "nginx did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        n
    }

    pub(crate) fn www(&self) -> PathBuf {
        self.dir.join("www")
    }

    pub(crate) fn url(&self, rel: &str) -> String {
        format!("http://127.0.0.1:{}/{rel}", self.port)
    }

    /// Every request served so far: its status and body bytes, as nginx logged them.
    pub(crate) fn log(&self) -> Vec<(u16, u64)> {
        let log = std::fs::read_to_string(self.dir.join("access.log")).unwrap_or_default();
        log.lines()
            .map(|l| {
                let (s, n) = l.split_once(' ').unwrap();
                (s.parse().unwrap(), n.parse().unwrap())
            })
            .collect()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `organ ARGS`, which must succeed: stdout and stderr.
pub(crate) fn run(args: &[&str]) -> (Vec<u8>, String) {
    let mut c = organ();
    c.args(args);
    let o = ok(c);
    (o.stdout, String::from_utf8(o.stderr).unwrap())
}

/// `--stats`' remote line: bytes fetched, requests, retries.
pub(crate) fn remote_stats(stderr: &str) -> (u64, u64, u64) {
    let n = remote_numbers(stderr);
    (n[0], n[1], n[2])
}

/// `--stats`' remote line: of the bytes fetched, those of multipart framing.
pub(crate) fn remote_framing(stderr: &str) -> u64 {
    remote_numbers(stderr)[3]
}

fn remote_numbers(stderr: &str) -> Vec<u64> {
    let line = stderr.lines().find_map(|l| l.strip_prefix("stats: remote bytes fetched ")).expect(stderr);
    line.split(|c: char| !c.is_ascii_digit()).filter(|s| !s.is_empty()).map(|s| s.parse().unwrap()).collect()
}

pub(crate) fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// SmolLM2 at a URL: `inspect --json` gives the local file's text byte for byte, and
/// `measure` the local report byte for byte (the report names a model by its file name,
/// the URL's last segment here). The requests and bytes `--stats` counts are the ones
/// nginx logged; all were ranges, and measure fetched no more than the file.
#[test]
fn a_model_at_a_url_reads_as_the_local_file() {
    let Some(model) = need::smollm2() else { return };
    let Some(nginx) = need::nginx() else { return };
    let srv = Nginx::start(&nginx, "ngx-whole");
    let name = model.file_name().unwrap().to_str().unwrap();
    std::os::unix::fs::symlink(&model, srv.www().join(name)).unwrap();
    let url = srv.url(name);

    let (local, _) = run(&["inspect", "--json", s(&model)]);
    let (remote, _) = run(&["inspect", "--json", &url]);
    assert!(local == remote, "inspect --json differs");
    let (local, _) = run(&["inspect", s(&model)]);
    let (remote, _) = run(&["inspect", &url]);
    assert!(local == remote, "inspect differs");

    let before = srv.log().len();
    let (lj, rj) = (tmp("whole-local.json"), tmp("whole-remote.json"));
    let (local_text, _) = run(&["measure", s(&model), "--json", s(&lj)]);
    let (remote_text, err) = run(&["measure", &url, "--json", s(&rj), "--stats"]);
    assert!(std::fs::read(&lj).unwrap() == std::fs::read(&rj).unwrap(), "measure --json differs");
    assert!(local_text == remote_text, "measure's text differs");
    let (fetched, requests, retries) = remote_stats(&err);
    let served = &srv.log()[before..];
    assert_eq!(requests as usize, served.len(), "{err}");
    assert_eq!(fetched, served.iter().map(|r| r.1).sum::<u64>(), "{err}");
    assert!(served.iter().all(|r| r.0 == 206), "{served:?}");
    assert_eq!(retries, 0);
    // SmolLM2's token embedding is sampled sparsely: its blocks come many to a request,
    // in multipart answers whose framing nginx counted too.
    assert!(remote_framing(&err) > 0, "{err}");
    let size = std::fs::metadata(&model).unwrap().len();
    // The header is read in growing ranges, at most twice; the sampled blocks once each.
    assert!(fetched <= size + (4 << 20), "{fetched} of {size}");
    eprintln!("remote measure of SmolLM2 ({size} bytes): {fetched} bytes fetched in {requests} requests");

    // The cache knows the model by URL, ETag and size: measured again, only the header is
    // read; once the file is touched (a new ETag), it is measured anew.
    let cache = tmp("whole-cache");
    let cached = |want_hit: bool| {
        let (text, err) = run(&["measure", &url, "--cache", s(&cache), "--stats"]);
        assert!(text == local_text, "measure --cache differs");
        assert_eq!(err.contains("1 of 1 models taken from the cache"), want_hit, "{err}");
        remote_stats(&err).1
    };
    cached(false);
    assert!(cached(true) <= 3);
    let link = srv.www().join(name);
    let copy = srv.www().join("copy.gguf");
    std::fs::copy(&model, &copy).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&copy)
        .unwrap()
        .set_modified(SystemTime::now() + Duration::from_secs(100))
        .unwrap();
    std::fs::rename(&copy, &link).unwrap();
    cached(false);
}

/// A split SmolLM2 (llama-gguf-split) by the URL of its second shard: its siblings are
/// found by name; inspect gives the local split's document but for `shards` (URLs where
/// the local one has paths), measure the local split's report byte for byte.
#[test]
fn a_split_model_at_a_url_reads_as_the_local_split() {
    let Some(model) = need::smollm2_and_llama() else { return };
    let Some(nginx) = need::nginx() else { return };
    let srv = Nginx::start(&nginx, "ngx-split");
    let prefix = srv.www().join("sm");
    let mut c = llama_tool("llama-gguf-split");
    c.args(["--split", "--split-max-tensors", "80"]).arg(&model).arg(&prefix);
    ok(c);
    let n = SMOLLM2_TENSORS.div_ceil(80);
    let shard = |i: usize| format!("sm-{i:05}-of-{n:05}.gguf");
    let shards: Vec<PathBuf> = (1..=n).map(|i| srv.www().join(shard(i))).collect();
    assert!(n >= 3 && shards.iter().all(|p| p.exists()), "llama-gguf-split made other shards");
    let url = srv.url(&shard(2));

    let json = |args: &[&str]| -> Value { serde_json::from_slice(&run(args).0).unwrap() };
    let mut local = json(&["inspect", "--json", s(&shards[1])]);
    let mut remote = json(&["inspect", "--json", &url]);
    let (ls, rs) = (local["shards"].take(), remote["shards"].take());
    assert_eq!(local, remote);
    let want: Vec<String> = (1..=n).map(|i| srv.url(&shard(i))).collect();
    assert_eq!(rs, serde_json::json!(want));
    assert_eq!(ls.as_array().unwrap().len(), n);

    let (lj, rj) = (tmp("split-local.json"), tmp("split-remote.json"));
    run(&["measure", s(&shards[1]), "--json", s(&lj)]);
    let (_, err) = run(&["measure", &url, "--json", s(&rj), "--stats"]);
    assert!(std::fs::read(&lj).unwrap() == std::fs::read(&rj).unwrap(), "measure --json differs");
    let (fetched, requests, _) = remote_stats(&err);
    eprintln!("remote measure of a {n}-shard SmolLM2: {fetched} bytes fetched in {requests} requests");
}

/// The file replaced on the server (a new ETag: nginx's is mtime and size) while measure
/// reads it one small range at a time: a clear error naming the URL, no report written.
#[test]
fn a_file_replaced_mid_read_is_an_error() {
    let Some(model) = need::smollm2() else { return };
    let Some(nginx) = need::nginx() else { return };
    let srv = Nginx::start(&nginx, "ngx-swap");
    let file = srv.www().join("swap.gguf");
    std::fs::copy(&model, &file).unwrap();
    let url = srv.url("swap.gguf");
    let out = tmp("swap.json");
    let mut c = organ();
    c.args(["measure", &url, "--json", s(&out), "--remote-gap", "0", "--remote-concurrency", "1"]);
    let child = c.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let t0 = Instant::now();
    while srv.log().len() < 50 {
        assert!(t0.elapsed() < Duration::from_secs(60), "measure made too few requests");
        std::thread::sleep(Duration::from_millis(5));
    }
    let new = srv.www().join("swap.gguf.new");
    std::fs::copy(&model, &new).unwrap();
    let f = std::fs::File::options().write(true).open(&new).unwrap();
    f.set_modified(SystemTime::now() + Duration::from_secs(100)).unwrap();
    std::fs::rename(&new, &file).unwrap();
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8(o.stderr).unwrap();
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains(&url) && err.contains("changed on the server"), "{err}");
    assert!(!out.exists());
    // nginx logs a request after its answer is sent: the line may come after organ exits.
    let t0 = Instant::now();
    while !srv.log().iter().any(|r| r.0 == 412) {
        assert!(t0.elapsed() < Duration::from_secs(10), "nginx refused no precondition");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A server that ignores Range: the model is read whole (one request) up to
/// `--remote-max-whole` and gives the local report; above, a sentence says so. And the
/// bad inputs: each a clear error naming the URL, exit 1, nothing written.
#[test]
fn ignored_ranges_and_bad_urls() {
    let Some(model) = need::smollm2() else { return };
    let Some(nginx) = need::nginx() else { return };
    let srv = Nginx::start(&nginx, "ngx-bad");
    let name = model.file_name().unwrap().to_str().unwrap();
    std::os::unix::fs::symlink(&model, srv.www().join("norange").join(name)).unwrap();
    let url = srv.url(&format!("norange/{name}"));
    let (lj, rj) = (tmp("norange-local.json"), tmp("norange-remote.json"));
    run(&["measure", s(&model), "--json", s(&lj)]);
    let (_, err) = run(&["measure", &url, "--json", s(&rj), "--stats"]);
    assert!(std::fs::read(&lj).unwrap() == std::fs::read(&rj).unwrap(), "measure --json differs");
    assert_eq!(remote_stats(&err).1, 1, "{err}");
    assert_eq!(srv.log().last().unwrap().0, 200);
    // A server that answers a request for many ranges with 200 (`max_ranges 1`): the rest
    // is read by single ranges, the same θ.
    std::os::unix::fs::symlink(&model, srv.www().join("one").join(name)).unwrap();
    let one = tmp("one-remote.json");
    let (_, err) = run(&["measure", &srv.url(&format!("one/{name}")), "--json", s(&one), "--stats"]);
    assert!(std::fs::read(&lj).unwrap() == std::fs::read(&one).unwrap(), "measure --json differs");
    assert_eq!(remote_framing(&err), 0, "{err}");
    assert!(srv.log().iter().filter(|r| r.0 == 200).count() >= 2, "no request for many ranges was refused");

    std::fs::write(srv.www().join("text.gguf"), "not a model, only words\n".repeat(10)).unwrap();
    let closed = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let out = tmp("bad.json");
    let cases: Vec<(Vec<String>, String, &str)> = vec![
        (vec!["--remote-max-whole".into(), "1000000".into()], url.clone(), "ignores Range"),
        (vec![], srv.url("missing.gguf"), "404"),
        (vec![], srv.url("text.gguf"), "not a valid GGUF"),
        (vec!["--remote-retries".into(), "0".into()], format!("http://127.0.0.1:{closed}/m.gguf"), "Connection"),
        (vec![], "ftp://127.0.0.1/m.gguf".into(), "not ftp://"),
        (vec![], "http://[::1/m.gguf".into(), "not a valid URL"),
    ];
    for (extra, u, says) in &cases {
        for cmd in ["inspect", "measure"] {
            let mut c = organ();
            c.arg(cmd).arg(u).args(extra);
            if cmd == "measure" {
                c.arg("--json").arg(&out);
            }
            let err = fails(c);
            assert!(err.contains(u.as_str()) && err.contains(says), "{cmd} {u}: {err}");
            assert!(!out.exists());
        }
    }
    // Commands that take no URLs yet say so (check's errors exit 2: 1 is for findings).
    let o = organ().arg("check").arg(&url).output().unwrap();
    let err = String::from_utf8(o.stderr).unwrap();
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains(&url) && err.contains("read remote models so far"), "{err}");
}

/// A server of the test's own that answers with the real bytes but lies in its headers as
/// `lie` says: each lie refused, with the URL, the range asked and what came.
#[test]
fn lying_answers_are_refused() {
    let Some(model) = need::smollm2() else { return };
    type Lie = fn(u64, u64, u64) -> (u64, u64, u64, u64);
    let lies: [(Lie, &str); 4] = [
        // The first answer starts one byte late.
        (|a, b, t| (a + 1, b + 1, t, b - a + 1), "the server sent 1-"),
        // Right at first; later ranges are shifted.
        (|a, b, t| if a == 0 { (a, b, t, b - a + 1) } else { (a + 1, b + 1, t, b - a + 1) }, "the server sent"),
        // The object's size changes after the first answer.
        (|a, b, t| if a == 0 { (a, b, t, b - a + 1) } else { (a, b, t + 1, b - a + 1) }, "the server sent"),
        // A body longer than the range.
        (|a, b, t| if a == 0 { (a, b, t, b - a + 1) } else { (a, b, t, b - a + 2) }, "Content-Length"),
    ];
    for (lie, says) in lies {
        let port = liar(&model, lie);
        let url = format!("http://127.0.0.1:{port}/m.gguf");
        let out = tmp("liar.json");
        let mut c = organ();
        c.args(["measure", &url, "--json", s(&out)]);
        let err = fails(c);
        assert!(err.contains(&url) && err.contains(says), "{err}");
        assert!(!out.exists());
    }
}

/// A server that fails more than one request in two: 503s with `Retry-After: 0`, bodies cut
/// off halfway, and connections reset: measure retries each, counts every retry, and gives
/// the local report.
#[test]
fn failed_requests_are_retried_and_counted() {
    let Some(model) = need::smollm2() else { return };
    let name = model.file_name().unwrap().to_str().unwrap();
    let port = serve(&model, Fault::Flaky);
    let url = format!("http://127.0.0.1:{port}/{name}");
    let (lj, rj) = (tmp("flaky-local.json"), tmp("flaky-remote.json"));
    run(&["measure", s(&model), "--json", s(&lj)]);
    let (_, err) = run(&["measure", &url, "--json", s(&rj), "--stats", "--remote-concurrency", "2"]);
    assert!(std::fs::read(&lj).unwrap() == std::fs::read(&rj).unwrap(), "measure --json differs");
    let (_, requests, retries) = remote_stats(&err);
    // Every request the server failed was tried again, and only those.
    let failed = FLAKY_FAILED.load(std::sync::atomic::Ordering::Relaxed);
    assert!(failed > requests / 2, "{failed} of {requests} failed");
    assert_eq!(retries, failed, "{err}");
    assert!(err.contains("HTTP 503") && err.contains("retry 1 of 5"), "{err}");
}

/// What [`serve`]'s server does wrong.
#[derive(Clone, Copy)]
pub(crate) enum Fault {
    /// Headers as [`liar`]'s function says; a request for many ranges gets 416 (a server
    /// that refuses them).
    Lie(fn(u64, u64, u64) -> (u64, u64, u64, u64)),
    /// Request 1, 5, 9 … answered 503 with Retry-After: 0; request 3, 7, 11 … with half
    /// its body, then the connection closed; request 6, 38, 70 … reset (closed unread).
    /// Many ranges get an honest multipart answer. [`FLAKY_FAILED`] counts the failures.
    Flaky,
    /// Single ranges right; many ranges answered as [`crate::remote_multi::Multi`] says.
    Multi(crate::remote_multi::Multi),
}

/// Serves `file` on a free port, answering each range request with the bytes of the
/// range `lie(start, end, size)` names (start, end, total for Content-Range, and how many
/// bytes Content-Length claims and the body carries). Runs until the test process ends.
fn liar(file: &Path, lie: fn(u64, u64, u64) -> (u64, u64, u64, u64)) -> u16 {
    serve(file, Fault::Lie(lie))
}

/// How many requests a [`Fault::Flaky`] server has failed.
static FLAKY_FAILED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Serves `file` on a free port with `fault`, one connection at a time, until the test
/// process ends.
pub(crate) fn serve(file: &Path, fault: Fault) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let f = std::fs::File::open(file).unwrap();
    let size = f.metadata().unwrap().len();
    std::thread::spawn(move || {
        for (k, conn) in listener.incoming().enumerate() {
            let Ok(mut conn) = conn else { continue };
            if matches!(fault, Fault::Flaky) && k % 32 == 6 {
                // Closed with the request unread: the kernel resets the connection.
                std::thread::sleep(Duration::from_millis(20));
                FLAKY_FAILED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                continue;
            }
            let mut ranges = Vec::new();
            for line in BufReader::new(conn.try_clone().unwrap()).lines() {
                let Ok(line) = line else { break };
                if line.is_empty() {
                    break;
                }
                if let Some(r) = line.to_ascii_lowercase().strip_prefix("range: bytes=") {
                    for r in r.split(',') {
                        let (a, b) = r.trim().split_once('-').unwrap();
                        ranges.push((a.parse::<u64>().unwrap(), b.parse::<u64>().unwrap().min(size - 1)));
                    }
                }
            }
            let honest = |a: u64, b: u64, t: u64| (a, b, t, b - a + 1);
            let (lie, cut) = match fault {
                _ if ranges.is_empty() => continue,
                Fault::Lie(_) if ranges.len() > 1 => {
                    let _ = conn.write_all(b"HTTP/1.1 416 No\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
                    continue;
                }
                Fault::Lie(lie) => (lie, false),
                Fault::Flaky if k % 4 == 1 => {
                    FLAKY_FAILED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let _ = conn.write_all(b"HTTP/1.1 503 Busy\r\nRetry-After: 0\r\nContent-Length: 0\r\n\r\n");
                    continue;
                }
                Fault::Flaky if k % 4 == 3 => {
                    FLAKY_FAILED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    (honest as fn(u64, u64, u64) -> (u64, u64, u64, u64), true)
                }
                Fault::Flaky => (honest as fn(u64, u64, u64) -> (u64, u64, u64, u64), false),
                Fault::Multi(_) => (honest as fn(u64, u64, u64) -> (u64, u64, u64, u64), false),
            };
            let answer = if ranges.len() > 1 {
                let multi = if let Fault::Multi(m) = fault { m } else { crate::remote_multi::Multi::Honest };
                crate::remote_multi::answer(&f, &ranges, size, multi)
            } else {
                let (a, b) = ranges[0];
                let (ca, cb, ct, len) = lie(a, b, size);
                let mut body = vec![0; len as usize];
                let _ = f.read_at(&mut body, ca);
                let head = format!(
                    "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes {ca}-{cb}/{ct}\r\nContent-Length: {len}\r\n\
                     ETag: \"liar\"\r\nConnection: close\r\n\r\n"
                );
                [head.into_bytes(), body].concat()
            };
            // A cut answer loses half its body.
            let body_start = answer.windows(4).position(|w| w == b"\r\n\r\n").map_or(0, |i| i + 4);
            let sent = if cut { &answer[..body_start + (answer.len() - body_start) / 2] } else { &answer[..] };
            let _ = conn.write_all(sent);
        }
    });
    port
}
