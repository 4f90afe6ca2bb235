//! lora-merge and lora-extract jobs (docs/adapters.md): the file each writes is the CLI's,
//! byte for byte, and its result is the CLI's report; bad fields are a 400 before any job;
//! a refusal of the command fails the job with its reason. On a tiny llama and a tiny
//! adapter written here: needs nothing beyond the repository.

use super::server::*;
use crate::build::{noise, t, write_model_kvs};
use crate::common::{ok, organ, tmp};
use organ_core::gguf::MetaValue;
use organ_core::GgmlType;
use serde_json::{json, Value};
use std::path::Path;

/// A root with a base (`base.gguf`), a finetune of it (`tuned.gguf`: attn_q and ffn_up
/// changed) and an adapter of the base (`a.gguf`, on attn_q).
fn lora_root(name: &str) -> std::path::PathBuf {
    let root = make_tiny_root(name);
    let llama = [("general.architecture", MetaValue::Str(b"llama"))];
    let model = |file: &str, seed: u64| {
        write_model_kvs(
            &format!("{name}-{file}"),
            &llama,
            &[
                t("blk.0.attn_q.weight", &[64, 64], GgmlType::F16, noise(1 + seed, 4096)),
                t("blk.0.ffn_up.weight", &[64, 32], GgmlType::F32, noise(2 + seed, 2048)),
                t("blk.0.attn_norm.weight", &[64], GgmlType::F32, noise(3, 64)),
            ],
        )
    };
    std::fs::copy(model("base.gguf", 0), root.join("base.gguf")).unwrap();
    std::fs::copy(model("tuned.gguf", 10), root.join("tuned.gguf")).unwrap();
    let kvs = [
        ("general.architecture", MetaValue::Str(b"llama")),
        ("general.type", MetaValue::Str(b"adapter")),
        ("adapter.type", MetaValue::Str(b"lora")),
        ("adapter.lora.alpha", MetaValue::F32(8.0)),
    ];
    let adapter = write_model_kvs(
        &format!("{name}-a.gguf"),
        &kvs,
        &[
            t("blk.0.attn_q.weight.lora_a", &[64, 4], GgmlType::F32, noise(4, 256)),
            t("blk.0.attn_q.weight.lora_b", &[4, 64], GgmlType::F32, noise(5, 256)),
        ],
    );
    std::fs::copy(adapter, root.join("a.gguf")).unwrap();
    root
}

/// The output of `end` whose name ends with `suffix`.
fn output<'a>(end: &'a Value, suffix: &str) -> &'a str {
    let outs = end["outputs"].as_array().unwrap();
    outs.iter().filter_map(Value::as_str).find(|o| o.ends_with(suffix)).unwrap_or_else(|| panic!("{suffix} in {end}"))
}

/// `organ lora ARGS… --out OUT --json JSON --force` run by hand.
fn cli(root: &Path, args: &[&str], name: &str) -> (Vec<u8>, Value) {
    let (out, json) = (tmp(&format!("api-lora-cli-{name}.gguf")), tmp(&format!("api-lora-cli-{name}.json")));
    let mut c = organ();
    c.current_dir(root).arg("lora").args(args).arg("--out").arg(&out).arg("--json").arg(&json).arg("--force");
    ok(c);
    (std::fs::read(&out).unwrap(), serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap())
}

#[test]
fn lora_jobs_write_what_the_cli_writes() {
    let root = lora_root("api-lora-jobs");
    let s = start(&root, &[]);
    let (st, doc) = get(&s, "/openapi.json");
    assert_eq!(st, 200);
    for p in ["/api/lora-merge", "/api/lora-extract"] {
        assert!(doc["paths"][p]["post"].is_object(), "openapi.json documents {p}");
    }
    let kinds = doc["components"]["schemas"]["Job"]["properties"]["kind"]["enum"].as_array().unwrap();
    assert!(kinds.contains(&json!("lora-merge")) && kinds.contains(&json!("lora-extract")), "{kinds:?}");

    // Merge, the adapter at scale 0.5, into F32: the CLI's bytes and the CLI's report.
    let body = json!({ "base": "base.gguf", "adapters": [{ "path": "a.gguf", "scale": 0.5 }], "type": "f32" });
    let end = run_job(&s, "/api/lora-merge", body);
    assert_eq!(end["kind"], "lora-merge");
    let (bytes, report) = cli(&root, &["merge", "base.gguf", "--lora", "a.gguf:0.5", "--type", "f32"], "merge");
    assert!(download(&s, output(&end, "/merged.gguf")) == bytes, "lora-merge: the CLI's bytes");
    let api: Value = serde_json::from_slice(&download(&s, output(&end, "/lora-merge.json"))).unwrap();
    assert_eq!(api["tensors"], report["tensors"], "the CLI's report");
    assert_eq!(end["result"]["tensors"], report["tensors"], "the job's result is the report");

    // Extract at rank 4 from attn_q only: the same.
    let body = json!({ "base": "base.gguf", "tuned": "tuned.gguf", "rank": 4, "names": ["*attn_q*"], "out": "q.gguf" });
    let end = run_job(&s, "/api/lora-extract", body);
    assert_eq!(end["kind"], "lora-extract");
    let args = ["extract", "--base", "base.gguf", "--tuned", "tuned.gguf", "--rank", "4", "--name", "*attn_q*"];
    let (bytes, report) = cli(&root, &args, "extract");
    assert!(download(&s, output(&end, "/q.gguf")) == bytes, "lora-extract: the CLI's bytes");
    let rows = end["result"]["tensors"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "attn_q alone: {rows:?}");
    assert_eq!(end["result"]["tensors"], report["tensors"], "the job's result is the CLI's report");
}

#[test]
fn bad_lora_requests_are_refused_before_a_job_and_refusals_fail_the_job() {
    let root = lora_root("api-lora-bad");
    let s = start(&root, &[]);
    for (path, body, says) in [
        ("/api/lora-merge", json!({ "base": "base.gguf", "adapters": [] }), "give at least one"),
        (
            "/api/lora-merge",
            json!({ "base": "base.gguf", "adapters": [{ "path": "a.gguf", "scale": 1e39 }] }),
            "finite",
        ),
        ("/api/lora-merge", json!({ "base": "base.gguf", "adapters": [{ "path": "a.gguf" }], "type": "q9" }), "--type"),
        (
            "/api/lora-merge",
            json!({ "base": "base.gguf", "adapters": [{ "path": "a.gguf" }], "judge_ctx": 64 }),
            "judge",
        ),
        ("/api/lora-merge", json!({ "base": "base.gguf", "adapters": [{ "path": "../a.gguf" }] }), ""),
        ("/api/lora-merge", json!({ "base": "base.gguf", "adapters": [{ "path": "a.gguf", "s": 1 }] }), ""),
        ("/api/lora-extract", json!({ "base": "base.gguf", "tuned": "tuned.gguf", "rank": 0 }), "rank 0"),
        ("/api/lora-extract", json!({ "base": "base.gguf", "tuned": "tuned.gguf", "rank": 4, "type": "q4_0" }), "f32"),
        (
            "/api/lora-extract",
            json!({ "base": "base.gguf", "tuned": "tuned.gguf", "rank": 4, "out": "a.bin" }),
            ".gguf",
        ),
        ("/api/eval", json!({ "path": "base.gguf", "text": "base.gguf", "base_lora": [{ "path": "a.gguf" }] }), "base"),
    ] {
        let (st, answer) = post(&s, path, &body);
        assert!((400..500).contains(&st), "{path} {body}: {st} {answer}");
        assert!(answer["error"].as_str().unwrap().contains(says), "{path} {body}: {answer}");
    }
    // A file that is no adapter: the command refuses it, and the job fails with its reason.
    let (st, job) =
        post(&s, "/api/lora-merge", &json!({ "base": "base.gguf", "adapters": [{ "path": "tuned.gguf" }] }));
    assert_eq!(st, 202, "{job}");
    let end = follow(&s, job["id"].as_str().unwrap());
    assert_eq!(end["state"], "failed", "{end}");
    assert!(end["error"].as_str().unwrap().contains("tuned.gguf"), "{end}");
}
