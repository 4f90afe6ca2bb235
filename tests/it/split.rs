//! Split GGUF models (`NAME-0000i-of-0000N.gguf`): written by organ, read as one model
//! from any shard, accepted by llama-gguf-split --merge.

use crate::common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

pub(crate) fn split_model(name: &str) -> Vec<PathBuf> {
    let dir = tmp(&format!("{name}.organs"));
    let mut c = organ();
    c.arg("dissect").arg(smollm2()).arg("--out").arg(&dir);
    ok(c);
    let base = tmp(&format!("{name}.gguf"));
    let mut c = organ();
    c.arg("assemble").arg(&dir).arg("--out").arg(&base).args(["--split-max-size", "30M"]);
    let s = String::from_utf8(ok(c).stdout).unwrap();
    assert!(s.contains("into 4 shards"), "{s}");
    (1..=4).map(|i| tmp(&format!("{name}-{i:05}-of-00004.gguf"))).collect()
}

fn measure_json(model: &Path, name: &str) -> Value {
    let json = tmp(name);
    let mut c = organ();
    c.arg("measure").arg(model).arg("--json").arg(&json).arg("--summary-only");
    ok(c);
    serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap()
}

#[test]
fn a_split_model_reads_as_one_from_any_shard() {
    if need::smollm2().is_none() {
        return;
    }
    let shards = split_model("sp1");
    for s in &shards {
        assert!(s.exists(), "{}", s.display());
        // Every shard's data is at most 30 MiB, except a shard holding one larger tensor.
        let g = std::fs::read(s).unwrap();
        let h = organ_core::Gguf::parse(&g, g.len() as u64).unwrap();
        let data: u64 = h.tensors.iter().map(|t| t.n_bytes).sum();
        assert!(data <= 30 << 20 || h.tensors.len() == 1, "{}: {data}", s.display());
    }
    let whole = measure_json(&smollm2(), "sp1-whole.json");
    let split = measure_json(&shards[2], "sp1-split.json");
    assert_eq!(whole["models"][0]["tensors"], split["models"][0]["tensors"]);
    let mut c = organ();
    c.arg("inspect").arg(&shards[1]).arg("--json");
    let v: Value = serde_json::from_slice(&ok(c).stdout).unwrap();
    assert_eq!(v["tensors"].as_array().unwrap().len(), SMOLLM2_TENSORS);
    assert_eq!(v["shards"].as_array().unwrap().len(), 4);
    assert!(v["metadata"].as_array().unwrap().iter().all(|m| !m["key"].as_str().unwrap().starts_with("split.")));
}

#[test]
fn dissecting_a_split_model_and_assembling_gives_the_original() {
    if need::smollm2().is_none() {
        return;
    }
    let shards = split_model("sp2");
    let dir = tmp("sp2-again.organs");
    let mut c = organ();
    c.arg("dissect").arg(&shards[0]).arg("--out").arg(&dir);
    ok(c);
    let out = tmp("sp2-again.gguf");
    let mut c = organ();
    c.arg("assemble").arg(&dir).arg("--out").arg(&out);
    ok(c);
    assert!(std::fs::read(&out).unwrap() == std::fs::read(smollm2()).unwrap());
}

#[test]
fn a_missing_shard_is_a_clear_error() {
    if need::smollm2().is_none() {
        return;
    }
    let shards = split_model("sp3");
    std::fs::remove_file(&shards[2]).unwrap();
    let o = organ().arg("measure").arg(&shards[0]).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    let e = String::from_utf8(o.stderr).unwrap();
    assert!(e.contains("sp3-00003-of-00004.gguf") && e.contains("cannot open"), "{e}");
}

#[test]
fn llama_gguf_split_merges_organ_shards() {
    if need::smollm2_and_llama().is_none() {
        return;
    }
    let shards = split_model("sp4");
    let merged = tmp("sp4-merged.gguf");
    let mut c = llama_tool("llama-gguf-split");
    c.arg("--merge").arg(&shards[0]).arg(&merged);
    ok(c);
    let whole = measure_json(&smollm2(), "sp4-whole.json");
    let m = measure_json(&merged, "sp4-merged.json");
    assert_eq!(whole["models"][0]["tensors"], m["models"][0]["tensors"]);
}
