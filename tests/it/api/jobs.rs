//! Jobs: cancellation without partial output, ids that survive a restart, a killed
//! server taking its running job with it, and progress and errors from the child's typed
//! events.

use super::server::*;
use crate::common::{need, organ, SMOLLM2_TENSORS};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

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
    // A second DELETE removes the cancelled job's entry.
    let (st, d) = call(agent().delete(&format!("{}/api/jobs/{id}", s.base)), None);
    assert_eq!((st, d["state"].as_str()), (200, Some("deleted")), "{d}");
    assert_eq!(get(&s, &format!("/api/jobs/{id}")).0, 404);
    assert_eq!(get(&s, "/api/health").0, 200);
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
