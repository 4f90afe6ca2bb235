//! End-to-end on the real model (SmolLM2-135M-Instruct Q4_1, 272 tensors), against the
//! reference reader gguf-py 0.19.0 and the reference Z-measure `tests/oracle/zref.py`.

use crate::common::*;
use organ_core::gguf::writer::plan_like;
use organ_core::gguf::MetaValue;
use organ_core::{Error, Gguf};
use serde_json::Value;
use std::collections::BTreeSet;

fn read_model() -> Vec<u8> {
    std::fs::read(smollm2()).unwrap()
}

#[test]
fn inspect_json_agrees_with_gguf_py() {
    let Some(model) = need::smollm2_and_oracle() else { return };
    let want = oracle_json(&repo().join("tests/oracle/gguf_dump.py"), &[model.as_os_str()], "gguf_dump.json");
    let mut c = organ();
    c.arg("inspect").arg(&model).arg("--json");
    let got: Value = serde_json::from_slice(&ok(c).stdout).unwrap();

    assert_eq!(got["data_offset"], want["data_offset"]);
    assert_eq!(got["alignment"], want["alignment"]);
    let (gm, wm) = (got["metadata"].as_array().unwrap(), want["metadata"].as_array().unwrap());
    assert_eq!(gm.len(), wm.len(), "metadata count");
    for (g, w) in gm.iter().zip(wm) {
        assert_eq!(g["key"], w["key"]);
        assert_eq!(g["types"], w["types"], "{}", w["key"]);
        assert_eq!(g["value"], w["value"], "{}", w["key"]);
    }
    let (gt, wt) = (got["tensors"].as_array().unwrap(), want["tensors"].as_array().unwrap());
    assert_eq!(gt.len(), SMOLLM2_TENSORS);
    assert_eq!(gt.len(), wt.len());
    for (g, w) in gt.iter().zip(wt) {
        assert_eq!(g["name"], w["name"]);
        assert_eq!(g["type"], w["type"], "{}", w["name"]);
        assert_eq!(g["shape"], w["shape"], "{}", w["name"]);
        assert_eq!(g["file_offset"], w["data_offset"], "{}", w["name"]);
        assert_eq!(g["bytes"], w["n_bytes"], "{}", w["name"]);
    }

    // Every tensor of the real model dequantizes bit-identically to gguf-py.
    let bytes = read_model();
    let g = Gguf::parse(&bytes, bytes.len() as u64).unwrap();
    for (t, w) in g.tensors.iter().zip(wt) {
        let v = organ_core::quant::dequantize(t.ty, t.data(&bytes).unwrap()).unwrap();
        let raw: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        assert_eq!(sha256_hex(&raw), w["sha256_f32"].as_str().unwrap(), "{}", t.name);
    }
}

fn sha256_hex(b: &[u8]) -> String {
    use std::io::Write;
    let mut c = std::process::Command::new("sha256sum");
    c.stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped());
    let mut child = c.spawn().unwrap();
    child.stdin.take().unwrap().write_all(b).unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8(out.stdout).unwrap().split_whitespace().next().unwrap().to_owned()
}

#[test]
fn measure_matches_zref_to_1e_6_degrees() {
    let Some(model) = need::smollm2_and_oracle() else { return };
    let want = oracle_json(&repo().join("tests/oracle/zref.py"), &[model.as_os_str(), "--json".as_ref()], "zref.json");
    let json = tmp("measure.json");
    let mut c = organ();
    c.arg("measure").arg(&model).arg("--json").arg(&json).arg("--summary-only");
    let stdout = String::from_utf8(ok(c).stdout).unwrap();
    assert!(stdout.contains(&format!("{SMOLLM2_TENSORS} tensors")), "{stdout}");
    let got: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(got["measure"], "z1");
    let tensors = got["models"][0]["tensors"].as_array().unwrap();
    let refs = want["tensors"].as_array().unwrap();
    assert_eq!(tensors.len(), SMOLLM2_TENSORS);
    assert_eq!(refs.len(), SMOLLM2_TENSORS);
    for (g, w) in tensors.iter().zip(refs) {
        assert_eq!(g["name"], w["name"]);
        assert_eq!(g["group"], w["group"], "{}", w["name"]);
        let (gt, wt) = (g["theta"].as_f64().unwrap(), w["theta"].as_f64().unwrap());
        assert!((gt - wt).abs() <= 1e-6, "{}: θ {gt} vs zref {wt}", w["name"]);
        for k in ["entropy", "kurtosis", "cv"] {
            let (a, b) = (g[k].as_f64().unwrap(), w[k].as_f64().unwrap());
            assert!((a - b).abs() <= 1e-9 * b.abs().max(1.0), "{}: {k} {a} vs {b}", w["name"]);
        }
    }
    let (gm, wm) =
        (got["models"][0]["summary"]["theta_mean"].as_f64().unwrap(), want["summary"]["theta_mean"].as_f64().unwrap());
    assert!((gm - wm).abs() <= 1e-9, "θ_mean {gm} vs {wm}");
}

#[test]
fn measure_json_and_csv_follow_the_documented_schema() {
    let Some(model) = need::smollm2_and_oracle() else { return };
    let (json, csv) = (tmp("schema.json"), tmp("schema.csv"));
    let mut c = organ();
    c.arg("measure").arg(&model).arg(&model).arg("--json").arg(&json).arg("--csv").arg(&csv);
    let stdout = String::from_utf8(ok(c).stdout).unwrap();
    assert!(stdout.contains("ranking (2 models"), "a ranking table follows several models");
    // Validate with the jsonschema package of the oracle venv against docs/report.schema.json.
    let mut v = std::process::Command::new(oracle_python());
    v.arg("-c")
        .arg("import json,sys,jsonschema; jsonschema.Draft202012Validator(json.load(open(sys.argv[1]))).validate(json.load(open(sys.argv[2]))); print('valid')")
        .arg(repo().join("docs/report.schema.json"))
        .arg(&json);
    assert_eq!(String::from_utf8(ok(v).stdout).unwrap().trim(), "valid");
    let rows = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(rows.lines().count(), 1 + 2 * SMOLLM2_TENSORS);
    assert!(rows.starts_with("model,tensor,group,"));
}

/// `organ diff --json` follows the same schema (its `"compare": "c1"` branch), on real
/// quantized data: SmolLM2 against a copy with layer 5's organs purified.
#[test]
fn diff_json_follows_the_documented_schema() {
    let Some(model) = need::smollm2_and_oracle() else { return };
    let purified = tmp("schema-purified.gguf");
    let mut c = organ();
    c.arg("purify").arg(&model).args(["--method", "fractal", "--type", "organ", "--layers", "5", "--force"]);
    c.arg("--out").arg(&purified);
    ok(c);
    let json = tmp("schema-diff.json");
    let mut c = organ();
    c.arg("diff").arg(&model).arg(&purified).arg("--json").arg(&json).arg("--force");
    ok(c);
    let report: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(report["counts"]["comparable"], SMOLLM2_TENSORS);
    assert!(report["counts"]["changed"].as_u64().is_some_and(|n| n > 0), "{}", report["counts"]);
    let mut v = std::process::Command::new(oracle_python());
    v.arg("-c")
        .arg("import json,sys,jsonschema; jsonschema.Draft202012Validator(json.load(open(sys.argv[1]))).validate(json.load(open(sys.argv[2]))); print('valid')")
        .arg(repo().join("docs/report.schema.json"))
        .arg(&json);
    assert_eq!(String::from_utf8(ok(v).stdout).unwrap().trim(), "valid");
}

/// The streaming path (positioned reads planned by the core's ReadPlan, as the browser's
/// Blob reads are) must give the very report the memory-mapped path gives.
#[test]
fn streamed_reads_give_the_same_report_as_the_memory_map() {
    let Some(model) = need::smollm2() else { return };
    let report = |stream: bool, name: &str| {
        let json = tmp(name);
        let mut c = organ();
        c.arg("measure").arg(&model).arg("--json").arg(&json);
        if stream {
            c.arg("--stream");
        }
        ok(c);
        let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        v["models"][0].take()
    };
    let (mapped, streamed) = (report(false, "mapped.json"), report(true, "streamed.json"));
    assert_eq!(mapped["tensors"].as_array().map(Vec::len), Some(SMOLLM2_TENSORS));
    assert_eq!(mapped, streamed);
}

#[test]
fn writer_reproduces_the_model_byte_for_byte() {
    if need::smollm2().is_none() {
        return;
    }
    let bytes = read_model();
    let g = Gguf::parse(&bytes, bytes.len() as u64).unwrap();
    let layout = plan_like(g.version, &g.kvs, &g.tensors).unwrap();
    assert_eq!(layout.file_len, bytes.len() as u64);
    assert_eq!(layout.header.len() as u64, g.data_offset);
    assert_eq!(&layout.header[..], &bytes[..layout.header.len()]);
    let mut out = layout.header.clone();
    out.resize(layout.file_len as usize, 0);
    for (t, &(off, n)) in g.tensors.iter().zip(&layout.tensors) {
        assert_eq!(off, t.offset, "{}", t.name);
        let at = layout.header.len() + off as usize;
        out[at..at + n as usize].copy_from_slice(t.data(&bytes).unwrap());
    }
    assert!(out == bytes, "rewritten file differs");
}

/// Cut points that exercise every distinct way the header can end early: every byte
/// outside the large arrays; inside each array of more than 128 elements, every byte of
/// its first and last 64 elements and, in between, the bytes around every 97th element's
/// start (a cut anywhere inside one string payload fails the same read as any other).
fn cut_points(bytes: &[u8], g: &Gguf<'_>) -> BTreeSet<usize> {
    let header = g.data_offset as usize;
    let base = bytes.as_ptr() as usize;
    let mut skip = Vec::new();
    let mut cuts = BTreeSet::new();
    for kv in &g.kvs {
        let MetaValue::Array(a) = kv.value else {
            continue;
        };
        if a.len <= 128 {
            continue;
        }
        let start = a.raw().as_ptr() as usize - base;
        let end = start + a.raw().len();
        skip.push(start..end);
        // Element starts.
        let mut starts = Vec::with_capacity(a.len as usize);
        let mut at = start;
        for v in a.iter() {
            starts.push(at);
            at += match v {
                MetaValue::Str(s) => 8 + s.len(),
                other => other.value_type().fixed_size().unwrap() as usize,
            };
        }
        assert_eq!(at, end);
        let n = starts.len();
        let head_end = starts[64];
        let tail_start = starts[n - 64];
        cuts.extend(start..=head_end);
        cuts.extend(tail_start..=end);
        for &s in starts.iter().step_by(97) {
            cuts.extend(s.saturating_sub(2)..=(s + 10).min(end));
        }
    }
    for l in 0..=header {
        if !skip.iter().any(|r| r.contains(&l)) {
            cuts.insert(l);
        }
    }
    cuts
}

#[test]
fn truncated_headers_always_error_never_panic() {
    if need::smollm2().is_none() {
        return;
    }
    let bytes = read_model();
    let g = Gguf::parse(&bytes, bytes.len() as u64).unwrap();
    let cuts = cut_points(&bytes, &g);
    assert!(cuts.len() > 20_000, "{} cut points", cuts.len());
    let header = g.data_offset as usize;
    let cuts: Vec<usize> = cuts.into_iter().filter(|&l| l < header).collect();
    // Each cut is parsed twice from the start: some 100 GB of header in all (most of it for
    // the cuts in the tensor infos, past the vocabulary), over a minute of one core in CI.
    // The cuts are independent, so they are dealt out in turn to every core (each gets its
    // share of long ones): this module runs near the end of the binary, when the other test
    // slot is often idle.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    std::thread::scope(|s| {
        for first in 0..cores {
            let (bytes, cuts) = (&bytes, &cuts);
            s.spawn(move || {
                for &l in cuts.iter().skip(first).step_by(cores) {
                    // The file itself cut at l: a final error naming an offset.
                    let e = Gguf::parse(&bytes[..l], l as u64).unwrap_err();
                    assert!(e.to_string().contains("offset") || matches!(e, Error::BadTensor { .. }), "cut {l}: {e}");
                    // A prefix of the real file: Incomplete, asking for more than it has.
                    match Gguf::parse(&bytes[..l], bytes.len() as u64) {
                        Err(Error::Incomplete { needed, .. }) => assert!(needed > l as u64, "cut {l}"),
                        other => panic!("prefix {l}: {other:?}"),
                    }
                }
            });
        }
    });
}
