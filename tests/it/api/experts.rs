//! measure jobs with `experts` (Z-measure §6): the job's report is `organ measure
//! --experts`'s exactly (each expert's θ, outliers and duplicates), alone and with σ, and
//! its CSV lists the experts. The model is a tiny MoE written here, so no download.

use super::server::*;
use crate::build::{noise, t, write_model};
use crate::common::{ok, organ, tmp};
use organ_core::GgmlType;
use serde_json::{json, Value};

/// A root with `moe.gguf`: per layer a router, and expert tensors of 5 experts of which
/// expert 3 is a byte copy of expert 1, and a shared expert.
fn moe_root() -> std::path::PathBuf {
    let root = make_tiny_root("api-experts");
    let mut tensors = Vec::new();
    for l in 0..2u64 {
        tensors.push(t(&format!("blk.{l}.ffn_gate_inp.weight"), &[64, 5], GgmlType::F32, noise(10 + l, 320)));
        for (k, kind) in ["gate", "up", "down"].into_iter().enumerate() {
            let seed = 100 * l + 10 * k as u64;
            let e: Vec<Vec<f32>> = (0..5).map(|e| noise(seed + [0, 1, 2, 1, 4][e], 64 * 32)).collect();
            tensors.push(t(&format!("blk.{l}.ffn_{kind}_exps.weight"), &[64, 32, 5], GgmlType::Q8_0, e.concat()));
        }
        tensors.push(t(&format!("blk.{l}.ffn_up_shexp.weight"), &[64, 32], GgmlType::Q8_0, noise(50 + l, 2048)));
    }
    let moe = write_model("api-experts-moe.gguf", "llama", &tensors);
    std::fs::copy(moe, root.join("moe.gguf")).unwrap();
    root
}

/// `organ measure --summary-only --no-cache --experts FLAGS --json` on the root's MoE.
fn cli(root: &std::path::Path, flags: &[&str], name: &str) -> Value {
    let json = tmp(name);
    ok({
        let mut c = organ();
        c.arg("measure").arg(root.join("moe.gguf")).args(["--summary-only", "--no-cache", "--force", "--experts"]);
        c.args(flags).arg("--json").arg(&json);
        c
    });
    serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap()
}

#[test]
fn measure_jobs_take_experts() {
    let root = moe_root();
    let s = start(&root, &[]);
    let end = run_job(&s, "/api/measure", json!({ "paths": ["moe.gguf"], "experts": true }));
    let want = cli(&root, &[], "api-cli-experts.json");
    let up = want["models"][0]["tensors"].as_array().unwrap().iter().find(|t| t["name"] == "blk.0.ffn_up_exps.weight");
    let experts = up.unwrap()["experts"].as_array().unwrap();
    assert_eq!(experts.len(), 5);
    assert_eq!(experts[3]["duplicate_of"], 1, "the CLI finds the byte copy: {experts:?}");
    assert_eq!(end["result"], want, "the API's report is organ measure --experts --json's");
    let csv_out = end["outputs"].as_array().unwrap().iter().find(|o| o.as_str().unwrap().ends_with(".csv")).unwrap();
    let csv = String::from_utf8(download(&s, csv_out.as_str().unwrap())).unwrap();
    assert!(
        csv.lines().next().unwrap().ends_with(",expert,outlier,duplicate_of,standing"),
        "{}",
        csv.lines().next().unwrap()
    );
    assert!(csv.lines().any(|l| l.contains("blk.0.ffn_up_exps.weight#3,") && l.ends_with(",1,copy")), "{csv}");

    let end = run_job(&s, "/api/measure", json!({ "paths": ["moe.gguf"], "experts": true, "sigma": true }));
    assert_eq!(end["result"], cli(&root, &["--sigma"], "api-cli-experts-sigma.json"), "with σ too");

    let end = run_job(&s, "/api/measure", json!({ "paths": ["moe.gguf"] }));
    let rows = end["result"]["models"][0]["tensors"].as_array().unwrap();
    assert!(rows.iter().all(|t| t.get("experts").is_none()), "no experts unless asked for");
    let (st, e) = post(&s, "/api/measure", &json!({ "paths": ["moe.gguf"], "experts": "yes" }));
    assert_eq!(st, 400, "experts that is not a boolean: {e}");
}
