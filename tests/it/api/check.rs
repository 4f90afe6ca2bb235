//! check jobs: the job's report is `organ check --json`'s, byte for byte, and follows
//! docs/report.schema.json; a model with error findings is a done job whose report counts
//! them (the CLI would exit 1); a file that is not a model fails the job with its name.

use super::server::*;
use crate::common::{need, ok, organ, repo, tmp};
use serde_json::{json, Value};

#[test]
fn a_check_job_gives_organ_check_json() {
    // smol.gguf: a llama with one all-zero 32 x 2 tensor and no tokenizer.
    let root = make_tiny_root("api-check");
    let s = start(&root, &[]);
    let end = run_job(&s, "/api/check", json!({ "path": "smol.gguf" }));
    assert_eq!((&end["kind"], &end["state"]), (&json!("check"), &json!("done")), "{end}");
    let outs: Vec<&str> = end["outputs"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    let out = |f: &str| *outs.iter().find(|o| o.ends_with(&format!("/{f}"))).unwrap_or_else(|| panic!("no {f}: {end}"));

    let json_path = tmp("cli-check.json");
    let _ = std::fs::remove_file(&json_path);
    let o = organ().arg("check").arg(root.join("smol.gguf")).arg("--json").arg(&json_path).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "the CLI exits 1 on this model");
    let cli = std::fs::read(&json_path).unwrap();
    assert!(download(&s, out("check.json")) == cli, "the job's check.json is organ check --json's, byte for byte");
    let cli: Value = serde_json::from_slice(&cli).unwrap();
    assert_eq!(end["result"], cli, "the job's result is the report");
    let r = &end["result"];
    assert_eq!(r["check"], "k1");
    assert!(r["counts"]["error"].as_u64().unwrap() > 0, "{r}");
    let zero = r["findings"].as_array().unwrap().iter().find(|f| f["kind"] == "all_zero").unwrap();
    assert_eq!((&zero["subject"], &zero["severity"]), (&json!("blk.0.ffn_up.weight"), &json!("error")));
    let text = String::from_utf8(download(&s, out("check.txt"))).unwrap();
    assert_eq!(text, String::from_utf8(o.stdout).unwrap(), "check.txt is what organ check prints");

    // The report follows the schema (with the oracle venv's jsonschema, when it is there).
    if let Some(py) = need::oracle() {
        let file = tmp("api-check-result.json");
        std::fs::write(&file, serde_json::to_vec(r).unwrap()).unwrap();
        let mut v = std::process::Command::new(py);
        v.arg("-c")
            .arg("import json,sys,jsonschema; jsonschema.Draft202012Validator(json.load(open(sys.argv[1]))).validate(json.load(open(sys.argv[2]))); print('valid')")
            .arg(repo().join("docs/report.schema.json"))
            .arg(&file);
        assert_eq!(String::from_utf8(ok(v).stdout).unwrap().trim(), "valid");
    }

    // Not a model: the job fails, naming the file.
    let (st, job) = post(&s, "/api/check", &json!({ "path": "corrupt.gguf" }));
    assert_eq!(st, 202, "{job}");
    let end = follow(&s, job["id"].as_str().unwrap());
    assert_eq!(end["state"], "failed", "{end}");
    assert!(end["error"].as_str().unwrap().contains("corrupt.gguf"), "{end}");
    // A bad request is refused before any job.
    let (st, _) = post(&s, "/api/check", &json!({ "path": "smol.gguf", "deep": true }));
    assert_eq!(st, 400);
    let (st, doc) = get(&s, "/openapi.json");
    assert_eq!(st, 200);
    assert!(doc["paths"]["/api/check"]["post"].is_object(), "openapi.json documents /api/check");
}

/// A job's model may be named as `path` or as `paths` (a list): check and measure take both
/// forms, and give the same report either way.
#[test]
fn path_and_paths_both_name_a_model() {
    let s = start(&make_tiny_root("api-path-forms"), &[]);
    let one = run_job(&s, "/api/check", json!({ "path": "smol.gguf" }));
    let list = run_job(&s, "/api/check", json!({ "paths": ["smol.gguf"] }));
    assert_eq!((&one["state"], &list["state"]), (&json!("done"), &json!("done")), "{one} {list}");
    assert_eq!(one["result"], list["result"]);
    let one = run_job(&s, "/api/measure", json!({ "path": "smol.gguf" }));
    let list = run_job(&s, "/api/measure", json!({ "paths": ["smol.gguf"] }));
    assert_eq!((&one["state"], &list["state"]), (&json!("done"), &json!("done")), "{one} {list}");
    let tensors = |r: &Value| r["result"]["models"][0]["tensors"].clone();
    assert!(tensors(&one).is_array());
    assert_eq!(tensors(&one), tensors(&list));
}
