//! A sensitivity sweep spread over workers (`organ sensitivity … --shard I/N --results R`)
//! and merged (`organ report merge R`; docs/sensitivity.md), on SmolLM2 with two texts:
//! three shards, one killed once it has stored a result and started again with another
//! cache (another machine), merge to the one-machine report byte for byte; a worker of
//! another sweep, a result swapped for another tensor's and an unfinished shard are
//! refused by name.

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const TENSORS: [&str; 3] = ["blk.1.attn_q.weight", "blk.2.attn_k.weight", "blk.6.attn_output.weight"];

/// The two halves of tests/data/perplexity.txt, cut at a paragraph: two disjoint texts.
fn texts(dir: &Path) -> (PathBuf, PathBuf) {
    let all = std::fs::read_to_string(repo().join("tests/data/perplexity.txt")).unwrap();
    let cut = all[all.len() / 2..].find("\n").unwrap() + all.len() / 2 + 1;
    let (a, b) = (dir.join("first.txt"), dir.join("second.txt"));
    std::fs::write(&a, &all[..cut]).unwrap();
    std::fs::write(&b, &all[cut..]).unwrap();
    (a, b)
}

/// `organ sensitivity MODEL --ablate zero` on the three tensors and both texts, one job,
/// results kept in `cache`, then `extra` (a second `--ablate` replaces the first).
fn sweep(model: &Path, (a, b): &(PathBuf, PathBuf), cache: &Path, extra: &[&str]) -> Command {
    let llama = llama_tool("llama-perplexity");
    let mut c = organ();
    c.arg("sensitivity").arg(model).arg("--text").arg(a).arg("--repeat-text").arg(b);
    if !extra.contains(&"--ablate") {
        c.args(["--ablate", "zero"]);
    }
    c.args(["--ctx", "128", "--chunks", "2", "--jobs", "1", "--llama-cpp"]);
    c.arg(Path::new(llama.get_program()).parent().unwrap());
    for t in TENSORS {
        c.args(["--name", t]);
    }
    c.arg("--cache").arg(cache).args(extra);
    c
}

fn results_in(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("result-"))
        .count()
}

#[test]
fn three_shards_one_killed_merge_to_the_one_machine_report_byte_for_byte() {
    let Some(model) = need::smollm2_and_llama() else { return };
    let dir = tmp("sens-sweep");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let texts = texts(&dir);
    let one = dir.join("one.json");
    let mut c = sweep(&model, &texts, &dir.join("cache-one"), &[]);
    c.arg("--json").arg(&one);
    ok(c);

    let results = dir.join("results");
    let r = results.to_str().unwrap();
    let out = ok(sweep(&model, &texts, &dir.join("cache-0"), &["--shard", "0/3", "--results", r]));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("shard 0/3: 1 of 3 tensors") && stdout.contains("shard 0/3 done"), "{stdout}");
    // Shard 1 is killed once it has stored its first result, and started again with a
    // cache of its own: it takes that result from the results.
    let before = results_in(&results);
    let mut child = sweep(&model, &texts, &dir.join("cache-1a"), &["--shard", "1/3", "--results", r]).spawn().unwrap();
    let t0 = Instant::now();
    while results_in(&results) == before && t0.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(results_in(&results), before + 1, "shard 1 stored one result before the kill");
    assert!(!results.join("shard-1-of-3.json").exists());
    let out = ok(sweep(&model, &texts, &dir.join("cache-1b"), &["--shard", "1/3", "--results", r]));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("1 done, 1 of them taken from the results"), "{stdout}");
    // Shard 2 from a Kubernetes Indexed Job's variable.
    let mut c = sweep(&model, &texts, &dir.join("cache-2"), &["--shards", "3", "--results", r]);
    c.env("JOB_COMPLETION_INDEX", "2");
    ok(c);

    let merged = dir.join("merged.json");
    let mut c = organ();
    c.args(["report", "merge", r, "--json"]).arg(&merged);
    ok(c);
    let (a, b) = (std::fs::read(&one).unwrap(), std::fs::read(&merged).unwrap());
    assert!(
        a == b,
        "the merge differs from the one-machine report:\n{}\n{}",
        String::from_utf8_lossy(&a),
        String::from_utf8_lossy(&b)
    );
    let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
    assert_eq!(v["tensors"].as_array().unwrap().len(), 3);
    assert!(v["repeat_rho"].is_number(), "{v}");

    // A worker of another sweep (another change) is refused, both sweeps named.
    let e =
        fails(sweep(&model, &texts, &dir.join("cache-0"), &["--ablate", "noise", "--shard", "0/3", "--results", r]));
    let both = e.contains("zero on text BLAKE3") && e.contains("noise on text BLAKE3");
    assert!(e.contains("the results of another sweep") && both, "{e}");

    // A result swapped for another tensor's (its BLAKE3 in the index updated too) is
    // refused naming both.
    let index_path = results.join("shard-0-of-3.json");
    let index_text = std::fs::read_to_string(&index_path).unwrap();
    let mut index: serde_json::Value = serde_json::from_str(&index_text).unwrap();
    let other: serde_json::Value =
        serde_json::from_slice(&std::fs::read(results.join("shard-1-of-3.json")).unwrap()).unwrap();
    let (x, y) = (&index["results"][0].clone(), &other["results"][0]);
    assert_ne!(x["tensor"], y["tensor"]);
    let moved = results.join(x["result"].as_str().unwrap());
    let saved = std::fs::read(&moved).unwrap();
    std::fs::copy(results.join(y["result"].as_str().unwrap()), &moved).unwrap();
    index["results"][0]["result_blake3"] = y["result_blake3"].clone();
    std::fs::write(&index_path, serde_json::to_vec_pretty(&index).unwrap()).unwrap();
    let mut c = organ();
    c.args(["report", "merge", r]);
    let e = fails(c);
    let (xt, yt) = (x["tensor"].as_str().unwrap(), y["tensor"].as_str().unwrap());
    assert!(e.contains(&format!("the result of {yt}: model BLAKE3")) && e.contains(&format!("not of {xt}")), "{e}");
    // Without the index's BLAKE3 changed, the bytes' own are refused.
    std::fs::write(&index_path, &index_text).unwrap();
    let mut c = organ();
    c.args(["report", "merge", r]);
    let e = fails(c);
    assert!(e.contains("changed after its shard ended"), "{e}");
    std::fs::write(&moved, saved).unwrap();

    // An unfinished shard.
    std::fs::remove_file(results.join("shard-2-of-3.json")).unwrap();
    let mut c = organ();
    c.args(["report", "merge", r]);
    let e = fails(c);
    assert!(e.contains("shard-2-of-3.json: not there: shard 2 of 3 has not finished"), "{e}");
}
