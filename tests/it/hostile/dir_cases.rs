//! The crafted organ directories of the hostile set: a dissected valid model with its
//! manifest or files edited (paths out of the directory, bad hashes, types, shapes,
//! metadata).

use super::gguf_bytes::valid;
use super::{Case, DIGESTS_UNREAD_OK, DIR_OK, MAX_INPUT, MEASURE_OK};
use crate::common::*;
use std::path::{Path, PathBuf};

/// Dissects the valid model into `d/base.organs` (the base of every organ directory case).
fn base_dir(d: &Path) -> PathBuf {
    let src = d.join("base.gguf");
    std::fs::write(&src, valid()).unwrap();
    let dir = d.join("base.organs");
    ok({
        let mut c = organ();
        c.args(["dissect".as_ref(), src.as_os_str(), "--out".as_ref(), dir.as_os_str()]);
        c
    });
    dir
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let p = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &p);
        } else {
            std::fs::copy(e.path(), p).unwrap();
        }
    }
}

/// Every crafted organ directory, made in `d` from a dissected valid model.
pub(super) fn dir_cases(d: &Path) -> Vec<Case> {
    let base = base_dir(d);
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(base.join("manifest.json")).unwrap()).unwrap();
    let mut cases = Vec::new();
    let mut add = |name: &str,
                   ok_for: &'static [&'static str],
                   edit: &dyn Fn(&Path, &mut serde_json::Value) -> Option<Vec<u8>>| {
        let dir = d.join(format!("{name}.organs"));
        copy_dir(&base, &dir);
        let mut m = manifest.clone();
        let text = edit(&dir, &mut m).unwrap_or_else(|| serde_json::to_vec_pretty(&m).unwrap());
        assert!((text.len() as u64) < MAX_INPUT, "{name}: manifest of {} bytes", text.len());
        std::fs::write(dir.join("manifest.json"), text).unwrap();
        cases.push(Case { name: name.to_owned(), path: dir, ok_for });
    };
    use serde_json::json;
    add("dir-valid", DIR_OK, &|_, _| None);
    add("dir-no-manifest", &[], &|dir, _| {
        std::fs::remove_file(dir.join("manifest.json")).unwrap();
        Some(Vec::new())
    });
    add("dir-manifest-empty", &[], &|_, _| Some(Vec::new()));
    add("dir-manifest-not-json", &[], &|_, _| Some(b"{\"format\": \"organ-dir/1\", ".to_vec()));
    add("dir-manifest-array", &[], &|_, _| Some(b"[1, 2, 3]".to_vec()));
    add("dir-wrong-format", &[], &|_, m| {
        m["format"] = json!("organ-dir/9");
        None
    });
    add("dir-gguf-version-99", MEASURE_OK, &|_, m| {
        m["gguf_version"] = json!(99);
        None
    });
    add("dir-gguf-version-huge", &[], &|_, m| {
        m["gguf_version"] = json!(u64::MAX);
        None
    });
    add("dir-file-dotdot", &[], &|_, m| {
        m["tensors"][0]["file"] = json!("../base.organs/embed/token_embd.weight.bin");
        None
    });
    add("dir-file-absolute", &[], &|_, m| {
        m["tensors"][0]["file"] = json!("/etc/passwd");
        None
    });
    add("dir-file-empty", &[], &|_, m| {
        m["tensors"][0]["file"] = json!("");
        None
    });
    add("dir-file-huge", &[], &|_, m| {
        m["tensors"][0]["file"] = json!("a/".repeat(100_000));
        None
    });
    add("dir-file-symlink-out", &[], &|dir, m| {
        std::os::unix::fs::symlink("/etc/passwd", dir.join("other/escape.bin")).unwrap();
        m["tensors"][0]["file"] = json!("other/escape.bin");
        None
    });
    add("dir-file-missing", &[], &|_, m| {
        m["tensors"][0]["file"] = json!("organs/nothing.bin");
        None
    });
    add("dir-digest-not-hex", &[], &|_, m| {
        m["tensors"][0]["blake3"] = json!("zz");
        None
    });
    add("dir-digest-mismatch", DIGESTS_UNREAD_OK, &|_, m| {
        m["tensors"][0]["blake3"] = json!("0".repeat(64));
        None
    });
    add("dir-two-digests", &[], &|_, m| {
        m["tensors"][0]["sha256"] = json!("0".repeat(64));
        None
    });
    add("dir-no-digest", &[], &|_, m| {
        m["tensors"][0].as_object_mut().map(|t| t.remove("blake3"));
        None
    });
    // An older directory (sha256 entries) whose digest does not match its file.
    add("dir-old-sha-mismatch", DIGESTS_UNREAD_OK, &|_, m| {
        m["tensors"][0].as_object_mut().map(|t| t.remove("blake3"));
        m["tensors"][0]["sha256"] = json!("0".repeat(64));
        None
    });
    add("dir-bin-swapped", &[], &|_, m| {
        let (a, b) = (m["tensors"][0]["file"].clone(), m["tensors"][1]["file"].clone());
        m["tensors"][0]["file"] = b;
        m["tensors"][1]["file"] = a;
        None
    });
    add("dir-bin-header-garbage", &[], &|dir, m| {
        let f = dir.join(m["tensors"][0]["file"].as_str().unwrap());
        std::fs::write(f, [0xffu8; 64]).unwrap();
        None
    });
    add("dir-bin-truncated", &[], &|dir, m| {
        let f = dir.join(m["tensors"][1]["file"].as_str().unwrap());
        let b = std::fs::read(&f).unwrap();
        std::fs::write(f, &b[..b.len() - 5]).unwrap();
        None
    });
    add("dir-bin-other-shape", &[], &|_, m| {
        m["tensors"][0]["shape"] = json!([64, 1]);
        None
    });
    add("dir-bin-other-type", &[], &|_, m| {
        m["tensors"][0]["type"] = json!("Q4_0");
        None
    });
    add("dir-type-unknown", &[], &|_, m| {
        m["tensors"][0]["type"] = json!("Q99");
        None
    });
    add("dir-shape-5-dims", &[], &|_, m| {
        m["tensors"][0]["shape"] = json!([1, 1, 1, 1, 1]);
        None
    });
    add("dir-shape-overflow", &[], &|_, m| {
        m["tensors"][0]["shape"] = json!([u64::MAX, u64::MAX]);
        None
    });
    add("dir-shape-negative", &[], &|_, m| {
        m["tensors"][0]["shape"] = json!([-1]);
        None
    });
    add("dir-layer-negative", &[], &|_, m| {
        m["tensors"][0]["layer"] = json!(-1);
        None
    });
    add("dir-bytes-string", &[], &|_, m| {
        m["tensors"][0]["bytes"] = json!("many");
        None
    });
    add("dir-duplicate-tensor", MEASURE_OK, &|_, m| {
        let t = m["tensors"][0].clone();
        m["tensors"].as_array_mut().unwrap().push(t);
        None
    });
    add("dir-tensors-not-list", &[], &|_, m| {
        m["tensors"] = json!({"a": 1});
        None
    });
    add("dir-metadata-not-list", &[], &|_, m| {
        m["metadata"] = json!("none");
        None
    });
    let set_meta = |m: &mut serde_json::Value, entry: serde_json::Value| {
        m["metadata"].as_array_mut().unwrap().push(entry);
    };
    add("dir-meta-bad-hex", &[], &|_, m| {
        set_meta(m, json!({"key": "h", "type": "STRING", "value": {"hex": "zz"}}));
        None
    });
    add("dir-meta-odd-hex", &[], &|_, m| {
        set_meta(m, json!({"key": "h", "type": "STRING", "value": {"hex": "abc"}}));
        None
    });
    add("dir-meta-hex-multibyte", &[], &|_, m| {
        set_meta(m, json!({"key": "h", "type": "STRING", "value": {"hex": "a\u{e9}0"}}));
        None
    });
    add("dir-meta-u8-300", &[], &|_, m| {
        set_meta(m, json!({"key": "n", "type": "UINT8", "value": 300}));
        None
    });
    add("dir-meta-wrong-type", &[], &|_, m| {
        set_meta(m, json!({"key": "n", "type": "UINT32", "value": "seven"}));
        None
    });
    add("dir-meta-unknown-type", &[], &|_, m| {
        set_meta(m, json!({"key": "n", "type": "UINT128", "value": 1}));
        None
    });
    add("dir-meta-no-value", &[], &|_, m| {
        set_meta(m, json!({"key": "n", "type": "UINT32"}));
        None
    });
    add("dir-meta-duplicate-key", &[], &|_, m| {
        let e = m["metadata"][0].clone();
        set_meta(m, e);
        None
    });
    add("dir-meta-alignment-0", MEASURE_OK, &|_, m| {
        set_meta(m, json!({"key": "general.alignment", "type": "UINT32", "value": 0}));
        None
    });
    add("dir-meta-f32-bits-huge", &[], &|_, m| {
        set_meta(m, json!({"key": "f", "type": "FLOAT32", "value": {"f32_bits": u64::MAX}}));
        None
    });
    add("dir-meta-array-9-deep", &[], &|_, m| {
        let mut v = json!({"elem_type": "UINT8", "values": []});
        for _ in 0..8 {
            v = json!({"elem_type": "ARRAY", "values": [v]});
        }
        set_meta(m, json!({"key": "deep", "type": "ARRAY", "value": v}));
        None
    });
    add("dir-meta-nested-arrays-over-cap", &[], &|_, m| {
        let inner = json!({"elem_type": "UINT8", "values": []});
        let v = json!({"elem_type": "ARRAY", "values": vec![inner; (1 << 16) + 1]});
        set_meta(m, json!({"key": "nested", "type": "ARRAY", "value": v}));
        None
    });
    add("dir-meta-entries-over-cap", &[], &|_, m| {
        for i in 0..(1 << 16) {
            set_meta(m, json!({"key": format!("k{i}"), "type": "UINT8", "value": 0}));
        }
        None
    });
    add("dir-meta-u64-zeros-over-budget", &[], &|_, m| {
        // 2 bytes of JSON per element, 8 of GGUF: 18 MB of text for 72 MB of metadata.
        let zeros = "0,".repeat(9 << 20);
        let v =
            format!(r#"{{"key": "z", "type": "ARRAY", "value": {{"elem_type": "UINT64", "values": [{}0]}}}}"#, zeros);
        let text = serde_json::to_string(m).unwrap();
        let at = text.find("\"metadata\":[").unwrap() + "\"metadata\":[".len();
        Some(format!("{}{v},{}", &text[..at], &text[at..]).into_bytes())
    });
    add("dir-meta-values-before-type", DIR_OK, &|_, m| {
        let text = serde_json::to_string(m).unwrap();
        let entry = r#"{"value": {"values": [1, 2], "elem_type": "UINT8"}, "type": "ARRAY", "key": "late"}"#;
        let at = text.find("\"metadata\":[").unwrap() + "\"metadata\":[".len();
        Some(format!("{}{entry},{}", &text[..at], &text[at..]).into_bytes())
    });
    cases
}
