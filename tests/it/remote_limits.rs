//! Remote reads that must end (docs/remote.md, docs/limits.md): a server trickling one
//! byte every 2 s fails `inspect` within `--remote-speed-time`, with a sentence naming the
//! URL and the rate; a model that must be fetched whole and whose server claims more than
//! `--remote-max-whole` (or than the disk holds) is refused before a byte is downloaded;
//! a URL's credentials never appear in an error. The servers are the test's own, on
//! loopback, each bounded in what it sends.

use crate::common::*;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Output, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The request line and headers of one request, lowercased, or none if the client went.
fn request_head(conn: &TcpStream) -> Option<String> {
    let mut head = String::new();
    let mut r = BufReader::new(conn.try_clone().ok()?).take(64 << 10);
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).ok()? == 0 {
            return None;
        }
        if line.trim().is_empty() {
            return Some(head.to_ascii_lowercase());
        }
        head.push_str(&line);
    }
}

/// The first byte of the `Range: bytes=A-B` of a request head, and its last (inclusive).
fn range_of(head: &str) -> Option<(u64, u64)> {
    let r = head.lines().find_map(|l| l.strip_prefix("range: bytes="))?;
    let (a, b) = r.split(',').next()?.trim().split_once('-')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// A server that answers every range request with 206 and a promise of 1 MiB, then sends
/// one byte every 2 s (at most 60 of them, or until the client goes).
pub(crate) fn trickle() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming().take(32) {
            let Ok(mut conn) = conn else { continue };
            std::thread::spawn(move || {
                let Some(head) = request_head(&conn) else { return };
                let (a, _) = range_of(&head).unwrap_or((0, 0));
                let n = 1u64 << 20;
                let answer = format!(
                    "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes {a}-{}/{}\r\nContent-Length: {n}\r\n\
                     ETag: \"trickle\"\r\nLast-Modified: Wed, 25 Nov 2026 00:00:00 GMT\r\n\r\nG",
                    a + n - 1,
                    a + n
                );
                if conn.write_all(answer.as_bytes()).is_err() {
                    return;
                }
                for _ in 0..60 {
                    std::thread::sleep(Duration::from_secs(2));
                    if conn.write_all(b"G").is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

/// A listener that counts the connections made to it and closes each at once: what must
/// never be reached.
pub(crate) fn canary() -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(AtomicUsize::new(0));
    let count = seen.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming().take(1000) {
            count.fetch_add(1, Ordering::SeqCst);
            drop(conn);
        }
    });
    (port, seen)
}

/// A server that answers every request with `answer`, and keeps the heads of the requests
/// it got (at most 1000 connections).
fn recording(answer: String) -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let heads = Arc::new(Mutex::new(Vec::new()));
    let kept = heads.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming().take(1000) {
            let Ok(mut conn) = conn else { continue };
            let Some(head) = request_head(&conn) else { continue };
            kept.lock().unwrap().push(head);
            let _ = conn.write_all(answer.as_bytes());
        }
    });
    (port, heads)
}

/// A server that answers every request with `302 Location: to`, and keeps the heads of
/// the requests it got.
pub(crate) fn redirector(to: String) -> (u16, Arc<Mutex<Vec<String>>>) {
    recording(format!("HTTP/1.1 302 Found\r\nLocation: {to}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
}

/// A server that answers every request with 404 and an S3-style error, and keeps the heads
/// of the requests it got (the Authorization header tells a signed one).
pub(crate) fn recorder() -> (u16, Arc<Mutex<Vec<String>>>) {
    let body = "<?xml version=\"1.0\"?><Error><Code>NoSuchKey</Code><Message>none</Message></Error>";
    recording(format!(
        "HTTP/1.1 404 Not Found\r\nContent-Type: application/xml\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    ))
}

/// A server of `model`'s bytes that claims the object is `claimed` bytes long (zeros past
/// the real end), honest about ranges otherwise; it serves at most 64 MiB in all, then
/// closes every connection, and counts the body bytes it sent.
fn boaster(model: &Path, claimed: u64) -> (u16, Arc<AtomicU64>) {
    let bytes = std::fs::read(model).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let sent = Arc::new(AtomicU64::new(0));
    let count = sent.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming().take(1000) {
            let Ok(mut conn) = conn else { continue };
            let Some(head) = request_head(&conn) else { continue };
            let Some((a, b)) = range_of(&head) else { continue };
            let b = b.min(claimed - 1).min(a + (8 << 20) - 1);
            if count.load(Ordering::SeqCst) > 64 << 20 || a > b {
                continue;
            }
            let mut body = vec![0u8; (b - a + 1) as usize];
            if let Some(have) = bytes.get(a as usize..) {
                let n = have.len().min(body.len());
                body[..n].copy_from_slice(&have[..n]);
            }
            let head = format!(
                "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes {a}-{b}/{claimed}\r\nContent-Length: {}\r\n\
                 ETag: \"boast\"\r\nConnection: close\r\n\r\n",
                body.len()
            );
            if conn.write_all(head.as_bytes()).and_then(|()| conn.write_all(&body)).is_ok() {
                count.fetch_add(body.len() as u64, Ordering::SeqCst);
            }
        }
    });
    (port, sent)
}

/// A valid llama GGUF with one 32 x 2 F32 tensor of zeros, from the core's writer.
fn write_tiny_model(path: &Path) {
    use organ_core::gguf::writer::{plan, TensorSpec};
    let kvs = [("general.architecture", organ_core::gguf::MetaValue::Str(b"llama"))];
    let specs = [TensorSpec { name: "blk.0.ffn_up.weight", dims: &[32, 2], ty: organ_core::GgmlType::F32 }];
    let layout = plan(3, &kvs, &specs).unwrap();
    let mut bytes = layout.header;
    bytes.resize(usize::try_from(layout.file_len).unwrap(), 0);
    std::fs::write(path, bytes).unwrap();
}

/// `organ ARGS`, killed if it runs past `limit`: its output, and how long it ran.
fn run_bounded(args: &[&str], limit: Duration) -> (Output, Duration) {
    let t0 = Instant::now();
    let mut child = organ().args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    while child.try_wait().unwrap().is_none() {
        if t0.elapsed() > limit {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    (child.wait_with_output().unwrap(), t0.elapsed())
}

/// Item 2 of the hardening: one byte every 2 s kept `organ inspect URL` running for ever
/// (a read timeout never fires). With `--remote-speed-time 3` it fails in a few seconds,
/// naming the URL and the rate.
#[test]
fn a_trickling_server_fails_within_the_speed_time() {
    let url = format!("http://127.0.0.1:{}/m.gguf", trickle());
    let (out, took) = run_bounded(&["inspect", url.as_str(), "--remote-speed-time", "3"], Duration::from_secs(40));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "still running after {took:?}? {err}");
    assert!(took < Duration::from_secs(15), "took {took:?}: {err}");
    assert!(err.contains(&url) && err.contains("stalled") && err.contains("bytes/s"), "{err}");
    assert!(err.contains("--remote-speed-limit"), "the sentence names the flags: {err}");

    // The same through object_store: an S3 endpoint that trickles.
    let port = trickle();
    let mut c = organ();
    c.args(["inspect", "s3://bucket/m.gguf", "--remote-speed-time", "3"]);
    c.env("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{port}")).env("AWS_ALLOW_HTTP", "true");
    c.env("AWS_SKIP_SIGNATURE", "true").env("AWS_REGION", "us-east-1");
    let t0 = Instant::now();
    let mut child = c.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    while child.try_wait().unwrap().is_none() && t0.elapsed() < Duration::from_secs(40) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(15), "took {:?}: {err}", t0.elapsed());
    assert!(err.contains("s3://bucket/m.gguf") && err.contains("stalled"), "{err}");
}

/// Item 4: `diff URL` fetches the model whole; a server claiming 8 GiB had it download
/// into $TMPDIR until the disk was full. The declared size is checked against
/// `--remote-max-whole`, then against the free space, before any tensor byte is asked for:
/// only the header's first read is served.
#[test]
fn a_whole_download_past_the_cap_or_the_free_space_is_refused_before_a_byte() {
    let dir = tmp("whole-cap");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let model = dir.join("tiny.gguf");
    write_tiny_model(&model);
    let m = model.to_str().unwrap();
    for (claimed, extra, says) in [
        (8u64 << 30, vec![], "--remote-max-whole"),
        (1 << 56, vec!["--remote-max-whole", "72057594037927936"], "bytes free"),
    ] {
        let (port, sent) = boaster(&model, claimed);
        let url = format!("http://127.0.0.1:{port}/tiny.gguf");
        let mut args = vec!["diff", url.as_str(), m];
        args.extend(extra.iter().copied());
        let t0 = Instant::now();
        let mut child =
            organ().args(&args).env("TMPDIR", &dir).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
        while child.try_wait().unwrap().is_none() && t0.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{claimed}: {err}");
        assert!(err.contains(&url) && err.contains(says) && err.contains(&claimed.to_string()), "{err}");
        let served = sent.load(Ordering::SeqCst);
        assert!(served <= 1 << 20, "{claimed}: {served} bytes served before the refusal");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "something left in TMPDIR");
    }
}

/// Item 1, on the command line: a URL's credentials appeared in its error. Now they are
/// written `***`, in text and in JSON lines alike, and the host is still named.
#[test]
fn credentials_in_a_url_are_never_printed() {
    let closed = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("http://alice:hunter2@127.0.0.1:{closed}/m.gguf");
    for extra in [&[][..], &["--progress", "jsonl"][..]] {
        let (out, _) = run_bounded(
            &[&["inspect", url.as_str(), "--remote-retries", "0"][..], extra].concat(),
            Duration::from_secs(60),
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(!err.contains("hunter2") && !err.contains("alice"), "{err}");
        assert!(err.contains(&format!("http://***@127.0.0.1:{closed}/m.gguf")), "{err}");
    }
}
