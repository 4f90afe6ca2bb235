//! Finished jobs go away (hardening item 8): `DELETE /api/jobs/{id}` removes a finished
//! job's results and entry, finished jobs expire after `--job-retention` and beyond
//! `--max-finished-jobs`, and a job past `--job-timeout` is stopped, its processes killed.

use super::server::*;
use crate::common::need;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

fn delete(s: &Server, id: &str) -> (u16, Value) {
    call(agent().delete(&format!("{}/api/jobs/{id}", s.base)), None)
}

fn measure_tiny(s: &Server) -> String {
    let end = run_job(s, "/api/measure", json!({ "paths": ["smol.gguf"] }));
    end["id"].as_str().unwrap().to_owned()
}

/// There was no way to remove a finished job's results: DELETE of a done job answered 200
/// and removed nothing.
#[test]
fn deleting_a_finished_job_removes_its_results_and_entry() {
    let s = start(&make_tiny_root("api-delete"), &[]);
    let id = measure_tiny(&s);
    let dir = s.root.join("results").join(&id);
    assert!(dir.join("report.json").is_file());
    let (st, r) = get(&s, &format!("/api/jobs/{id}/result"));
    assert_eq!((st, r["models"].as_array().map(Vec::len)), (200, Some(1)), "{r}");
    let (st, v) = delete(&s, &id);
    assert_eq!((st, v["state"].as_str(), &v["outputs"]), (200, Some("deleted"), &json!([])), "{v}");
    assert!(!dir.exists(), "the job's results directory is gone");
    for path in [format!("/api/jobs/{id}"), format!("/api/jobs/{id}/result"), format!("/api/jobs/{id}/events")] {
        let (st, v) = get(&s, &path);
        assert_eq!(st, 404, "{path}: {v}");
    }
    assert_eq!(delete(&s, &id).0, 404, "deleted once");
    let (st, _) = get(&s, &format!("/api/results/{id}/report.json"));
    assert_eq!(st, 404, "no download either");
    // A failed job (its directory already gone) is deleted the same way.
    let (st, job) = post(&s, "/api/dissect", &json!({ "path": "corrupt.gguf" }));
    assert_eq!(st, 202);
    let fid = job["id"].as_str().unwrap();
    assert_eq!(follow(&s, fid)["state"], "failed");
    let (st, r) = get(&s, &format!("/api/jobs/{fid}/result"));
    assert_eq!(st, 404, "a failed job has no report: {r}");
    assert_eq!(delete(&s, fid).1["state"], "deleted");
    assert_eq!(get(&s, &format!("/api/jobs/{fid}")).0, 404);
}

/// Finished jobs were kept for ever, results and all.
#[test]
fn finished_jobs_expire_after_the_retention() {
    let s = start(&make_tiny_root("api-retention"), &["--job-retention", "2"]);
    let id = measure_tiny(&s);
    let ended = Instant::now();
    let dir = s.root.join("results").join(&id);
    assert_eq!(get(&s, &format!("/api/jobs/{id}")).0, 200, "kept at first");
    assert!(dir.is_dir());
    while get(&s, &format!("/api/jobs/{id}")).0 == 200 {
        assert!(ended.elapsed() < Duration::from_secs(15), "still there after 15 s");
        std::thread::sleep(Duration::from_millis(100));
    }
    let gone = ended.elapsed();
    assert!(gone >= Duration::from_millis(1900), "expired after {gone:?}, before the retention of 2 s");
    assert!(!dir.exists(), "its results went with it");
    eprintln!("a job kept 2 s expired {:.1} s after it ended", gone.as_secs_f64());
}

/// The number of finished jobs kept had no bound.
#[test]
fn only_the_newest_finished_jobs_are_kept() {
    let s = start(&make_tiny_root("api-max-finished"), &["--max-finished-jobs", "2"]);
    let ids: Vec<String> = (0..3).map(|_| measure_tiny(&s)).collect();
    // The sweep that follows a job's end runs just after its last event.
    let t0 = Instant::now();
    while get(&s, &format!("/api/jobs/{}", ids[0])).0 == 200 && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(get(&s, &format!("/api/jobs/{}", ids[0])).0, 404, "the oldest of 3 finished jobs is dropped");
    assert!(!s.root.join("results").join(&ids[0]).exists());
    for id in &ids[1..] {
        assert_eq!(get(&s, &format!("/api/jobs/{id}")).0, 200, "{id}: the 2 newest stay");
        assert!(s.root.join("results").join(id).join("report.json").is_file());
    }
}

/// Item 2 (for the API): a job had no wall-clock limit; one made to run long ran on.
#[test]
fn a_job_past_the_time_limit_is_stopped_with_its_processes() {
    if need::smollm2().is_none() {
        return;
    }
    let root = make_root("api-job-timeout");
    let slow = slow_models(&root, 300);
    let s = start(&root, &["--jobs", "1", "--job-timeout", "1"]);
    let t0 = Instant::now();
    let (st, job) = post(&s, "/api/measure", &json!({ "paths": slow }));
    assert_eq!(st, 202, "{job}");
    let id = job["id"].as_str().unwrap();
    wait_running(&s, id);
    let end = follow(&s, id);
    let took = t0.elapsed();
    assert_eq!(end["state"], "failed", "{end}");
    let err = end["error"].as_str().unwrap_or_default();
    assert!(err.contains("limit of 1 s") && err.contains("--job-timeout"), "{end}");
    assert!(took >= Duration::from_secs(1) && took < Duration::from_secs(20), "stopped after {took:?}");
    assert_eq!(end["outputs"], json!([]));
    assert!(!s.root.join("results").join(id).exists(), "no partial output remains");
    let t1 = Instant::now();
    while !children(s.child.id()).is_empty() && t1.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(children(s.child.id()), Vec::<u32>::new(), "the job's process was killed");
    assert_eq!(get(&s, "/api/health").0, 200);
}
