//! `organ serve`, started for real on a loopback port: every endpoint on SmolLM2, measure
//! equal to `organ measure --json`, hostile requests answered 4xx with the server still up,
//! 200 concurrent inspects with 4 concurrent measure jobs, and cancellation without
//! partial output.

use crate::common::{need, ok, organ, smollm2, tmp, SMOLLM2_TENSORS};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

struct Server {
    child: Child,
    base: String,
    root: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A root holding SmolLM2 (hard-linked, or copied), a corrupt GGUF, and a symlink that
/// leads outside the root.
fn make_root(name: &str) -> PathBuf {
    let root = tmp(name);
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    if std::fs::hard_link(smollm2(), root.join("smol.gguf")).is_err() {
        std::fs::copy(smollm2(), root.join("smol.gguf")).unwrap();
    }
    std::fs::write(root.join("corrupt.gguf"), b"GGUF\x03\x00\x00\x00 but then nothing sensible").unwrap();
    std::os::unix::fs::symlink("/etc", root.join("escape")).unwrap();
    root
}

fn start(root: &Path, extra: &[&str]) -> Server {
    let mut c = organ();
    c.arg("serve").arg("--root").arg(root).arg("--addr").arg("127.0.0.1:0").arg("--web").arg(root.join("no-web"));
    c.args(extra).stdout(Stdio::piped()).stderr(Stdio::inherit());
    let mut child = c.spawn().expect("spawn organ serve");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let addr = line.split("http://").nth(1).and_then(|r| r.split_whitespace().next()).expect(&line).to_owned();
    Server { child, base: format!("http://{addr}"), root: root.canonicalize().unwrap() }
}

fn agent() -> ureq::Agent {
    ureq::AgentBuilder::new().timeout(Duration::from_secs(300)).build()
}

/// Status and JSON body of a request, whatever the status.
fn call(req: ureq::Request, body: Option<&str>) -> (u16, Value) {
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

fn get(s: &Server, path: &str) -> (u16, Value) {
    call(agent().get(&format!("{}{path}", s.base)), None)
}

fn post(s: &Server, path: &str, body: &Value) -> (u16, Value) {
    call(agent().post(&format!("{}{path}", s.base)), Some(&body.to_string()))
}

/// Follows a job to its end through the SSE stream; returns the last status.
fn follow(s: &Server, id: &str) -> Value {
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

fn run_job(s: &Server, path: &str, body: Value) -> Value {
    let (st, job) = post(s, path, &body);
    assert_eq!(st, 202, "{path} {body}: {job}");
    let end = follow(s, job["id"].as_str().unwrap());
    assert_eq!(end["state"], "done", "{path} {body}: {end}");
    end
}

fn download(s: &Server, output: &str) -> Vec<u8> {
    let rel = output.strip_prefix("results/").unwrap();
    let resp = agent().get(&format!("{}/api/results/{rel}", s.base)).call().unwrap();
    let mut v = Vec::new();
    std::io::Read::read_to_end(&mut resp.into_reader(), &mut v).unwrap();
    v
}

#[test]
fn every_endpoint_on_smollm2() {
    if need::smollm2().is_none() {
        return;
    }
    let s = start(&make_root("api-all"), &[]);
    let (st, h) = get(&s, "/api/health");
    assert_eq!((st, h["status"].as_str()), (200, Some("ok")));
    let (st, doc) = get(&s, "/openapi.json");
    assert_eq!(st, 200);
    for p in [
        "/api/models",
        "/api/inspect",
        "/api/measure",
        "/api/dissect",
        "/api/assemble",
        "/api/graft",
        "/api/purify",
        "/api/jobs/{id}",
        "/api/jobs/{id}/events",
        "/api/results/{path}",
        "/api/health",
    ] {
        assert!(doc["paths"][p].is_object(), "openapi.json documents {p}");
    }
    let (st, m) = get(&s, "/api/models");
    assert_eq!(st, 200);
    let paths: Vec<&str> = m["models"].as_array().unwrap().iter().map(|m| m["path"].as_str().unwrap()).collect();
    assert!(paths.contains(&"smol.gguf"), "{m}");

    // inspect equals the CLI's.
    let (st, api) = get(&s, "/api/inspect?path=smol.gguf");
    assert_eq!(st, 200);
    let cli: Value = serde_json::from_slice(
        &ok({
            let mut c = organ();
            c.arg("inspect").arg(s.root.join("smol.gguf")).arg("--json");
            c
        })
        .stdout,
    )
    .unwrap();
    assert_eq!(api, cli);

    // measure equals organ measure --json, exactly.
    let end = run_job(&s, "/api/measure", json!({ "paths": ["smol.gguf"] }));
    assert_eq!(end["progress"], json!([SMOLLM2_TENSORS, SMOLLM2_TENSORS]));
    let cli_json = tmp("api-cli-measure.json");
    ok({
        let mut c = organ();
        c.arg("measure").arg(s.root.join("smol.gguf")).arg("--summary-only").arg("--json").arg(&cli_json);
        c
    });
    let cli: Value = serde_json::from_slice(&std::fs::read(&cli_json).unwrap()).unwrap();
    assert_eq!(end["result"], cli, "the API's report is organ measure --json's");
    let downloaded: Value = serde_json::from_slice(&download(&s, end["outputs"][0].as_str().unwrap())).unwrap();
    assert_eq!(downloaded, cli);

    // dissect -> assemble gives the original bytes back.
    let d = run_job(&s, "/api/dissect", json!({ "path": "smol.gguf" }));
    let organs = d["outputs"][0].as_str().unwrap();
    assert!(s.root.join(organs).join("manifest.json").is_file());
    let a = run_job(&s, "/api/assemble", json!({ "path": organs, "out": "back.gguf" }));
    let back = download(&s, a["outputs"][0].as_str().unwrap());
    assert!(back == std::fs::read(smollm2()).unwrap(), "dissect -> assemble over HTTP is byte-identical");

    // graft and purify run and give loadable GGUFs (organ inspect reads them).
    let g = run_job(
        &s,
        "/api/graft",
        json!({ "donor": "smol.gguf", "recipient": "smol.gguf", "layers": "5-6", "types": ["organ"], "out": "g.gguf" }),
    );
    let p = run_job(
        &s,
        "/api/purify",
        json!({ "path": "smol.gguf", "method": "fractal", "layers": "5", "types": ["organ"] }),
    );
    assert!(p["result"].is_object() || p["result"].is_array(), "purify's report: {p}");
    for out in [g["outputs"][0].as_str().unwrap(), p["outputs"][0].as_str().unwrap()] {
        let (st, j) = get(&s, &format!("/api/inspect?path={out}"));
        assert_eq!(st, 200, "{out}: {j}");
        assert_eq!(j["tensors"].as_array().map(Vec::len), Some(SMOLLM2_TENSORS));
    }
    let (st, job) = get(&s, &format!("/api/jobs/{}", g["id"].as_str().unwrap()));
    assert_eq!((st, job["state"].as_str()), (200, Some("done")));
}

#[test]
fn the_browser_app_is_served_at_the_root_with_isolation_headers() {
    if need::smollm2().is_none() {
        return;
    }
    let root = make_root("api-web");
    let web = root.join("web");
    std::fs::create_dir_all(&web).unwrap();
    std::fs::write(web.join("index.html"), "<!doctype html><title>organ</title>").unwrap();
    let mut c = organ();
    c.arg("serve").arg("--root").arg(&root).arg("--addr").arg("127.0.0.1:0").arg("--web").arg(&web);
    c.stdout(Stdio::piped());
    let mut child = c.spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let addr = line.split("http://").nth(1).and_then(|r| r.split_whitespace().next()).unwrap().to_owned();
    let s = Server { child, base: format!("http://{addr}"), root: root.canonicalize().unwrap() };
    let resp = agent().get(&format!("{}/", s.base)).call().unwrap();
    assert_eq!(resp.header("cross-origin-opener-policy"), Some("same-origin"));
    assert_eq!(resp.header("cross-origin-embedder-policy"), Some("require-corp"));
    assert!(resp.into_string().unwrap().contains("<title>organ</title>"));
    assert_eq!(get(&s, "/api/health").0, 200, "the API lives beside the app");
}

#[test]
fn hostile_requests_get_a_4xx_and_the_server_stays_up() {
    if need::smollm2().is_none() {
        return;
    }
    let root = make_root("api-hostile");
    assert!(std::process::Command::new("mkfifo").arg(root.join("fifo.gguf")).status().unwrap().success());
    let s = start(&root, &["--max-body", "4096"]);
    let long = format!("/api/inspect?path={}", "a".repeat(5000));
    let big = format!("{{\"paths\": [\"{}\"]}}", "a".repeat(10_000));
    let json = [("Content-Type", "application/json")];
    // (method, path, headers, body, status, what the error says)
    type Case<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)], &'a [u8], u16, &'a str);
    let cases: Vec<Case> = vec![
        ("GET", "/api/inspect?path=../smol.gguf", &[], b"", 400, "without '..'"),
        ("GET", "/api/inspect?path=%2e%2e%2f%2e%2e%2fetc%2fpasswd", &[], b"", 400, "without '..'"),
        ("GET", "/api/inspect?path=/etc/passwd", &[], b"", 400, "must be relative"),
        ("GET", "/api/inspect?path=escape/passwd", &[], b"", 404, "no such model under the root"),
        ("GET", "/api/inspect?path=corrupt.gguf", &[], b"", 422, "corrupt.gguf"),
        ("GET", "/api/inspect?path=missing.gguf", &[], b"", 404, "no such model under the root"),
        ("GET", "/api/inspect?path=fifo.gguf", &[], b"", 400, "not a regular file"),
        ("GET", "/api/inspect?path=a%00b", &[], b"", 404, "no such model under the root"),
        ("GET", &long, &[], b"", 404, "no such model under the root"),
        ("GET", "/api/inspect", &[], b"", 400, "path"),
        ("GET", "/api/jobs/job-999", &[], b"", 404, "no job"),
        ("GET", "/api/jobs/00000000000000000000000000000000/events", &[], b"", 404, "no job"),
        ("DELETE", "/api/jobs/job-1", &[], b"", 404, "no job"),
        ("GET", "/api/results/job-1/organs/manifest.json", &[], b"", 404, ""),
        ("GET", "/api/results/../smol.gguf", &[], b"", 400, "without '..'"),
        ("GET", "/api/results/%2e%2e/smol.gguf", &[], b"", 400, "without '..'"),
        ("GET", "/api/models", &[("Host", "attacker.example")], b"", 421, "attacker.example"),
        ("GET", "/api/models", &[("Host", "127.0.0.1.attacker.example")], b"", 421, "--allow-host"),
        ("GET", "/api/models", &[("Origin", "http://attacker.example")], b"", 403, "cross-site"),
        ("GET", "/api/models", &[("Sec-Fetch-Site", "cross-site")], b"", 403, "cross-site"),
        ("POST", "/api/measure", &json, br#"{"paths": ["../../etc/passwd"]}"#, 400, "without '..'"),
        ("POST", "/api/measure", &json, br#"{"paths": ["escape/hosts"]}"#, 404, "no such model under the root"),
        ("POST", "/api/measure", &json, br#"{"paths": ["fifo.gguf"]}"#, 400, "not a regular file"),
        ("POST", "/api/measure", &json, br#"{"paths": []}"#, 400, "paths"),
        ("POST", "/api/measure", &json, br#"{"pathz": ["smol.gguf"]}"#, 400, "unknown field"),
        ("POST", "/api/measure", &json, br#"{"paths": "smol.gguf"}"#, 400, "invalid type"),
        ("POST", "/api/measure", &json, br#"{"paths": ["smol.gguf""#, 400, "JSON"),
        ("POST", "/api/measure", &json, b"\xff\xfe\x00garbage\x80", 400, ""),
        ("POST", "/api/measure", &json, big.as_bytes(), 413, ""),
        ("POST", "/api/measure", &[], br#"{"paths": ["smol.gguf"]}"#, 415, "Content-Type"),
        (
            "POST",
            "/api/dissect",
            &[("Content-Type", "application/json"), ("Origin", "null")],
            br#"{"path": "smol.gguf"}"#,
            403,
            "cross-site",
        ),
        ("POST", "/api/purify", &json, br#"{"path": "smol.gguf", "method": "magic"}"#, 400, "fractal or spectral"),
        ("POST", "/api/assemble", &json, br#"{"path": "smol.gguf", "out": "../../x.gguf"}"#, 400, "plain file name"),
        ("DELETE", "/api/models", &[], b"", 405, ""),
    ];
    let mut refused = 0;
    for (method, path, headers, body, want, needle) in &cases {
        let (st, v) = raw(&s, method, path, headers, body);
        let msg = v["error"].as_str().unwrap_or_default().to_owned();
        let short = &path[..path.len().min(80)];
        assert_eq!(st, *want, "{method} {short} {headers:?}: {v}");
        refused += usize::from((400..500).contains(&st));
        assert!(msg.contains(needle), "{method} {short}: the message {msg:?} should say {needle:?}");
        assert!(!msg.contains(s.root.to_str().unwrap()), "{short}: the message does not reveal the root");
        assert_eq!(get(&s, "/api/health").0, 200, "the server is still up after {method} {short}");
    }
    println!("hostile requests: {} sent, {refused} refused with 4xx", cases.len());
    assert_eq!(refused, cases.len(), "hostile requests: {} sent, {refused} refused with 4xx", cases.len());
    // A corrupt model as a job fails with the reason, and leaves no output.
    let (_, job) = post(&s, "/api/dissect", &json!({ "path": "corrupt.gguf" }));
    let end = follow(&s, job["id"].as_str().unwrap());
    assert_eq!(end["state"], "failed");
    assert!(end["error"].as_str().unwrap().contains("corrupt.gguf"), "{end}");
    assert!(!s.root.join("results").join(job["id"].as_str().unwrap()).exists());
    assert_eq!(get(&s, "/api/health").0, 200, "the server is still up");

    // With a token: missing or wrong gets 401; the right one passes.
    let t = start(&make_root("api-token"), &["--token", "s3cret"]);
    let (st, v) = get(&t, "/api/models");
    assert_eq!(st, 401);
    assert!(v["error"].as_str().unwrap().contains("missing token"));
    let (st, _) = call(agent().get(&format!("{}/api/models", t.base)).set("Authorization", "Bearer nope"), None);
    assert_eq!(st, 401);
    let (st, _) = call(agent().get(&format!("{}/api/models", t.base)).set("Authorization", "Bearer s3cret"), None);
    assert_eq!(st, 200);

    // Beyond loopback without a token, the server refuses to start.
    let out = organ()
        .arg("serve")
        .arg("--root")
        .arg(&s.root)
        .arg("--addr")
        .arg("0.0.0.0:0")
        .env_remove("ORGAN_TOKEN")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("requires --token"));
}

#[test]
fn two_hundred_inspects_and_four_measure_jobs_at_once() {
    if need::smollm2().is_none() {
        return;
    }
    let s = start(&make_root("api-load"), &["--jobs", "2"]);
    let jobs: Vec<String> = (0..4)
        .map(|_| {
            let (st, j) = post(&s, "/api/measure", &json!({ "paths": ["smol.gguf"] }));
            assert_eq!(st, 202);
            j["id"].as_str().unwrap().to_owned()
        })
        .collect();
    let base = s.base.clone();
    let t0 = Instant::now();
    let handles: Vec<_> = (0..200)
        .map(|_| {
            let url = format!("{base}/api/inspect?path=smol.gguf");
            std::thread::spawn(move || {
                let (st, v) = call(agent().get(&url), None);
                (st, v["tensors"].as_array().map(Vec::len))
            })
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap(), (200, Some(SMOLLM2_TENSORS)));
    }
    eprintln!("200 concurrent inspects in {:.2} s", t0.elapsed().as_secs_f64());
    let reports: Vec<Value> = jobs.iter().map(|id| follow(&s, id)).collect();
    for r in &reports {
        assert_eq!(r["state"], "done", "{r}");
        assert_eq!(r["result"], reports[0]["result"]);
    }
}

#[test]
fn a_cancelled_job_leaves_no_partial_output() {
    if need::smollm2().is_none() {
        return;
    }
    let s = start(&make_root("api-cancel"), &["--jobs", "1"]);
    // A long job (purify every organ, spectral), and one queued behind it.
    let (_, long) = post(&s, "/api/purify", &json!({ "path": "smol.gguf", "method": "spectral", "types": ["organ"] }));
    let (_, queued) = post(&s, "/api/measure", &json!({ "paths": ["smol.gguf"] }));
    let (id, qid) = (long["id"].as_str().unwrap(), queued["id"].as_str().unwrap());
    let (st, q) = call(agent().delete(&format!("{}/api/jobs/{qid}", s.base)), None);
    let long_now = get(&s, &format!("/api/jobs/{id}")).1;
    assert_eq!(
        (st, q["state"].as_str()),
        (200, Some("cancelled")),
        "a queued job cancels: {q}; the long one: {long_now}"
    );
    let t0 = Instant::now();
    loop {
        let st = get(&s, &format!("/api/jobs/{id}")).1;
        if st["state"] == "running" {
            break;
        }
        assert!(st["state"] == "queued" && t0.elapsed() < Duration::from_secs(30), "{st}");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300)); // let it write something
    let (st, c) = call(agent().delete(&format!("{}/api/jobs/{id}", s.base)), None);
    assert_eq!((st, c["state"].as_str()), (200, Some("cancelled")), "{c}");
    assert_eq!(c["outputs"], json!([]));
    for j in [id, qid] {
        assert!(!s.root.join("results").join(j).exists(), "{j}: its directory, temp files and all, is gone");
    }
    assert_eq!(get(&s, &format!("/api/jobs/{id}")).1["state"], "cancelled");
    assert_eq!(get(&s, "/api/health").0, 200);
}

// ---- Regression tests for the hardening of `organ serve` ----------------------------

/// One HTTP/1.1 request written by hand on a fresh connection (so that Host, Origin and
/// broken bodies can be anything), read to its end: the status and the body as JSON (or
/// as a string when it is not JSON). Status 0: the server closed without answering.
fn raw(s: &Server, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> (u16, Value) {
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
fn slow_models(root: &Path, n: usize) -> Vec<String> {
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

fn wait_running(s: &Server, id: &str) {
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
fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).into_iter().flatten().flatten() {
        let c = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
        out.extend(c.split_whitespace().filter_map(|p| p.parse::<u32>().ok()));
    }
    out
}

/// Whether a process still runs (exists and is not a zombie).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(") ").map(|(_, r)| !r.starts_with('Z')))
        .unwrap_or(false)
}

/// Issue 3: the server checked the path when the request came; the child opened it when
/// the job ran. A queued dissect of a regular file, swapped for a symlink to a file outside
/// the root before its turn, dissected the outside file.
#[test]
fn a_queued_job_whose_model_is_swapped_for_a_symlink_outside_fails() {
    if need::smollm2().is_none() {
        return;
    }
    let root = make_root("api-swap");
    let slow = slow_models(&root, 300);
    let victim = root.join("victim.gguf");
    std::fs::copy(root.join("corrupt.gguf"), &victim).unwrap();
    let outside = tmp("api-swap-outside.gguf");
    let _ = std::fs::remove_file(&outside);
    if std::fs::hard_link(smollm2(), &outside).is_err() {
        std::fs::copy(smollm2(), &outside).unwrap();
    }
    let s = start(&root, &["--jobs", "1"]);
    // A long job holds the only slot, so the dissect waits in the queue.
    let (st, blocker) = post(&s, "/api/measure", &json!({ "paths": slow }));
    assert_eq!(st, 202, "{blocker}");
    let bid = blocker["id"].as_str().unwrap().to_owned();
    wait_running(&s, &bid);
    let (st, job) = post(&s, "/api/dissect", &json!({ "path": "victim.gguf" }));
    assert_eq!(st, 202, "{job}");
    let id = job["id"].as_str().unwrap().to_owned();
    assert_eq!(get(&s, &format!("/api/jobs/{id}")).1["state"], "queued");
    std::fs::remove_file(&victim).unwrap();
    std::os::unix::fs::symlink(&outside, &victim).unwrap();
    let (st, c) = call(agent().delete(&format!("{}/api/jobs/{bid}", s.base)), None);
    assert_eq!((st, c["state"].as_str()), (200, Some("cancelled")), "{c}");
    let end = follow(&s, &id);
    assert_eq!(end["state"], "failed", "the dissect read the file outside the root: {end}");
    assert!(end["error"].as_str().unwrap_or_default().contains("outside"), "{end}");
    assert_eq!(end["outputs"], json!([]));
    assert!(!s.root.join("results").join(&id).exists(), "no output remains");
}

/// Issue 4 (and 11b): a restarted server numbered its jobs job-1, job-2… again, and a
/// failing new job-1 removed the previous run's results/job-1.
#[test]
fn job_ids_are_random_and_a_restart_keeps_earlier_results() {
    if need::smollm2().is_none() {
        return;
    }
    let root = make_root("api-restart");
    let s = start(&root, &[]);
    let first = run_job(&s, "/api/dissect", json!({ "path": "smol.gguf" }));
    let organs = s.root.join(first["outputs"][0].as_str().unwrap()).join("manifest.json");
    assert!(organs.is_file());
    drop(s);
    let s = start(&root, &[]);
    let (st, job) = post(&s, "/api/dissect", &json!({ "path": "corrupt.gguf" }));
    assert_eq!(st, 202, "{job}");
    let end = follow(&s, job["id"].as_str().unwrap());
    assert_eq!(end["state"], "failed");
    assert!(organs.is_file(), "the first run's results survive a failing job of the second run: {end}");
    let mut ids = vec![first["id"].as_str().unwrap().to_owned(), job["id"].as_str().unwrap().to_owned()];
    for _ in 0..5 {
        let (st, j) = post(&s, "/api/dissect", &json!({ "path": "corrupt.gguf" }));
        assert_eq!(st, 202, "{j}");
        ids.push(j["id"].as_str().unwrap().to_owned());
    }
    for id in &ids {
        let hex = id.strip_prefix("job-").unwrap_or(id);
        assert!(hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit()), "{id}: 128 random bits in hex");
    }
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), ids.len(), "{ids:?}");
    // Another job's results are not reachable without its id.
    let (st, v) = get(&s, "/api/results/job-1/organs/manifest.json");
    assert!(matches!(st, 400 | 404), "{st} {v}");
}

/// Issue 5: `GET /api/inspect?path=fifo.gguf` pinned a blocking thread forever; past
/// tokio's 512 blocking threads, every other inspect and listing waited forever.
#[test]
fn fifo_inspects_do_not_starve_the_server() {
    if need::smollm2().is_none() {
        return;
    }
    use std::io::{Read, Write};
    let root = make_root("api-fifo");
    let mkfifo = |p: &Path| assert!(std::process::Command::new("mkfifo").arg(p).status().unwrap().success());
    mkfifo(&root.join("fifo.gguf"));
    // A split model whose second shard is a FIFO: the server sees a regular first shard;
    // only the child that opens the second one hangs (until the inspect timeout kills it).
    std::fs::hard_link(root.join("smol.gguf"), root.join("fs-00001-of-00002.gguf")).unwrap();
    mkfifo(&root.join("fs-00002-of-00002.gguf"));
    let s = start(&root, &["--inspect-timeout-ms", "1000"]);
    let addr = s.base.trim_start_matches("http://").to_owned();

    let conns: Vec<std::net::TcpStream> = (0..520)
        .map(|_| {
            let mut c = std::net::TcpStream::connect(&addr).unwrap();
            let req = format!("GET /api/inspect?path=fifo.gguf HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
            c.write_all(req.as_bytes()).unwrap();
            c
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let quick = ureq::AgentBuilder::new().timeout(Duration::from_secs(10)).build();
    let t0 = Instant::now();
    let r = quick.get(&format!("{}/api/inspect?path=smol.gguf", s.base)).call();
    let ok = r.ok().and_then(|r| r.into_json::<Value>().ok()).and_then(|v| v["tensors"].as_array().map(Vec::len));
    assert_eq!(ok, Some(SMOLLM2_TENSORS), "an inspect of a real model answers while 520 FIFO inspects are pending");
    assert!(t0.elapsed() < Duration::from_secs(10));
    assert_eq!(quick.get(&format!("{}/api/models", s.base)).call().map(|r| r.status()).ok(), Some(200));
    let mut refused = 0;
    for mut c in conns {
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut resp = String::new();
        let _ = c.read_to_string(&mut resp);
        let st: u16 = resp.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
        refused += usize::from((400..500).contains(&st));
    }
    assert_eq!(refused, 520, "every FIFO inspect is refused with a 4xx");

    // 50 inspects whose child hangs: at most a few run at once, each is killed after the
    // timeout, and the server answers meanwhile.
    let base = s.base.clone();
    let t0 = Instant::now();
    let hung: Vec<_> = (0..50)
        .map(|_| {
            let url = format!("{base}/api/inspect?path=fs-00001-of-00002.gguf");
            std::thread::spawn(move || {
                call(ureq::AgentBuilder::new().timeout(Duration::from_secs(60)).build().get(&url), None)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let (st, _) = call(quick.get(&format!("{}/api/health", s.base)), None);
    assert_eq!(st, 200);
    assert!(t0.elapsed() < Duration::from_secs(5), "health answers within seconds");
    let running = children(s.child.id()).len();
    assert!(running <= 4, "{running} inspect children at once");
    let mut timed_out = 0;
    for h in hung {
        let (st, v) = h.join().unwrap();
        assert!(st >= 400, "{st} {v}");
        timed_out += usize::from(st == 504);
    }
    eprintln!("50 hanging inspects: {timed_out} stopped by the timeout, the rest refused while busy");
    assert!(t0.elapsed() < Duration::from_secs(60));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(children(s.child.id()), Vec::<u32>::new(), "every timed-out inspect child was killed");
}

/// Issue 7: DNS rebinding. A tokenless loopback server answered any Host
/// (`Host: attacker.example` -> 200), and any cross-site browser request.
#[test]
fn foreign_hosts_and_cross_site_requests_are_refused() {
    if need::smollm2().is_none() {
        return;
    }
    let s = start(&make_root("api-host"), &[]);
    let port = s.base.rsplit(':').next().unwrap().to_owned();
    let (st, v) = raw(&s, "GET", "/api/models", &[("Host", "attacker.example")], b"");
    assert_eq!(st, 421, "Host: attacker.example: {v}");
    assert!(v["error"].as_str().unwrap_or_default().contains("attacker.example"), "{v}");
    let (st, _) = raw(&s, "GET", "/api/health", &[("Host", &format!("attacker.example:{port}"))], b"");
    assert_eq!(st, 421);
    for host in ["localhost", "LOCALHOST:8935", "127.0.0.1", &format!("127.0.0.1:{port}"), "[::1]", "[::1]:1"] {
        let (st, v) = raw(&s, "GET", "/api/health", &[("Host", host)], b"");
        assert_eq!(st, 200, "Host: {host}: {v}");
    }
    let cross: [&[(&str, &str)]; 4] = [
        &[("Origin", "http://attacker.example")],
        &[("Origin", "null")],
        &[("Origin", "http://localhost.attacker.example:8935")],
        &[("Sec-Fetch-Site", "cross-site")],
    ];
    for h in cross {
        let (st, v) = raw(&s, "POST", "/api/measure", h, br#"{"paths": ["smol.gguf"]}"#);
        assert_eq!(st, 403, "{h:?}: {v}");
        assert!(v["error"].is_string(), "{v}");
    }
    let same: [&[(&str, &str)]; 3] = [
        &[("Origin", &format!("http://127.0.0.1:{port}"))],
        &[("Origin", "http://localhost:5173")],
        &[("Sec-Fetch-Site", "same-origin")],
    ];
    for h in same {
        let (st, v) = raw(&s, "GET", "/api/models", h, b"");
        assert_eq!(st, 200, "{h:?}: {v}");
    }
    // --allow-host adds names.
    let t = start(&make_root("api-host2"), &["--allow-host", "organ.lan", "--allow-host", "Models.Example"]);
    for host in ["organ.lan", "organ.lan:8935", "models.example:80"] {
        assert_eq!(raw(&t, "GET", "/api/health", &[("Host", host)], b"").0, 200, "{host}");
    }
    assert_eq!(raw(&t, "GET", "/api/health", &[("Origin", "https://organ.lan")], b"").0, 200);
    assert_eq!(raw(&t, "GET", "/api/health", &[("Host", "other.lan")], b"").0, 421);
}

/// Issue 10: slow clients were never timed out; 300 half-sent requests locked every
/// other client out.
#[test]
fn stalled_connections_are_closed_and_others_get_through() {
    if need::smollm2().is_none() {
        return;
    }
    use std::io::{Read, Write};
    let root = make_root("api-slow");
    let s = start(&root, &["--header-timeout-ms", "1000", "--body-timeout-ms", "1000"]);
    let addr = s.base.trim_start_matches("http://").to_owned();
    let stalled: Vec<std::net::TcpStream> = (0..300)
        .map(|_| {
            let mut c = std::net::TcpStream::connect(&addr).unwrap();
            c.write_all(b"GET /api/hea").unwrap();
            c
        })
        .collect();
    // A body that never comes.
    let mut body = std::net::TcpStream::connect(&addr).unwrap();
    let head = format!(
        "POST /api/measure HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"pa"
    );
    body.write_all(head.as_bytes()).unwrap();
    let t0 = Instant::now();
    let quick = ureq::AgentBuilder::new().timeout(Duration::from_secs(5)).build();
    let r = quick.get(&format!("{}/api/health", s.base)).call();
    assert!(r.is_ok_and(|r| r.status() == 200), "a normal request gets through");
    assert!(t0.elapsed() < Duration::from_secs(5));
    let deadline = Instant::now() + Duration::from_secs(10);
    let closed = |mut c: std::net::TcpStream| {
        let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
        c.set_read_timeout(Some(left)).unwrap();
        let mut buf = Vec::new();
        match c.read_to_end(&mut buf) {
            Ok(_) => true,
            Err(e) => !matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut),
        }
    };
    let n = stalled.into_iter().map(closed).filter(|&c| c).count();
    assert_eq!(n, 300, "the server closes stalled connections within 10 s");
    assert!(closed(body), "the server closes a connection whose body stalls");
    assert_eq!(get(&s, "/api/health").0, 200);
}

/// Issue 11a: killing `organ serve` left its running child working, orphaned.
#[test]
fn killing_the_server_kills_its_running_job() {
    if need::smollm2().is_none() {
        return;
    }
    let root = make_root("api-orphan");
    let slow = slow_models(&root, 300);
    let mut s = start(&root, &["--jobs", "1"]);
    let (st, job) = post(&s, "/api/measure", &json!({ "paths": slow }));
    assert_eq!(st, 202, "{job}");
    wait_running(&s, job["id"].as_str().unwrap());
    // "running" is set just before the fork; and until it has exec'ed `organ measure`, the
    // child may still be between fork and the prctl that sets its parent-death signal
    // (stopped there, it would never set it). Wait for the exec'ed child.
    let is_measure = |pid: &u32| {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        cmdline.split(|&b| b == 0).any(|a| a == b"measure")
    };
    let t0 = Instant::now();
    let mut kids = children(s.child.id());
    while !(kids.len() == 1 && kids.iter().all(is_measure)) && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(5));
        kids = children(s.child.id());
    }
    assert!(kids.len() == 1 && kids.iter().all(is_measure), "one running measure child: {kids:?}");
    // Stopped, the child cannot die of SIGPIPE on its next progress line once the server is
    // gone: it stands for a child in a quiet phase (hashing, writing), where it would run on.
    let signal = |sig: &str, pid: u32| std::process::Command::new("kill").arg(sig).arg(pid.to_string()).status();
    signal("-STOP", kids[0]).unwrap();
    s.child.kill().unwrap(); // SIGKILL: no chance to clean up
    let _ = s.child.wait();
    let t0 = Instant::now();
    while alive(kids[0]) && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let orphan = alive(kids[0]);
    if orphan {
        let _ = signal("-KILL", kids[0]);
    }
    assert!(!orphan, "the job's child outlived the server by 5 s");
}

/// Issue 11c: `--token ""` was accepted with a public --addr (no authentication at all).
#[test]
fn an_empty_or_blank_token_is_refused() {
    if need::smollm2().is_none() {
        return;
    }
    let root = make_root("api-empty-token");
    for (arg, env) in [(Some(""), None), (Some("   "), None), (None, Some(""))] {
        let mut c = organ();
        c.arg("serve").arg("--root").arg(&root).arg("--addr").arg("0.0.0.0:0").env_remove("ORGAN_TOKEN");
        if let Some(t) = arg {
            c.arg("--token").arg(t);
        }
        if let Some(t) = env {
            c.env("ORGAN_TOKEN", t);
        }
        let mut child = c.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
        let t0 = Instant::now();
        let status = loop {
            if let Some(st) = child.try_wait().unwrap() {
                break Some(st);
            }
            if t0.elapsed() > Duration::from_secs(5) {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(status.is_some_and(|s| !s.success()), "token {arg:?} / ORGAN_TOKEN={env:?}: the server started");
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
        assert!(err.contains("empty"), "{err}");
    }
}

/// Issue 11d: "missing" and "leads outside" were different answers, so a client could
/// probe what exists outside the root.
#[test]
fn missing_and_outside_paths_get_the_same_answer() {
    if need::smollm2().is_none() {
        return;
    }
    let s = start(&make_root("api-probe"), &[]);
    let (a, va) = get(&s, "/api/inspect?path=escape/passwd");
    let (b, vb) = get(&s, "/api/inspect?path=escape/no-such-file");
    let (c, vc) = get(&s, "/api/inspect?path=missing.gguf");
    assert_eq!((a, b, c), (404, 404, 404), "{va} {vb} {vc}");
    let msg = |v: &Value, p: &str| v["error"].as_str().unwrap_or_default().replace(p, "P");
    assert_eq!(msg(&va, "escape/passwd"), msg(&vc, "missing.gguf"));
    assert_eq!(msg(&vb, "escape/no-such-file"), msg(&vc, "missing.gguf"));
    assert!(msg(&vc, "missing.gguf").contains("no such model under the root"), "{vc}");
    let (a, va) = post(&s, "/api/measure", &json!({ "paths": ["escape/hosts"] }));
    let (b, vb) = post(&s, "/api/measure", &json!({ "paths": ["nothing/hosts"] }));
    assert_eq!((a, msg(&va, "escape/hosts")), (b, msg(&vb, "nothing/hosts")));
}

/// An inspect whose JSON is over the server's cap is refused whole (it used to be cut at
/// 1 GiB and served as 200, after holding up to 1 GiB per inspect, four at once).
#[test]
fn an_inspect_over_the_output_cap_is_refused_not_cut() {
    if need::smollm2().is_none() {
        return;
    }
    let root = make_root("api-inspect-cap");
    let s = start(&root, &["--inspect-max-bytes", "100000"]);
    let (st, v) = get(&s, "/api/inspect?path=smol.gguf");
    assert_eq!(st, 422, "{v}");
    assert!(v["error"].as_str().unwrap().contains("over 100000 bytes"), "{v}");
    // The server holds up, and no inspect child is left running.
    assert_eq!(get(&s, "/api/health").0, 200);
    assert!(children(s.child.id()).is_empty(), "an inspect child outlived its request");
    // Under the cap, the whole JSON comes back.
    let big = start(&root, &[]);
    let (st, v) = get(&big, "/api/inspect?path=smol.gguf");
    assert_eq!((st, v["tensors"].as_array().map(Vec::len)), (200, Some(SMOLLM2_TENSORS)));
}

// ---- Typed progress: children report in `--progress jsonl` events --------------------

/// The stderr lines of `organ ARGS --progress jsonl`, each parsed as JSON (every line must
/// be one).
fn jsonl_events(args: &[&std::ffi::OsStr]) -> (bool, Vec<Value>) {
    let mut c = organ();
    c.args(args).args(["--progress", "jsonl"]);
    let o = c.output().unwrap();
    let err = String::from_utf8(o.stderr).unwrap();
    let events = err.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}"))).collect();
    (o.status.success(), events)
}

/// `--progress jsonl`: measure writes one progress event per tensor and nothing else; a
/// failure ends with one error event carrying kind, path and offset. Without the flag,
/// people still read `organ: error: `.
#[test]
fn progress_jsonl_gives_typed_progress_and_errors() {
    if need::smollm2().is_none() {
        return;
    }
    let root = make_root("api-jsonl");
    let smol = root.join("smol.gguf");
    let (ok, events) = jsonl_events(&["measure".as_ref(), smol.as_os_str(), "--summary-only".as_ref()]);
    assert!(ok);
    assert_eq!(events.len(), SMOLLM2_TENSORS, "one event per tensor");
    assert!(events.iter().all(|e| e["event"] == "progress" && e["total"] == SMOLLM2_TENSORS), "{events:?}");
    assert!(events.iter().any(|e| e["done"] == SMOLLM2_TENSORS), "the last tensor is reported");

    let corrupt = root.join("corrupt.gguf");
    let (ok, events) = jsonl_events(&["inspect".as_ref(), corrupt.as_os_str()]);
    assert!(!ok);
    let [e] = events.as_slice() else { panic!("one error event: {events:?}") };
    assert_eq!(e["event"], "error");
    assert_eq!(e["kind"], "format", "{e}");
    assert_eq!(e["path"].as_str(), Some(corrupt.to_str().unwrap()), "{e}");
    assert!(e["offset"].is_u64(), "{e}");
    let human = organ().arg("inspect").arg(&corrupt).output().unwrap();
    let text = String::from_utf8(human.stderr).unwrap();
    assert_eq!(text, format!("organ: error: {}\n", e["message"].as_str().unwrap()));
}

/// A job's progress and its error come from the child's events: a measure's last status
/// says every tensor is done, and a failing dissect's error is the child's message (root
/// hidden), not a JSON line or a prefixed human one.
#[test]
fn job_progress_and_errors_come_from_the_childs_events() {
    if need::smollm2().is_none() {
        return;
    }
    let s = start(&make_root("api-events"), &[]);
    let end = run_job(&s, "/api/measure", json!({ "paths": ["smol.gguf"] }));
    assert_eq!(end["progress"], json!([SMOLLM2_TENSORS, SMOLLM2_TENSORS]));

    let (st, job) = post(&s, "/api/dissect", &json!({ "path": "corrupt.gguf" }));
    assert_eq!(st, 202, "{job}");
    let end = follow(&s, job["id"].as_str().unwrap());
    assert_eq!(end["state"], "failed", "{end}");
    let err = end["error"].as_str().unwrap();
    assert!(err.starts_with("ROOT/corrupt.gguf: ") && err.contains("offset"), "{end}");
    assert!(!err.contains("organ: error") && !err.starts_with('{'), "{end}");

    let (st, j) = get(&s, "/api/inspect?path=corrupt.gguf");
    assert_eq!(st, 422, "{j}");
    let msg = j["error"].as_str().unwrap();
    assert!(msg.starts_with("corrupt.gguf: ROOT/corrupt.gguf: ") && !msg.contains('{'), "{j}");
}
