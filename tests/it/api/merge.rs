//! The merge job (docs/merge.md): the file it writes is the CLI's, byte for byte, its
//! result the CLI's report; bad fields are a 400 before any job; a refusal of the command
//! fails the job with its reason. On tiny llamas written here: needs nothing beyond the
//! repository.

use super::server::*;
use crate::build::{noise, t, write_model_kvs};
use crate::common::{ok, organ, tmp};
use organ_core::gguf::MetaValue;
use organ_core::GgmlType;
use serde_json::{json, Value};
use std::path::Path;

/// A root with a base (`base.gguf`), two finetunes of it (`a.gguf`, `b.gguf`) and a model
/// of other shapes (`wide.gguf`).
fn merge_root(name: &str) -> std::path::PathBuf {
    let root = make_tiny_root(name);
    let llama = [("general.architecture", MetaValue::Str(b"llama")), ("llama.block_count", MetaValue::U32(1))];
    let model = |file: &str, seed: u64, cols: u64| {
        let d = |k: u64, n: usize| -> Vec<f32> {
            noise(k, n).iter().zip(noise(seed * 10 + k, n)).map(|(b, d)| b + 0.05 * d * (seed.min(1) as f32)).collect()
        };
        let path = write_model_kvs(
            &format!("{name}-{file}"),
            &llama,
            &[
                t("blk.0.attn_q.weight", &[cols, 64], GgmlType::F16, d(1, (cols * 64) as usize)),
                t("blk.0.ffn_up.weight", &[64, 32], GgmlType::Q8_0, d(2, 2048)),
                t("blk.0.attn_norm.weight", &[64], GgmlType::F32, noise(3, 64)),
            ],
        );
        std::fs::copy(path, root.join(file)).unwrap();
    };
    model("base.gguf", 0, 64);
    model("a.gguf", 1, 64);
    model("b.gguf", 2, 64);
    model("wide.gguf", 3, 128);
    root
}

/// `organ merge ARGS… --out OUT --json JSON --force` run by hand in the root.
fn cli(root: &Path, args: &[&str]) -> (Vec<u8>, Value) {
    let (out, json) = (tmp("api-merge-cli.gguf"), tmp("api-merge-cli.json"));
    let mut c = organ();
    c.current_dir(root).arg("merge").args(args).arg("--out").arg(&out).arg("--json").arg(&json).arg("--force");
    ok(c);
    (std::fs::read(&out).unwrap(), serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap())
}

#[test]
fn the_merge_job_writes_what_the_cli_writes() {
    let root = merge_root("api-merge-job");
    let s = start(&root, &[]);
    let (st, doc) = get(&s, "/openapi.json");
    assert_eq!(st, 200);
    assert!(doc["paths"]["/api/merge"]["post"].is_object(), "openapi.json documents /api/merge");
    let kinds = doc["components"]["schemas"]["Job"]["properties"]["kind"]["enum"].as_array().unwrap();
    assert!(kinds.contains(&json!("merge")), "{kinds:?}");

    let body = json!({
        "method": "dare_ties", "base": "base.gguf", "seed": 7, "type": "f32",
        "models": [{"path": "a.gguf", "weight": 0.7, "density": 0.5}, {"path": "b.gguf", "density": 0.6}],
        "parameters": {"normalize": true, "lambda": 0.9},
    });
    let end = run_job(&s, "/api/merge", body);
    assert_eq!(end["kind"], "merge");
    let args = [
        "--method",
        "dare_ties",
        "--base",
        "base.gguf",
        "--seed",
        "7",
        "--type",
        "f32",
        "--model",
        "a.gguf:0.7,density=0.5",
        "--model",
        "b.gguf:1,density=0.6",
        "--param",
        "normalize=true",
        "--param",
        "lambda=0.9",
    ];
    let (bytes, report) = cli(&root, &args);
    let outs = end["outputs"].as_array().unwrap();
    let find = |suffix: &str| outs.iter().filter_map(Value::as_str).find(|o| o.ends_with(suffix)).unwrap().to_owned();
    assert!(download(&s, &find("/merged.gguf")) == bytes, "merge: the CLI's bytes");
    assert_eq!(end["result"]["tensors"], report["tensors"], "the job's result is the CLI's report");
    assert_eq!(report["tensors"].as_array().unwrap().len(), 2, "attn_q and ffn_up merged, attn_norm copied");
}

#[test]
fn bad_merge_requests_are_refused_before_a_job_and_refusals_fail_the_job() {
    let root = merge_root("api-merge-bad");
    let s = start(&root, &[]);
    for (body, says) in [
        (json!({"method": "frankenmerge", "base": "base.gguf", "models": [{"path": "a.gguf"}]}), "frankenmerge"),
        (json!({"method": "ties", "base": "base.gguf", "models": []}), "models"),
        (json!({"method": "ties", "models": [{"path": "a.gguf"}]}), "base_model"),
        (
            json!({"method": "ties", "base": "base.gguf", "models": [{"path": "a.gguf"}], "parameters": {"gamma": 1}}),
            "gamma",
        ),
        (
            json!({"method": "ties", "base": "base.gguf", "models": [{"path": "a.gguf"}], "parameters": {"lambda": "x"}}),
            "lambda",
        ),
        (
            json!({"method": "slerp", "base": "base.gguf", "models": [{"path": "a.gguf"}, {"path": "b.gguf"}], "t": 0.5}),
            "one other",
        ),
        (json!({"method": "ties", "base": "base.gguf", "models": [{"path": "a.gguf"}], "type": "q9"}), "--type"),
        (json!({"method": "ties", "base": "base.gguf", "models": [{"path": "../a.gguf"}]}), ""),
        (json!({"method": "ties", "base": "base.gguf", "models": [{"path": "a.gguf", "w": 1}]}), ""),
        (
            json!({"method": "passthrough", "models": [], "slices": [{"sources": [{"model": "a.gguf", "layer_range": [0, 1]}]}]}),
            "slices: the merge job merges whole models",
        ),
        (
            json!({"method": "passthrough", "models": [{"path": "a.gguf"}, {"path": "b.gguf"}]}),
            "passthrough copies one model, not 2",
        ),
    ] {
        let (st, answer) = post(&s, "/api/merge", &body);
        assert!((400..500).contains(&st), "{body}: {st} {answer}");
        assert!(answer["error"].as_str().unwrap().contains(says), "{body}: {answer}");
    }
    // Another shape: the command refuses it, and the job fails with its reason.
    let body = json!({"method": "task_arithmetic", "base": "base.gguf", "models": [{"path": "wide.gguf"}]});
    let (st, job) = post(&s, "/api/merge", &body);
    assert_eq!(st, 202, "{job}");
    let end = follow(&s, job["id"].as_str().unwrap());
    assert_eq!(end["state"], "failed", "{end}");
    assert!(end["error"].as_str().unwrap().contains("wide.gguf"), "{end}");
}
