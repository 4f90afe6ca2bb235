//! Fleets (`organ measure DIR`) and atomic outputs under SIGKILL.

use crate::common::*;
use serde_json::Value;
use std::path::Path;
use std::process::Command;
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
    // Two models of one name are told apart by their paths' tails (issue 50).
    copy(&model, &fleet.join("x/m.gguf"));
    copy(&model, &fleet.join("y/m.gguf"));
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
    assert!(out.contains("ranking (5 models") && out.contains("per group, mean θ° across models"), "{out}");
    let report: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let names: Vec<&str> = report["models"].as_array().unwrap().iter().map(|m| m["model"].as_str().unwrap()).collect();
    assert_eq!(names, ["a.gguf", "b.gguf", "c-00001-of-00003.gguf", "x/m.gguf", "y/m.gguf"]);
    assert!(out.contains("x/m.gguf") && out.contains("y/m.gguf"), "{out}");
    assert_eq!(std::fs::read_to_string(&csv).unwrap().lines().count(), 6);
    assert_eq!(std::fs::read_dir(&cache).unwrap().count(), 2, "two distinct models: the file and the split set");

    let second = run(&["--json", tmp("fleet2.json").to_str().unwrap()]);
    assert!(String::from_utf8(second.stderr).unwrap().contains("5 of 5 models taken from the cache"));
    let again: Value = serde_json::from_slice(&std::fs::read(tmp("fleet2.json")).unwrap()).unwrap();
    assert_eq!(report["models"], again["models"]);
    assert_eq!(report["ranking"], again["ranking"]);
}

/// Kills a command with SIGKILL after `delay`; returns whether it had already finished.
fn kill_after(mut c: Command, delay: Duration) -> bool {
    let mut child = c.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).spawn().unwrap();
    std::thread::sleep(delay);
    let finished = child.try_wait().unwrap().is_some();
    let _ = child.kill(); // SIGKILL
    let status = child.wait().unwrap();
    finished || status.success()
}

/// The moments, in ms after the start, at which a run is killed.
const KILL_MS: [u64; 11] = [0, 2, 5, 10, 20, 40, 70, 100, 150, 250, 400];

/// Runs `what` (the command from `run`, writing to the path it is given) killed at each
/// moment of [`KILL_MS`], and later ones, doubling, until a run finishes (at most 60 s).
/// An output that exists must pass `complete`; a run that finished must have written it.
/// Both outcomes must occur (killed before its output, output complete), or the test has
/// not exercised what it claims.
fn killed_at_every_moment(what: &str, suffix: &str, run: impl Fn(&Path) -> Command, complete: impl Fn(&Path, u64)) {
    let (mut cut, mut whole) = (0, 0);
    let mut delays = KILL_MS.to_vec();
    let mut k = 0;
    while let Some(&ms) = delays.get(k) {
        let out = tmp(&format!("kill-{what}-{k}{suffix}"));
        let finished = kill_after(run(&out), Duration::from_millis(ms));
        if out.exists() {
            complete(&out, ms);
            whole += 1;
        } else {
            assert!(!finished, "{what} finished but wrote nothing");
            cut += 1;
        }
        k += 1;
        if k == delays.len() && whole == 0 && ms < 60_000 {
            delays.push(ms * 2);
        }
    }
    println!("{what}: killed before its output {cut} times, output complete {whole} times");
    assert!(cut > 0 && whole > 0, "{what}: cut {cut}, whole {whole}: both outcomes must occur");
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
    let assemble = |out: &Path| {
        let mut c = organ();
        c.arg("assemble").arg(&organs).arg("--out").arg(out);
        c
    };
    killed_at_every_moment("assemble", ".gguf", assemble, |out, ms| {
        assert!(std::fs::read(out).unwrap() == before, "assemble killed after {ms} ms left a partial file");
    });
    let dissect = |out: &Path| {
        let mut c = organ();
        c.arg("dissect").arg(&model).arg("--out").arg(out);
        c
    };
    killed_at_every_moment("dissect", ".organs", dissect, |dir, ms| {
        let m: Value = serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
        let files = m["tensors"].as_array().unwrap();
        assert_eq!(files.len(), SMOLLM2_TENSORS, "dissect killed after {ms} ms left a partial directory");
        assert!(files.iter().all(|t| dir.join(t["file"].as_str().unwrap()).exists()));
    });
    let graft = |out: &Path| {
        let mut c = organ();
        c.args(["graft", "--type", "organ"]).arg("--donor").arg(&organs).arg("--recipient").arg(&model);
        c.arg("--out").arg(out);
        c
    };
    killed_at_every_moment("graft", ".gguf", graft, |out, ms| {
        let b = std::fs::read(out).unwrap();
        let g = organ_core::Gguf::parse(&b, b.len() as u64).expect("a complete GGUF");
        assert_eq!(g.tensors.len(), SMOLLM2_TENSORS, "graft killed after {ms} ms left a partial file");
    });
    assert!(std::fs::read(&model).unwrap() == before, "the input was modified");
}
