//! diff jobs on a pair of tiny synthetic models that differ in every way Compare v1
//! reports: the job's report is `organ diff --json`'s, byte for byte, on GGUFs, an organ
//! directory and a split GGUF; it follows docs/report.schema.json; a bad model fails the job with its
//! name; a metadata edit and a model cut by `organ layers` get the report's metadata and
//! layers sections, as `organ diff --json`'s. (The refused requests are in security.rs's
//! hostile list.)

use super::server::*;
use crate::common::{need, ok, organ, repo, tmp};
use organ_core::gguf::writer::{plan, TensorSpec};
use organ_core::gguf::MetaValue;
use organ_core::GgmlType;
use serde_json::{json, Value};
use std::path::Path;

/// One tensor of a synthetic model: its name, shape and F32 values by element index.
type Spec<'a> = (&'a str, &'a [u64], fn(usize) -> f32);

/// A llama GGUF of F32 tensors, from the core's writer.
fn write_model(path: &Path, tensors: &[Spec]) {
    write_model_with(path, &[("general.architecture", MetaValue::Str(b"llama"))], tensors);
}

/// A GGUF of F32 tensors with the metadata `kvs`.
fn write_model_with(path: &Path, kvs: &[(&str, MetaValue)], tensors: &[Spec]) {
    let specs: Vec<TensorSpec> =
        tensors.iter().map(|&(name, dims, _)| TensorSpec { name, dims, ty: GgmlType::F32 }).collect();
    let layout = plan(3, kvs, &specs).unwrap();
    let mut bytes = layout.header.clone();
    bytes.resize(usize::try_from(layout.file_len).unwrap(), 0);
    for (&(_, dims, value), &(off, n)) in tensors.iter().zip(&layout.tensors) {
        let at = layout.header.len() + usize::try_from(off).unwrap();
        let count: u64 = dims.iter().product();
        assert_eq!(count * 4, n);
        for i in 0..usize::try_from(count).unwrap() {
            bytes[at + 4 * i..at + 4 * i + 4].copy_from_slice(&value(i).to_le_bytes());
        }
    }
    std::fs::write(path, bytes).unwrap();
}

/// Values that spread over [-0.8, 0.8].
fn base(i: usize) -> f32 {
    ((i * 37 % 101) as f32 - 50.0) / 64.0
}

fn tuned(i: usize) -> f32 {
    base(i) * 1.1 + 0.01
}

/// Expert 0 (the first 32 values) as in the base, expert 1 changed.
fn tuned_expert_1(i: usize) -> f32 {
    if i < 32 {
        base(i)
    } else {
        tuned(i)
    }
}

fn zero(_: usize) -> f32 {
    0.0
}

/// base.gguf and tuned.gguf in `root`: 4 comparable pairs (2 identical, one of them all
/// zeros so its cos is null; 2 changed, one an expert tensor with one changed expert), a
/// name only in each, and a shape mismatch.
fn write_pair(root: &Path) {
    write_model(
        &root.join("base.gguf"),
        &[
            ("token_embd.weight", &[8, 4], base),
            ("blk.0.attn_q.weight", &[8, 4], base),
            ("blk.0.attn_k.weight", &[8, 4], base),
            ("blk.0.ffn_up.weight", &[32, 2], base),
            ("blk.0.ffn_up_exps.weight", &[8, 4, 2], base),
            ("output_norm.weight", &[8], zero),
        ],
    );
    write_model(
        &root.join("tuned.gguf"),
        &[
            ("token_embd.weight", &[8, 4], base),
            ("blk.0.attn_q.weight", &[4, 8], base),
            ("blk.0.ffn_up.weight", &[32, 2], tuned),
            ("blk.0.ffn_up_exps.weight", &[8, 4, 2], tuned_expert_1),
            ("output_norm.weight", &[8], zero),
            ("blk.0.attn_v.weight", &[8, 4], base),
        ],
    );
}

/// `organ diff A B --json FILE EXTRA…`: the file's bytes.
fn cli_diff(a: &Path, b: &Path, name: &str, extra: &[&str]) -> Vec<u8> {
    let json = tmp(name);
    let _ = std::fs::remove_file(&json);
    let mut c = organ();
    c.arg("diff").arg(a).arg(b).arg("--json").arg(&json).args(extra);
    ok(c);
    std::fs::read(&json).unwrap()
}

/// The job's outputs, by file name.
fn output<'a>(end: &'a Value, file: &str) -> &'a str {
    let outs = end["outputs"].as_array().unwrap();
    let o = outs.iter().filter_map(Value::as_str).find(|o| o.ends_with(&format!("/{file}")));
    o.unwrap_or_else(|| panic!("no {file} in {end}"))
}

/// JSON text without the whitespace outside its strings (the report's names hold no
/// quote or backslash).
fn without_whitespace(json: &str) -> String {
    let mut quoted = false;
    json.chars()
        .filter(|&c| {
            quoted ^= c == '"';
            quoted || !c.is_ascii_whitespace()
        })
        .collect()
}

/// Validates reports (files) against docs/report.schema.json with the oracle venv's
/// jsonschema, when the venv is there.
fn validate(reports: &[&Path]) {
    let Some(py) = need::oracle() else { return };
    let mut v = std::process::Command::new(py);
    v.arg("-c")
        .arg("import json,sys,jsonschema; v = jsonschema.Draft202012Validator(json.load(open(sys.argv[1]))); [v.validate(json.load(open(r))) for r in sys.argv[2:]]; print('valid')")
        .arg(repo().join("docs/report.schema.json"))
        .args(reports);
    assert_eq!(String::from_utf8(ok(v).stdout).unwrap().trim(), "valid", "{reports:?}");
}

#[test]
fn a_diff_job_gives_organ_diff_json() {
    let root = make_tiny_root("api-diff");
    write_pair(&root);
    let s = start(&root, &[]);
    let (a, b) = (s.root.join("base.gguf"), s.root.join("tuned.gguf"));

    let end = run_job(&s, "/api/diff", json!({ "a": "base.gguf", "b": "tuned.gguf" }));
    assert_eq!(end["kind"], "diff");
    assert_eq!(end["progress"], json!([4, 4]), "one progress unit per comparable pair: {end}");
    let cli = cli_diff(&a, &b, "cli-diff.json", &[]);
    let downloaded = download(&s, output(&end, "diff.json"));
    assert!(downloaded == cli, "the job's diff.json is organ diff --json's, byte for byte");
    let url = format!("{}/api/jobs/{}", s.base, end["id"].as_str().unwrap());
    let status = agent().get(&url).call().unwrap().into_string().unwrap();
    let text = without_whitespace(std::str::from_utf8(&cli).unwrap());
    assert!(status.contains(&format!("\"result\":{text}")), "the job's result is the report's bytes, compacted");
    let cli: Value = serde_json::from_slice(&cli).unwrap();
    assert_eq!(end["result"], cli, "and so is the result the SSE stream ends with");

    // The report says what the pair was built to show.
    let r = &end["result"];
    assert_eq!(r["compare"], "c1");
    let counts =
        json!({ "comparable": 4, "identical": 2, "changed": 2, "only_in_a": 1, "only_in_b": 1, "shape_mismatch": 1 });
    assert_eq!(r["counts"], counts, "{r}");
    assert_eq!(r["only_in_a"], json!(["blk.0.attn_k.weight"]));
    assert_eq!(r["only_in_b"], json!(["blk.0.attn_v.weight"]));
    assert_eq!(r["shape_mismatch"], json!([{ "name": "blk.0.attn_q.weight", "a": [8, 4], "b": [4, 8] }]));
    let pairs = r["pairs"].as_array().unwrap();
    let norm = pairs.iter().find(|p| p["name"] == "output_norm.weight").unwrap();
    assert_eq!((&norm["identical"], &norm["cos"]), (&json!(true), &Value::Null), "all zeros: cos is null");
    let exps = pairs.iter().find(|p| p["name"] == "blk.0.ffn_up_exps.weight").unwrap();
    let same: Vec<&Value> = exps["experts"].as_array().unwrap().iter().map(|e| &e["identical"]).collect();
    assert_eq!(same, [&json!(true), &json!(false)], "{exps}");

    // Its CSV and its text report are outputs too.
    let csv = String::from_utf8(download(&s, output(&end, "diff.csv"))).unwrap();
    assert!(csv.starts_with("tensor,expert,group,"), "{csv}");
    let text = String::from_utf8(download(&s, output(&end, "diff.txt"))).unwrap();
    assert!(text.contains("most changed (2 of 2)") && text.contains("blk.0.ffn_up.weight"), "{text}");

    // only_changed and top, as the CLI's --only-changed and --top.
    let end = run_job(&s, "/api/diff", json!({ "a": "base.gguf", "b": "tuned.gguf", "only_changed": true, "top": 0 }));
    let cli = cli_diff(&a, &b, "cli-diff-changed.json", &["--only-changed"]);
    assert!(download(&s, output(&end, "diff.json")) == cli);
    let pairs = end["result"]["pairs"].as_array().unwrap();
    assert_eq!(pairs.len(), 2, "changed pairs only");
    assert_eq!(end["result"]["counts"], counts, "the counts still cover every pair");
    let text = String::from_utf8(download(&s, output(&end, "diff.txt"))).unwrap();
    assert!(!text.contains("most changed"), "top 0 lists none: {text}");

    // An organ directory against a GGUF: nothing changed.
    ok({
        let mut c = organ();
        c.arg("dissect").arg(&a).arg("--out").arg(s.root.join("base.organs"));
        c
    });
    let end = run_job(&s, "/api/diff", json!({ "a": "base.organs", "b": "base.gguf" }));
    let cli = cli_diff(&s.root.join("base.organs"), &a, "cli-diff-organs.json", &[]);
    assert!(download(&s, output(&end, "diff.json")) == cli);
    assert_eq!(end["result"]["counts"]["changed"], 0, "{}", end["result"]["counts"]);

    // A split model, named by any shard, against the tuned GGUF.
    std::fs::create_dir(s.root.join("split")).unwrap();
    ok({
        let mut c = organ();
        c.arg("assemble").arg(s.root.join("base.organs")).arg("--out").arg(s.root.join("split/base.gguf"));
        c.args(["--split-max-size", "300"]);
        c
    });
    let mut shards: Vec<String> = std::fs::read_dir(s.root.join("split"))
        .unwrap()
        .map(|e| format!("split/{}", e.unwrap().file_name().to_str().unwrap()))
        .collect();
    shards.sort();
    assert!(shards.len() > 1, "{shards:?}");
    let end = run_job(&s, "/api/diff", json!({ "a": shards[1], "b": "tuned.gguf" }));
    let cli = cli_diff(&s.root.join(&shards[1]), &b, "cli-diff-split.json", &[]);
    assert!(download(&s, output(&end, "diff.json")) == cli);
    assert_eq!(end["result"]["counts"], counts, "the split base is the base");

    // The report follows the schema (served beside the OpenAPI document, which documents
    // the endpoint), as a measure report still does.
    let (st, doc) = get(&s, "/openapi.json");
    assert_eq!(st, 200);
    assert!(doc["paths"]["/api/diff"]["post"].is_object(), "openapi.json documents /api/diff");
    let (st, schema) = get(&s, "/report.schema.json");
    assert_eq!(st, 200);
    let file: Value = serde_json::from_slice(&std::fs::read(repo().join("docs/report.schema.json")).unwrap()).unwrap();
    assert_eq!(schema, file);
    let measure = tmp("tiny-measure.json");
    ok({
        let mut c = organ();
        c.arg("measure").arg(&a).arg(&b).arg("--no-cache").arg("--json").arg(&measure);
        c
    });
    validate(&[&tmp("cli-diff.json"), &tmp("cli-diff-changed.json"), &tmp("cli-diff-split.json"), &measure]);
}

#[test]
fn a_diff_job_of_a_bad_model_fails_naming_it() {
    let root = make_tiny_root("api-diff-bad");
    write_pair(&root);
    let s = start(&root, &[]);
    for body in [json!({ "a": "corrupt.gguf", "b": "base.gguf" }), json!({ "a": "base.gguf", "b": "corrupt.gguf" })] {
        let (st, job) = post(&s, "/api/diff", &body);
        assert_eq!(st, 202, "{job}");
        let id = job["id"].as_str().unwrap();
        let end = follow(&s, id);
        assert_eq!(end["state"], "failed", "{end}");
        let err = end["error"].as_str().unwrap();
        assert!(err.contains("ROOT/corrupt.gguf"), "{body}: {end}");
        assert!(!err.contains(s.root.to_str().unwrap()), "the root stays hidden: {err}");
        assert_eq!(end["outputs"], json!([]));
        assert!(!s.root.join("results").join(id).exists(), "no output remains");
    }
    let (st, v) = post(&s, "/api/diff", &json!({ "a": "base.gguf", "b": "missing.gguf" }));
    assert_eq!(st, 404, "{v}");
    assert_eq!(v["error"], "path \"missing.gguf\": no such model under the root");
}

/// issue 50: the job's report compares the metadata (a key removed, one changed, one
/// added) and lines up the blocks of a model cut by `organ layers --drop 1`, as the CLI's.
#[test]
fn a_diff_job_compares_the_metadata_and_lines_up_a_cut_model() {
    let root = make_tiny_root("api-diff-meta");
    let blocks: Vec<String> = (0..3).map(|l| format!("blk.{l}.attn_q.weight")).collect();
    let mut tensors: Vec<Spec> = vec![("token_embd.weight", &[8, 4], base)];
    let values: [fn(usize) -> f32; 3] = [base, tuned, tuned_expert_1];
    tensors.extend(blocks.iter().zip(values).map(|(n, v)| (n.as_str(), &[8u64, 4][..], v)));
    let kvs = [
        ("general.architecture", MetaValue::Str(b"llama")),
        ("general.name", MetaValue::Str(b"tiny")),
        ("general.license", MetaValue::Str(b"mit")),
        ("llama.block_count", MetaValue::U32(3)),
    ];
    write_model_with(&root.join("three.gguf"), &kvs, &tensors);
    for args in [
        &["layers", "three.gguf", "--drop", "1", "--out", "cut.gguf"][..],
        &[
            "meta",
            "three.gguf",
            "--rm",
            "general.license",
            "--set",
            "general.name=renamed",
            "--set",
            "organ.note=new",
            "--out",
            "edited.gguf",
        ],
    ] {
        ok({
            let mut c = organ();
            c.current_dir(&root).args(args);
            c
        });
    }
    let s = start(&root, &[]);
    let end = run_job(&s, "/api/diff", json!({ "a": "three.gguf", "b": "edited.gguf" }));
    let cli = cli_diff(&s.root.join("three.gguf"), &s.root.join("edited.gguf"), "cli-diff-meta.json", &[]);
    assert!(download(&s, output(&end, "diff.json")) == cli, "the job's diff.json is organ diff --json's");
    let m = &end["result"]["metadata"];
    assert_eq!(
        m["counts"],
        json!({ "keys_a": 4, "keys_b": 4, "same": 2, "changed": 1, "only_in_a": 1, "only_in_b": 1, "gguf_version_a": 3, "gguf_version_b": 3 })
    );
    assert_eq!(m["only_in_a"], json!([{ "key": "general.license", "type": "STRING", "value": "\"mit\"" }]));
    assert_eq!(m["changed"][0]["b"]["value"], "\"renamed\"");
    let text = String::from_utf8(download(&s, output(&end, "diff.txt"))).unwrap();
    assert!(text.contains("metadata: 3 keys changed (1 removed, 1 added, 1 changed)"), "{text}");

    let end = run_job(&s, "/api/diff", json!({ "a": "three.gguf", "b": "cut.gguf" }));
    let cli = cli_diff(&s.root.join("three.gguf"), &s.root.join("cut.gguf"), "cli-diff-cut.json", &[]);
    assert!(download(&s, output(&end, "diff.json")) == cli);
    let r = &end["result"];
    assert_eq!(r["layers"], json!({ "by": "organ.layers.dropped", "dropped_a": null, "dropped_b": [1] }));
    assert_eq!(r["only_in_a"], json!(["blk.1.attn_q.weight"]));
    let moved = r["pairs"].as_array().unwrap().iter().find(|p| p["name"] == "blk.2.attn_q.weight").unwrap();
    assert_eq!((&moved["name_b"], &moved["identical"]), (&json!("blk.1.attn_q.weight"), &json!(true)), "{moved}");
    assert_eq!(r["counts"]["changed"], 0, "no block is compared with another: {}", r["counts"]);
    let text = String::from_utf8(download(&s, output(&end, "diff.txt"))).unwrap();
    assert!(text.contains("layers lined up by organ.layers.dropped"), "{text}");
    validate(&[&tmp("cli-diff-meta.json"), &tmp("cli-diff-cut.json")]);
}
