//! `organ layers` (issue 32, point 2; docs/surgery.md): SmolLM2 without a middle layer,
//! and the test-built gemma3 (with a sliding window, its period written out) and deepseek2
//! (a dense first layer, experts and a shared expert) without one of theirs, each run by
//! llama.cpp, each kept tensor the original's bytes under its new number; keeping every
//! layer writes the input back byte for byte; bad lists are clear errors that write nothing.

use crate::build::*;
use crate::common::*;
use organ_core::gguf::MetaValue;
use organ_core::{GgmlType, Gguf};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// A GGUF's tensors by name: type, shape, bytes.
fn tensors(path: &Path) -> BTreeMap<String, (GgmlType, Vec<u64>, Vec<u8>)> {
    let bytes = std::fs::read(path).unwrap();
    let g = Gguf::parse(&bytes, bytes.len() as u64).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    g.tensors
        .iter()
        .map(|t| (t.name.to_owned(), (t.ty, t.shape().to_vec(), t.data(&bytes).unwrap().to_vec())))
        .collect()
}

/// A GGUF's metadata, each value as organ's parser shows it (a debug string).
fn metadata(path: &Path) -> BTreeMap<String, String> {
    let bytes = std::fs::read(path).unwrap();
    let g = Gguf::parse(&bytes, bytes.len() as u64).unwrap();
    g.kvs.iter().map(|kv| (kv.key.to_owned(), format!("{:?}", kv.value))).collect()
}

/// `organ layers MODEL ARGS --out tmp(NAME) --json tmp(NAME.json)`, which must succeed:
/// the output and its report.
fn layers(model: &Path, args: &[&str], name: &str) -> (PathBuf, Value) {
    let (out, json) = (tmp(name), tmp(&format!("{name}.json")));
    let mut c = organ();
    c.arg("layers").arg(model).args(args).arg("--out").arg(&out).arg("--json").arg(&json);
    ok(c);
    (out, serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap())
}

/// The source's tensors, those of `dropped` left out and the others renumbered, are the
/// output's, bytes, types and shapes.
#[track_caller]
fn renumbered(source: &Path, out: &Path, dropped: &[u64]) {
    let mut want = BTreeMap::new();
    for (name, t) in tensors(source) {
        let Some((n, rest)) = name.strip_prefix("blk.").and_then(|r| r.split_once('.')) else {
            want.insert(name, t);
            continue;
        };
        let n: u64 = n.parse().unwrap();
        if !dropped.contains(&n) {
            let below = dropped.iter().filter(|&&d| d < n).count() as u64;
            want.insert(format!("blk.{}.{rest}", n - below), t);
        }
    }
    let got = tensors(out);
    assert_eq!(got.keys().collect::<Vec<_>>(), want.keys().collect::<Vec<_>>());
    for (name, t) in &want {
        assert!(got[name] == *t, "{}: {name} is not the source's tensor", out.display());
    }
}

/// The metadata of `out` is the source's but for `changed` (key, new value as
/// [`metadata`] shows it) and the organ.layers.* provenance.
#[track_caller]
fn same_metadata_but(source: &Path, out: &Path, changed: &[(&str, &str)]) {
    let mut want = metadata(source);
    for (k, v) in changed {
        want.insert(k.to_string(), v.to_string());
    }
    let got: BTreeMap<String, String> =
        metadata(out).into_iter().filter(|(k, _)| !k.starts_with("organ.layers.")).collect();
    assert_eq!(got, want);
}

#[test]
fn smollm2_without_a_middle_layer_runs_and_is_judged() {
    let Some(model) = need::smollm2_and_llama() else { return };
    let bin = crate::eval::one_thread_llama_bin();
    let text = repo().join("tests/data/perplexity.txt");
    // --judge-chunks: the text holds more than 3 chunks of 128 tokens; 3 are scored.
    let judge = [
        "--judge",
        text.to_str().unwrap(),
        "--judge-ctx",
        "128",
        "--judge-chunks",
        "3",
        "--llama-cpp",
        bin.to_str().unwrap(),
    ];
    let args = [&["--drop", "15"][..], &judge].concat();
    let (out, report) = layers(&model, &args, "smollm2-drop-15.gguf");
    renumbered(&model, &out, &[15]);
    same_metadata_but(&model, &out, &[("llama.block_count", "U32(29)")]);
    let m = metadata(&out);
    assert_eq!(m["organ.layers.dropped"], "Str([49, 53])", "\"15\"");
    assert_eq!(m["organ.layers.source_block_count"], "U64(30)");
    assert_eq!(report["kept"].as_array().unwrap().len(), 29);
    assert_eq!(report["tensors_removed"].as_array().unwrap().len(), 9);
    // llama.cpp runs it; the judge saw a change (one layer of 30 is not nothing) that is
    // not a broken model.
    llama_generate(&out, 8);
    let kld = report["judge"]["evaluation"]["kl_divergence"]["mean"]["value"].as_f64().unwrap();
    assert!(kld > 1e-3, "a layer less changes the model: KL {kld}");
    assert_eq!(report["judge"]["evaluation"]["chunks"], 3, "--judge-chunks 3");
    assert_ne!(report["judge"]["verdict"].as_str(), Some("broken"), "{report}");
    // --keep is the complement: the same file.
    let (kept, _) = layers(&model, &["--keep", "0-14,16-29"], "smollm2-keep.gguf");
    assert_eq!(std::fs::read(&kept).unwrap(), std::fs::read(&out).unwrap());
}

#[test]
fn keeping_every_layer_gives_the_input_back_byte_for_byte() {
    let Some(model) = need::smollm2() else { return };
    let (out, report) = layers(&model, &["--keep", "29,0-28"], "smollm2-all.gguf");
    assert!(std::fs::read(&out).unwrap() == std::fs::read(&model).unwrap(), "not the input's bytes");
    assert_eq!(report["dropped"], serde_json::json!([]));
}

/// The test-built families of tests/oracle/make-family-models.py (two layers each), made
/// once per test process.
fn families(tokenizer: &Path) -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = tmp("families");
        let mut c = std::process::Command::new(oracle_python());
        c.arg(repo().join("tests/oracle/make-family-models.py")).arg(tokenizer).arg(&d);
        ok(c);
        d
    })
    .clone()
}

/// `model` with `kvs` added to its metadata, as NAME.
fn with_keys(model: &Path, name: &str, extra: &[(&str, MetaValue)]) -> PathBuf {
    let bytes = std::fs::read(model).unwrap();
    let g = Gguf::parse(&bytes, bytes.len() as u64).unwrap();
    let ts: Vec<_> = g.tensors.iter().map(|t| raw(t.name, t.shape(), t.ty, t.data(&bytes).unwrap().to_vec())).collect();
    let mut kvs: Vec<(&str, MetaValue)> = g.kvs.iter().map(|kv| (kv.key, kv.value)).collect();
    kvs.extend_from_slice(extra);
    write_model_kvs(name, &kvs, &ts)
}

#[test]
fn gemma3_and_deepseek2_lose_a_layer_and_run() {
    let Some(tokenizer) = need::smollm2_oracle_and_llama() else { return };
    let dir = families(&tokenizer);
    // gemma3 with a sliding window: llama.cpp derives which layers slide from a period of
    // 6, by position; the output says it per layer, and llama.cpp reads it.
    let gemma = with_keys(
        &dir.join("gemma3.gguf"),
        "gemma3-swa.gguf",
        &[("gemma3.attention.sliding_window", MetaValue::U32(16))],
    );
    let (out, report) = layers(&gemma, &["--drop", "0"], "gemma3-drop-0.gguf");
    renumbered(&gemma, &out, &[0]);
    let pattern = "Array(MetaArray { elem_type: Bool, len: 1, raw: [1] })";
    same_metadata_but(
        &gemma,
        &out,
        &[("gemma3.block_count", "U32(1)"), ("gemma3.attention.sliding_window_pattern", pattern)],
    );
    assert!(report["metadata_changed"]["gemma3.attention.sliding_window_pattern"].is_string(), "{report}");
    llama_generate_any(&out);
    // deepseek2: layer 0 dense, layer 1 experts and a shared expert. Without the dense
    // layer none leads; without the MoE layer the dense one still does.
    let ds = dir.join("deepseek2.gguf");
    let (out, _) = layers(&ds, &["--drop", "0"], "deepseek2-drop-0.gguf");
    renumbered(&ds, &out, &[0]);
    let lead = "deepseek2.leading_dense_block_count";
    same_metadata_but(&ds, &out, &[("deepseek2.block_count", "U32(1)"), (lead, "U32(0)")]);
    assert!(
        tensors(&out).contains_key("blk.0.ffn_gate_exps.weight")
            && tensors(&out).contains_key("blk.0.ffn_up_shexp.weight")
    );
    llama_generate_any(&out);
    let (out, _) = layers(&ds, &["--keep", "0"], "deepseek2-keep-0.gguf");
    renumbered(&ds, &out, &[1]);
    same_metadata_but(&ds, &out, &[("deepseek2.block_count", "U32(1)"), (lead, "U32(1)")]);
    llama_generate_any(&out);
}

/// llama.cpp loads `model` and computes a few tokens (of random weights: any text).
fn llama_generate_any(model: &Path) {
    let mut c = llama_tool("llama-completion");
    c.arg("-m").arg(model).args(["-p", "Hello", "-n", "4", "--temp", "0", "-no-cnv", "-t", LLAMA_THREADS]);
    ok(c);
}

#[test]
fn bad_lists_are_clear_errors_and_write_nothing() {
    let Some(model) = need::smollm2() else { return };
    let cases: [(&[&str], &str); 9] = [
        (&["--drop", "30"], "layer 30 is out of range: the model has 30 layers (0-29)"),
        (&["--keep", "0,31"], "layer 31 is out of range"),
        (&["--drop", "0-29"], "removes all 30 layers: keep at least one"),
        (&["--drop", ""], "--drop is empty"),
        (&["--drop", "3-1"], "the range \"3-1\" runs backwards"),
        (&["--drop", "1,x"], "\"x\" is not a layer number"),
        (&["--drop", "2,2"], "layer 2 is given twice"),
        (&["--drop", "1", "--out", "x.bin"], "ending in .gguf"),
        (&["--drop", "1", "--out", "SmolLM2-135M-Instruct.Q4_1.gguf"], "is an input of this run"),
    ];
    for (args, want) in cases {
        let dir = tmp(&format!("refused-{}", args.join("_").replace([',', ' ', '.'], "-")));
        std::fs::create_dir_all(&dir).unwrap();
        let mut c = organ();
        c.arg("layers").arg(&model).args(args);
        if args.contains(&"SmolLM2-135M-Instruct.Q4_1.gguf") {
            c.current_dir(model.parent().unwrap());
        } else {
            c.current_dir(&dir);
            if !args.contains(&"--out") {
                c.arg("--out").arg("out.gguf");
            }
        }
        c.arg("--json").arg(dir.join("out.json"));
        let err = fails(c);
        assert!(err.contains(want), "{args:?}: {err}");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "{args:?}: nothing written");
    }
}
