//! The digests organ records (issue 15, decision 6): BLAKE3 of every organ file, of a
//! dissected source and of a graft's donor; sha256 only with `--sha256`; organ directories
//! written before BLAKE3 (sha256 entries) still open and are verified.

use crate::common::*;
use crate::harden::{refused, tiny};
use organ_core::gguf::MetaValue;
use organ_core::Gguf;
use sha2::Digest;
use std::path::Path;
use std::process::Command;

fn b3(p: &Path) -> String {
    blake3::hash(&std::fs::read(p).unwrap()).to_hex().to_string()
}

fn sha256(p: &Path) -> String {
    organ_core::model::manifest::hex(&sha2::Sha256::digest(std::fs::read(p).unwrap()))
}

fn assemble(dir: &Path, name: &str) -> Command {
    let mut c = organ();
    c.arg("assemble").arg(dir).arg("--out").arg(tmp(name));
    c
}

/// Flips the last byte of the first tensor's organ file; returns its path in the manifest.
fn flip_first(dir: &Path) -> String {
    let rel = manifest(dir)["tensors"][0]["file"].as_str().unwrap().to_owned();
    let f = dir.join(&rel);
    let mut b = std::fs::read(&f).unwrap();
    let last = b.len() - 1;
    b[last] ^= 1;
    std::fs::write(&f, b).unwrap();
    rel
}

#[test]
fn dissect_records_blake3_of_every_organ_file_and_of_the_source() {
    let model = tiny("dg-b3.gguf", 3);
    let dir = dissect(&model, "dg-b3.organs", &[]);
    let m = manifest(&dir);
    assert_eq!(m["source"]["blake3"].as_str().unwrap(), b3(&model));
    assert_eq!(m["source"]["bytes"].as_u64().unwrap(), std::fs::metadata(&model).unwrap().len());
    assert!(m["source"].get("sha256").is_none(), "sha256 only with --sha256: {}", m["source"]);
    for t in m["tensors"].as_array().unwrap() {
        assert_eq!(t["blake3"].as_str().unwrap(), b3(&dir.join(t["file"].as_str().unwrap())), "{}", t["name"]);
        assert!(t.get("sha256").is_none(), "{t}");
    }
    // A flipped byte in an organ file is refused, naming the file.
    let rel = flip_first(&dir);
    let e = refused(assemble(&dir, "dg-b3.gguf"));
    assert!(e.contains("differ from the digest their manifest records") && e.contains(&rel), "{e}");
    assert!(!tmp("dg-b3.gguf").exists());
}

#[test]
fn dissect_sha256_adds_the_sources_sha256() {
    let model = tiny("dg-sha.gguf", 2);
    let m = manifest(&dissect(&model, "dg-sha.organs", &["--sha256"]));
    assert_eq!(m["source"]["sha256"].as_str().unwrap(), sha256(&model));
    assert_eq!(m["source"]["blake3"].as_str().unwrap(), b3(&model));
    // The organ files' digests stay BLAKE3.
    assert!(m["tensors"][0].get("sha256").is_none() && m["tensors"][0]["blake3"].is_string());
}

/// An organ directory written before BLAKE3 (sha256 per entry, a source with only
/// sha256) opens, assembles to the same bytes, and is verified with sha256.
#[test]
fn an_old_sha256_manifest_still_opens_and_is_verified() {
    let model = tiny("dg-old.gguf", 3);
    let dir = dissect(&model, "dg-old.organs", &[]);
    let mut m = manifest(&dir);
    m["source"] = serde_json::json!({"file": "dg-old.gguf", "sha256": sha256(&model), "bytes": 0});
    for t in m["tensors"].as_array_mut().unwrap() {
        let digest = sha256(&dir.join(t["file"].as_str().unwrap()));
        let o = t.as_object_mut().unwrap();
        o.remove("blake3");
        o.insert("sha256".into(), digest.into());
    }
    std::fs::write(dir.join("manifest.json"), serde_json::to_vec_pretty(&m).unwrap()).unwrap();
    ok(assemble(&dir, "dg-old.gguf"));
    assert!(std::fs::read(tmp("dg-old.gguf")).unwrap() == std::fs::read(&model).unwrap());
    let rel = flip_first(&dir);
    let e = refused(assemble(&dir, "dg-old-bad.gguf"));
    assert!(e.contains("differ from the digest their manifest records") && e.contains(&rel), "{e}");
}

#[test]
fn graft_records_the_donors_blake3_and_sha256_only_when_asked() {
    let (donor, recipient) = (tiny("dg-donor.gguf", 2), tiny("dg-recipient.gguf", 2));
    let donor_dir = dissect(&donor, "dg-donor.organs", &[]);
    for (from, extra, name) in [
        (&donor, &[][..], "dg-g1.gguf"),
        (&donor, &["--sha256"][..], "dg-g2.gguf"),
        (&donor_dir, &[][..], "dg-g3.gguf"),
    ] {
        let out = tmp(name);
        let mut c = organ();
        c.args(["graft", "--layers", "0", "--type", "organ"]).arg("--donor").arg(from);
        c.arg("--recipient").arg(&recipient).arg("--out").arg(&out).args(extra);
        ok(c);
        let b = std::fs::read(&out).unwrap();
        let g = Gguf::parse(&b, b.len() as u64).unwrap();
        let get = |k: &str| g.get(k).and_then(MetaValue::as_str).map(str::to_owned);
        // An organ directory's identity is its manifest's bytes.
        let identity = if from.is_dir() { from.join("manifest.json") } else { from.to_path_buf() };
        assert_eq!(get("organ.graft.donor_blake3"), Some(b3(&identity)), "{name}");
        let want_sha = extra.contains(&"--sha256").then(|| sha256(&identity));
        assert_eq!(get("organ.graft.donor_sha256"), want_sha, "{name}");
    }
}
