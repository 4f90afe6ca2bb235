//! `organ check` (Check k1): SmolLM2 has no error, in every form it can be given (file,
//! organ directory, split set, --stream); the four families' test-built files, which
//! llama.cpp loads and runs, have no error; each broken copy is flagged with exactly what
//! the script broke (tests/oracle/make-family-models.py lists it), and nothing else is
//! an error.

use crate::common::{dissect, llama_tool, need, ok, oracle_python, organ, repo, tmp, LLAMA_THREADS};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// `organ check MODEL --json …` with `extra` arguments: exit status and report.
fn check(model: &Path, name: &str, extra: &[&str]) -> (i32, Value) {
    let json = tmp(&format!("{name}.json"));
    let _ = std::fs::remove_file(&json);
    let o = organ().arg("check").arg(model).arg("--json").arg(&json).args(extra).output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    let code = o.status.code().unwrap_or(-1);
    assert!(code == 0 || code == 1, "{}: exit {code}: {stderr}", model.display());
    let report: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(code == 1, report["counts"]["error"].as_u64().unwrap() > 0, "exit status against the report");
    (code, report)
}

/// The findings of a report of `severity` (or all), as (kind, severity, subject).
fn findings(r: &Value, severity: Option<&str>) -> Vec<(String, String, String)> {
    let s = |v: &Value| v.as_str().unwrap().to_owned();
    r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| severity.is_none_or(|want| f["severity"] == want))
        .map(|f| (s(&f["kind"]), s(&f["severity"]), s(&f["subject"])))
        .collect()
}

#[test]
fn smollm2_has_no_error_in_any_form() {
    let Some(model) = need::smollm2() else { return };
    let (code, file) = check(&model, "smollm2", &[]);
    assert_eq!(code, 0);
    assert_eq!(findings(&file, Some("error")), vec![]);
    assert_eq!(file["tensors"], crate::common::SMOLLM2_TENSORS);
    assert_eq!(file["scans"].as_array().unwrap().len(), crate::common::SMOLLM2_TENSORS);
    assert_eq!(file["shapes_checked"], true);
    let size = std::fs::metadata(&model).unwrap().len();
    let scanned = file["bytes_scanned"].as_u64().unwrap();
    assert!(scanned > size * 9 / 10 && scanned < size, "scanned {scanned} of {size} bytes");
    // The same findings and scans by positioned reads, from an organ directory, and from
    // a split set.
    let (_, streamed) = check(&model, "smollm2-stream", &["--stream"]);
    let dir = dissect(&model, "smollm2.organs", &[]);
    let (_, from_dir) = check(&dir, "smollm2-dir", &[]);
    let split = tmp("split.gguf");
    let mut c = organ();
    c.arg("assemble").arg(&dir).arg("--out").arg(&split).args(["--split-max-size", "40M"]);
    ok(c);
    let first = std::fs::read_dir(split.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("split-00001-of-"))
        .expect("the first shard");
    assert!(!first.to_string_lossy().ends_with("-of-00001.gguf"), "several shards expected");
    let (_, from_split) = check(&first, "smollm2-split", &[]);
    for (what, r) in [("--stream", &streamed), ("organ directory", &from_dir), ("split set", &from_split)] {
        assert_eq!(r["findings"], file["findings"], "{what}");
        assert_eq!(r["scans"], file["scans"], "{what}");
    }
}

/// The families and broken copies, made once per test process.
fn families() -> Option<(PathBuf, Vec<Value>)> {
    let tokenizer = need::smollm2_oracle_and_llama()?;
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let d = tmp("families");
        let mut c = std::process::Command::new(oracle_python());
        c.arg(repo().join("tests/oracle/make-family-models.py")).arg(&tokenizer).arg(&d);
        ok(c);
        d
    });
    let list: Value = serde_json::from_slice(&std::fs::read(dir.join("families.json")).unwrap()).unwrap();
    Some((dir.clone(), list.as_array().unwrap().clone()))
}

#[test]
fn families_as_llama_cpp_expects_them() {
    let Some((dir, list)) = families() else { return };
    let good: Vec<&Value> = list.iter().filter(|f| f["expect"].as_array().unwrap().is_empty()).collect();
    let archs: Vec<&str> = good.iter().map(|f| f["arch"].as_str().unwrap()).collect();
    assert_eq!(archs, ["llama", "qwen2", "gemma3", "deepseek2"]);
    for f in good {
        let path = dir.join(f["file"].as_str().unwrap());
        let (code, r) = check(&path, f["arch"].as_str().unwrap(), &[]);
        assert_eq!((code, findings(&r, None)), (0, vec![]), "{}", path.display());
        assert_eq!(r["shapes_checked"], true);
        // llama.cpp loads it and computes a token.
        let mut c = llama_tool("llama-completion");
        c.arg("-m").arg(&path).args(["-p", "Hello", "-n", "1", "--temp", "0", "-no-cnv", "-t", LLAMA_THREADS]);
        ok(c);
    }
}

#[test]
fn broken_copies_are_flagged_with_what_was_broken() {
    let Some((dir, list)) = families() else { return };
    let broken: Vec<&Value> = list.iter().filter(|f| !f["expect"].as_array().unwrap().is_empty()).collect();
    assert_eq!(broken.len(), 7);
    for f in broken {
        let name = f["file"].as_str().unwrap();
        let (code, r) = check(&dir.join(name), name, &[]);
        let s = |v: &Value| v.as_str().unwrap().to_owned();
        let mut expect: Vec<(String, String, String)> = f["expect"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (s(&e["kind"]), s(&e["severity"]), s(&e["subject"])))
            .collect();
        // Exactly the expected findings, in any order: nothing else at all.
        let mut got = findings(&r, None);
        got.sort();
        expect.sort();
        assert_eq!(got, expect, "{name}");
        assert_eq!(code, i32::from(expect.iter().any(|e| e.1 == "error")), "{name}");
        let text = organ().arg("check").arg(dir.join(name)).output().unwrap();
        let text = String::from_utf8_lossy(&text.stdout);
        for (_, _, subject) in &expect {
            assert!(text.contains(subject.as_str()), "{name}: the text report names {subject}:\n{text}");
        }
    }
    // The metadata and shape breaks are real: llama.cpp refuses those files.
    for name in ["llama-missing.gguf", "llama-wrong-embd.gguf", "llama-tokens.gguf"] {
        let mut c = llama_tool("llama-completion");
        c.arg("-m").arg(dir.join(name)).args(["-p", "Hello", "-n", "1", "-no-cnv", "-t", LLAMA_THREADS]);
        let o = c.output().unwrap();
        assert!(!o.status.success(), "llama.cpp loaded {name}");
    }
}

#[test]
fn bad_input_exits_2() {
    let missing = tmp("no-such-model.gguf");
    let o = organ().arg("check").arg(&missing).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.starts_with("organ: error: ") && err.contains("no-such-model.gguf"), "{err}");
    let not_gguf = tmp("not-a-model.gguf");
    std::fs::write(&not_gguf, b"GGUF\x03\x00\x00\x00 and then nothing sensible").unwrap();
    let o = organ().arg("check").arg(&not_gguf).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
}
