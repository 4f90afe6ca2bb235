//! The meta job (docs/surgery.md): the file it writes is `organ meta`'s, byte for byte, its
//! result the command's report; bad fields are a 400 before any job, and what only the
//! model can refuse fails the job with the command's reason. On a tiny llama written here.

use super::server::*;
use crate::build::{noise, t, write_model_kvs};
use crate::common::{ok, organ, tmp};
use organ_core::gguf::MetaValue;
use organ_core::GgmlType;
use serde_json::{json, Value};

/// A root holding `m.gguf` (a tiny llama) and `t.jinja` (a chat template).
fn meta_root(name: &str) -> std::path::PathBuf {
    let root = make_tiny_root(name);
    let kvs = [
        ("general.architecture", MetaValue::Str(b"llama")),
        ("general.name", MetaValue::Str(b"tiny")),
        ("llama.block_count", MetaValue::U32(1)),
        ("tokenizer.ggml.eos_token_id", MetaValue::U32(2)),
    ];
    let m = write_model_kvs(
        &format!("{name}-m.gguf"),
        &kvs,
        &[t("blk.0.attn_norm.weight", &[64], GgmlType::F32, noise(1, 64))],
    );
    std::fs::copy(m, root.join("m.gguf")).unwrap();
    std::fs::write(root.join("t.jinja"), "{{ messages[0].content }}").unwrap();
    root
}

#[test]
fn the_meta_job_writes_what_the_cli_writes() {
    let root = meta_root("api-meta-job");
    let s = start(&root, &[]);
    let (st, doc) = get(&s, "/openapi.json");
    assert_eq!(st, 200);
    assert!(doc["paths"]["/api/meta"]["post"].is_object(), "openapi.json documents /api/meta");
    let kinds = doc["components"]["schemas"]["Job"]["properties"]["kind"]["enum"].as_array().unwrap();
    assert!(kinds.contains(&json!("meta")), "{kinds:?}");

    let body = json!({
        "path": "m.gguf",
        "set": [
            { "key": "general.name", "value": "a: b", "type": "str" },
            { "key": "tokenizer.ggml.eos_token_id", "value": 0 },
            { "key": "x.list", "value": [1, 2], "type": "arr[u16]" },
        ],
        "set_file": [{ "key": "tokenizer.chat_template", "path": "t.jinja" }],
        "rm": [],
        "rename": [{ "from": "x.none", "to": "x.other" }],
        "out": "edited.gguf",
    });
    // x.none is not in the model: the command refuses it, and the job fails with its reason.
    let (st, job) = post(&s, "/api/meta", &body);
    assert_eq!(st, 202, "{job}");
    let end = follow(&s, job["id"].as_str().unwrap());
    assert_eq!(end["state"], "failed", "{end}");
    assert!(end["error"].as_str().unwrap().contains("x.none"), "{end}");

    let mut body = body;
    body["rename"] = json!([{ "from": "general.name", "to": "general.title" }]);
    body["set"][0] = json!({ "key": "general.description", "value": "a: b", "type": "str" });
    let end = run_job(&s, "/api/meta", body);
    assert_eq!(end["kind"], "meta");
    let (out, report) = (tmp("api-meta-cli.gguf"), tmp("api-meta-cli.json"));
    let mut c = organ();
    c.current_dir(&root).args(["meta", "m.gguf", "--set", "general.description=a: b:str"]);
    c.args(["--set", "tokenizer.ggml.eos_token_id=0", "--set", "x.list=[1,2]:arr[u16]"]);
    c.args(["--set-file", "tokenizer.chat_template=t.jinja", "--rename", "general.name=general.title"]);
    c.arg("--out").arg(&out).arg("--json").arg(&report);
    ok(c);
    let outputs = end["outputs"].as_array().unwrap();
    let edited = outputs.iter().filter_map(Value::as_str).find(|o| o.ends_with("/edited.gguf")).unwrap();
    assert!(download(&s, edited) == std::fs::read(&out).unwrap(), "meta: the CLI's bytes");
    let report: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(end["result"]["changes"], report["changes"], "the job's result is the CLI's report");
    assert_eq!(end["result"]["changes"].as_array().unwrap().len(), 5);
}

#[test]
fn bad_meta_requests_are_refused_before_a_job() {
    let root = meta_root("api-meta-bad");
    let s = start(&root, &[]);
    let long = "k".repeat(70_000);
    for (body, says) in [
        (json!({ "path": "m.gguf", "set": [{ "key": "a", "value": 1, "type": "u33" }] }), "unknown type"),
        (json!({ "path": "m.gguf", "set": [{ "key": "a", "value": "[1, 2", "type": "arr[u8]" }] }), "JSON array"),
        (json!({ "path": "m.gguf", "set": [{ "key": "a", "value": 300, "type": "u8" }] }), "not a u8"),
        (json!({ "path": "m.gguf", "set": [{ "key": "a", "value": "x:u8" }] }), "needs its \"type\""),
        (json!({ "path": "m.gguf", "set": [{ "key": "a", "value": null }] }), "give a string"),
        (json!({ "path": "m.gguf", "set": [{ "key": long, "value": 1 }] }), "at most 65535 bytes"),
        (json!({ "path": "m.gguf", "rm": ["general.alignment"] }), "organ does not change it"),
        (json!({ "path": "m.gguf", "rename": [{ "from": "split.count", "to": "a" }] }), "organ does not change it"),
        (json!({ "path": "m.gguf", "set_file": [{ "key": "a", "path": "../t.jinja" }] }), ""),
        (json!({ "path": "m.gguf", "out": "x.bin" }), ".gguf"),
        (json!({ "path": "m.gguf", "sett": [] }), ""),
        (json!({ "path": "nothing.gguf" }), "no such model"),
    ] {
        let (st, answer) = post(&s, "/api/meta", &body);
        // A path not under the root is a 404, as for every job; any other bad field a 400.
        let want = if says == "no such model" { 404 } else { 400 };
        assert_eq!(st, want, "{body:.200}: {st} {answer}");
        assert!(answer["error"].as_str().unwrap().contains(says), "{body:.200}: {answer}");
    }
}

/// A shard of a split model is edited as the whole model, and every shard written is
/// among the job's outputs (issue 46: only meta.json was listed).
#[test]
fn the_meta_job_lists_every_shard_it_writes() {
    let root = meta_root("api-meta-split");
    let kvs = [("general.architecture", MetaValue::Str(b"llama")), ("llama.block_count", MetaValue::U32(1))];
    let two = [
        t("blk.0.attn_norm.weight", &[64], GgmlType::F32, noise(1, 64)),
        t("blk.0.ffn_norm.weight", &[64], GgmlType::F32, noise(2, 64)),
    ];
    let model = write_model_kvs("api-meta-split-src.gguf", &kvs, &two);
    let dir = tmp("api-meta-split-organs");
    let _ = std::fs::remove_dir_all(&dir);
    let mut c = organ();
    c.arg("dissect").arg(&model).arg("--out").arg(&dir);
    ok(c);
    let mut c = organ();
    c.arg("assemble").arg(&dir).args(["--split-max-size", "150", "--out"]).arg(root.join("s.gguf"));
    ok(c);
    let s = start(&root, &[]);
    for (path, out, prefix) in
        [("s-00002-of-00002.gguf", "e.gguf", "e"), ("s-00001-of-00002.gguf", "f-00001-of-00002.gguf", "f")]
    {
        let end = run_job(
            &s,
            "/api/meta",
            json!({ "path": path, "set": [{ "key": "general.name", "value": "x" }], "out": out }),
        );
        let outputs: Vec<&str> = end["outputs"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
        let names: Vec<&str> = outputs.iter().filter_map(|o| o.rsplit('/').next()).collect();
        let want =
            [format!("{prefix}-00001-of-00002.gguf"), format!("{prefix}-00002-of-00002.gguf"), "meta.json".into()];
        assert_eq!(names, want, "{path} --out {out}: {end}");
        for (o, shard) in outputs.iter().zip(["s-00001-of-00002.gguf", "s-00002-of-00002.gguf"]) {
            let got = download(&s, o);
            assert!(!got.is_empty(), "{o}");
            if shard.ends_with("00002-of-00002.gguf") {
                assert!(got == std::fs::read(root.join(shard)).unwrap(), "{o}: the second shard copied as it is");
            }
        }
    }
}

/// Tensor edits: the job's file is the CLI's for the same flags, its result lists each
/// tensor changed and what the check finds broken; a tensor edit that does not parse is a
/// 400, one the model refuses fails the job.
#[test]
fn the_meta_job_edits_tensors_as_the_cli_does() {
    let root = meta_root("api-meta-tensors");
    let kvs = [("general.architecture", MetaValue::Str(b"llama")), ("llama.block_count", MetaValue::U32(1))];
    let three = [
        t("blk.0.attn_norm.weight", &[64], GgmlType::F32, noise(1, 64)),
        t("blk.0.ffn_norm.weight", &[64], GgmlType::F32, noise(2, 64)),
        t("output.weight", &[64, 2], GgmlType::F32, noise(3, 128)),
    ];
    let m = write_model_kvs("api-meta-tensors-src.gguf", &kvs, &three);
    std::fs::copy(m, root.join("t.gguf")).unwrap();
    let s = start(&root, &[]);
    let body = json!({
        "path": "t.gguf",
        "rename_tensor": [{ "pattern": r"blk\.(\d+)\.attn_norm\.weight", "replacement": "blk.$1.attn_norm2.weight" }],
        "remove_tensor": ["blk.0.ffn_norm.weight"],
        "retype_tensor": [{ "pattern": "output.weight", "type": "q8_0" }],
        "out": "edited.gguf",
    });
    let end = run_job(&s, "/api/meta", body.clone());
    let (out, report) = (tmp("api-meta-tensors-cli.gguf"), tmp("api-meta-tensors-cli.json"));
    let mut c = organ();
    c.current_dir(&root).args([
        "meta",
        "t.gguf",
        "--rename-tensor",
        r"blk\.(\d+)\.attn_norm\.weight=blk.$1.attn_norm2.weight",
    ]);
    c.args(["--remove-tensor", "blk.0.ffn_norm.weight", "--retype-tensor", "output.weight=Q8_0", "--force"]);
    c.arg("--out").arg(&out).arg("--json").arg(&report);
    ok(c);
    let outputs = end["outputs"].as_array().unwrap();
    let edited = outputs.iter().filter_map(Value::as_str).find(|o| o.ends_with("/edited.gguf")).unwrap();
    assert!(download(&s, edited) == std::fs::read(&out).unwrap(), "meta: the CLI's bytes");
    let report: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(end["result"]["tensor_changes"], report["tensor_changes"], "{end}");
    let ops: Vec<&str> =
        end["result"]["tensor_changes"].as_array().unwrap().iter().map(|c| c["op"].as_str().unwrap()).collect();
    assert_eq!(ops, ["removed", "retyped", "renamed"]);
    assert!(end["result"]["findings"].is_array(), "{end}");
    // What the model refuses fails the job, with the command's reason.
    let mut nothing = body.clone();
    nothing["remove_tensor"] = json!(["blk.7.ffn_norm.weight"]);
    let (st, job) = post(&s, "/api/meta", &nothing);
    assert_eq!(st, 202, "{job}");
    let end = follow(&s, job["id"].as_str().unwrap());
    assert_eq!(end["state"], "failed", "{end}");
    assert!(end["error"].as_str().unwrap().contains("--remove-tensor \"blk.7.ffn_norm.weight\": no tensor"), "{end}");
    // What does not parse is a 400.
    let many: Vec<String> = (0..257).map(|i| format!("x{i}")).collect();
    for (field, value, says) in [
        ("rename_tensor", json!([{ "pattern": "(a", "replacement": "b" }]), "not a regular expression"),
        ("rename_tensor", json!([{ "pattern": "a=b", "replacement": "b" }]), "a pattern with '='"),
        ("rename_tensor", json!([{ "pattern": "(a)", "replacement": "$2" }]), "names group $2"),
        ("rename_tensor", json!([{ "pattern": "a", "replacement": "" }]), "both non-empty"),
        ("rename_tensor", json!([{ "pattern": "a" }]), "replacement"),
        ("remove_tensor", json!([""]), "expected a tensor name"),
        ("remove_tensor", json!(many), "257 tensor edits, at most 256"),
        ("retype_tensor", json!([{ "pattern": "output.weight", "type": "q9" }]), "\"q9\" is not a ggml type"),
        ("retype_tensor", json!([{ "pattern": "", "type": "f16" }]), "both non-empty"),
    ] {
        let body = json!({ "path": "t.gguf", field: value });
        let (st, answer) = post(&s, "/api/meta", &body);
        assert_eq!(st, 400, "{body:.200}: {st} {answer}");
        assert!(answer["error"].as_str().unwrap().contains(says), "{body:.200}: {answer}");
    }
}
