//! `organ merge` (issue 33, docs/merge.md): every method against the NumPy oracle
//! (tests/oracle/merge_ref.py) on test-built models of mixed types, F32 output, to 1e-6
//! relative; the identities that need no oracle; a mergekit YAML config; SmolLM2 F16
//! finetunes made with gguf-py merged and run by llama.cpp; bad inputs refused by name
//! with nothing written.

use crate::build::{noise, t, write_model_kvs, T};
use crate::common::*;
use organ_core::gguf::{Gguf, MetaValue};
use organ_core::GgmlType;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The tensors of a test model: the base's values plus `delta` times seeded noise (0: the
/// base); token_embd of the second finetune is F16 where the others' is Q8_0, and
/// output_norm is the same in every model.
fn tensors(seed: u64, delta: f32, embd: GgmlType) -> Vec<T> {
    let v = |k: u64, n: usize| -> Vec<f32> {
        let base = noise(100 + k, n);
        let d = noise(seed * 1000 + k, n);
        base.iter().zip(d).map(|(b, d)| b + delta * d).collect()
    };
    vec![
        t("token_embd.weight", &[64, 10], embd, v(1, 640)),
        t("blk.0.attn_norm.weight", &[64], GgmlType::F32, v(2, 64)),
        t("blk.0.attn_q.weight", &[64, 8], GgmlType::F32, v(3, 512)),
        t("blk.1.ffn_up.weight", &[32, 16], GgmlType::F16, v(4, 512)),
        t("output_norm.weight", &[64], GgmlType::F32, noise(5, 64)),
    ]
}

fn kvs() -> Vec<(&'static str, MetaValue<'static>)> {
    vec![("general.architecture", MetaValue::Str(b"llama")), ("llama.block_count", MetaValue::U32(2))]
}

/// The base and two finetunes of it, written once.
fn trio() -> &'static (PathBuf, PathBuf, PathBuf) {
    static P: OnceLock<(PathBuf, PathBuf, PathBuf)> = OnceLock::new();
    P.get_or_init(|| {
        let k = kvs();
        (
            write_model_kvs("merge-base.gguf", &k, &tensors(0, 0.0, GgmlType::Q8_0)),
            write_model_kvs("merge-a.gguf", &k, &tensors(1, 0.05, GgmlType::Q8_0)),
            write_model_kvs("merge-b.gguf", &k, &tensors(2, 0.08, GgmlType::F16)),
        )
    })
}

fn merge(args: &[&std::ffi::OsStr]) -> Command {
    let mut c = organ();
    c.arg("merge").args(args);
    c
}

/// Every tensor of a GGUF as f32 values, by name.
fn values(p: &Path) -> Vec<(String, GgmlType, Vec<f32>)> {
    let bytes = std::fs::read(p).unwrap();
    let g = Gguf::parse(&bytes, bytes.len() as u64).unwrap();
    g.tensors
        .iter()
        .map(|ti| (ti.name.to_owned(), ti.ty, organ_core::quant::dequantize(ti.ty, ti.data(&bytes).unwrap()).unwrap()))
        .collect()
}

#[test]
fn every_method_equals_the_numpy_oracle_to_1e_6() {
    let Some(python) = need::oracle() else { return };
    let (base, a, b) = trio();
    let m = |p: &Path, w: f64, d: f64| json!({"path": p, "weight": w, "density": d});
    // (method, organ's flags, the oracle's parameters as organ resolves them)
    let cases: Vec<(&str, Vec<String>, Value)> = vec![
        ("linear", vec![], json!({"base": null, "models": [m(a, 0.6, 1.0), m(b, 0.3, 1.0)], "normalize": true})),
        (
            "task_arithmetic",
            vec![],
            json!({"models": [m(a, 0.7, 1.0), m(b, -0.4, 1.0)], "normalize": false, "lambda": 1.5}),
        ),
        ("ties", vec![], json!({"models": [m(a, 0.7, 0.5), m(b, 0.5, 0.3)], "normalize": true, "rescale": false})),
        (
            "dare_linear",
            vec![],
            json!({"models": [m(a, 0.7, 0.6), m(b, 0.5, 0.4)], "normalize": false, "rescale": true}),
        ),
        ("dare_ties", vec![], json!({"models": [m(a, 0.7, 0.6), m(b, 0.5, 0.4)], "normalize": false, "rescale": true})),
        ("slerp", vec!["--t".into(), "0.3".into()], json!({"models": [m(a, 1.0, 1.0)], "t": 0.3})),
    ];
    let mut checks = Vec::new();
    for (method, extra, mut spec) in cases {
        let out = tmp(&format!("merge-oracle-{method}.gguf"));
        let _ = std::fs::remove_file(&out);
        let mut c = organ();
        c.args(["merge", "--method", method, "--type", "f32", "--seed", "42", "--out"]).arg(&out).args(&extra);
        if method != "linear" {
            c.arg("--base").arg(base);
        }
        for e in spec["models"].as_array().unwrap() {
            let p = e["path"].as_str().unwrap();
            c.arg("--model").arg(match method {
                "linear" => format!("{p}:{}", e["weight"]),
                "slerp" => p.to_owned(),
                _ => format!("{p}:{},density={}", e["weight"], e["density"]),
            });
        }
        if spec.get("lambda").is_some() {
            c.args(["--param", "lambda=1.5"]);
        }
        ok(c);
        let o = spec.as_object_mut().unwrap();
        o.insert("method".into(), json!(method));
        o.entry("base").or_insert(json!(base));
        o.entry("lambda").or_insert(json!(1.0));
        o.entry("normalize").or_insert(json!(false));
        o.entry("rescale").or_insert(json!(false));
        o.entry("t").or_insert(json!(0.0));
        o.insert("seed".into(), json!(42));
        o.insert("merged".into(), json!(out));
        checks.push(spec);
    }
    let list = tmp("merge-oracle-checks.json");
    std::fs::write(&list, serde_json::to_vec(&checks).unwrap()).unwrap();
    let res = tmp("merge-oracle-results.json");
    let mut c = Command::new(python);
    c.arg(repo().join("tests/oracle/merge_ref.py")).arg(&list).arg(&res);
    ok(c);
    let results: Vec<Value> = serde_json::from_slice(&std::fs::read(&res).unwrap()).unwrap();
    assert_eq!(results.len(), 6);
    for r in &results {
        eprintln!("{}: max rel {} ({})", r["merged"], r["max_rel"], r["worst"]);
        assert_eq!(r["tensors"], 5, "{r}");
        assert!(r["max_rel"].as_f64().unwrap() <= 1e-6, "{r}");
    }
}
