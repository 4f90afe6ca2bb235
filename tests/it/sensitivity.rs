//! `organ sensitivity` (docs/sensitivity.md) on SmolLM2 and tests/data/perplexity.txt:
//! each changed model differs from the input in its tensor only; the KL divergence is
//! llama-perplexity's own for that model; a run killed with SIGKILL resumes to the same
//! report; the errors come before any work. Contexts of 128 tokens, 2 chunks (128 scored
//! tokens, over the 100 llama.cpp wants) keep each evaluation to about a second.

use crate::common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn text() -> PathBuf {
    repo().join("tests/data/perplexity.txt")
}

fn llama_bin() -> PathBuf {
    let c = llama_tool("llama-perplexity");
    Path::new(c.get_program()).parent().unwrap().to_owned()
}

#[track_caller]
fn test_dir(name: &str) -> PathBuf {
    let d = tmp(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `organ sensitivity MODEL --text T --ctx 128 --chunks 2 --llama-cpp BIN EXTRA…` (two jobs
/// unless EXTRA says how many).
fn sensitivity(model: &Path, extra: &[&str]) -> Command {
    let mut c = organ();
    c.arg("sensitivity").arg(model).arg("--text").arg(text());
    c.args(["--ctx", "128", "--chunks", "2", "--llama-cpp"]).arg(llama_bin()).args(extra);
    if !extra.contains(&"--jobs") {
        c.args(["--jobs", "2"]);
    }
    c
}

fn json(p: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

/// The tensors `organ diff A B --json` finds not identical.
fn changed_tensors(a: &Path, b: &Path, dir: &Path) -> Vec<String> {
    let out = dir.join("diff.json");
    let mut c = organ();
    c.arg("diff").arg(a).arg(b).arg("--json").arg(&out).arg("--force");
    ok(c);
    let d = json(&out);
    d["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["identical"] != Value::Bool(true))
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn each_changed_model_differs_in_its_tensor_only_and_scores_as_llama_cpp_scores_it() {
    let Some(model) = need::smollm2_and_llama() else { return };
    let dir = test_dir("sens-to");
    let keep = dir.join("models");
    std::fs::create_dir_all(&keep).unwrap();
    let report = dir.join("s.json");
    let mut c =
        sensitivity(&model, &["--to", "q4_0", "--name", "blk.3.attn_v.weight", "--name", "blk.7.ffn_down.weight"]);
    c.arg("--no-cache").arg("--keep-models").arg(&keep).arg("--json").arg(&report).arg("--csv").arg(dir.join("s.csv"));
    let out = ok(c);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("blk.7.ffn_down.weight"), "{stdout}");
    let r = json(&report);
    assert_eq!(r["organ_sensitivity"], 1);
    assert_eq!(r["change"], "Q4_0");
    let rows = r["tensors"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for row in rows {
        let name = row["name"].as_str().unwrap();
        assert_eq!(row["changed_type"], "Q4_0", "{name}");
        let changed = keep.join(format!("{name}.gguf"));
        assert_eq!(changed_tensors(&model, &changed, &dir), vec![name.to_owned()], "{name}");
        // The KL divergence is what llama-perplexity measures for that very model.
        let eval = dir.join("eval.json");
        let mut e = organ();
        e.arg("eval").arg(&changed).arg("--base").arg(&model).arg("--text").arg(text());
        e.args(["--ctx", "128", "--chunks", "2", "-j", "1", "--llama-cpp"]).arg(llama_bin());
        e.arg("--json").arg(&eval).arg("--force");
        ok(e);
        let kld = &json(&eval)["kl_divergence"]["mean"];
        assert_eq!(row["kld"]["value"], kld["value"], "{name}");
        assert!(row["kld"]["value"].as_f64().unwrap() > 0.0, "{name}");
    }
    let csv = std::fs::read_to_string(dir.join("s.csv")).unwrap();
    assert_eq!(csv.lines().count(), 3, "{csv}");
    assert!(csv.starts_with("name,kind,layer,type,"), "{csv}");
}

/// What an evaluation may write beyond twice its changed tensor: the changed shard's
/// header (its split keys, the set id and one tensor's entry: 256 bytes on SmolLM2) and
/// its padding, with room to spare.
const DISK_OVERHEAD: u64 = 64 << 10;

/// The `--progress jsonl` events named `name` on `stderr`.
fn events<'a>(stderr: &'a str, name: &'a str) -> impl Iterator<Item = Value> + 'a {
    stderr.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).filter(move |e| e["event"] == name)
}

#[test]
fn each_evaluation_writes_its_tensor_not_a_model_copy_and_scores_as_a_whole_copy() {
    let Some(model) = need::smollm2_and_llama() else { return };
    let dir = test_dir("sens-disk");
    let names = ["--name", "blk.3.attn_v.weight", "--name", "blk.7.ffn_down.weight", "--name", "token_embd.weight"];
    // Each run in a cache of its own (the second must measure again, not read back).
    let run = |extra: &[&str], report: &Path| {
        let mut c = sensitivity(&model, &["--ablate", "zero", "--stats", "--progress", "jsonl"]);
        // The staged shards and the changed models are made in the run's cache: nothing of
        // them may be left there.
        c.args(names)
            .args(extra)
            .arg("--cache")
            .arg(report.with_extension("cache"))
            .arg("--json")
            .arg(report)
            .arg("--force");
        ok(c)
    };
    let staged = dir.join("staged.json");
    let out = run(&[], &staged);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let model_bytes = std::fs::metadata(&model).unwrap().len();
    let per: Vec<Value> = events(&stderr, "evaluation_stats").collect();
    assert_eq!(per.len(), 3, "{stderr}");
    for e in &per {
        let (written, changed) = (e["bytes_written"].as_u64().unwrap(), e["changed_bytes"].as_u64().unwrap());
        assert!(written <= 2 * changed + DISK_OVERHEAD, "{e}: more than 2 × the tensor + {DISK_OVERHEAD}");
        assert!(written < model_bytes / 2, "{e}: {written} bytes of a {model_bytes}-byte model");
    }
    let end = events(&stderr, "sensitivity_stats").next().unwrap_or_else(|| panic!("{stderr}"));
    assert_eq!(end["evaluations"], 3, "{end}");
    assert_eq!(end["linked"], "hard links", "{end}");
    // Staged once: the model's bytes and a header per shard.
    let staged_bytes = end["staged_bytes"].as_u64().unwrap();
    assert!((model_bytes..model_bytes + DISK_OVERHEAD).contains(&staged_bytes), "{end}");
    // A whole copy of each changed model (--keep-models) scores the same to the last digit.
    let keep = dir.join("models");
    std::fs::create_dir_all(&keep).unwrap();
    let whole = dir.join("whole.json");
    let out = run(&["--keep-models", keep.to_str().unwrap()], &whole);
    let stderr = String::from_utf8_lossy(&out.stderr);
    for e in events(&stderr, "evaluation_stats") {
        assert!(e["bytes_written"].as_u64().unwrap() >= model_bytes / 2, "{e}: --keep-models writes it whole");
    }
    assert_eq!(json(&staged)["tensors"], json(&whole)["tensors"]);
    // Nothing of the staging or of the changed models is left.
    let left: Vec<PathBuf> = walk(&dir).into_iter().filter(|p| p.extension().is_some_and(|e| e == "gguf")).collect();
    assert!(left.iter().all(|p| p.starts_with(&keep)), "{left:?}");
}

/// Without --chunks, each evaluation scores the default 6 contexts (what a sweep fits
/// in 10 minutes with: docs/sensitivity.md), the report says so, and `--stats` keeps the
/// running KL divergence after each chunk, the last the report's figure to 5 decimals.
/// `organ sensitivity`'s default --chunks.
const CHUNKS: usize = 6;

#[test]
fn the_default_chunks_are_in_the_report_and_stats_keep_each_chunks_running_figure() {
    let Some(model) = need::smollm2_and_llama() else { return };
    let dir = test_dir("sens-chunks");
    let report = dir.join("s.json");
    let mut c = organ();
    c.args(["--progress", "jsonl", "sensitivity"]).arg(&model).arg("--text").arg(text());
    c.args(["--ablate", "zero", "--name", "blk.0.attn_k.weight", "--jobs", "1", "--stats", "--no-cache"]);
    c.arg("--llama-cpp").arg(llama_bin()).arg("--json").arg(&report);
    let out = ok(c);
    let r = json(&report);
    assert_eq!(r["text"]["chunks"], CHUNKS, "{r}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let e = events(&stderr, "evaluation_stats").next().unwrap_or_else(|| panic!("{stderr}"));
    let rows = e["kld_by_chunk"].as_array().unwrap_or_else(|| panic!("{e}"));
    assert_eq!(rows.len(), CHUNKS, "{e}");
    let last = rows[CHUNKS - 1][0].as_f64().unwrap();
    let kld = r["tensors"][0]["kld"]["value"].as_f64().unwrap();
    assert!((last - kld).abs() <= 5e-6 + 1e-12, "{last} after the last chunk, {kld} in the report");
}

#[test]
fn noise_ablation_keeps_the_type_and_hurts_more_than_requantization() {
    let Some(model) = need::smollm2_and_llama() else { return };
    let dir = test_dir("sens-noise");
    let keep = dir.join("models");
    std::fs::create_dir_all(&keep).unwrap();
    let report = dir.join("s.json");
    let mut c = sensitivity(&model, &["--ablate", "noise", "--name", "blk.3.attn_v.weight"]);
    c.arg("--no-cache").arg("--keep-models").arg(&keep).arg("--json").arg(&report);
    ok(c);
    let r = json(&report);
    let row = &r["tensors"][0];
    assert_eq!(r["change"], "noise");
    assert_eq!(row["type"], row["changed_type"]);
    assert_eq!(row["bytes"], row["changed_bytes"]);
    let changed = keep.join("blk.3.attn_v.weight.gguf");
    assert_eq!(changed_tensors(&model, &changed, &dir), vec!["blk.3.attn_v.weight".to_owned()]);
    // Noise of the tensor's own statistics destroys what it carries: far more than Q4_0.
    assert!(row["kld"]["value"].as_f64().unwrap() > 0.05, "{row}");
}

#[test]
fn a_run_killed_with_sigkill_resumes_to_the_same_report() {
    let Some(model) = need::smollm2_and_llama() else { return };
    let dir = test_dir("sens-resume");
    let names = ["--name", "blk.1.attn_q.weight", "--name", "blk.2.attn_k.weight", "--name", "blk.4.ffn_up.weight"];
    let run = |cache: &Path, report: &Path| {
        let mut c = sensitivity(&model, &["--ablate", "zero", "--jobs", "1"]);
        c.args(names).arg("--cache").arg(cache).arg("--json").arg(report).arg("--force");
        c
    };
    // Uninterrupted, in a cache of its own.
    let whole = dir.join("whole.json");
    ok(run(&dir.join("cache-a"), &whole));
    // Killed once its first result is kept, then run again.
    let cache = dir.join("cache-b");
    let mut child = run(&cache, &dir.join("killed.json")).spawn().unwrap();
    let kept =
        |cache: &Path| walk(cache).into_iter().filter(|p| p.parent().is_some_and(|d| d.ends_with("tensors"))).count();
    let t0 = std::time::Instant::now();
    while kept(&cache) == 0 && t0.elapsed() < std::time::Duration::from_secs(120) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let n = kept(&cache);
    assert!((1..3).contains(&n), "{n} results kept before the kill");
    let resumed = dir.join("resumed.json");
    let out = ok(run(&cache, &resumed));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("{n} of 3 tensors measured already")), "{stderr}");
    let (a, b) = (json(&whole), json(&resumed));
    assert_eq!(a["tensors"], b["tensors"]);
    assert_eq!(a["text"], b["text"]);
    // The killed run's staged shards and changed model were swept: no model is left.
    let models: Vec<PathBuf> =
        walk(&cache).into_iter().filter(|p| p.extension().is_some_and(|e| e == "gguf")).collect();
    assert!(models.is_empty(), "{models:?}");
}

/// The files under `d`, links not followed (a run's scratch holds links to
/// `/proc/self/fd/N`, which in this process may lead to a directory being read).
fn walk(d: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(d).into_iter().flatten().flatten() {
        let p = e.path();
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn errors_come_before_any_work() {
    let Some(model) = need::smollm2_and_llama() else { return };
    let dir = test_dir("sens-errors");
    let short = dir.join("short.txt");
    std::fs::write(&short, "Too short a text.").unwrap();
    let mut c = organ();
    c.arg("sensitivity").arg(&model).arg("--text").arg(&short).args(["--to", "q4_0", "--no-cache"]);
    c.arg("--llama-cpp").arg(llama_bin());
    let e = fails(c);
    assert!(e.contains("too short") && e.contains("short.txt"), "{e}");
    let mut c = sensitivity(&model, &["--to", "q4_0", "--name", "nothing.like.this", "--no-cache"]);
    c.arg("--json").arg(dir.join("x.json"));
    let e = fails(c);
    assert!(e.contains("names nothing.like.this matches no tensor"), "{e}");
    let mut c = sensitivity(&model, &["--to", "iq2_xxs", "--no-cache"]);
    c.arg("--json").arg(dir.join("x.json"));
    let e = fails(c);
    assert!(e.contains("iq2_xxs") || e.contains("IQ2_XXS"), "{e}");
    let mut c = organ();
    c.arg("sensitivity").arg(&model).arg("--text").arg(text()).args(["--to", "q4_0", "--no-cache"]);
    c.arg("--llama-cpp").arg(&dir);
    let e = fails(c);
    assert!(e.contains("llama-perplexity") && e.contains("build-llama.sh"), "{e}");
    assert!(!dir.join("x.json").exists());
}
