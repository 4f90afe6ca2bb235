//! dissect, assemble and graft on the real model and on hostile organ directories.

use crate::common::*;
use organ_core::gguf::writer::{plan, TensorSpec};
use organ_core::gguf::MetaValue;
use organ_core::{GgmlType, Gguf};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn blake3(p: &Path) -> String {
    blake3::hash(&std::fs::read(p).unwrap()).to_hex().to_string()
}

/// No temp entry of `out` is left beside it (tests run in parallel, so others may be).
fn no_temp_left(out: &Path) {
    let prefix = format!(".{}.organ-tmp", out.file_name().unwrap().to_string_lossy());
    let left: Vec<_> = std::fs::read_dir(out.parent().unwrap())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&prefix))
        .collect();
    assert!(left.is_empty(), "temp entries left: {left:?}");
}

#[test]
fn dissect_then_assemble_is_byte_identical() {
    let Some(model) = need::smollm2() else { return };
    let dir = dissect(&model, "rt.organs", &["--sha256"]);
    let m = manifest(&dir);
    assert_eq!(m["format"], "organ-dir/1");
    assert_eq!(m["source"]["sha256"], SMOLLM2_SHA256);
    assert_eq!(m["source"]["blake3"].as_str().unwrap(), blake3(&model));
    let tensors = m["tensors"].as_array().unwrap();
    assert_eq!(tensors.len(), SMOLLM2_TENSORS);
    assert_eq!(m["metadata"].as_array().unwrap().len(), 33);
    for t in tensors.iter().step_by(17) {
        let f = dir.join(t["file"].as_str().unwrap());
        assert_eq!(blake3(&f), t["blake3"].as_str().unwrap(), "{}", t["name"]);
        assert!(t.get("sha256").is_none(), "{}", t["name"]);
        let folder = t["file"].as_str().unwrap().split('/').next().unwrap();
        let want = match t["group"].as_str().unwrap() {
            "organ" => "organs",
            "adapter" => "adapters",
            g => g,
        };
        assert_eq!(folder, want);
    }
    let out = tmp("rt.gguf");
    let mut c = organ();
    c.arg("assemble").arg(&dir).arg("--out").arg(&out);
    ok(c);
    assert!(std::fs::read(&out).unwrap() == std::fs::read(&model).unwrap(), "assembled file differs");
    no_temp_left(&out);
}

#[test]
fn dissect_measure_records_the_same_theta_as_measure() {
    let Some(model) = need::smollm2() else { return };
    let dir = dissect(&model, "theta.organs", &["--measure"]);
    let json = tmp("theta.json");
    let mut c = organ();
    c.arg("measure").arg(&model).arg("--json").arg(&json).arg("--summary-only");
    ok(c);
    let r: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    for (a, b) in
        manifest(&dir)["tensors"].as_array().unwrap().iter().zip(r["models"][0]["tensors"].as_array().unwrap())
    {
        assert_eq!(a["name"], b["name"]);
        assert_eq!(a["theta"], b["theta"], "{}", a["name"]);
    }
}

#[test]
fn graft_dry_run_prints_the_plan_and_writes_nothing() {
    let Some(model) = need::smollm2() else { return };
    let out = tmp("dry.gguf");
    let mut c = organ();
    c.args(["graft", "--layers", "5-6", "--type", "organ", "--dry-run"])
        .arg("--donor")
        .arg(&model)
        .arg("--recipient")
        .arg(&model);
    let s = String::from_utf8(ok(c).stdout).unwrap();
    assert!(s.contains("graft plan: 6 tensors"), "{s}");
    // Swaps alike but for their layer are one line (issue 50); --verbose lists each.
    assert!(s.contains("blk.*.ffn_up.weight") && s.contains("×2 (layers 5-6)") && s.contains("dry run"), "{s}");
    assert!(!out.exists());
    let mut c = organ();
    c.args(["graft", "--layers", "5-6", "--type", "organ", "--dry-run", "--verbose", "--donor"]).arg(&model);
    c.arg("--recipient").arg(&model);
    let s = String::from_utf8(ok(c).stdout).unwrap();
    assert!(s.contains("blk.5.ffn_up.weight") && s.contains("blk.6.ffn_up.weight") && !s.contains("×2"), "{s}");
    // An --out that exists does not stop a run that writes nothing, and is left as it was
    // (issue 50).
    std::fs::write(&out, "mine").unwrap();
    let mut c = organ();
    c.args(["graft", "--layers", "5-6", "--type", "organ", "--dry-run", "--donor"]).arg(&model);
    c.arg("--recipient").arg(&model).arg("--out").arg(&out);
    assert!(String::from_utf8(ok(c).stdout).unwrap().contains("graft plan: 6 tensors"));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "mine");
}

/// The seed tools spell graft's sides --source and --target: organ takes them as aliases
/// of --donor and --recipient, with the same plan, and says so in its help.
#[test]
fn graft_takes_source_and_target_as_aliases_of_donor_and_recipient() {
    let Some(model) = need::smollm2() else { return };
    let plan = |donor: &str, recipient: &str| {
        let mut c = organ();
        c.args(["graft", "--layers", "5-6", "--type", "organ", "--dry-run"])
            .arg(donor)
            .arg(&model)
            .arg(recipient)
            .arg(&model);
        String::from_utf8(ok(c).stdout).unwrap()
    };
    let aliased = plan("--source", "--target");
    assert!(aliased.contains("graft plan: 6 tensors"), "{aliased}");
    assert_eq!(aliased, plan("--donor", "--recipient"));
    let mut c = organ();
    c.args(["graft", "--help"]);
    let help = String::from_utf8(ok(c).stdout).unwrap();
    assert!(help.contains("--source") && help.contains("--target"), "the aliases are visible: {help}");
}

/// A small llama "model" whose layer-5 FFN tensors have other shapes than SmolLM2's.
fn incompatible_donor() -> PathBuf {
    let p = tmp("bad-donor.gguf");
    let kvs = [("general.architecture", MetaValue::Str(b"llama"))];
    let specs = [
        TensorSpec { name: "blk.5.ffn_up.weight", dims: &[576, 1024], ty: GgmlType::F16 },
        TensorSpec { name: "blk.5.ffn_down.weight", dims: &[1024, 576], ty: GgmlType::F16 },
        TensorSpec { name: "blk.5.ffn_extra.weight", dims: &[32], ty: GgmlType::F32 },
    ];
    let layout = plan(3, &kvs, &specs).unwrap();
    let mut f = layout.header.clone();
    f.resize(layout.file_len as usize, 0);
    std::fs::write(&p, f).unwrap();
    p
}

#[test]
fn graft_with_mismatched_shapes_is_refused_with_every_offender_and_no_output() {
    let Some(model) = need::smollm2() else { return };
    let donor = incompatible_donor();
    let out = tmp("refused.gguf");
    let mut c = organ();
    c.args(["graft", "--layers", "5", "--type", "organ"]).arg("--donor").arg(&donor).arg("--recipient").arg(&model);
    c.arg("--out").arg(&out);
    let e = fails(c);
    assert!(e.contains("graft refused") && e.contains("4 problems"), "{e}");
    for line in [
        "blk.5.ffn_down.weight: shape [1024, 576] in the donor, [1536, 576] in the recipient",
        "blk.5.ffn_up.weight: shape [576, 1024] in the donor, [576, 1536] in the recipient",
        "blk.5.ffn_gate.weight: not in the donor",
        "blk.5.ffn_extra.weight: selected in the donor but not in the recipient",
    ] {
        assert!(e.contains(line), "missing {line:?} in:\n{e}");
    }
    assert!(!out.exists());
    no_temp_left(&out);
}

#[test]
fn grafts_through_organ_directories_equal_the_gguf_graft() {
    let Some(model) = need::smollm2() else { return };
    // A donor with other bytes: requantization is llama.cpp's job (tests/it/llama.rs); here a
    // dissected copy whose layer-3 organs are replaced by layer-4's is enough.
    let donor_dir = dissect(&model, "donor.organs", &[]);
    let gguf_out = tmp("g2g.gguf");
    let mut c = organ();
    c.args(["graft", "--layers", "3-4", "--type", "organ"])
        .arg("--donor")
        .arg(&donor_dir)
        .arg("--recipient")
        .arg(&model)
        .arg("--out")
        .arg(&gguf_out);
    ok(c);
    let dir_out = tmp("g2d.organs");
    let mut c = organ();
    c.args(["graft", "--layers", "3-4", "--type", "organ"])
        .arg("--donor")
        .arg(&donor_dir)
        .arg("--recipient")
        .arg(&donor_dir)
        .arg("--out")
        .arg(&dir_out);
    ok(c);
    let assembled = tmp("g2d.gguf");
    let mut c = organ();
    c.arg("assemble").arg(&dir_out).arg("--out").arg(&assembled);
    ok(c);
    let (a, b) = (std::fs::read(&gguf_out).unwrap(), std::fs::read(&assembled).unwrap());
    let (ga, gb) = (Gguf::parse(&a, a.len() as u64).unwrap(), Gguf::parse(&b, b.len() as u64).unwrap());
    assert_eq!(ga.tensors.len(), gb.tensors.len());
    for (x, y) in ga.tensors.iter().zip(&gb.tensors) {
        assert_eq!((x.name, x.ty, x.shape()), (y.name, y.ty, y.shape()));
        assert!(x.data(&a).unwrap() == y.data(&b).unwrap(), "{}", x.name);
    }
    let tensors = match ga.get("organ.graft.tensors") {
        Some(MetaValue::Array(t)) => t.len,
        other => panic!("{other:?}"),
    };
    assert_eq!(tensors, 6);
    assert_eq!(ga.get("organ.graft.layers").and_then(|v| v.as_str()), Some("3-4"));
}

fn copy_dir(src: &Path, name: &str) -> PathBuf {
    let dst = tmp(name);
    assert!(std::process::Command::new("cp").arg("-r").arg(src).arg(&dst).status().unwrap().success());
    dst
}

#[test]
fn hostile_organ_directories_are_refused() {
    let Some(model) = need::smollm2() else { return };
    let base = dissect(&model, "base.organs", &[]);
    let assemble = |dir: &Path, out: &str| {
        let out = tmp(out);
        let o = organ().arg("assemble").arg(dir).arg("--out").arg(&out).output().unwrap();
        assert_eq!(o.status.code(), Some(1), "{}", dir.display());
        assert!(!out.exists());
        // Nor its temp entry: assemble writes it while the digests are compared.
        let temp = format!(".{}.organ-tmp.", out.file_name().unwrap().to_str().unwrap());
        let left: Vec<_> = std::fs::read_dir(out.parent().unwrap())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(&temp))
            .collect();
        assert!(left.is_empty(), "{left:?}");
        String::from_utf8(o.stderr).unwrap()
    };
    let edit = |dir: &Path, f: &dyn Fn(&mut Value)| {
        let mut m = manifest(dir);
        f(&mut m);
        std::fs::write(dir.join("manifest.json"), serde_json::to_vec(&m).unwrap()).unwrap();
    };

    let d = copy_dir(&base, "climb.organs");
    edit(&d, &|m| m["tensors"][0]["file"] = "../../etc/passwd".into());
    assert!(assemble(&d, "climb.gguf").contains("without '..'"));

    let d = copy_dir(&base, "abs.organs");
    edit(&d, &|m| m["tensors"][0]["file"] = "/etc/passwd".into());
    assert!(assemble(&d, "abs.gguf").contains("must be relative"));

    let d = copy_dir(&base, "link.organs");
    let victim = d.join("embed/token_embd.weight.bin");
    std::fs::remove_file(&victim).unwrap();
    std::os::unix::fs::symlink(&model, &victim).unwrap();
    assert!(assemble(&d, "link.gguf").contains("leads outside"));

    let d = copy_dir(&base, "tamper.organs");
    let f = d.join("norm/output_norm.weight.bin");
    let mut b = std::fs::read(&f).unwrap();
    let last = b.len() - 1;
    b[last] ^= 1;
    std::fs::write(&f, b).unwrap();
    let e = assemble(&d, "tamper.gguf");
    assert!(e.contains("differ from the digest their manifest records") && e.contains("output_norm.weight"), "{e}");

    let d = copy_dir(&base, "swap.organs");
    edit(&d, &|m| m["tensors"][1]["shape"] = serde_json::json!([577]));
    assert!(assemble(&d, "swap.gguf").contains("the manifest says"));

    let d = copy_dir(&base, "meta.organs");
    edit(&d, &|m| m["metadata"][0]["type"] = "UINT8".into());
    assert!(assemble(&d, "meta.gguf").contains("general.architecture"));
}
