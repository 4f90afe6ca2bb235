//! Starting `organ serve` for a test, and talking to it: the root it serves, requests
//! through ureq or written by hand, jobs followed to their end, and the server's child
//! processes.

use crate::common::{organ, smollm2, tmp};
use organ_core::gguf::writer::{plan, TensorSpec};
use organ_core::gguf::MetaValue;
use organ_core::GgmlType;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

pub(super) struct Server {
    pub(super) child: Child,
    pub(super) base: String,
    pub(super) root: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A root holding SmolLM2 (hard-linked, or copied), a corrupt GGUF, and a symlink that
/// leads outside the root.
pub(super) fn make_root(name: &str) -> PathBuf {
    root_with(name, |model| {
        if std::fs::hard_link(smollm2(), model).is_err() {
            std::fs::copy(smollm2(), model).unwrap();
        }
    })
}

/// [`make_root`]'s root with a tiny synthetic GGUF as `smol.gguf` instead of SmolLM2, for
/// the tests that check only who may ask and which paths they reach: they need no
/// download, so they run in `scripts/test.sh --quick` too.
pub(super) fn make_tiny_root(name: &str) -> PathBuf {
    root_with(name, write_tiny_model)
}

fn root_with(name: &str, write_model: impl FnOnce(&Path)) -> PathBuf {
    // A root is removed and made again here: two tests with one name would delete each
    // other's files under their running servers (a job's report gone, its result null).
    static NAMES: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    assert!(!names.iter().any(|n| n == name), "root {name:?} is used by two tests: give each its own name");
    names.push(name.to_owned());
    drop(names);
    let root = tmp(name);
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    write_model(&root.join("smol.gguf"));
    std::fs::write(root.join("corrupt.gguf"), b"GGUF\x03\x00\x00\x00 but then nothing sensible").unwrap();
    std::os::unix::fs::symlink("/etc", root.join("escape")).unwrap();
    root
}

/// A valid llama GGUF with one 32 x 2 F32 tensor of zeros, from the core's writer.
fn write_tiny_model(path: &Path) {
    let kvs = [("general.architecture", MetaValue::Str(b"llama"))];
    let specs = [TensorSpec { name: "blk.0.ffn_up.weight", dims: &[32, 2], ty: GgmlType::F32 }];
    let layout = plan(3, &kvs, &specs).unwrap();
    let mut bytes = layout.header;
    bytes.resize(usize::try_from(layout.file_len).unwrap(), 0);
    std::fs::write(path, bytes).unwrap();
}

pub(super) fn start(root: &Path, extra: &[&str]) -> Server {
    let mut c = organ();
    c.arg("serve").arg("--root").arg(root).arg("--addr").arg("127.0.0.1:0").arg("--web").arg(root.join("no-web"));
    c.args(extra).stdout(Stdio::piped()).stderr(Stdio::inherit());
    let mut child = c.spawn().expect("spawn organ serve");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let addr = line.split("http://").nth(1).and_then(|r| r.split_whitespace().next()).expect(&line).to_owned();
    Server { child, base: format!("http://{addr}"), root: root.canonicalize().unwrap() }
}

pub(super) fn agent() -> ureq::Agent {
    ureq::AgentBuilder::new().timeout(Duration::from_secs(300)).build()
}

/// Status and JSON body of a request, whatever the status.
pub(super) fn call(req: ureq::Request, body: Option<&str>) -> (u16, Value) {
    let r = match body {
        Some(b) => req.set("Content-Type", "application/json").send_string(b),
        None => req.call(),
    };
    let resp = match r {
        Ok(r) => r,
        Err(ureq::Error::Status(_, r)) => r,
        Err(e) => panic!("transport error: {e}"),
    };
    let status = resp.status();
    let text = resp.into_string().unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

pub(super) fn get(s: &Server, path: &str) -> (u16, Value) {
    call(agent().get(&format!("{}{path}", s.base)), None)
}

pub(super) fn post(s: &Server, path: &str, body: &Value) -> (u16, Value) {
    call(agent().post(&format!("{}{path}", s.base)), Some(&body.to_string()))
}

/// Follows a job to its end through the SSE stream; returns the last status.
pub(super) fn follow(s: &Server, id: &str) -> Value {
    let resp = agent().get(&format!("{}/api/jobs/{id}/events", s.base)).call().unwrap();
    assert_eq!(resp.content_type(), "text/event-stream");
    let mut last = Value::Null;
    for line in BufReader::new(resp.into_reader()).lines() {
        let line = line.unwrap();
        if let Some(d) = line.strip_prefix("data: ") {
            last = serde_json::from_str(d).unwrap();
        }
    }
    assert!(matches!(last["state"].as_str(), Some("done" | "failed" | "cancelled")), "stream ended at {last}");
    last
}

pub(super) fn run_job(s: &Server, path: &str, body: Value) -> Value {
    let (st, job) = post(s, path, &body);
    assert_eq!(st, 202, "{path} {body}: {job}");
    let end = follow(s, job["id"].as_str().unwrap());
    assert_eq!(end["state"], "done", "{path} {body}: {end}");
    end
}

pub(super) fn download(s: &Server, output: &str) -> Vec<u8> {
    let rel = output.strip_prefix("results/").unwrap();
    let resp = agent().get(&format!("{}/api/results/{rel}", s.base)).call().unwrap();
    let mut v = Vec::new();
    std::io::Read::read_to_end(&mut resp.into_reader(), &mut v).unwrap();
    v
}

/// One HTTP/1.1 request written by hand on a fresh connection (so that Host, Origin and
/// broken bodies can be anything), read to its end: the status and the body as JSON (or
/// as a string when it is not JSON). Status 0: the server closed without answering.
pub(super) fn raw(s: &Server, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> (u16, Value) {
    use std::io::{Read, Write};
    let addr = s.base.strip_prefix("http://").unwrap();
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        req += &format!("Host: {addr}\r\n");
    }
    for (k, v) in headers {
        req += &format!("{k}: {v}\r\n");
    }
    if !body.is_empty() && !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("content-length")) {
        req += &format!("Content-Length: {}\r\n", body.len());
    }
    req += "\r\n";
    let mut bytes = req.into_bytes();
    bytes.extend_from_slice(body);
    let _ = c.write_all(&bytes);
    let mut resp = Vec::new();
    let _ = c.read_to_end(&mut resp);
    let text = String::from_utf8_lossy(&resp).into_owned();
    let status = text.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or_default();
    (status, serde_json::from_str(body).unwrap_or(Value::String(body.to_owned())))
}

/// `n` hard links (or copies) of SmolLM2 under ROOT/slow/, and their paths for a measure
/// job that runs long enough to hold the only job slot.
pub(super) fn slow_models(root: &Path, n: usize) -> Vec<String> {
    std::fs::create_dir_all(root.join("slow")).unwrap();
    (0..n)
        .map(|i| {
            let rel = format!("slow/m{i}.gguf");
            if std::fs::hard_link(smollm2(), root.join(&rel)).is_err() {
                std::fs::copy(smollm2(), root.join(&rel)).unwrap();
            }
            rel
        })
        .collect()
}

pub(super) fn wait_running(s: &Server, id: &str) {
    let t0 = Instant::now();
    loop {
        let st = get(s, &format!("/api/jobs/{id}")).1;
        if st["state"] == "running" {
            return;
        }
        assert!(st["state"] == "queued" && t0.elapsed() < Duration::from_secs(60), "{st}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The pids of a process's children (from /proc/PID/task/*/children).
pub(super) fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).into_iter().flatten().flatten() {
        let c = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
        out.extend(c.split_whitespace().filter_map(|p| p.parse::<u32>().ok()));
    }
    out
}

/// Whether a process still runs (exists and is not a zombie).
pub(super) fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(") ").map(|(_, r)| !r.starts_with('Z')))
        .unwrap_or(false)
}
