//! `organ experts extract` and `organ experts prune` (issue 18, docs/experts.md): on a
//! llama-layout (Mixtral) MoE stacked from SmolLM2 donors without requantization, each
//! extracted expert's FFN is its donor's bytes and llama.cpp runs it; a pruned MoE runs,
//! and its experts extract to the original's bytes; deepseek2 MoEs (test-built, one with
//! expert groups and `exp_probs_b`) pruned as gguf-py says they should be, and run;
//! refusals that write nothing.

use crate::build::*;
use crate::common::*;
use organ_core::gguf::MetaValue;
use organ_core::quant::quantize::quantize;
use organ_core::{GgmlType, Gguf};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// SmolLM2's layers.
const LAYERS: u64 = 30;
const KINDS: [&str; 3] = ["gate", "up", "down"];

/// SmolLM2 Q4_1 requantized to `via` and back to Q4_1 by llama.cpp: other bytes, the
/// same types.
fn requant(model: &Path, via: &str) -> PathBuf {
    let mid = match via {
        "Q8_0" => smollm2_q8_0(model),
        _ => {
            let mid = tmp(&format!("smollm2-{via}.gguf"));
            let mut q = llama_tool("llama-quantize");
            q.arg("--allow-requantize").arg(model).arg(&mid).arg(via);
            ok(q);
            mid
        }
    };
    let out = tmp(&format!("smollm2-{via}-q4_1.gguf"));
    let mut q = llama_tool("llama-quantize");
    q.arg("--allow-requantize").arg(mid).arg(&out).arg("Q4_1");
    ok(q);
    out
}

/// Every tensor of a GGUF: name, shape, type, bytes.
fn tensors(path: &Path) -> Vec<(String, Vec<u64>, GgmlType, Vec<u8>)> {
    let bytes = std::fs::read(path).unwrap();
    let g = Gguf::parse(&bytes, bytes.len() as u64).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    g.tensors.iter().map(|t| (t.name.to_owned(), t.shape().to_vec(), t.ty, t.data(&bytes).unwrap().to_vec())).collect()
}

/// The metadata value of `key` in `path`, as organ's parser reads it (a debug string).
fn meta(path: &Path, key: &str) -> Option<String> {
    let bytes = std::fs::read(path).unwrap();
    let g = Gguf::parse(&bytes, bytes.len() as u64).unwrap();
    g.kvs.iter().find(|kv| kv.key == key).map(|kv| match kv.value {
        MetaValue::Str(s) => String::from_utf8_lossy(s).into_owned(),
        v => v.as_u64().map_or_else(|| format!("{v:?}"), |n| n.to_string()),
    })
}

/// The test MoE (made once per test process) by `organ moe`: SmolLM2 Q4_1's skeleton with,
/// in every layer, three Q4_1 experts stacked as raw blocks (no requantization: the
/// donors' types agree), the FFNs of SmolLM2 and of SmolLM2 requantized through Q8_0 and
/// through Q5_0 back to Q4_1 ([`requant`]); seeded random routers. The donors, by expert.
fn smollm2_mixtral(model: &Path) -> (PathBuf, Vec<PathBuf>) {
    static MOE: OnceLock<(PathBuf, Vec<PathBuf>)> = OnceLock::new();
    MOE.get_or_init(|| {
        let donors = vec![model.to_owned(), requant(model, "Q8_0"), requant(model, "Q5_0")];
        let out = tmp("smollm2-mixtral.gguf");
        let mut c = organ();
        c.arg("moe").arg("--base").arg(model);
        for d in &donors {
            c.arg("--expert").arg(d);
        }
        c.args(["--router", "random", "--seed", "5", "--force", "--out"]).arg(&out);
        ok(c);
        (out, donors)
    })
    .clone()
}

/// `organ experts ARGS`, which must succeed.
fn experts(args: &[&std::ffi::OsStr]) {
    let mut c = organ();
    c.arg("experts").args(args);
    ok(c);
}

/// `organ experts extract MODEL --expert E --out tmp(NAME)`: the output.
#[track_caller]
fn extract(model: &Path, e: u64, name: &str) -> PathBuf {
    let out = tmp(name);
    let e = e.to_string();
    experts(&[
        "extract".as_ref(),
        model.as_os_str(),
        "--expert".as_ref(),
        e.as_ref(),
        "--out".as_ref(),
        out.as_os_str(),
        "--force".as_ref(),
    ]);
    out
}

/// `organ experts prune MODEL --keep KEEP EXTRA… --out tmp(NAME)`: the output.
#[track_caller]
fn prune(model: &Path, keep: &str, extra: &[&str], name: &str) -> PathBuf {
    let out = tmp(name);
    let mut a: Vec<&std::ffi::OsStr> = vec!["prune".as_ref(), model.as_os_str(), "--keep".as_ref(), keep.as_ref()];
    a.extend(extra.iter().map(std::ffi::OsStr::new));
    a.extend(["--out".as_ref(), out.as_os_str(), "--force".as_ref()]);
    experts(&a);
    out
}

#[test]
fn extract_gives_each_donors_ffn_bytes_and_runs() {
    let Some(model) = need::smollm2_and_llama() else { return };
    let (moe, donors) = smollm2_mixtral(&model);
    let moe_tensors = tensors(&moe);
    for (e, d) in donors.iter().enumerate() {
        let out = extract(&moe, e as u64, &format!("expert-{e}.gguf"));
        let got = tensors(&out);
        let donor = tensors(d);
        assert_eq!(got.len(), moe_tensors.len() - LAYERS as usize, "expert {e}: the routers are dropped");
        let mut ffn = 0;
        for (name, dims, ty, bytes) in &got {
            assert!(!name.contains("_exps") && !name.contains("gate_inp"), "{name}");
            let l = organ_core::anatomy::layer_of(name).map(u64::from);
            match (l, KINDS.iter().find(|k| name.ends_with(&format!(".ffn_{k}.weight")))) {
                (Some(_), Some(_)) => {
                    let want = donor.iter().find(|t| &t.0 == name).unwrap();
                    assert_eq!((dims, ty), (&want.1, &want.2), "expert {e}: {name}");
                    assert!(bytes == &want.3, "expert {e}: {name} is not the donor's");
                    ffn += 1;
                }
                _ => {
                    let want = moe_tensors.iter().find(|t| &t.0 == name).unwrap();
                    assert!((dims, ty, bytes) == (&want.1, &want.2, &want.3), "expert {e}: {name} changed");
                }
            }
        }
        assert_eq!(ffn, 3 * LAYERS as usize, "expert {e}");
        assert_eq!(meta(&out, "llama.expert_count"), None);
        assert_eq!(meta(&out, "organ.experts.op").as_deref(), Some("extract"));
        assert_eq!(meta(&out, "organ.experts.kept"), Some(e.to_string()));
        assert_eq!(meta(&out, "organ.experts.source").as_deref(), Some("smollm2-mixtral.gguf"));
        let text = llama_generate(&out, 8);
        if e == 0 {
            // Expert 0 is SmolLM2's own FFN: the extracted model is SmolLM2, tensor for tensor.
            assert_eq!(text, llama_generate(&model, 8), "expert 0 generates as SmolLM2");
        }
    }
}

#[test]
fn pruned_mixtral_runs_and_its_experts_extract_to_the_same_bytes() {
    let Some(model) = need::smollm2_oracle_and_llama() else { return };
    let (moe, _) = smollm2_mixtral(&model);
    let pruned = prune(&moe, "2,0", &[], "pruned.gguf");
    assert_eq!(meta(&pruned, "llama.expert_count").as_deref(), Some("2"));
    assert_eq!(meta(&pruned, "llama.expert_used_count").as_deref(), Some("2"));
    assert_eq!(meta(&pruned, "organ.experts.kept").as_deref(), Some("0,2"));
    let json = tmp("pruned-check.json");
    let mut c = std::process::Command::new(oracle_python());
    c.arg(repo().join("tests/oracle/check-pruned.py")).arg(&moe).arg(&pruned).arg("0,2").arg(&json);
    ok(c);
    let checked: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(checked["sliced"].as_array().unwrap().len(), 4 * LAYERS as usize, "experts and routers");
    llama_generate(&pruned, 8);
    for (new, old) in [(0u64, 0u64), (1, 2)] {
        let a = tensors(&extract(&pruned, new, &format!("pruned-expert-{new}.gguf")));
        let b = tensors(&extract(&moe, old, &format!("moe-expert-{old}.gguf")));
        assert!(a == b, "expert {new} of the pruned model is not expert {old} of the original");
    }
    // One expert used of the two kept; more than kept is refused.
    let one = prune(&moe, "0,1", &["--experts-used", "1"], "pruned-used-1.gguf");
    assert_eq!(meta(&one, "llama.expert_used_count").as_deref(), Some("1"));
    llama_generate(&one, 8);
}

/// deepseek2.gguf of tests/oracle/make-family-models.py (4 experts, a shared expert, a
/// dense first layer), made once per test process.
fn deepseek2(tokenizer: &Path) -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = tmp("families");
        let mut c = std::process::Command::new(oracle_python());
        c.arg(repo().join("tests/oracle/make-family-models.py")).arg(tokenizer).arg(&d);
        ok(c);
        d
    })
    .join("deepseek2.gguf")
}

/// deepseek2.gguf grown to 8 experts in 2 groups (one used), the new experts seeded
/// noise, with an `exp_probs_b` bias: what llama.cpp's group routing reads.
fn deepseek2_groups(ds: &Path) -> PathBuf {
    let bytes = std::fs::read(ds).unwrap();
    let g = Gguf::parse(&bytes, bytes.len() as u64).unwrap();
    let mut out = Vec::new();
    for (i, t) in g.tensors.iter().enumerate() {
        let mut data = t.data(&bytes).unwrap().to_vec();
        let mut dims = t.shape().to_vec();
        if t.name.contains("_exps") || t.name.contains("ffn_gate_inp") {
            let n = (t.n_elements / 4) as usize;
            for e in 0..4 {
                let values: Vec<f32> = noise(900 + 10 * i as u64 + e, n).iter().map(|v| v * 0.05).collect();
                quantize(t.ty, &values, &mut data).unwrap();
            }
            *dims.last_mut().unwrap() = 8;
        }
        out.push(raw(t.name, &dims, t.ty, data));
        if t.name == "blk.1.ffn_gate_inp.weight" {
            out.push(crate::build::t("blk.1.exp_probs_b.bias", &[8], GgmlType::F32, noise(77, 8)));
        }
    }
    let mut kvs: Vec<(&str, MetaValue)> = g.kvs.iter().map(|kv| (kv.key, kv.value)).collect();
    for kv in kvs.iter_mut().filter(|kv| kv.0 == "deepseek2.expert_count") {
        kv.1 = MetaValue::U32(8);
    }
    kvs.push(("deepseek2.expert_group_count", MetaValue::U32(2)));
    kvs.push(("deepseek2.expert_group_used_count", MetaValue::U32(1)));
    write_model_kvs("deepseek2-groups.gguf", &kvs, &out)
}

/// check-pruned.py's verdict on `pruned` (it fails on any difference).
fn gguf_py_check(source: &Path, pruned: &Path, kept: &str, name: &str) -> Value {
    let json = tmp(name);
    let mut c = std::process::Command::new(oracle_python());
    c.arg(repo().join("tests/oracle/check-pruned.py")).arg(source).arg(pruned).arg(kept).arg(&json);
    ok(c);
    serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap()
}

/// llama.cpp loads `model` and computes a few tokens.
fn llama_runs(model: &Path) {
    let mut c = llama_tool("llama-completion");
    c.arg("-m").arg(model).args(["-p", "Hello", "-n", "4", "--temp", "0", "-no-cnv", "-t", LLAMA_THREADS]);
    ok(c);
}

#[test]
fn deepseek2_prunes_every_per_expert_tensor_and_keeps_groups_whole() {
    let Some(tokenizer) = need::smollm2_oracle_and_llama() else { return };
    let ds = deepseek2(&tokenizer);
    let pruned = prune(&ds, "1,3", &[], "ds-pruned.gguf");
    let v = gguf_py_check(&ds, &pruned, "1,3", "ds-pruned.json");
    let sliced: Vec<&str> = v["sliced"].as_array().unwrap().iter().map(|s| s.as_str().unwrap()).collect();
    assert_eq!(
        sliced,
        [
            "blk.1.ffn_gate_inp.weight",
            "blk.1.ffn_down_exps.weight",
            "blk.1.ffn_gate_exps.weight",
            "blk.1.ffn_up_exps.weight"
        ]
    );
    assert_eq!((v["expert_count"].as_u64(), v["expert_used_count"].as_u64()), (Some(2), Some(2)));
    llama_runs(&pruned);

    let groups = deepseek2_groups(&ds);
    llama_runs(&groups);
    let pruned = prune(&groups, "0,1,4,5", &[], "ds-groups-pruned.gguf");
    let v = gguf_py_check(&groups, &pruned, "0,1,4,5", "ds-groups-pruned.json");
    assert_eq!(v["sliced"].as_array().unwrap().len(), 5, "with exp_probs_b: {v}");
    assert_eq!(v["expert_count"].as_u64(), Some(4));
    assert_eq!(meta(&pruned, "deepseek2.expert_group_count").as_deref(), Some("2"));
    llama_runs(&pruned);
    for keep in ["0,4", "0,1,2,4,5", "0,1"] {
        let out = tmp("ds-groups-refused.gguf");
        let mut c = organ();
        c.args(["experts", "prune"]).arg(&groups).args(["--keep", keep, "--out"]).arg(&out);
        let err = fails(c);
        assert!(err.contains("deepseek2.expert_group_count") && err.contains("at least 2"), "{keep}: {err}");
        assert!(!out.exists(), "{keep}: nothing written");
    }
    // extract writes a llama: deepseek2 is refused by name.
    let mut c = organ();
    c.args(["experts", "extract"]).arg(&ds).args(["--expert", "0", "--out"]).arg(tmp("ds-expert.gguf"));
    let err = fails(c);
    assert!(err.contains("deepseek2 is not one"), "{err}");
}

#[test]
fn bad_input_is_a_clear_error_and_writes_nothing() {
    let moe = write_model(
        "small-moe.gguf",
        "llama",
        &[
            t("blk.0.ffn_gate_inp.weight", &[32, 4], GgmlType::F32, noise(1, 128)),
            t("blk.0.ffn_gate_exps.weight", &[32, 8, 4], GgmlType::F32, noise(2, 1024)),
            t("blk.0.ffn_up_exps.weight", &[32, 8, 4], GgmlType::F32, noise(3, 1024)),
            t("blk.0.ffn_down_exps.weight", &[8, 32, 4], GgmlType::F32, noise(4, 1024)),
        ],
    );
    let dense = write_model("dense.gguf", "llama", &[t("blk.0.ffn_up.weight", &[32, 8], GgmlType::F32, noise(5, 256))]);
    // No expert keys: the MoE is not one until it says how many experts it has.
    let cases: [(&Path, &[&str], &str); 8] = [
        (&moe, &["extract", "--expert", "0"], "no expert count"),
        (&dense, &["extract", "--expert", "0"], "not a mixture of experts"),
        (&dense, &["prune", "--keep", "0"], "not a mixture of experts"),
        (&moe, &["prune", "--keep", ""], "is not an expert number"),
        (&moe, &["prune", "--keep", "1,x"], "is not an expert number"),
        (&moe, &["prune", "--keep", "3-1"], "runs backwards"),
        (&moe, &["prune", "--keep", "0", "--out", "x.bin"], "ending in .gguf"),
        (&moe, &["extract", "--expert", "0", "--out", "x"], "ending in .gguf"),
    ];
    check_refusals(&cases);
    let mut kvs = vec![("general.architecture", MetaValue::Str(b"llama"))];
    kvs.push(("llama.expert_count", MetaValue::U32(4)));
    kvs.push(("llama.expert_used_count", MetaValue::U32(2)));
    let moe = write_model_kvs(
        "small-moe-keys.gguf",
        &kvs,
        &[
            t("blk.0.ffn_gate_inp.weight", &[32, 4], GgmlType::F32, noise(1, 128)),
            t("blk.0.ffn_gate_exps.weight", &[32, 8, 4], GgmlType::F32, noise(2, 1024)),
            t("blk.0.ffn_up_exps.weight", &[32, 8, 4], GgmlType::F32, noise(3, 1024)),
            t("blk.0.ffn_down_exps.weight", &[8, 32, 4], GgmlType::F32, noise(4, 1024)),
        ],
    );
    let cases: [(&Path, &[&str], &str); 6] = [
        (&moe, &["extract", "--expert", "4"], "expert 4 is out of range: the model has 4 experts (0-3)"),
        (&moe, &["prune", "--keep", "0,9"], "expert 9 is out of range"),
        (&moe, &["prune", "--keep", "1,1"], "expert 1 is given twice"),
        (&moe, &["prune", "--keep", "0,1", "--experts-used", "3"], "--experts-used: 3: give 1 to the 2 experts kept"),
        (&moe, &["prune", "--keep", "0", "--experts-used", "0"], "--experts-used: 0"),
        (&moe, &["extract", "--expert", "0", "--out", "small-moe-keys.gguf"], "is an input of this run"),
    ];
    check_refusals(&cases);
    // The same MoE extracts and prunes.
    let out = extract(&moe, 3, "small-expert-3.gguf");
    let got = tensors(&out);
    let src = tensors(&moe);
    assert_eq!(got[0].0, "blk.0.ffn_gate.weight");
    assert_eq!(got[0].3, src[1].3[3 * 1024..], "expert 3 of 4 is the last quarter");
}

/// Each case fails with exit 1, says what it should, and leaves nothing in its directory.
#[track_caller]
fn check_refusals(cases: &[(&Path, &[&str], &str)]) {
    for (model, args, want) in cases {
        let dir = tmp(&format!("refused-{}", args.join("_").replace([',', ' '], "-")));
        std::fs::create_dir_all(&dir).unwrap();
        let mut c = organ();
        c.arg("experts").arg(args[0]).arg(model).args(&args[1..]);
        if !args.contains(&"--out") {
            c.arg("--out").arg(dir.join("out.gguf"));
        } else if args.contains(&"small-moe-keys.gguf") {
            c.current_dir(model.parent().unwrap());
        } else {
            c.current_dir(&dir);
        }
        let err = fails(c);
        assert!(err.contains(want), "{args:?}: {err}");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "{args:?}: nothing written");
    }
}
