//! sensitivity, recipe and quantize jobs: a predicted sensitivity job's report is `organ sensitivity
//! --predict --json`'s and a recipe job's table is `organ recipe --json`'s, for the same
//! arguments (data-free curves on SmolLM2; with llama.cpp, the checked-in measured reports
//! of tests/data/sensitivity/ as truth and as curves); every bad request is a 4xx naming the
//! field, before any job. No llama-perplexity runs here (docs/sensitivity.md measures).

use super::server::*;
use crate::common::{need, ok, organ, repo, smollm2_f16, tmp};
use serde_json::{json, Value};
use std::path::Path;

/// The job's output named `file` (its path under the root).
fn output<'a>(end: &'a Value, file: &str) -> &'a str {
    let outs = end["outputs"].as_array().unwrap();
    outs.iter().filter_map(Value::as_str).find(|o| o.ends_with(&format!("/{file}"))).unwrap_or_else(|| {
        panic!("no {file} among the outputs: {end}");
    })
}

/// The outputs' file names.
fn names(end: &Value) -> Vec<&str> {
    let outs = end["outputs"].as_array().unwrap();
    outs.iter().filter_map(Value::as_str).map(|o| o.rsplit('/').next().unwrap()).collect()
}

/// `organ ARGS… --json OUT` run by hand: the JSON it wrote (parsed and as bytes) and what it printed.
fn cli(args: &[&std::ffi::OsStr], name: &str, extra: &[(&str, &Path)]) -> (Value, Vec<u8>, String) {
    let json = tmp(&format!("{name}.json"));
    let mut c = organ();
    c.args(args).arg("--json").arg(&json).arg("--force");
    for (flag, p) in extra {
        c.arg(flag).arg(p);
    }
    let printed = String::from_utf8(ok(c).stdout).unwrap();
    let bytes = std::fs::read(&json).unwrap();
    (serde_json::from_slice(&bytes).unwrap(), bytes, printed)
}

fn os(s: &str) -> &std::ffi::OsStr {
    s.as_ref()
}

#[test]
fn a_predicted_sensitivity_job_gives_organ_sensitivity_predict_json() {
    let Some(_) = need::smollm2() else { return };
    let s = start(&make_root("api-sens-predict"), &[]);
    let model = s.root.join("smol.gguf");
    let end = run_job(&s, "/api/sensitivity", json!({ "path": "smol.gguf", "to": "q4_0", "predict": true }));
    assert_eq!(end["kind"], "sensitivity");
    assert_eq!(names(&end), ["sensitivity.json", "sensitivity.csv", "sensitivity.txt"], "{end}");

    let csv = tmp("cli-sens.csv");
    let args = [os("sensitivity"), model.as_os_str(), os("--to"), os("q4_0"), os("--predict")];
    let (want, bytes, printed) = cli(&args, "cli-sens", &[("--csv", &csv)]);
    let r = &end["result"];
    assert_eq!(*r, want, "the job's result is organ sensitivity --predict --json's report");
    assert_eq!((r["organ_sensitivity_prediction"].as_u64(), r["change"].as_str()), (Some(1), Some("Q4_0")), "{r}");
    assert_eq!(r["source"], "data-free");
    // SmolLM2's 30 blocks × 7 linear weights are predicted; the embedding is not.
    assert_eq!(r["tensors"].as_array().map(Vec::len), Some(210));
    assert_eq!(r["not_predicted"][0][0], "token_embd.weight");
    assert!(r["tensors"].as_array().unwrap().iter().all(|t| t["predicted_kld"].as_f64().is_some_and(|k| k >= 0.0)));
    assert!(download(&s, output(&end, "sensitivity.json")) == bytes, "sensitivity.json is the CLI's, byte for byte");
    assert!(download(&s, output(&end, "sensitivity.csv")) == std::fs::read(&csv).unwrap(), "the CSV is the CLI's");
    let text = String::from_utf8(download(&s, output(&end, "sensitivity.txt"))).unwrap();
    assert_eq!(text, printed, "sensitivity.txt is what organ sensitivity prints");

    // A selection goes through as the CLI's flags: layers 0-1, the organ group (ffn_*).
    let body = json!({ "path": "smol.gguf", "to": "Q4_0", "predict": true, "layers": "0-1", "types": ["organ"] });
    let end = run_job(&s, "/api/sensitivity", body);
    let args = [os("sensitivity"), model.as_os_str(), os("--to"), os("Q4_0"), os("--predict")];
    let sel = [os("--layers"), os("0-1"), os("--type"), os("organ")];
    let (want, _, _) = cli(&[&args[..], &sel[..]].concat(), "cli-sens-sel", &[]);
    assert_eq!(end["result"], want);
    let picked: Vec<&str> = want["tensors"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(picked.len(), 6, "ffn_gate, ffn_up and ffn_down of layers 0 and 1: {picked:?}");
    assert!(picked.iter().all(|n| n.starts_with("blk.0.ffn_") || n.starts_with("blk.1.ffn_")), "{picked:?}");

    // A file that is not a model fails the job, naming it.
    let (st, job) = post(&s, "/api/sensitivity", &json!({ "path": "corrupt.gguf", "to": "q4_0", "predict": true }));
    assert_eq!(st, 202, "{job}");
    let end = follow(&s, job["id"].as_str().unwrap());
    assert_eq!(end["state"], "failed", "{end}");
    assert!(end["error"].as_str().unwrap_or_default().contains("corrupt.gguf"), "{end}");
}

#[test]
fn a_data_free_recipe_job_gives_organ_recipes_table() {
    let Some(_) = need::smollm2() else { return };
    let s = start(&make_root("api-recipe"), &[]);
    let model = s.root.join("smol.gguf");
    // Two candidates (one given twice, in another case) keep the prediction short; 5.5 bits
    // per weight lies between SmolLM2's Q4_1 and its smallest recipe, so the choice is a mix.
    let body = json!({ "path": "smol.gguf", "target_bpw": 5.5, "data_free": true, "types": ["q4_0", "Q8_0", "Q4_0"] });
    let end = run_job(&s, "/api/recipe", body);
    assert_eq!(end["kind"], "recipe");
    assert_eq!(names(&end), ["recipe.json", "tensor-types.txt", "recipe.txt"], "{end}");

    let lines = tmp("cli-recipe.txt");
    let args = [os("recipe"), model.as_os_str(), os("--target-bpw"), os("5.5"), os("--data-free")];
    let args = [&args[..], &[os("--types"), os("q4_0,Q8_0,q4_0")]].concat();
    let (want, bytes, printed) = cli(&args, "cli-recipe", &[("--out", &lines)]);
    let r = &end["result"];
    assert_eq!(*r, want, "the job's result is organ recipe --json's table");
    assert!(download(&s, output(&end, "recipe.json")) == bytes, "recipe.json is the CLI's, byte for byte");
    let got_lines = download(&s, output(&end, "tensor-types.txt"));
    assert!(got_lines == std::fs::read(&lines).unwrap(), "tensor-types.txt is organ recipe --out's");
    assert_eq!(String::from_utf8(download(&s, output(&end, "recipe.txt"))).unwrap(), printed);
    // Within the budget, and a real choice: some weights leave Q4_1 for Q4_0, some keep it.
    assert!(r["tensor_bytes"].as_u64().unwrap() <= r["budget"].as_u64().unwrap(), "{r}");
    let types: Vec<&str> = r["tensors"].as_array().unwrap().iter().filter_map(|t| t["type"].as_str()).collect();
    assert!(types.contains(&"Q4_0") && types.contains(&"Q4_1"), "{types:?}");
    let text = String::from_utf8(got_lines).unwrap();
    assert!(text.lines().all(|l| l.starts_with('^') && l.contains("\\.weight$=")), "{text}");
}

/// With llama.cpp: SmolLM2 F16 (the model tests/data/sensitivity/ was measured on), its
/// measured Q4_0 report as the prediction's truth, and the Q2_0 and Q4_0 reports as a
/// recipe's curves: both jobs equal the CLI's answers.
#[test]
fn measured_reports_are_truth_and_curves_as_in_the_cli() {
    let Some(q41) = need::smollm2_and_llama() else { return };
    let root = make_root("api-recipe-from");
    let f16 = smollm2_f16(&q41);
    if std::fs::hard_link(&f16, root.join("f16.gguf")).is_err() {
        std::fs::copy(&f16, root.join("f16.gguf")).unwrap();
    }
    std::fs::create_dir_all(root.join("sens")).unwrap();
    for ty in ["q2_0", "q4_0"] {
        let from = repo().join(format!("tests/data/sensitivity/smollm2-f16-{ty}.json"));
        std::fs::copy(from, root.join(format!("sens/{ty}.json"))).unwrap();
    }
    let s = start(&root, &[]);
    let (model, truth) = (s.root.join("f16.gguf"), s.root.join("sens/q4_0.json"));

    let body = json!({ "path": "f16.gguf", "to": "q4_0", "predict": true, "truth": "sens/q4_0.json" });
    let end = run_job(&s, "/api/sensitivity", body);
    let args = [os("sensitivity"), model.as_os_str(), os("--to"), os("q4_0"), os("--predict")];
    let (want, _, _) = cli(&args, "cli-truth", &[("--truth", &truth)]);
    assert_eq!(end["result"], want);
    assert_eq!(want["ranking"]["n"], 210, "every block weight was predicted and measured");

    let body = json!({ "path": "f16.gguf", "target_size": "80M", "from": ["sens/q2_0.json", "sens/q4_0.json"] });
    let end = run_job(&s, "/api/recipe", body);
    let args = [os("recipe"), model.as_os_str(), os("--target-size"), os("80M")];
    let (q2, q4) = (s.root.join("sens/q2_0.json"), s.root.join("sens/q4_0.json"));
    let (want, _, _) = cli(&args, "cli-recipe-from", &[("--from", &q2), ("--from", &q4)]);
    assert_eq!(end["result"], want);
    assert!(want["file_bytes"].as_u64().unwrap() <= 80 << 20, "{want}");
    assert!(want["source"].as_str().unwrap().starts_with("measured"), "{want}");
}

/// A quantize job writes `organ quantize`'s file and report: SmolLM2's Q4_1 requantized to
/// Q8_0 with a key overridden and two layers pruned, and a dry run that writes no model.
#[test]
fn a_quantize_job_writes_organ_quantizes_file_and_report() {
    let Some(_) = need::smollm2() else { return };
    let s = start(&make_root("api-quantize"), &[]);
    let model = s.root.join("smol.gguf");
    let body = json!({ "path": "smol.gguf", "type": "q8_0", "allow_requantize": true, "out": "q8.gguf",
                       "override_kv": ["general.name=str:api"], "prune_layers": "4,5" });
    let end = run_job(&s, "/api/quantize", body);
    assert_eq!(end["kind"], "quantize");
    assert_eq!(names(&end), ["q8.gguf", "quantize.json", "quantize.txt"], "{end}");
    let out = tmp("cli-quantize.gguf");
    let args = [os("quantize"), os("--allow-requantize"), os("--override-kv"), os("general.name=str:api")];
    let args = [&args[..], &[os("--prune-layers"), os("4,5"), model.as_os_str(), out.as_os_str(), os("Q8_0")]].concat();
    let (want, _, printed) = cli(&args, "cli-quantize", &[]);
    assert!(download(&s, output(&end, "q8.gguf")) == std::fs::read(&out).unwrap(), "the model is the CLI's");
    let r = &end["result"];
    // The same report but for where the file went.
    let strip = |v: &Value| {
        let mut v = v.clone();
        v["outputs"] = json!([]);
        v
    };
    assert_eq!(strip(r), strip(&want), "the job's result is organ quantize --json's report");
    assert_eq!((r["type"].as_str(), r["tensors"].as_array().map(Vec::len)), (Some("Q8_0"), Some(272 - 2 * 9)), "{r}");
    assert_eq!(String::from_utf8(download(&s, output(&end, "quantize.txt"))).unwrap(), printed);
    let end = run_job(
        &s,
        "/api/quantize",
        json!({ "path": "smol.gguf", "type": "Q4_0", "dry_run": true, "allow_requantize": true }),
    );
    assert_eq!(names(&end), ["quantize.json", "quantize.txt"], "{end}");
    assert_eq!(end["result"]["outputs"], json!([]));
}

#[test]
fn bad_sensitivity_and_recipe_requests_are_refused_naming_the_field() {
    let root = make_tiny_root("api-quantize-bad");
    std::fs::write(root.join("text.txt"), "a text under the root").unwrap();
    let s = start(&root, &[]);
    let (path, to) = ("smol.gguf", "q4_0");
    let many: Vec<String> = (0..65).map(|i| format!("r{i}.json")).collect();
    let cases: Vec<(&str, Value, u16, &str)> = vec![
        ("/api/sensitivity", json!({ "to": to, "predict": true }), 400, "`path`"),
        ("/api/sensitivity", json!({ "path": path, "predict": true }), 400, "to:"),
        (
            "/api/sensitivity",
            json!({ "path": path, "to": "q9_9", "predict": true }),
            400,
            "to \"q9_9\": not a ggml type",
        ),
        ("/api/sensitivity", json!({ "path": path, "to": 4, "predict": true }), 400, "to: invalid type"),
        (
            "/api/sensitivity",
            json!({ "path": path, "to": to, "ablate": "zero", "text": "text.txt" }),
            400,
            "to and ablate",
        ),
        ("/api/sensitivity", json!({ "path": path, "ablate": "fire", "text": "text.txt" }), 400, "ablate \"fire\""),
        ("/api/sensitivity", json!({ "path": path, "to": to, "seed": 3, "predict": true }), 400, "seed: "),
        ("/api/sensitivity", json!({ "path": path, "ablate": "noise", "predict": true }), 400, "predict: "),
        ("/api/sensitivity", json!({ "path": path, "to": to, "predict": true, "text": "text.txt" }), 400, "text: "),
        ("/api/sensitivity", json!({ "path": path, "to": to, "predict": true, "ctx": 64 }), 400, "ctx: "),
        ("/api/sensitivity", json!({ "path": path, "to": to, "predict": true, "jobs": 1 }), 400, "jobs: "),
        ("/api/sensitivity", json!({ "path": path, "to": to, "imatrix": "text.txt" }), 400, "imatrix: "),
        ("/api/sensitivity", json!({ "path": path, "to": to, "text": "text.txt", "truth": "t.json" }), 400, "truth: "),
        ("/api/sensitivity", json!({ "path": path, "to": to }), 400, "text: "),
        ("/api/sensitivity", json!({ "path": path, "to": to, "text": "text.txt", "ctx": 4 }), 400, "ctx 4"),
        ("/api/sensitivity", json!({ "path": path, "to": to, "text": "text.txt", "chunks": 0 }), 400, "chunks 0"),
        ("/api/sensitivity", json!({ "path": path, "to": to, "text": "text.txt", "jobs": 0 }), 400, "jobs 0"),
        ("/api/sensitivity", json!({ "path": path, "to": to, "text": "text.txt", "jobs": 100000 }), 400, "jobs 100000"),
        ("/api/sensitivity", json!({ "path": path, "to": to, "predict": true, "layers": "3-1" }), 400, "layers: "),
        (
            "/api/sensitivity",
            json!({ "path": path, "to": to, "predict": true, "types": ["liver"] }),
            400,
            "types: \"liver\"",
        ),
        (
            "/api/sensitivity",
            json!({ "path": path, "to": to, "predict": true, "types": "organ" }),
            400,
            "types: invalid type",
        ),
        ("/api/sensitivity", json!({ "path": path, "to": to, "predict": true, "names": [""] }), 400, "names: "),
        (
            "/api/sensitivity",
            json!({ "path": path, "to": to, "predict": true, "cache": "/tmp" }),
            400,
            "unknown field `cache`",
        ),
        ("/api/sensitivity", json!({ "path": "escape/passwd", "to": to, "predict": true }), 404, "escape/passwd"),
        ("/api/sensitivity", json!({ "path": path, "to": to, "predict": true, "imatrix": "../x" }), 400, "../x"),
        ("/api/sensitivity", json!({ "path": path, "to": to, "text": "missing.txt" }), 404, "missing.txt"),
        ("/api/recipe", json!({ "path": path, "data_free": true }), 400, "target_bpw or target_size"),
        (
            "/api/recipe",
            json!({ "path": path, "target_bpw": 4, "target_size": "9M", "data_free": true }),
            400,
            "target_bpw and target_size",
        ),
        ("/api/recipe", json!({ "path": path, "target_bpw": 0, "data_free": true }), 400, "target_bpw 0"),
        ("/api/recipe", json!({ "path": path, "target_bpw": 65, "data_free": true }), 400, "target_bpw 65"),
        ("/api/recipe", json!({ "path": path, "target_bpw": "4", "data_free": true }), 400, "target_bpw: invalid type"),
        ("/api/recipe", json!({ "path": path, "target_size": "lots", "data_free": true }), 400, "target_size: "),
        ("/api/recipe", json!({ "path": path, "target_size": "0", "data_free": true }), 400, "target_size: "),
        ("/api/recipe", json!({ "path": path, "target_bpw": 4 }), 400, "from, imatrix or data_free"),
        ("/api/recipe", json!({ "path": path, "target_bpw": 4, "from": [] }), 400, "from, imatrix or data_free"),
        (
            "/api/recipe",
            json!({ "path": path, "target_bpw": 4, "data_free": true, "imatrix": "text.txt" }),
            400,
            "not several",
        ),
        (
            "/api/recipe",
            json!({ "path": path, "target_bpw": 4, "data_free": true, "from": ["r.json"] }),
            400,
            "not several",
        ),
        ("/api/recipe", json!({ "path": path, "target_bpw": 4, "from": many }), 400, "from: 65 reports"),
        (
            "/api/recipe",
            json!({ "path": path, "target_bpw": 4, "data_free": true, "types": ["q3_0"] }),
            400,
            "types \"q3_0\"",
        ),
        (
            "/api/recipe",
            json!({ "path": path, "target_bpw": 4, "from": ["r.json"], "types": ["q4_0"] }),
            400,
            "types: ",
        ),
        (
            "/api/recipe",
            json!({ "path": path, "target_bpw": 4, "data_free": true, "apply": "o.gguf" }),
            400,
            "unknown field `apply`",
        ),
        ("/api/recipe", json!({ "path": path, "target_bpw": 4, "from": ["missing.json"] }), 404, "missing.json"),
        ("/api/recipe", json!({ "path": "escape/passwd", "target_bpw": 4, "data_free": true }), 404, "escape/passwd"),
        ("/api/quantize", json!({ "path": path }), 400, "`type`"),
        ("/api/quantize", json!({ "path": path, "type": "Q9_K" }), 400, "invalid TYPE \"Q9_K\""),
        ("/api/quantize", json!({ "path": path, "type": "Q8_0", "override_kv": ["a=u8:1"] }), 400, "--override-kv"),
        ("/api/quantize", json!({ "path": path, "type": "Q8_0", "prune_layers": "1,-2" }), 400, "--prune-layers"),
        ("/api/quantize", json!({ "path": path, "type": "Q8_0", "tensor_types": ["attn(=q8_0"] }), 400, "attn("),
        ("/api/quantize", json!({ "path": path, "type": "Q8_0", "tensor_types": ["attn=q9"] }), 400, "\"q9\""),
        ("/api/quantize", json!({ "path": path, "type": "Q8_0", "exclude_weights": ["a"] }), 400, "give imatrix"),
        ("/api/quantize", json!({ "path": path, "type": "Q8_0", "out": "x.bin" }), 400, "out \"x.bin\""),
        ("/api/quantize", json!({ "path": path, "type": "Q8_0", "out": "../x.gguf" }), 400, "out \"../x.gguf\""),
        ("/api/quantize", json!({ "path": path, "type": "Q8_0", "threads": 2 }), 400, "unknown field `threads`"),
        ("/api/quantize", json!({ "path": path, "type": "Q8_0", "imatrix": "../x" }), 400, "../x"),
        ("/api/quantize", json!({ "path": "escape/passwd", "type": "Q8_0" }), 404, "escape/passwd"),
    ];
    for (route, body, status, names) in &cases {
        let (st, v) = post(&s, route, body);
        assert_eq!(st, *status, "{route} {body}: {v}");
        let msg = v["error"].as_str().unwrap_or_default();
        assert!(msg.contains(names), "{route} {body}: {msg:?} does not name {names:?}");
    }
    // Refused before any job: no job directory was made, and the server still answers.
    let jobs = std::fs::read_dir(root.join("results")).unwrap().count();
    assert_eq!(jobs, 0, "a refused request made a job directory");
    assert_eq!(get(&s, "/api/health").0, 200);
    let (st, doc) = get(&s, "/openapi.json");
    assert_eq!(st, 200);
    for p in ["/api/sensitivity", "/api/recipe"] {
        assert!(doc["paths"][p]["post"].is_object(), "openapi.json documents {p}");
    }
}
