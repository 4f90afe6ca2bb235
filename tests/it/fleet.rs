//! Fleets (`organ measure DIR`) and atomic outputs under SIGKILL.

use crate::common::*;
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

fn copy(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
    std::fs::copy(src, dst).unwrap();
}

#[test]
fn a_directory_is_measured_as_a_fleet_and_resumes_from_the_cache() {
    if need::smollm2().is_none() {
        return;
    }
    let fleet = tmp("fleet");
    let model = smollm2();
    copy(&model, &fleet.join("a.gguf"));
    copy(&model, &fleet.join("nested/b.gguf"));
    // A split model in the fleet counts once.
    let organs = tmp("fleet-src.organs");
    let mut c = organ();
    c.arg("dissect").arg(&model).arg("--out").arg(&organs);
    ok(c);
    let mut c = organ();
    c.arg("assemble").arg(&organs).arg("--out").arg(fleet.join("nested/c.gguf")).args(["--split-max-size", "40M"]);
    ok(c);
    let cache = tmp("fleet-cache");
    let (json, csv) = (tmp("fleet.json"), tmp("fleet-rank.csv"));
    let run = |extra: &[&str]| {
        let mut c = organ();
        c.arg("measure").arg(&fleet).arg("--summary-only").arg("--cache").arg(&cache).args(extra);
        ok(c)
    };
    let first = run(&["--json", json.to_str().unwrap(), "--ranking-csv", csv.to_str().unwrap()]);
    let out = String::from_utf8(first.stdout).unwrap();
    assert!(out.contains("ranking (3 models") && out.contains("per group, mean θ° across models"), "{out}");
    let report: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let names: Vec<&str> = report["models"].as_array().unwrap().iter().map(|m| m["model"].as_str().unwrap()).collect();
    assert_eq!(names, ["a.gguf", "b.gguf", "c-00001-of-00003.gguf"]);
    assert_eq!(std::fs::read_to_string(&csv).unwrap().lines().count(), 4);
    assert_eq!(std::fs::read_dir(&cache).unwrap().count(), 2, "two distinct models: the file and the split set");

    let second = run(&["--json", tmp("fleet2.json").to_str().unwrap()]);
    assert!(String::from_utf8(second.stderr).unwrap().contains("3 of 3 models taken from the cache"));
    let again: Value = serde_json::from_slice(&std::fs::read(tmp("fleet2.json")).unwrap()).unwrap();
    assert_eq!(report["models"], again["models"]);
    assert_eq!(report["ranking"], again["ranking"]);
}

/// Kills a command with SIGKILL after `delay`; returns whether it had already finished.
fn kill_after(mut c: std::process::Command, delay: Duration) -> bool {
    let mut child = c.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).spawn().unwrap();
    std::thread::sleep(delay);
    let finished = child.try_wait().unwrap().is_some();
    let _ = child.kill(); // SIGKILL
    let status = child.wait().unwrap();
    finished || status.success()
}

#[test]
fn sigkill_at_any_moment_never_leaves_a_partial_output_and_the_input_intact() {
    let Some(model) = need::smollm2() else { return };
    let before = std::fs::read(&model).unwrap();
    let organs = tmp("kill-src.organs");
    let mut c = organ();
    c.arg("dissect").arg(&model).arg("--out").arg(&organs);
    ok(c);
    // A kill can land before, during or after the final rename: whatever the moment, an
    // output that exists must be complete, and a run that finished must have written it.
    for (k, ms) in [0u64, 2, 5, 10, 20, 40, 70, 100, 150, 250, 400].into_iter().enumerate() {
        let d = Duration::from_millis(ms);
        let gguf = tmp(&format!("kill-{k}.gguf"));
        let mut c = organ();
        c.arg("assemble").arg(&organs).arg("--out").arg(&gguf);
        let finished = kill_after(c, d);
        if gguf.exists() {
            assert!(std::fs::read(&gguf).unwrap() == before, "assemble killed after {ms} ms left a partial file");
        } else {
            assert!(!finished, "assemble finished but wrote nothing");
        }

        let dir = tmp(&format!("kill-{k}.organs"));
        let mut c = organ();
        c.arg("dissect").arg(&model).arg("--out").arg(&dir);
        let finished = kill_after(c, d);
        if dir.exists() {
            let m: Value = serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
            let files = m["tensors"].as_array().unwrap();
            assert_eq!(files.len(), 272, "dissect killed after {ms} ms left a partial directory");
            assert!(files.iter().all(|t| dir.join(t["file"].as_str().unwrap()).exists()));
        } else {
            assert!(!finished, "dissect finished but wrote nothing");
        }

        let chimera = tmp(&format!("kill-{k}-graft.gguf"));
        let mut c = organ();
        c.args(["graft", "--type", "organ"])
            .arg("--donor")
            .arg(&organs)
            .arg("--recipient")
            .arg(&model)
            .arg("--out")
            .arg(&chimera);
        let finished = kill_after(c, d);
        if chimera.exists() {
            let b = std::fs::read(&chimera).unwrap();
            let g = organ_core::Gguf::parse(&b, b.len() as u64).expect("a complete GGUF");
            assert_eq!(g.tensors.len(), 272, "graft killed after {ms} ms left a partial file");
        } else {
            assert!(!finished, "graft finished but wrote nothing");
        }
    }
    assert!(std::fs::read(&model).unwrap() == before, "the input was modified");
}
