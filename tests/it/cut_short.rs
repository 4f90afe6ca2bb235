//! Files cut short (docs/ux.md, "Half-downloaded files"): SmolLM2 cut at several offsets
//! and a split SmolLM2 with one shard cut and one absent. `inspect` shows the header and
//! then what is missing (the same figures in `--json`), `check` reports it as one error
//! finding, and `measure`, `diff` and `dissect` keep refusing with the parser's message.

use crate::common::*;
use organ_core::gguf::Gguf;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The first `len` bytes of `model`, as `name`.
fn cut(model: &Path, len: usize, name: &str) -> PathBuf {
    let p = tmp(name);
    std::fs::write(&p, &std::fs::read(model).unwrap()[..len]).unwrap();
    p
}

fn inspect_json(p: &Path) -> Value {
    let mut c = organ();
    c.arg("inspect").arg(p).arg("--json");
    serde_json::from_slice(&ok(c).stdout).unwrap()
}

#[test]
fn a_file_cut_short_is_a_header_and_what_it_lacks() {
    let Some(model) = need::smollm2() else { return };
    let bytes = std::fs::read(&model).unwrap();
    let g = Gguf::parse(&bytes, bytes.len() as u64).unwrap();
    let total = bytes.len();
    // Where the data starts (the header whole, no tensor byte), in the data (twice), one
    // byte short.
    let data = g.data_offset as usize;
    for (k, len) in [data, data + 1_000_000, total / 2, total - 1].into_iter().enumerate() {
        let p = cut(&model, len, &format!("cut-{k}.gguf"));
        // What the header says, computed here from the whole file's tensors.
        let ends = |t: &organ_core::gguf::TensorInfo<'_>| (t.file_offset, t.file_offset + t.n_bytes);
        let whole = g.tensors.iter().filter(|t| ends(t).1 <= len as u64).count();
        let straddling: Vec<&str> =
            g.tensors.iter().filter(|t| ends(t).0 < len as u64 && ends(t).1 > len as u64).map(|t| t.name).collect();
        let absent = g.tensors.iter().filter(|t| ends(t).0 >= len as u64).count();

        let doc = inspect_json(&p);
        assert_eq!(doc["tensors"].as_array().unwrap().len(), g.tensors.len(), "every tensor of the header is shown");
        assert_eq!(doc["metadata"].as_array().unwrap().len(), g.kvs.len());
        let c = &doc["cut"];
        assert_eq!(c["file_bytes"], len as u64, "{c}");
        assert_eq!(c["expected_bytes"], total as u64, "{c}");
        assert_eq!(c["whole"], whole, "{c}");
        assert_eq!(c["absent"].as_array().unwrap().len(), absent, "{c}");
        match straddling.as_slice() {
            [] => assert!(c["cut"].is_null(), "{c}"),
            [one] => assert_eq!(c["cut"][0], *one, "{c}"),
            more => panic!("tensors overlap: {more:?}"),
        }
        let mut t = organ();
        t.arg("inspect").arg(&p);
        let text = String::from_utf8(ok(t).stdout).unwrap();
        let line = format!("cut short: {len} of the {total} bytes its header implies");
        assert!(text.contains(&line) && text.contains(&format!("{whole} tensors whole")), "{text}");

        // check: one error, what is missing; nothing else on this healthy model.
        let json = tmp(&format!("cut-{k}-check.json"));
        let mut c = organ();
        c.arg("check").arg(&p).arg("--json").arg(&json);
        let o = c.output().unwrap();
        assert_eq!(o.status.code(), Some(1), "BROKEN: {}", String::from_utf8_lossy(&o.stdout));
        let r: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        let findings = r["findings"].as_array().unwrap();
        assert_eq!(findings.len(), 1, "{findings:?}");
        assert_eq!(
            (findings[0]["kind"].as_str(), findings[0]["severity"].as_str()),
            (Some("incomplete"), Some("error"))
        );
        assert!(findings[0]["message"].as_str().unwrap().contains(&line), "{findings:?}");

        // The commands that read tensor data refuse it, saying it is cut short as inspect
        // says it (issue 50: "not a valid GGUF" before), and write nothing.
        let out = tmp(&format!("cut-{k}.organs"));
        for args in [
            vec!["measure".as_ref(), p.as_os_str()],
            vec!["diff".as_ref(), p.as_os_str(), model.as_os_str()],
            vec!["dissect".as_ref(), p.as_os_str(), "--out".as_ref(), out.as_os_str()],
        ] {
            let mut c = organ();
            c.args(&args);
            let e = fails(c);
            assert!(e.contains(&line) && e.contains("download the rest first"), "{args:?}: {e}");
            assert!(!e.contains("not a valid GGUF"), "{args:?}: {e}");
        }
        assert!(!out.exists(), "dissect wrote nothing");
    }
    // Cut inside the header: nothing to show but the parser's message, which says so
    // (where the tensor count cannot fit, and where a value is cut).
    let cuts = [
        (1000, "cut short inside its header"),
        (1_000_000, "cut short inside its header"),
        (data - 100, "file ends while reading"),
    ];
    for (len, says) in cuts {
        let p = cut(&model, len, "cut-header.gguf");
        let mut c = organ();
        c.arg("inspect").arg(&p);
        let e = fails(c);
        assert!(e.contains(says), "{len}: {e}");
    }
}

#[test]
fn a_split_model_with_a_shard_cut_and_one_absent_says_which() {
    if need::smollm2().is_none() {
        return;
    }
    let shards = crate::split::split_model("cut-split");
    let len = std::fs::metadata(&shards[1]).unwrap().len() as usize;
    let bytes = std::fs::read(&shards[1]).unwrap();
    std::fs::write(&shards[1], &bytes[..len - 100_000]).unwrap();
    std::fs::remove_file(&shards[3]).unwrap();
    let mut c = organ();
    c.arg("inspect").arg(&shards[0]);
    let text = String::from_utf8(ok(c).stdout).unwrap();
    assert!(text.contains("a split model of 4 shards, incomplete"), "{text}");
    assert!(text.contains("cut-split-00002-of-00004.gguf: cut short"), "{text}");
    assert!(text.contains("cut-split-00004-of-00004.gguf: absent"), "{text}");
    let doc = inspect_json(&shards[2]);
    let states: Vec<&str> = doc["shards"].as_array().unwrap().iter().map(|s| s["state"].as_str().unwrap()).collect();
    assert_eq!(states, ["whole", "cut", "whole", "absent"]);
    assert_eq!(doc["tensors_declared"], 272);
    // Each header that is there, with its tensors.
    let shown: usize = doc["headers"].as_array().unwrap().iter().map(|h| h["tensors"].as_array().unwrap().len()).sum();
    let whole_or_cut: usize = shards[..3]
        .iter()
        .map(|s| {
            let b = std::fs::read(s).unwrap();
            Gguf::parse_cut_short(&b, b.len() as u64).unwrap().tensors.len()
        })
        .sum();
    assert_eq!(shown, whole_or_cut);
    assert!(doc["tensors_present"].as_u64().unwrap() < 272);
    let mut m = organ();
    m.arg("measure").arg(&shards[0]);
    assert!(fails(m).contains("cannot open"));
}
