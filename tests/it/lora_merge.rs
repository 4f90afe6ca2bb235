//! `organ lora merge` (docs/adapters.md, "Merging adapters") on the F16 requant of SmolLM2
//! with seeded adapters from tests/oracle/make-lora.py: values against llama-export-lora's
//! (F16 output, to one F16 ulp; untouched tensors byte for byte), two adapters with
//! scales and on different tensors, the judge against llama.cpp applying the adapter at
//! run time, and every bad input refused by name with nothing written.

use crate::build::{noise, t, write_model_kvs};
use crate::common::*;
use organ_core::gguf::{Gguf, MetaValue};
use organ_core::GgmlType;
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// `make-lora.py BASE tmp(NAME) ARGS…`, made once per name.
fn adapter(base: &Path, name: &str, args: &[&str]) -> PathBuf {
    let out = tmp(name);
    let mut c = Command::new(oracle_python());
    c.arg(repo().join("tests/oracle/make-lora.py")).arg(base).arg(&out).args(args);
    ok(c);
    out
}

/// Rank 4, F32, on token_embd (stored transposed), attn_k and ffn_up of every layer.
fn embd_r4(base: &Path) -> PathBuf {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| adapter(base, "embd-r4.gguf", &["--rank", "4", "--type", "f32", "--seed", "1", "--targets", EMBD]))
        .clone()
}

/// Rank 16, F16, on the same tensors as [`embd_r4`].
fn embd_r16(base: &Path) -> PathBuf {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        adapter(base, "embd-r16.gguf", &["--rank", "16", "--type", "f16", "--seed", "2", "--targets", EMBD])
    })
    .clone()
}

/// Rank 8, Q8_0, on attn_q and ffn_gate of every layer.
fn q8_r8(base: &Path) -> PathBuf {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        adapter(base, "q8-r8.gguf", &["--rank", "8", "--type", "q8_0", "--seed", "3", "--targets", "attn_q,ffn_gate"])
    })
    .clone()
}

/// [`q8_r8`] as F32, its values as stored: what llama-export-lora (which refuses
/// quantized adapters) merges.
fn q8_r8_f32(base: &Path) -> PathBuf {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        let out = tmp("q8-r8-f32.gguf");
        let mut c = Command::new(oracle_python());
        c.arg(repo().join("tests/oracle/dequantize-lora.py")).arg(q8_r8(base)).arg(&out);
        ok(c);
        out
    })
    .clone()
}

const EMBD: &str = "token_embd,attn_k,ffn_up";

/// `llama-export-lora -m BASE --lora-scaled A:S… -o tmp(NAME)` on one thread, made once per name.
fn export_lora(base: &Path, adapters: &[(&Path, &str)], name: &str) -> PathBuf {
    static MADE: OnceLock<std::sync::Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    let mut made = MADE.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    made.entry(name.to_owned())
        .or_insert_with(|| {
            let out = tmp(name);
            let mut c = llama_tool("llama-export-lora");
            c.arg("-m").arg(base).arg("-o").arg(&out).args(["-t", LLAMA_THREADS]);
            for (a, s) in adapters {
                let mut arg = a.as_os_str().to_owned();
                arg.push(format!(":{s}"));
                c.arg("--lora-scaled").arg(arg);
            }
            ok(c);
            out
        })
        .clone()
}

/// `organ lora merge BASE --lora A… --out tmp(NAME) EXTRA…`, which must succeed: the output
/// and its JSON report.
fn merge(base: &Path, adapters: &[&str], name: &str, extra: &[&str]) -> (PathBuf, Value) {
    let (out, json) = (tmp(name), tmp(&format!("{name}.json")));
    let mut c = organ();
    c.args(["lora", "merge"]).arg(base).arg("--out").arg(&out).arg("--json").arg(&json).arg("--force");
    for a in adapters {
        c.arg("--lora").arg(a);
    }
    c.args(extra);
    ok(c);
    (out, serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap())
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Every tensor of a GGUF: name → (type, bytes); and `general.file_type`.
struct Read {
    tensors: HashMap<String, (GgmlType, Vec<u8>)>,
    order: Vec<String>,
    file_type: Option<u32>,
}

fn read(p: &Path) -> Read {
    let file = std::fs::read(p).unwrap();
    let g = Gguf::parse(&file, file.len() as u64).unwrap();
    let file_type = match g.get("general.file_type") {
        Some(MetaValue::U32(v)) => Some(*v),
        _ => None,
    };
    let order = g.tensors.iter().map(|t| t.name.to_owned()).collect();
    let tensors = g.tensors.iter().map(|t| (t.name.to_owned(), (t.ty, t.data(&file).unwrap().to_vec()))).collect();
    Read { tensors, order, file_type }
}

/// An F16's bits on a line where neighbours differ by one: one ulp is 1.
fn ordered(bits: u16) -> i32 {
    if bits & 0x8000 != 0 {
        -i32::from(bits & 0x7fff)
    } else {
        i32::from(bits)
    }
}

/// The largest difference, in F16 ulps, between two F16 tensors' values.
fn max_ulps(a: &[u8], b: &[u8]) -> i32 {
    assert_eq!(a.len(), b.len());
    let h = |x: &[u8]| x.chunks_exact(2).map(|c| ordered(u16::from_le_bytes([c[0], c[1]]))).collect::<Vec<_>>();
    h(a).iter().zip(h(b)).map(|(x, y)| (x - y).abs()).max().unwrap_or(0)
}

/// `ours` against export-lora's `theirs` for the tensors in `merged` (from `base`): both
/// F16, values within one F16 ulp; every other tensor byte for byte the base's.
fn same_as_export_lora(ours: &Read, theirs: &Read, base: &Read, merged: &[String]) {
    assert_eq!(ours.order, base.order, "the base's tensors, in its order");
    for name in &base.order {
        let (ty, bytes) = &ours.tensors[name];
        if merged.contains(name) {
            let (their_ty, their_bytes) = &theirs.tensors[name];
            assert_eq!((*ty, *their_ty), (GgmlType::F16, GgmlType::F16), "{name}");
            let ulps = max_ulps(bytes, their_bytes);
            assert!(ulps <= 1, "{name}: {ulps} F16 ulps from export-lora's");
            assert_ne!(bytes, &base.tensors[name].1, "{name} did not change");
        } else {
            assert_eq!((ty, bytes), (&base.tensors[name].0, &base.tensors[name].1), "{name} is not the base's");
        }
    }
}

fn merged_names(report: &Value) -> Vec<String> {
    report["tensors"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
}

#[test]
fn f16_merges_are_export_loras_to_one_ulp_and_the_rest_is_the_base() {
    let Some(model) = need::smollm2_oracle_and_llama() else { return };
    let base = smollm2_f16(&model);
    let base_read = read(&base);
    for (a, twin, name) in [(embd_r4(&base), embd_r4(&base), "embd-r4"), (q8_r8(&base), q8_r8_f32(&base), "q8-r8")] {
        let theirs = read(&export_lora(&base, &[(&twin, "1")], &format!("export-{name}.gguf")));
        let (out, report) = merge(&base, &[path(&a)], &format!("merged-{name}.gguf"), &["--type", "f16"]);
        let merged = merged_names(&report);
        // Every pair merged: 30 layers of two weights, and token_embd.
        let want = if name == "embd-r4" { 61 } else { 60 };
        assert_eq!(merged.len(), want, "{report}");
        assert_eq!(report["copied"].as_u64(), Some((base_read.order.len() - want) as u64));
        if name == "embd-r4" {
            assert!(merged.iter().any(|n| n == "token_embd.weight"));
        }
        let ours = read(&out);
        same_as_export_lora(&ours, &theirs, &base_read, &merged);
        // The base is F16 already: the file type stays what both say.
        assert_eq!((ours.file_type, theirs.file_type), (Some(1), Some(1)));
    }
}

#[test]
fn adapters_sum_with_their_scales_and_may_adapt_different_tensors() {
    let Some(model) = need::smollm2_oracle_and_llama() else { return };
    let base = smollm2_f16(&model);
    let base_read = read(&base);
    let (r4, r16) = (embd_r4(&base), embd_r16(&base));
    // Two adapters of the same tensors, ranks 4 and 16, at 0.5 and 2: export-lora's sum.
    let theirs = read(&export_lora(&base, &[(&r4, "0.5"), (&r16, "2")], "export-sum.gguf"));
    let scaled = [format!("{}:0.5", path(&r4)), format!("{}:2", path(&r16))];
    let (out, report) = merge(&base, &[&scaled[0], &scaled[1]], "merged-sum.gguf", &["--type", "f16"]);
    let adapters = report["adapters"].as_array().unwrap();
    let scales: Vec<f64> = adapters.iter().map(|a| a["scale"].as_f64().unwrap()).collect();
    assert_eq!(scales, [0.5, 2.0]);
    assert_eq!(adapters[1]["ranks"], serde_json::json!([16]));
    let merged = merged_names(&report);
    assert!(report["tensors"].as_array().unwrap().iter().all(|t| t["adapters"] == serde_json::json!([0, 1])));
    same_as_export_lora(&read(&out), &theirs, &base_read, &merged);
    // At another scale the result differs: the scale is applied.
    let once = read(&export_lora(&base, &[(&r4, "1")], "export-embd-r4.gguf"));
    assert!(max_ulps(&read(&out).tensors["blk.0.ffn_up.weight"].1, &once.tensors["blk.0.ffn_up.weight"].1) > 1);

    // Adapters of different tensors (export-lora refuses them together): each tensor is
    // what export-lora makes of the one adapter that adapts it.
    let (q8, q8_twin) = (q8_r8(&base), q8_r8_f32(&base));
    let (out, report) = merge(&base, &[path(&r4), path(&q8)], "merged-two.gguf", &["--type", "f16"]);
    let merged = merged_names(&report);
    assert_eq!(merged.len(), 121, "{report}");
    let ours = read(&out);
    let by_r4 = read(&export_lora(&base, &[(&r4, "1")], "export-embd-r4.gguf"));
    let by_q8 = read(&export_lora(&base, &[(&q8_twin, "1")], "export-q8-r8.gguf"));
    for name in &merged {
        let kind = name.split('.').rev().nth(1).unwrap();
        let theirs = if matches!(kind, "attn_q" | "ffn_gate") { &by_q8 } else { &by_r4 };
        let ulps = max_ulps(&ours.tensors[name].1, &theirs.tensors[name].1);
        assert!(ulps <= 1, "{name}: {ulps} F16 ulps from export-lora's");
    }
    let untouched = base_read.order.iter().filter(|n| !merged.contains(n));
    for name in untouched {
        assert_eq!(ours.tensors[name], base_read.tensors[name], "{name}");
    }
}

#[test]
fn the_default_keeps_each_type_and_a_forced_type_sets_the_file_type() {
    let Some(model) = need::smollm2_and_oracle() else { return };
    // The Q4_1 model itself: organ writes Q4_1, so merged tensors stay Q4_1.
    let a = q8_r8(&smollm2_f16_or_skip(&model));
    let (out, report) = merge(&model, &[path(&a)], "merged-q4_1.gguf", &[]);
    let t = &report["tensors"][0];
    assert_eq!(
        (t["type"].as_str(), t["written_as"].as_str(), t["why"].as_str()),
        (Some("Q4_1"), Some("Q4_1"), Some("kept"))
    );
    let (base, ours) = (read(&model), read(&out));
    assert_eq!(ours.file_type, base.file_type);
    for name in merged_names(&report) {
        assert_eq!(ours.tensors[&name].0, base.tensors[&name].0, "{name}");
        assert_eq!(ours.tensors[&name].1.len(), base.tensors[&name].1.len(), "{name}");
    }
    // --type q8_0: the merged tensors, and the file type (7, llama.cpp's MOSTLY_Q8_0).
    let (out, report) = merge(&model, &[path(&a)], "merged-q8_0.gguf", &["--type", "q8_0"]);
    assert_eq!(report["tensors"][0]["why"], "--type");
    let ours = read(&out);
    assert_eq!(ours.file_type, Some(7));
    assert!(merged_names(&report).iter().all(|n| ours.tensors[n].0 == GgmlType::Q8_0));
}

/// The F16 requant when llama.cpp is there (the adapters are made on it); SmolLM2's
/// shapes are the same in either.
fn smollm2_f16_or_skip(model: &Path) -> PathBuf {
    if llama_dir().join("llama-quantize").exists() {
        smollm2_f16(model)
    } else {
        model.to_owned()
    }
}

#[test]
fn the_judge_finds_the_merge_at_the_noise_of_its_type_against_the_adapter_run_by_llama_cpp() {
    let Some(model) = need::smollm2_oracle_and_llama() else { return };
    let base = smollm2_f16(&model);
    // Every linear weight, rank 16, F16; no token_embd, which llama.cpp 11434 cannot apply
    // at run time to SmolLM2 (it ties its output to token_embd).
    let a = adapter(&base, "judge-r16.gguf", &["--rank", "16", "--type", "f16", "--seed", "4"]);
    // Four chunks of 128 tokens of the held-out text.
    let text = tmp("heldout-head.txt");
    let held = std::fs::read_to_string(repo().join("tests/data/texts/heldout.txt")).unwrap();
    let cut = held.char_indices().nth(2400).map_or(held.len(), |(i, _)| i);
    std::fs::write(&text, &held[..cut]).unwrap();
    let bin = crate::eval::one_thread_llama_bin();
    let judge = |name: &str, scale: &str| {
        let arg = format!("{}:{scale}", path(&a));
        let extra = ["--type", "q8_0", "--judge", path(&text), "--judge-ctx", "128", "--llama-cpp", path(&bin)];
        merge(&base, &[&arg], name, &extra)
    };
    let kld = |r: &Value| r["judge"]["evaluation"]["kl_divergence"]["mean"]["value"].as_f64().unwrap();
    // The merge written as Q8_0, against the base with the adapter applied by llama.cpp.
    let (merged, report) = judge("judged.gguf", "1");
    let merge_kld = kld(&report);
    let label = format!("{} + lora {}:1", base.display(), a.display());
    assert_eq!(report["judge"]["evaluation"]["base"].as_str(), Some(label.as_str()));
    // The noise of Q8_0 on those tensors: the adapter at scale 0 (the same tensors written
    // as Q8_0, nothing added) against the base as it is.
    let (_, zero) = judge("judged-zero.gguf", "0");
    let noise = kld(&zero);
    assert!(noise > 1e-4, "Q8_0's noise is measured: {noise}");
    assert!(merge_kld < 1.5 * noise, "the merge {merge_kld} is at the noise of Q8_0 ({noise})");
    // The model side of the seam: the base with the adapter applied by llama.cpp is the
    // merge. (Were an adapter not applied, the KL would be the adapter's whole effect,
    // 0.024 here, 8× the noise.)
    let mut c = organ();
    c.arg("eval").arg(&base).arg("--lora").arg(&a).arg("--base").arg(&merged).arg("--text").arg(&text);
    c.args(["--ctx", "128", "-j", LLAMA_THREADS, "--llama-cpp", path(&bin), "--json", path(&tmp("eval-lora.json"))]);
    ok(c);
    let e: Value = serde_json::from_slice(&std::fs::read(tmp("eval-lora.json")).unwrap()).unwrap();
    let applied = e["kl_divergence"]["mean"]["value"].as_f64().unwrap();
    assert!(applied < 1.5 * noise, "the base with the adapter (eval --lora) is the merge: {applied}");
}

/// A tiny adapter for llama whose attn_q pair makes a 64 × 64 update.
fn small_shapes() -> PathBuf {
    let kvs = [
        ("general.architecture", MetaValue::Str(b"llama")),
        ("general.type", MetaValue::Str(b"adapter")),
        ("adapter.type", MetaValue::Str(b"lora")),
        ("adapter.lora.alpha", MetaValue::F32(8.0)),
    ];
    let tensors = [
        t("blk.0.attn_q.weight.lora_a", &[64, 4], GgmlType::F32, noise(1, 256)),
        t("blk.0.attn_q.weight.lora_b", &[4, 64], GgmlType::F32, noise(2, 256)),
    ];
    write_model_kvs("small-shapes.gguf", &kvs, &tensors)
}

#[test]
fn bad_inputs_are_refused_by_name_and_nothing_is_written() {
    let Some(model) = need::smollm2_and_oracle() else { return };
    let base = smollm2_f16_or_skip(&model);
    let good = q8_r8(&base);
    // Made at once, a process each: make-lora.py's start is most of each one's time.
    let kinds = ["arch", "half", "rank0", "no-alpha", "model"];
    let made: HashMap<&str, PathBuf> = std::thread::scope(|s| {
        let handles: Vec<_> = kinds
            .iter()
            .map(|&kind| {
                let base = &base;
                s.spawn(move || {
                    let name = format!("broken-{kind}.gguf");
                    let args = ["--rank", "4", "--targets", "attn_q", "--layers", "0,1", "--break", kind];
                    (kind, adapter(base, &name, &args))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let broken = |kind: &str| made[kind].clone();
    let cases: Vec<(PathBuf, PathBuf, &str)> = vec![
        (base.clone(), broken("arch"), "the adapter is for \"qwen2\", the base is \"llama\""),
        (
            base.clone(),
            small_shapes(),
            "blk.0.attn_q.weight: the pair makes a [64, 64] update, the base's weight is [576, 576]",
        ),
        (base.clone(), broken("half"), "lora_b is missing: half a pair"),
        (base.clone(), broken("rank0"), "rank 0"),
        (base.clone(), broken("no-alpha"), "adapter.lora.alpha: missing"),
        (base.clone(), broken("model"), "general.type: expected \"adapter\", got \"model\""),
        (
            base.clone(),
            base.clone(),
            "not a LoRA adapter organ can merge: general.type: expected \"adapter\", got \"model\"",
        ),
        (good.clone(), good.clone(), "a LoRA adapter (general.type = \"adapter\"), not a model"),
    ];
    for (i, (b, a, want)) in cases.iter().enumerate() {
        let out = tmp(&format!("refused-{i}.gguf"));
        let mut c = organ();
        c.args(["lora", "merge"]).arg(b).arg("--lora").arg(path(&good)).arg("--lora").arg(a).arg("--out").arg(&out);
        let err = fails(c);
        assert!(err.contains(want), "case {i}: {err}");
        // The file at fault is named: the adapter, or the base given as one.
        let named = if i == cases.len() - 1 { b } else { a };
        assert!(err.contains(path(named)), "case {i} names {}: {err}", named.display());
        assert!(!out.exists(), "case {i} wrote {}", out.display());
        let leftovers: Vec<_> = std::fs::read_dir(out.parent().unwrap())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().contains(&format!("refused-{i}")))
            .collect();
        assert!(leftovers.is_empty(), "case {i} left {leftovers:?}");
    }
    // --judge with an adapter llama.cpp cannot apply to the base (token_embd on a model
    // that ties its output to it) is refused before any work.
    if llama_dir().join("llama-perplexity").exists() {
        let out = tmp("refused-judge.gguf");
        let mut c = organ();
        c.args(["lora", "merge"]).arg(&base).arg("--lora").arg(embd_r4(&base)).arg("--out").arg(&out);
        c.arg("--judge").arg(repo().join("tests/data/perplexity.txt")).arg("--llama-cpp").arg(llama_dir());
        let err = fails(c);
        assert!(err.contains("token_embd.weight: the base ties its output to token_embd"), "{err}");
        assert!(!out.exists());
    }
}

#[test]
fn eval_refuses_an_adapter_llama_cpp_would_refuse_or_abort_on_before_running_it() {
    let Some(model) = need::smollm2_oracle_and_llama() else { return };
    let base = smollm2_f16(&model);
    let text = repo().join("tests/data/perplexity.txt");
    let eval = |flag: &str, adapter: &Path| {
        let mut c = organ();
        c.arg("eval").arg(&base).arg("--base").arg(&base).arg("--text").arg(&text).arg(flag).arg(adapter);
        c.arg("--llama-cpp").arg(llama_dir());
        fails(c)
    };
    // token_embd on a model that ties its output to it: llama.cpp 11434 aborts.
    let err = eval("--lora", &embd_r4(&base));
    assert!(err.contains(&format!("{}: cannot be applied to", embd_r4(&base).display())), "{err}");
    assert!(err.contains("ties its output to token_embd"), "{err}");
    // A model given as an adapter, on the base side.
    let err = eval("--base-lora", &base);
    assert!(err.contains(&format!("{}: not a LoRA adapter llama.cpp loads", base.display())), "{err}");
}

/// `organ diff BASE MERGED` reports the change as for any two models: exactly the weights
/// the adapter updates are changed, every other tensor identical.
#[test]
fn diff_finds_exactly_the_adapted_weights_changed() {
    let Some(model) = need::smollm2_oracle_and_llama() else { return };
    let base = smollm2_f16(&model);
    let a = adapter(&base, "diff-r4.gguf", &["--rank", "4", "--targets", "attn_q,ffn_down", "--layers", "0,5"]);
    let (merged, _) = merge(&base, &[path(&a)], "diff-merged.gguf", &[]);
    let json = tmp("diff-merged.json");
    let mut c = organ();
    c.arg("diff").arg(&base).arg(&merged).arg("--json").arg(&json);
    ok(c);
    let d: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let mut changed: Vec<&str> = (d["pairs"].as_array().unwrap().iter())
        .filter(|p| p["identical"] == false)
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    changed.sort_unstable();
    let want = ["blk.0.attn_q.weight", "blk.0.ffn_down.weight", "blk.5.attn_q.weight", "blk.5.ffn_down.weight"];
    assert_eq!(changed, want);
    assert_eq!(d["counts"]["changed"], 4);
    assert_eq!(d["counts"]["identical"].as_u64().unwrap() + 4, d["counts"]["comparable"].as_u64().unwrap());
}

#[test]
fn an_alora_is_merged_with_a_warning_and_never_judged() {
    let Some(model) = need::smollm2_and_oracle() else { return };
    let base = smollm2_f16_or_skip(&model);
    let plain = q8_r8(&base);
    // The same adapter, made an aLoRA by organ meta: active after 3 invocation tokens.
    let alora = tmp("alora-q8-r8.gguf");
    let _ = std::fs::remove_file(&alora);
    let mut c = organ();
    c.arg("meta").arg(&plain).args(["--set", "adapter.alora.invocation_tokens=[1,2,3]:arr[u32]", "--out"]).arg(&alora);
    ok(c);
    let run = |a: &Path, name: &str, extra: &[&std::ffi::OsStr]| {
        let out = tmp(name);
        let mut c = organ();
        c.args(["lora", "merge"]).arg(&base).arg("--lora").arg(a).arg("--out").arg(&out).arg("--force").args(extra);
        (out, c)
    };
    let (plain_out, c) = run(&plain, "merged-plain.gguf", &[]);
    let said = String::from_utf8_lossy(&ok(c).stderr).into_owned();
    assert!(!said.contains("aLoRA"), "{said}");
    // Merged, with a warning naming the file and what merging loses; the weights are
    // the plain adapter's (the invocation sequence is metadata only).
    let (alora_out, c) = run(&alora, "merged-alora.gguf", &[]);
    let said = String::from_utf8_lossy(&ok(c).stderr).into_owned();
    let want = "an aLoRA, which llama.cpp applies only after its 3 invocation tokens \
                (adapter.alora.invocation_tokens); merged, it changes every token";
    assert!(said.contains(path(&alora)) && said.contains(want), "{said}");
    let (ours, plain_merge) = (read(&alora_out), read(&plain_out));
    assert!(ours.order == plain_merge.order && ours.tensors == plain_merge.tensors, "the aLoRA merged otherwise");
    // --judge would compare with llama.cpp running it switched off: refused before any work.
    if !llama_dir().join("llama-perplexity").exists() {
        return;
    }
    let (text, bin) = (repo().join("tests/data/perplexity.txt"), llama_dir());
    let judge = ["--judge".as_ref(), text.as_os_str(), "--llama-cpp".as_ref(), bin.as_os_str()];
    let (out, c) = run(&alora, "judged-alora.gguf", &judge);
    let _ = std::fs::remove_file(&out);
    let err = fails(c);
    assert!(err.contains(path(&alora)) && err.contains("differ by design"), "{err}");
    assert!(!out.exists());
    // organ eval applies it as asked, and says it may stay off.
    let mut c = organ();
    c.arg("eval").arg(&base).arg("--lora").arg(&alora).arg("--text").arg(&text);
    c.args(["--ctx", "128", "--chunks", "2", "-j", LLAMA_THREADS]).arg("--llama-cpp").arg(&bin);
    let said = String::from_utf8_lossy(&ok(c).stderr).into_owned();
    assert!(said.contains("an aLoRA, which llama.cpp applies only after its 3 invocation tokens"), "{said}");
}

#[test]
fn an_update_beyond_f16s_range_is_refused_by_tensor_not_written_as_infinity() {
    let kvs = [("general.architecture", MetaValue::Str(b"llama")), ("llama.block_count", MetaValue::U32(1))];
    let base = write_model_kvs(
        "lora-overflow-base.gguf",
        &kvs,
        &[t("blk.0.attn_q.weight", &[64, 64], GgmlType::F16, noise(3, 4096))],
    );
    let adapter = small_shapes();
    // At scale 1 the merge is written; at 100000 its values pass F16's 65504.
    let out = tmp("lora-overflow.gguf");
    let _ = std::fs::remove_file(&out);
    let mut c = organ();
    c.args(["lora", "merge"]).arg(&base).arg("--lora").arg(&adapter).arg("--out").arg(&out);
    ok(c);
    std::fs::remove_file(&out).unwrap();
    let mut c = organ();
    c.args(["lora", "merge"]).arg(&base).arg("--lora").arg(format!("{}:100000", path(&adapter))).arg("--out").arg(&out);
    let err = fails(c);
    assert!(err.contains("blk.0.attn_q.weight") && err.contains("out of F16's range"), "{err}");
    assert!(!out.exists(), "wrote {}", out.display());
}
