//! organ purify on the real model: both methods judged by llama.cpp, the θ before/after
//! table and perplexities printed; refusals by name; --only-if-improves.

mod common;

use common::*;
use organ_core::gguf::MetaValue;
use organ_core::Gguf;
use serde_json::Value;

#[test]
fn both_methods_on_smollm2_organs_load_generate_and_report() {
    let model = smollm2();
    let p_orig = llama_perplexity(&model);
    println!("original: perplexity {p_orig:.4}");
    for (method, extra) in [("fractal", ["--strength", "0.5"]), ("spectral", ["--keep", "0.95"])] {
        let out = tmp(&format!("purified-{method}.gguf"));
        let json = tmp(&format!("purified-{method}.json"));
        let mut c = organ();
        c.arg("purify").arg(&model).args(["--method", method, "--type", "organ", "--layers", "5-20"]).args(extra);
        c.arg("--out").arg(&out).arg("--json").arg(&json);
        let table = String::from_utf8(ok(c).stdout).unwrap();
        println!("{table}");
        assert!(table.contains("48 of 48 selected tensors purified"), "{table}");
        let report: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        for r in report["tensors"].as_array().unwrap() {
            assert_eq!(r["status"], "purified");
            assert_eq!(r["written_as"], "Q4_1", "kept in its own type");
            assert!(r["relative_l2"].as_f64().unwrap() > 0.0);
        }
        let bytes = std::fs::read(&out).unwrap();
        let g = Gguf::parse(&bytes, bytes.len() as u64).unwrap();
        assert_eq!(g.get("organ.purify.method").and_then(|v| v.as_str()), Some(method));
        assert!(matches!(g.get("organ.purify.tensors"), Some(MetaValue::Array(a)) if a.len == 48));
        let text = llama_generate(&out, 24);
        let p = llama_perplexity(&out);
        println!("{method}: generates {text:?}; perplexity {p:.4} (original {p_orig:.4})");
        assert!(p.is_finite() && p > 1.0);
    }
}

#[test]
fn only_if_improves_keeps_every_tensor_whose_theta_would_fall() {
    let out = tmp("improves.gguf");
    let json = tmp("improves.json");
    let mut c = organ();
    c.arg("purify").arg(smollm2()).args([
        "--method",
        "spectral",
        "--keep",
        "0.99",
        "--layers",
        "0-3",
        "--only-if-improves",
    ]);
    c.arg("--out").arg(&out).arg("--json").arg(&json);
    ok(c);
    let report: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    for r in report["tensors"].as_array().unwrap() {
        let (b, a) = (r["theta_before"].as_f64(), r["theta_after"].as_f64());
        match r["status"].as_str().unwrap() {
            "purified" => assert!(a.unwrap() > b.unwrap(), "{r}"),
            s => assert!(s.starts_with("kept") || s.starts_with("untouched"), "{r}"),
        }
    }
}

#[test]
fn types_organ_cannot_requantize_are_refused_by_name_unless_written_as_f16() {
    // A Q4_K_M model, made by llama.cpp: its FFN tensors are Q4_K / Q6_K.
    let q4k = tmp("q4k.gguf");
    let mut q = llama_tool("llama-quantize");
    q.arg("--allow-requantize").arg(smollm2()).arg(&q4k).arg("Q4_K_M");
    ok(q);
    let out = tmp("q4k-purified.gguf");
    let mut c = organ();
    c.arg("purify").arg(&q4k).args(["--method", "fractal", "--type", "organ", "--layers", "5"]).arg("--out").arg(&out);
    let e = fails(c);
    assert!(e.contains("cannot requantize") && e.contains("blk.5.ffn_") && e.contains("--as f16"), "{e}");
    assert!(!out.exists());
    let mut c = organ();
    c.arg("purify")
        .arg(&q4k)
        .args(["--method", "fractal", "--type", "organ", "--layers", "5", "--as", "f16"])
        .arg("--out")
        .arg(&out);
    ok(c);
    let bytes = std::fs::read(&out).unwrap();
    let g = Gguf::parse(&bytes, bytes.len() as u64).unwrap();
    assert_eq!(g.tensor("blk.5.ffn_up.weight").unwrap().ty, organ_core::GgmlType::F16);
    llama_generate(&out, 24);
}
