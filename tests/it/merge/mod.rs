//! `organ merge` (issue 33, docs/merge.md): every method against the NumPy oracle
//! (tests/oracle/merge_ref.py) on test-built models of mixed types, F32 output, to 1e-6
//! relative; the identities that need no oracle; a mergekit YAML config; SmolLM2 F16
//! finetunes made with gguf-py merged and run by llama.cpp; bad inputs refused by name
//! with nothing written; mergekit's `slices:` (slices.rs).

use crate::build::{noise, t, write_model_kvs, T};
use crate::common::*;
use organ_core::gguf::{Gguf, MetaValue};
use organ_core::GgmlType;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

mod slices;
mod smollm2;

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

/// `organ merge ARGS… --out tmp(NAME)`, which must succeed: the output and stdout.
fn merged(name: &str, args: &[&str]) -> (PathBuf, String) {
    let out = tmp(name);
    let _ = std::fs::remove_file(&out);
    let mut c = organ();
    c.arg("merge").args(args).arg("--out").arg(&out);
    let o = ok(c);
    (out, String::from_utf8(o.stdout).unwrap())
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn linear_of_a_model_with_itself_is_the_model() {
    let (_, a, _) = trio();
    let twin = tmp("merge-a-twin.gguf");
    std::fs::copy(a, &twin).unwrap();
    let (out, text) =
        merged("merge-self.gguf", &["--method", "linear", "--model", s(a), "--model", &format!("{}:3", s(&twin))]);
    assert!(text.contains("merged 0 tensors, copied 5 byte for byte"), "{text}");
    assert_eq!(values(&out), values(a));
    // Without normalize the weights 1 and 3 make 4 times the model (mergekit's Σ wᵢ xᵢ):
    // identical inputs are merged, not copied.
    let (out, text) = merged(
        "merge-self-4x.gguf",
        &["--method", "linear", "--model", s(a), "--model", &format!("{}:3", s(&twin)), "--param", "normalize=false"],
    );
    assert!(text.contains("merged 5 tensors, copied 0 byte for byte"), "{text}");
    let find =
        |v: Vec<(String, GgmlType, Vec<f32>)>| v.into_iter().find(|t| t.0 == "blk.0.attn_norm.weight").unwrap().2;
    let four: Vec<f32> = find(values(a)).iter().map(|x| 4.0 * x).collect();
    assert_eq!(find(values(&out)), four);
}

#[test]
fn slerp_at_0_and_1_gives_the_endpoints() {
    let (base, a, _) = trio();
    for (t, want) in [("0", base), ("1", a)] {
        let (out, _) = merged(
            &format!("merge-slerp-{t}.gguf"),
            &["--method", "slerp", "--base", s(base), "--model", s(a), "--t", t, "--type", "f32"],
        );
        let (got, want) = (values(&out), values(want));
        for ((name, _, g), (_, _, w)) in got.iter().zip(&want) {
            assert_eq!(g, w, "t = {t}: {name}");
        }
    }
}

#[test]
fn ties_of_one_model_at_density_1_is_task_arithmetic() {
    let (base, a, _) = trio();
    let (ties, _) = merged(
        "merge-ties-1.gguf",
        &["--method", "ties", "--base", s(base), "--model", &format!("{}:1,density=1", s(a))],
    );
    let (ta, _) = merged("merge-ta-1.gguf", &["--method", "task_arithmetic", "--base", s(base), "--model", s(a)]);
    let (x, y) = (values(&ties), values(&ta));
    assert_eq!(x, y);
    // And it is a merge: every tensor but output_norm differs from the base's.
    let changed = x.iter().zip(values(base)).filter(|(m, b)| m.2 != b.2).count();
    assert_eq!(changed, 4);
}

#[test]
fn a_mergekit_config_with_filters_runs_as_written() {
    let (base, a, _) = trio();
    let config = tmp("merge-slerp.yml");
    std::fs::write(
        &config,
        format!(
            "# a mergekit slerp config\nmodels:\n  - model: {b}\n  - model: {a}\nmerge_method: slerp\nbase_model: {b}\n\
             parameters:\n  t:\n    - filter: self_attn\n      value: 0\n    - filter: mlp\n      value: [1, 1]\n    \
             - value: 0.5\ndtype: float32\n",
            b = s(base),
            a = s(a)
        ),
    )
    .unwrap();
    let json = tmp("merge-slerp.json");
    let _ = std::fs::remove_file(&json);
    let (out, text) = merged("merge-config.gguf", &[s(&config), "--json", s(&json)]);
    assert!(text.contains("merge: slerp of 1 model onto merge-base.gguf (llama)"), "{text}");
    let (got, b, x) = (values(&out), values(base), values(a));
    let find = |v: &[(String, GgmlType, Vec<f32>)], n: &str| v.iter().find(|t| t.0 == n).unwrap().clone();
    // self_attn (attn_q) at t = 0 is the base, mlp (ffn_up) at t = 1 the model, the rest
    // at 0.5 neither; every merged tensor is F32 (dtype).
    assert_eq!(find(&got, "blk.0.attn_q.weight").2, find(&b, "blk.0.attn_q.weight").2);
    assert_eq!(find(&got, "blk.1.ffn_up.weight").2, find(&x, "blk.1.ffn_up.weight").2);
    let norm = find(&got, "blk.0.attn_norm.weight");
    assert_eq!(norm.1, GgmlType::F32);
    assert!(norm.2 != find(&b, "blk.0.attn_norm.weight").2 && norm.2 != find(&x, "blk.0.attn_norm.weight").2);
    let report: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(report["tensors"].as_array().unwrap().len(), 4, "{report}");
    // The provenance: the method, each input by file name and BLAKE3.
    let bytes = std::fs::read(&out).unwrap();
    let g = Gguf::parse(&bytes, bytes.len() as u64).unwrap();
    let text = |k: &str| match g.get(k) {
        Some(MetaValue::Str(v)) => String::from_utf8(v.to_vec()).unwrap(),
        other => panic!("{k}: {other:?}"),
    };
    assert_eq!(text("organ.merge.method"), "slerp");
    assert_eq!(text("organ.merge.base"), "merge-base.gguf");
    assert_eq!(text("organ.merge.base_blake3"), blake3::hash(&std::fs::read(base).unwrap()).to_hex().to_string());
    assert!(text("organ.merge.parameters").contains("self_attn"));
}

#[test]
fn bad_inputs_are_refused_by_name_and_nothing_is_written() {
    let (base, a, b) = trio();
    let k = kvs();
    let mut other = tensors(3, 0.05, GgmlType::Q8_0);
    let qwen = write_model_kvs(
        "merge-qwen.gguf",
        &[("general.architecture", MetaValue::Str(b"qwen2")), ("qwen2.block_count", MetaValue::U32(2))],
        &other,
    );
    other[2] = t("blk.0.attn_q.weight", &[64, 4], GgmlType::F32, noise(9, 256));
    let narrow = write_model_kvs("merge-narrow.gguf", &k, &other);
    other.remove(2);
    let missing = write_model_kvs("merge-missing.gguf", &k, &other);
    let config = tmp("merge-bad.yml");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec!["--method".into(), "frankenmerge".into(), "--model".into(), s(a).into()], "frankenmerge"),
        (
            vec![
                "--method".into(),
                "task_arithmetic".into(),
                "--base".into(),
                s(base).into(),
                "--model".into(),
                s(&qwen).into(),
            ],
            "qwen2",
        ),
        (
            vec![
                "--method".into(),
                "task_arithmetic".into(),
                "--base".into(),
                s(base).into(),
                "--model".into(),
                s(&narrow).into(),
            ],
            "blk.0.attn_q.weight",
        ),
        (
            vec![
                "--method".into(),
                "task_arithmetic".into(),
                "--base".into(),
                s(base).into(),
                "--model".into(),
                s(&missing).into(),
            ],
            "merge-missing.gguf: has no tensor \"blk.0.attn_q.weight\"",
        ),
        (
            vec![
                "--method".into(),
                "ties".into(),
                "--base".into(),
                s(base).into(),
                "--model".into(),
                format!("{}:1,density=0", s(a)),
            ],
            "density",
        ),
        (
            vec![
                "--method".into(),
                "dare_linear".into(),
                "--base".into(),
                s(base).into(),
                "--model".into(),
                format!("{}:1,density=1.5", s(a)),
            ],
            "outside (0, 1]",
        ),
        (
            vec![
                "--method".into(),
                "linear".into(),
                "--model".into(),
                format!("{}:1", s(a)),
                "--model".into(),
                format!("{}:-1", s(b)),
            ],
            "sum to 0",
        ),
        (
            vec![
                "--method".into(),
                "ties".into(),
                "--base".into(),
                s(base).into(),
                "--model".into(),
                s(a).into(),
                "--param".into(),
                "gamma=0.1".into(),
            ],
            "parameters.gamma",
        ),
        (vec![s(&config).into()], "slices[0].sources[0].layer_range: [0, 3] is beyond"),
    ];
    std::fs::write(
        &config,
        format!("slices:\n  - sources: [{{model: {}, layer_range: [0, 3]}}]\nmerge_method: passthrough\n", s(a)),
    )
    .unwrap();
    let out = tmp("merge-refused.gguf");
    for (args, want) in cases {
        let mut c = organ();
        c.arg("merge").args(&args).arg("--out").arg(&out);
        let err = fails(c);
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!out.exists(), "{args:?} wrote {}", out.display());
    }
    // An output that is an input is refused.
    let mut c = organ();
    c.args(["merge", "--method", "task_arithmetic", "--base", s(base), "--model", s(a), "--out", s(a), "--force"]);
    fails(c);
}

#[test]
fn split_and_organ_directory_inputs_merge_as_their_files() {
    let (base, a, b) = trio();
    // `a` as a split model, `b` as an organ directory.
    let dir = tmp("merge-b-dir");
    let mut c = organ();
    c.arg("dissect").arg(b).arg("--out").arg(&dir);
    ok(c);
    let a_dir = tmp("merge-a-dir");
    let mut c = organ();
    c.arg("dissect").arg(a).arg("--out").arg(&a_dir);
    ok(c);
    let split = tmp("merge-a-split");
    std::fs::create_dir_all(&split).unwrap();
    let mut c = organ();
    c.arg("assemble").arg(&a_dir).args(["--split-max-size", "4K", "--out"]).arg(split.join("a.gguf"));
    ok(c);
    let shard = split.join("a-00001-of-00002.gguf");
    assert!(shard.exists() && split.join("a-00002-of-00002.gguf").exists());
    let args = |a: &Path, b: &Path| -> Vec<String> {
        ["--method", "task_arithmetic", "--base", s(base), "--model"]
            .iter()
            .map(|x| x.to_string())
            .chain([format!("{}:1", s(a)), "--model".into(), format!("{}:0.5", s(b)), "--type".into(), "f32".into()])
            .collect()
    };
    let from_files = args(a, b);
    let from_others = args(&shard, &dir);
    let (want, _) = merged("merge-from-files.gguf", &from_files.iter().map(String::as_str).collect::<Vec<_>>());
    let (got, _) = merged("merge-from-split-and-dir.gguf", &from_others.iter().map(String::as_str).collect::<Vec<_>>());
    let (want, got) = (values(&want), values(&got));
    assert_eq!(want.len(), got.len());
    for (w, g) in want.iter().zip(&got) {
        assert!(w == g, "tensor {:?} differs when the inputs are a split model and an organ directory", w.0);
    }
}

/// 100 KB of nested YAML lists, as a configuration or as a --param, is refused by its
/// depth with exit 1 (issue 46: the parser's recursion overflowed the stack, exit 134).
#[test]
fn deeply_nested_yaml_is_refused_not_a_stack_overflow() {
    let (base, a, _) = trio();
    let deep = format!("{}x\n", "- ".repeat(50_000));
    let config = tmp("merge-deep.yml");
    std::fs::write(
        &config,
        format!("merge_method: linear\nmodels:\n  - model: {}\nparameters:\n  normalize:\n    {deep}", s(a)),
    )
    .unwrap();
    let out = tmp("merge-deep.gguf");
    let _ = std::fs::remove_file(&out);
    let mut c = organ();
    c.arg("merge").arg(&config).arg("--out").arg(&out);
    let e = fails(c);
    assert!(e.contains("merge-deep.yml") && e.contains("deeper than 32"), "{e}");
    let mut c = organ();
    c.args(["merge", "--method", "task_arithmetic", "--base", s(base), "--model", s(a)]);
    c.arg("--param").arg(format!("normalize={deep}")).arg("--out").arg(&out);
    let e = fails(c);
    assert!(e.contains("--param") && e.contains("deeper than 32"), "{e}");
    assert!(!out.exists(), "nothing is written");
}

/// A base of one 4 Mi-value F16 tensor (16 MiB as f32) and `n` finetunes of it, each with
/// its own delta, written once.
fn wide(n: usize) -> Vec<PathBuf> {
    const DIMS: [u64; 2] = [1024, 4096];
    let k = kvs();
    let base = noise(900, 1 << 22);
    (0..=n)
        .map(|i| {
            let step = i as f32 * 1e-3;
            let v: Vec<f32> = base.iter().enumerate().map(|(j, b)| b + step * ((j % 7) as f32 - 3.0)).collect();
            write_model_kvs(&format!("merge-wide-{i}.gguf"), &k, &[t("blk.0.ffn_up.weight", &DIMS, GgmlType::F16, v)])
        })
        .collect()
}

#[test]
fn merge_memory_does_not_grow_with_the_number_of_models() {
    let paths = wide(16);
    let dir = tmp("merge-memory");
    std::fs::create_dir_all(&dir).unwrap();
    // Peak RSS in MiB of one merge of the base and the first `n` finetunes by `method`.
    let peak = |method: &str, n: usize| -> u64 {
        let out = dir.join(format!("{method}-{n}.gguf"));
        let mut args: Vec<std::ffi::OsString> = vec!["merge".into(), "--method".into(), method.into()];
        if method != "linear" {
            args.extend(["--base".into(), paths[0].clone().into_os_string()]);
        }
        for p in &paths[1..=n] {
            let density = if method == "linear" { "" } else { ",density=0.5" };
            args.extend(["--model".into(), format!("{}:0.5{density}", p.display()).into()]);
        }
        args.extend(["--out".into(), out.clone().into_os_string()]);
        let a: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
        let o = crate::hostile::runner::run(&a, &dir.join(format!("{method}-{n}.err")));
        assert_eq!(o.code, Some(0), "{method} of {n}: {}", o.stderr);
        let _ = std::fs::remove_file(&out);
        o.peak_rss_kib / 1024
    };
    for method in ["linear", "task_arithmetic", "ties", "dare_ties"] {
        let (two, sixteen) = (peak(method, 2), peak(method, 16));
        // A model more held as f32 is 16 MiB, 14 more 224 MiB: the growth allowed is three copies.
        eprintln!("{method}: peak RSS {two} MiB for 2 models, {sixteen} MiB for 16");
        assert!(sixteen <= two + 48, "{method}: peak RSS {two} MiB for 2 models, {sixteen} MiB for 16");
    }
}

#[test]
fn a_merge_beyond_the_output_types_range_is_refused_by_tensor_not_written_as_infinity() {
    let (base, a, _) = trio();
    for (ty, weight) in [("f16", "10000000"), ("q8_0", "1e12")] {
        let out = tmp(&format!("merge-overflow-{ty}.gguf"));
        let _ = std::fs::remove_file(&out);
        let mut c = organ();
        c.args(["merge", "--method", "task_arithmetic", "--base", s(base), "--model"]);
        c.arg(format!("{}:{weight}", s(a))).args(["--type", ty, "--out"]).arg(&out);
        let err = fails(c);
        assert!(err.contains("merged tensor \"") && err.contains("range"), "{ty}: {err}");
        assert!(!out.exists(), "{ty}: wrote {}", out.display());
    }
}
