//! The CLI on bad input: a clear one-line error naming the file and the offset or tensor,
//! exit status 1, and no output file left behind.

use crate::common::*;

fn err_of(args: &[&std::ffi::OsStr]) -> String {
    let out = organ().args(args).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{args:?} should fail");
    let e = String::from_utf8(out.stderr).unwrap();
    assert!(e.starts_with("organ: error: "), "{e}");
    e
}

fn write(name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let p = tmp(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn missing_file_is_named() {
    let p = tmp("does-not-exist.gguf");
    let e = err_of(&["inspect".as_ref(), p.as_os_str()]);
    assert!(e.contains("does-not-exist.gguf") && e.contains("cannot open"), "{e}");
}

#[test]
fn non_gguf_is_named_with_offset() {
    let p = write("readme.gguf", b"# organ\nnot a model at all");
    let e = err_of(&["measure".as_ref(), p.as_os_str()]);
    assert!(e.contains("readme.gguf") && e.contains("offset 0") && e.contains("not a GGUF"), "{e}");
}

#[test]
fn tensor_past_the_end_names_the_tensor_and_writes_nothing() {
    let mut b = b"GGUF".to_vec();
    b.extend(3u32.to_le_bytes());
    b.extend(1u64.to_le_bytes());
    b.extend(0u64.to_le_bytes());
    b.extend(1u64.to_le_bytes());
    b.push(b'w');
    b.extend(1u32.to_le_bytes());
    b.extend(64u64.to_le_bytes());
    b.extend(0u32.to_le_bytes());
    b.extend(0u64.to_le_bytes());
    b.resize(32 + 36, 0);
    let p = write("short.gguf", &b);
    let json = tmp("short-report.json");
    let e = err_of(&["measure".as_ref(), p.as_os_str(), "--json".as_ref(), json.as_os_str()]);
    assert!(e.contains("short.gguf") && e.contains("tensor \"w\"") && e.contains("beyond the end"), "{e}");
    assert!(!json.exists(), "no report for a model that failed");
    let leftovers: Vec<_> = std::fs::read_dir(json.parent().unwrap())
        .unwrap()
        .filter_map(|e| e.ok())
        // Only this report's temp files: tests in this binary run in parallel.
        .filter(|e| e.file_name().to_string_lossy().starts_with(".short-report.json.organ-tmp"))
        .collect();
    assert!(leftovers.is_empty(), "temp files left: {leftovers:?}");
}

#[test]
fn truncated_header_names_the_offset() {
    let p = write("trunc.gguf", b"GGUF\x03\x00\x00\x00\x01\x00");
    let e = err_of(&["inspect".as_ref(), p.as_os_str()]);
    assert!(e.contains("trunc.gguf") && e.contains("offset 8") && e.contains("file ends"), "{e}");
}

#[test]
fn measure_handles_valid_small_files_and_json_is_written_whole() {
    // A GGUF written by gguf-py's GGUFWriter (scripts/make-fuzz-seeds.py).
    let seed = repo().join("core/fuzz/seeds/parse/every_value.gguf");
    let json = tmp("small.json");
    let mut c = organ();
    c.arg("measure").arg(&seed).arg("--json").arg(&json);
    let out = String::from_utf8(ok(c).stdout).unwrap();
    assert!(out.contains("2 tensors"), "{out}");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(v["models"][0]["tensors"].as_array().unwrap().len(), 2);
}
