//! LoRA adapters read, checked and measured (issue 31, points 1 and 2): adapters made by
//! tests/oracle/make-lora.py for SmolLM2, `organ measure ADAPTER --base` against
//! tests/oracle/lora_ref.py (which materializes ΔW), `organ check` on adapters broken
//! one way each, and `organ inspect`'s view of an adapter.

use crate::common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// `make-lora.py BASE tmp(NAME) ARGS…`: an adapter for `base`.
#[track_caller]
pub fn make_lora(base: &Path, name: &str, args: &[&str]) -> PathBuf {
    let out = tmp(name);
    let mut c = std::process::Command::new(oracle_python());
    c.arg(repo().join("tests/oracle/make-lora.py")).arg(base).arg(&out).args(args);
    ok(c);
    out
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// A few layers of every linear weight and token_embd, so the oracle stays quick: at
/// each rank and type the tests make.
const TARGETS: &[&str] = &["--targets", "attn_q,attn_k,attn_v,attn_output,ffn_gate,ffn_up,ffn_down,token_embd"];

#[test]
fn measure_matches_the_oracle_that_materializes_delta_w() {
    let Some(model) = need::smollm2_and_oracle() else { return };
    for (rank, ty, seed) in [("4", "f32", "1"), ("8", "f16", "2"), ("16", "q8_0", "3")] {
        let name = format!("r{rank}-{ty}.gguf");
        let mut args = vec!["--rank", rank, "--type", ty, "--seed", seed, "--layers", "0,17,29"];
        args.extend(TARGETS);
        let adapter = make_lora(&model, &name, &args);
        let want = oracle_json(
            &repo().join("tests/oracle/lora_ref.py"),
            &[adapter.as_os_str(), "--base".as_ref(), model.as_os_str(), "--sigma".as_ref()],
            &format!("{name}.ref.json"),
        );
        let json = tmp(&format!("{name}.json"));
        let mut c = organ();
        c.arg("measure").arg(&adapter).arg("--base").arg(&model).arg("--sigma").arg("--json").arg(&json).arg("--force");
        let text = String::from_utf8(ok(c).stdout).unwrap();
        assert!(text.contains(&format!("LoRA adapter: 22 pairs, rank {rank}, α {}", 2 * rank.parse::<u32>().unwrap())));
        assert!(text.contains("‖ΔW‖/‖W‖"), "{text}");
        let got: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        let m = &got["models"][0];
        assert_eq!(m["adapter"]["pairs"], 22);
        assert_eq!(m["adapter"]["ranks"][0].as_u64().unwrap().to_string(), rank);
        let (rows, refs) = (m["tensors"].as_array().unwrap(), want["tensors"].as_array().unwrap());
        assert_eq!(rows.len(), 22);
        // The oracle lists pairs in the file's order of A halves, as organ does.
        for (g, w) in rows.iter().zip(refs) {
            let n = w["name"].as_str().unwrap();
            assert_eq!(g["name"], w["name"]);
            assert!((f(&g["theta"]) - f(&w["theta"])).abs() <= 1e-6, "{name} {n}: θ {} vs {}", g["theta"], w["theta"]);
            assert!((f(&g["sigma"]) - f(&w["sigma"])).abs() <= 1e-6, "{name} {n}: σ {} vs {}", g["sigma"], w["sigma"]);
            let u = &g["update"];
            assert_eq!(u["rank"], w["rank"], "{n}");
            assert_eq!(f(&u["scale"]), f(&w["scale"]), "{n}");
            let (fro, wfro) = (f(&u["frobenius"]), f(&w["frobenius"]));
            assert!((fro - wfro).abs() <= 1e-6 * wfro, "{name} {n}: ‖ΔW‖ {fro} vs {wfro}");
            let (b, wb) = (f(&u["base_frobenius"]), f(&w["base_frobenius"]));
            assert!((b - wb).abs() <= 1e-9 * wb, "{name} {n}: ‖W‖ {b} vs {wb}");
            // ΔW has W's shape: token_embd's update is the vocabulary's rows.
            let want_group = if n.starts_with("token_embd") {
                "embed"
            } else if n.contains(".attn_") {
                "skeleton"
            } else {
                "organ"
            };
            assert_eq!(g["group"], want_group, "{n}");
        }
    }
}

#[test]
fn check_finds_what_llama_cpp_refuses_and_measure_stops_on_it() {
    let Some(model) = need::smollm2_and_oracle() else { return };
    let args = ["--rank", "4", "--targets", "attn_q", "--layers", "0,1"];
    let good = make_lora(&model, "good.gguf", &args);
    let mut c = organ();
    c.arg("check").arg(&good).arg("--base").arg(&model);
    let text = String::from_utf8(ok(c).stdout).unwrap();
    assert!(text.contains("ok: 0 errors, 0 warnings"), "{text}");
    let cases: &[(&str, &str)] = &[
        ("half", "blk.0.attn_q.weight: lora_b is missing: half a pair"),
        ("rank0", "blk.0.attn_q.weight: rank 0"),
        ("no-alpha", "adapter.lora.alpha: missing"),
        ("arch", "general.architecture: the adapter is for \"qwen2\", the base is \"llama\""),
        ("suffix", "blk.0.attn_q.weight: not a LoRA tensor"),
    ];
    for (kind, said) in cases {
        let bad = make_lora(&model, &format!("bad-{kind}.gguf"), &[&args[..], &["--break", kind]].concat());
        let json = tmp(&format!("bad-{kind}.check.json"));
        let mut c = organ();
        c.arg("check").arg(&bad).arg("--base").arg(&model).arg("--json").arg(&json).arg("--force");
        let o = c.output().unwrap();
        assert_eq!(o.status.code(), Some(1), "{kind}: check exits 1 on an error finding");
        let r: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        let found = r["findings"].as_array().unwrap();
        assert!(
            found.iter().any(|x| x["kind"] == "adapter"
                && x["severity"] == "error"
                && format!("{}: {}", x["subject"].as_str().unwrap(), x["message"].as_str().unwrap()).starts_with(said)),
            "{kind}: {found:?}"
        );
        // measure refuses it before any work, naming the file and the problem.
        let mut c = organ();
        c.arg("measure").arg(&bad).arg("--base").arg(&model);
        let err = fails(c);
        assert!(err.contains(&format!("bad-{kind}.gguf")) && err.contains(said), "{kind}: {err}");
    }
    // A base given as the adapter, an adapter given as the base.
    let mut c = organ();
    c.arg("measure").arg(&model).arg("--base").arg(&model);
    assert!(fails(c).contains("--base is for adapters, and this is not one"));
    let mut c = organ();
    c.arg("measure").arg(&good).arg("--base").arg(&good);
    assert!(fails(c).contains("the base is itself an adapter"));
}

#[test]
fn a_token_embd_pair_on_a_tied_model_is_an_error_against_the_base_at_run_time() {
    let Some(model) = need::smollm2_and_oracle() else { return };
    let tied = make_lora(&model, "tied.gguf", &["--rank", "4", "--targets", "attn_q,token_embd", "--layers", "0"]);
    let mut c = organ();
    c.arg("check").arg(&tied);
    assert!(String::from_utf8(ok(c).stdout).unwrap().contains("ok: 0 errors"), "alone, the adapter is sound");
    let mut c = organ();
    c.arg("check").arg(&tied).arg("--base").arg(&model);
    let o = c.output().unwrap();
    let text = String::from_utf8(o.stdout).unwrap();
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(
        text.contains("error   adapter          token_embd.weight: the base ties its output to token_embd"),
        "{text}"
    );
    // measure takes it: the update is what it is, whether llama.cpp can run it or not.
    let mut c = organ();
    c.arg("measure").arg(&tied).arg("--base").arg(&model).arg("--summary-only");
    ok(c);
}

#[test]
fn inspect_shows_an_adapter_as_its_pairs() {
    let Some(model) = need::smollm2_and_oracle() else { return };
    let a = make_lora(
        &model,
        "inspect.gguf",
        &["--rank", "8", "--type", "q8_0", "--targets", "attn_v,token_embd", "--layers", "3"],
    );
    let mut c = organ();
    c.arg("inspect").arg(&a);
    let text = String::from_utf8(ok(c).stdout).unwrap();
    assert!(text.contains("LoRA adapter for llama: α 16, rank 8, 2 pairs"), "{text}");
    // token_embd's pair updates the [n_embd, n_vocab] weight; q8_0 rows of 8 values cannot
    // be blocks of 32, so B (and token_embd's halves) fall back to F16 as the converter does.
    let row = |words: &[&str]| text.lines().any(|l| l.split_whitespace().collect::<Vec<_>>().starts_with(words));
    assert!(row(&["token_embd.weight", "[576,", "49152]", "8", "F16", "F16"]), "{text}");
    assert!(row(&["blk.3.attn_v.weight", "[576,", "192]", "8", "Q8_0", "F16"]), "{text}");
    let mut c = organ();
    c.arg("inspect").arg(&a).arg("--json");
    let doc: Value = serde_json::from_slice(&ok(c).stdout).unwrap();
    let pairs = doc["adapter"]["pairs"].as_array().unwrap();
    assert_eq!(pairs[1]["target"], "blk.3.attn_v.weight");
    assert_eq!(pairs[1]["shape"], serde_json::json!([576, 192]));
    assert_eq!(pairs[1]["a"], "blk.3.attn_v.weight.lora_a");
    assert_eq!(doc["adapter"]["problems"], serde_json::json!([]));
    // A model's inspect has no adapter part.
    let mut c = organ();
    c.arg("inspect").arg(&model).arg("--json");
    let doc: Value = serde_json::from_slice(&ok(c).stdout).unwrap();
    assert!(doc.get("adapter").is_none());
}
