//! The base's logits kept between runs (docs/judge.md, The base's logits are kept): a
//! second `organ eval` against the same base, and a second `--judge` against the same
//! parent, run llama-perplexity once (the model) and give the first run's figures; a
//! damaged entry is computed again; another text or chunk count does not take the entry;
//! `--logits-cache-max 0` reads and keeps none. Each run is counted by a wrapper in place
//! of llama-perplexity, in a cache of the test's own (ORGAN_CACHE). Two chunks of 128
//! tokens keep each run to a second or two.

use crate::build::smollm2_q8_0;
use crate::common::*;
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

fn text() -> PathBuf {
    repo().join("tests/data/perplexity.txt")
}

/// A fresh directory.
#[track_caller]
fn fresh(name: &str) -> PathBuf {
    let d = tmp(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A directory whose `llama-perplexity` appends `base` (a run saving the base's logits),
/// `model` (a run against saved logits) or `plain` to `DIR/runs`, then execs the real one.
fn counting_bin(name: &str) -> PathBuf {
    let dir = fresh(name);
    let real = PathBuf::from(llama_tool("llama-perplexity").get_program());
    let runs = dir.join("runs");
    let script = format!(
        "#!/bin/sh\n\
         case \" $* \" in\n\
           *' --kl-divergence '*) echo model >> '{runs}';;\n\
           *' --kl-divergence-base '*) echo base >> '{runs}';;\n\
           *) echo plain >> '{runs}';;\n\
         esac\n\
         exec '{real}' \"$@\"\n",
        runs = runs.display(),
        real = real.display(),
    );
    let tool = dir.join("llama-perplexity");
    std::fs::write(&tool, script).unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// The runs `bin` made since the last call, in order, a run made again counted once: on a
/// loaded machine llama-perplexity's output is sometimes cut short at exit and organ runs
/// it again (`run_read`, "running it again"), which appends the same word twice in a
/// row. One evaluation runs the base and the model at most once each, so two equal words
/// in a row are always such a repeat.
fn runs(bin: &Path) -> Vec<String> {
    let p = bin.join("runs");
    let text = std::fs::read_to_string(&p).unwrap_or_default();
    let _ = std::fs::remove_file(&p);
    let mut v: Vec<String> = text.lines().map(str::to_owned).collect();
    v.dedup();
    v
}

/// The cache's entries: the logits files in `cache/logits`, by name.
fn entries(cache: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(cache.join("logits"))
        .map(|d| d.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "kld")).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// The report without what says where the base's logits came from: the figures.
fn figures(mut r: Value) -> Value {
    r.as_object_mut().unwrap().remove("base_logits");
    r
}

#[test]
fn a_second_eval_against_the_same_base_reuses_its_logits() {
    let Some(model) = need::smollm2_and_llama() else { return };
    let q8 = smollm2_q8_0(&model);
    let (bin, cache, dir) = (counting_bin("logits-bin"), fresh("logits-cache"), fresh("logits-out"));
    let json = dir.join("eval.json");
    // Two chunks, unless `extra` says otherwise.
    let eval = |text: &Path, extra: &[&str]| {
        let mut c = organ();
        c.env("ORGAN_CACHE", &cache).arg("eval").arg(&q8).arg("--base").arg(&model).arg("--text").arg(text);
        let chunks = if extra.contains(&"--chunks") { &[][..] } else { &["--chunks", "2"][..] };
        c.args(["--ctx", "128", "-j", LLAMA_THREADS, "--force"]).args(chunks).args(extra);
        c.arg("--llama-cpp").arg(&bin).arg("--json").arg(&json);
        let o = ok(c);
        let r: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        (r, String::from_utf8(o.stdout).unwrap(), String::from_utf8(o.stderr).unwrap())
    };
    // The first run scores the base and keeps its logits.
    let (first, stdout, _) = eval(&text(), &[]);
    assert_eq!(first["base_logits"], "computed", "{first}");
    assert_eq!(runs(&bin), ["base", "model"]);
    assert!(!stdout.contains("cached"), "{stdout}");
    let kept = entries(&cache);
    assert_eq!(kept.len(), 1, "{kept:?}");
    let len = std::fs::metadata(&kept[0]).unwrap().len();
    // 2 chunks × 63 scored tokens × (49,152 + 4) u16, the header and the tokens.
    assert_eq!(len, 12_388_356);
    // The second runs the model alone, and gives the same figures, byte for byte.
    let (second, stdout, stderr) = eval(&text(), &[]);
    assert_eq!(second["base_logits"], "cached", "{second}");
    assert_eq!(runs(&bin), ["model"]);
    assert_eq!(figures(second), figures(first.clone()));
    assert!(stdout.contains("its logits cached"), "{stdout}");
    assert!(stderr.contains("the base's logits read back from"), "{stderr}");
    // A truncated entry is said, and computed again: the same figures, the entry whole.
    std::fs::OpenOptions::new().write(true).open(&kept[0]).unwrap().set_len(len / 2).unwrap();
    let (third, _, stderr) = eval(&text(), &[]);
    assert!(stderr.contains("computed again"), "{stderr}");
    assert_eq!((third["base_logits"].as_str(), runs(&bin)), (Some("computed"), vec!["base".into(), "model".into()]));
    assert_eq!(figures(third), figures(first.clone()));
    assert_eq!(std::fs::metadata(&kept[0]).unwrap().len(), len);
    // Another text (one byte more) is another key; under a cap smaller than its entry,
    // computed, said, and not kept.
    let other = dir.join("other.txt");
    std::fs::write(&other, [std::fs::read(text()).unwrap(), b"\n".to_vec()].concat()).unwrap();
    let (r, _, stderr) = eval(&other, &["--logits-cache-max", "1M"]);
    assert_eq!((r["base_logits"].as_str(), runs(&bin).len()), (Some("computed"), 2));
    assert!(stderr.contains("do not fit in --logits-cache-max (1.0 MiB): not kept"), "{stderr}");
    assert_eq!(entries(&cache), kept);
    // Another chunk count is another key.
    let (r, _, _) = eval(&text(), &["--chunks", "3"]);
    assert_eq!((r["base_logits"].as_str(), runs(&bin).len()), (Some("computed"), 2));
    assert_eq!(entries(&cache).len(), 2);
    // 0: nothing read (the entry is there) and nothing kept.
    let (r, _, _) = eval(&text(), &["--logits-cache-max", "0"]);
    assert_eq!((r["base_logits"].as_str(), runs(&bin).len()), (Some("computed"), 2));
    assert_eq!(entries(&cache).len(), 2);
    // Without a base there is nothing to keep.
    let mut c = organ();
    c.env("ORGAN_CACHE", &cache).arg("eval").arg(&q8).arg("--text").arg(text());
    c.args(["--ctx", "128", "--chunks", "2", "-j", LLAMA_THREADS, "--force"]).arg("--llama-cpp").arg(&bin);
    c.arg("--json").arg(&json);
    ok(c);
    let r: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert!(r["base_logits"].is_null(), "{r}");
    assert_eq!(runs(&bin), ["plain"]);
}

#[test]
fn a_second_judge_against_the_same_parent_reuses_its_logits() {
    let Some(model) = need::smollm2_and_llama() else { return };
    let (bin, cache, dir) = (counting_bin("judge-logits-bin"), fresh("judge-logits-cache"), fresh("judge-logits-out"));
    let json = dir.join("layers.json");
    let judged = || {
        let mut c = organ();
        c.env("ORGAN_CACHE", &cache).arg("layers").arg(&model).args(["--drop", "15", "--force"]);
        c.arg("--judge").arg(text()).args(["--judge-ctx", "128", "--judge-chunks", "2", "--judge-threads", "1"]);
        c.arg("--llama-cpp").arg(&bin).arg("--out").arg(dir.join("dropped.gguf")).arg("--json").arg(&json);
        ok(c);
        let r: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        r["judge"].clone()
    };
    let first = judged();
    assert_eq!(first["evaluation"]["base_logits"], "computed", "{first}");
    assert_eq!(runs(&bin), ["base", "model"]);
    let mut second = judged();
    assert_eq!(second["evaluation"]["base_logits"], "cached", "{second}");
    assert_eq!(runs(&bin), ["model"]);
    // The same verdict on the same figures.
    let mut first = first;
    first["evaluation"] = figures(first["evaluation"].take());
    second["evaluation"] = figures(second["evaluation"].take());
    assert_eq!(second, first);
    assert_eq!(entries(&cache).len(), 1);
}

/// The flag's values: a size or 0; anything else is a usage error naming it.
#[test]
fn the_logits_cache_max_is_a_size() {
    let mut c = organ();
    c.arg("eval").arg("m.gguf").arg("--text").arg("t.txt").args(["--logits-cache-max", "lots"]);
    let o = c.output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("--logits-cache-max") && err.contains("lots"), "{err}");
    // Only with --judge, as its other flags.
    let mut c = organ();
    c.arg("layers").arg("m.gguf").args(["--drop", "1", "--out", "o.gguf", "--logits-cache-max", "0"]);
    let o = c.output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
}
