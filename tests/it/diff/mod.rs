//! `organ diff` (Compare v1, docs/compare.md): every figure against the NumPy oracle
//! tests/oracle/compare_ref.py (SmolLM2 Q4_1 against its Q8_0 requant, test-built expert
//! models per expert), streamed against mapped, a model against itself, its organ
//! directory and its split, graft and purify outputs against their inputs, renamed and
//! reshaped tensors, and bad inputs.

use crate::build::*;
use crate::common::*;
use organ_core::gguf::MetaValue;
use organ_core::{GgmlType, Gguf};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

mod experts;
mod meta;

/// What one `organ diff` run gave.
struct Diff {
    /// Exit status: 0 or 1 (an error, 2, fails the caller).
    code: i32,
    stdout: String,
    stderr: String,
    /// The `--json` report.
    report: Value,
    /// The report's bytes, as written.
    json: Vec<u8>,
}

/// `organ diff A B --json tmp(NAME) EXTRA…`, which must not fail with an error.
#[track_caller]
fn diff(a: &Path, b: &Path, name: &str, extra: &[&str]) -> Diff {
    let json = tmp(name);
    let mut c = organ();
    c.arg("diff").arg(a).arg(b).arg("--json").arg(&json).args(extra);
    let o = c.output().expect("spawn");
    let stderr = String::from_utf8(o.stderr).unwrap();
    let code = o.status.code().unwrap();
    assert!(code == 0 || code == 1, "{c:?}: status {code}:\n{stderr}");
    let bytes = std::fs::read(&json).unwrap();
    Diff {
        code,
        stdout: String::from_utf8(o.stdout).unwrap(),
        stderr,
        report: serde_json::from_slice(&bytes).unwrap(),
        json: bytes,
    }
}

/// `compare_ref.py A B --json OUT` with the gguf-py venv, parsed.
#[track_caller]
fn compare_ref(a: &Path, b: &Path, name: &str) -> Value {
    let script = repo().join("tests/oracle/compare_ref.py");
    oracle_json(&script, &[a.as_os_str(), b.as_os_str(), "--json".as_ref()], name)
}

/// One figure within Compare v1's tolerance (§2): 1e-9 relative, 1e-12 absolute where the
/// reference is 0; null exactly where the reference is null.
fn close(what: &str, got: &Value, want: &Value) {
    match (got.as_f64(), want.as_f64()) {
        (Some(g), Some(w)) => {
            let ok = if w == 0.0 { g.abs() <= 1e-12 } else { ((g - w) / w).abs() <= 1e-9 };
            assert!(ok, "{what}: organ {g:e}, compare_ref {w:e}");
        }
        _ => assert!(got.is_null() && want.is_null(), "{what}: organ {got}, compare_ref {want}"),
    }
}

/// cos, rel_l2, max_abs, d_theta and dropped of a pair (or of an expert) against the
/// oracle's row.
fn same_figures(what: &str, got: &Value, want: &Value) {
    for k in ["cos", "rel_l2", "max_abs"] {
        close(&format!("{what}: {k}"), &got[k], &want[k]);
    }
    let (g, w) = (got["d_theta"].as_f64().unwrap(), want["d_theta"].as_f64().unwrap());
    assert!((g - w).abs() <= 1e-6, "{what}: d_theta: organ {g}°, compare_ref {w}°");
    assert_eq!(got["dropped"], want["dropped"], "{what}: dropped");
}

fn names(v: &Value) -> Vec<&str> {
    v.as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect()
}

fn sorted(v: &Value) -> Vec<&str> {
    let mut n = names(v);
    n.sort_unstable();
    n
}

/// Checks a report against compare_ref's, pair by pair and expert by expert, and its
/// counts and unmatched names; returns how many experts were checked.
fn matches_oracle(report: &Value, oracle: &Value) -> usize {
    let pairs = report["pairs"].as_array().unwrap();
    let want = oracle["pairs"].as_array().unwrap();
    let order = |v: &[Value]| v.iter().map(|p| p["name"].as_str().unwrap().to_owned()).collect::<Vec<_>>();
    assert_eq!(order(pairs), order(want), "the comparable pairs, in A's order");
    let mut experts = 0;
    for (g, w) in pairs.iter().zip(want) {
        let name = w["name"].as_str().unwrap();
        assert_eq!(g["identical"], w["identical"], "{name}: identical");
        same_figures(name, g, w);
        match w.get("experts") {
            None => assert!(g.get("experts").is_none(), "{name}: experts where the oracle has none"),
            Some(we) => {
                let (ge, we) = (g["experts"].as_array().unwrap(), we.as_array().unwrap());
                assert_eq!(ge.len(), we.len(), "{name}: experts");
                for (e, (x, y)) in ge.iter().zip(we).enumerate() {
                    assert_eq!(x["expert"], e, "{name}: expert order");
                    same_figures(&format!("{name}#{e}"), x, y);
                    experts += 1;
                }
            }
        }
    }
    let identical = want.iter().filter(|p| p["identical"] == true).count();
    let c = &report["counts"];
    assert_eq!(c["comparable"], want.len());
    assert_eq!(c["identical"], identical);
    assert_eq!(c["changed"], want.len() - identical);
    for k in ["only_in_a", "only_in_b", "shape_mismatch"] {
        assert_eq!(c[k], oracle[k].as_array().unwrap().len(), "counts.{k}");
    }
    assert_eq!(sorted(&report["only_in_a"]), sorted(&oracle["only_in_a"]));
    assert_eq!(sorted(&report["only_in_b"]), sorted(&oracle["only_in_b"]));
    assert_eq!(report["shape_mismatch"], oracle["shape_mismatch"]);
    experts
}

/// §4 from the report's own pairs: each group's count, identical count, mean and minimum
/// cos and mean rel_l2 (nulls left out); the most changed tensors (lowest cos, then highest rel_l2, then name, null
/// cos last; at most 20); and each pair's `sampled` (min(N, 100 000)).
fn summary_follows_pairs(report: &Value) {
    let pairs = report["pairs"].as_array().unwrap();
    let mut groups: BTreeMap<&str, Vec<&Value>> = BTreeMap::new();
    for p in pairs {
        groups.entry(p["group"].as_str().unwrap()).or_default().push(p);
        let n = p["n_elements"].as_u64().unwrap();
        assert_eq!(p["sampled"].as_u64(), Some(n.min(100_000)), "{}: sampled", p["name"]);
    }
    let got = report["groups"].as_array().unwrap();
    assert_eq!(got.len(), groups.len(), "{got:?}");
    for g in got {
        let name = g["group"].as_str().unwrap();
        let ps = &groups[name];
        assert_eq!(g["count"], ps.len(), "{name}");
        assert_eq!(g["identical"], ps.iter().filter(|p| p["identical"] == true).count(), "{name}");
        let of = |k: &str| ps.iter().filter_map(|p| p[k].as_f64()).collect::<Vec<f64>>();
        let mean = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
        let near = |what: &str, got: &Value, want: Option<f64>| match want {
            Some(w) => {
                assert!((got.as_f64().unwrap() - w).abs() <= 1e-12 * w.abs().max(1.0), "{name} {what}: {got} vs {w}")
            }
            None => assert!(got.is_null(), "{name} {what}: {got}"),
        };
        let (cos, rel) = (of("cos"), of("rel_l2"));
        near("cos_mean", &g["cos_mean"], mean(&cos));
        near("rel_l2_mean", &g["rel_l2_mean"], mean(&rel));
        near("cos_min", &g["cos_min"], cos.iter().copied().reduce(f64::min));
    }
    let mut changed: Vec<&Value> = pairs.iter().filter(|p| p["identical"] == false).collect();
    changed.sort_by(|x, y| {
        let (cos, rel) = (|p: &Value| p["cos"].as_f64(), |p: &Value| p["rel_l2"].as_f64());
        let key = |p: &Value| (cos(p).is_none(), cos(p), rel(p).is_none(), rel(p).map(|r| -r));
        let (kx, ky) = (key(x), key(y));
        kx.partial_cmp(&ky).unwrap().then_with(|| x["name"].as_str().cmp(&y["name"].as_str()))
    });
    let want: Vec<&str> = changed.iter().take(20).map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names(&report["most_changed"]), want, "most_changed");
}

/// Names of the changed (not identical) pairs.
fn changed(report: &Value) -> BTreeSet<String> {
    let pairs = report["pairs"].as_array().unwrap();
    pairs.iter().filter(|p| p["identical"] == false).map(|p| p["name"].as_str().unwrap().to_owned()).collect()
}

/// The `stats:` line of `--stats`: (bytes compared, bytes read by positioned reads).
fn stats(stderr: &str) -> (u64, u64) {
    let line = stderr.lines().find(|l| l.starts_with("stats: ")).unwrap_or_else(|| panic!("no stats in {stderr}"));
    let after = |key: &str| -> u64 {
        let rest = &line[line.find(key).unwrap_or_else(|| panic!("{key} in {line}")) + key.len()..];
        rest.trim_start().split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap()
    };
    (after("bytes compared"), after("bytes read by positioned reads"))
}

// --- Test-built models -----------------------------------------------------------------

/// A small dense model: five tensors of several types, one of them all zeros.
fn small_model() -> Vec<T> {
    vec![
        t("token_embd.weight", &[64, 40], GgmlType::Q8_0, noise(1, 64 * 40)),
        t("blk.0.attn_q.weight", &[64, 64], GgmlType::F32, noise(2, 64 * 64)),
        t("blk.0.attn_k.weight", &[64, 64], GgmlType::F32, noise(3, 64 * 64)),
        t("blk.0.ffn_up.weight", &[64, 128], GgmlType::Q8_0, noise(4, 64 * 128)),
        t("blk.0.ffn_down.weight", &[128, 64], GgmlType::F32, noise(5, 128 * 64)),
        t("blk.0.attn_norm.weight", &[64], GgmlType::F32, noise(6, 64)),
        t("output_norm.weight", &[64], GgmlType::F32, vec![0.0; 64]),
    ]
}

// --- Against the oracle ----------------------------------------------------------------

#[test]
fn q4_1_against_its_q8_0_matches_compare_ref() {
    let Some(model) = need::smollm2_oracle_and_llama() else { return };
    let q8_0 = smollm2_q8_0(&model);
    let d = diff(&model, &q8_0, "q8_0.json", &[]);
    assert_eq!(d.code, 0, "no --fail-on-change: a change is not a failure");
    let oracle = compare_ref(&model, &q8_0, "q8_0-ref.json");
    assert_eq!(matches_oracle(&d.report, &oracle), 0);
    summary_follows_pairs(&d.report);
    let c = &d.report["counts"];
    assert_eq!(c["comparable"], SMOLLM2_TENSORS);
    // Both kinds of pair are there: Q8_0 tensors llama-quantize left alone, and requantized ones.
    assert!(c["identical"].as_u64().unwrap() > 0 && c["changed"].as_u64().unwrap() > 0, "{c}");
    assert!(d.report["warnings"].as_array().unwrap().is_empty(), "{}", d.report["warnings"]);
}

#[test]
fn streaming_gives_the_mapped_figures_bit_for_bit() {
    let Some(model) = need::smollm2_and_llama() else { return };
    let q8_0 = smollm2_q8_0(&model);
    let mapped = diff(&model, &q8_0, "mapped.json", &["--stats"]);
    let streamed = diff(&model, &q8_0, "streamed.json", &["--stream", "-j", "1", "--stats"]);
    assert!(!changed(&mapped.report).is_empty());
    assert!(mapped.json == streamed.json, "--stream -j 1 wrote another report than the mapped run");
    // The streamed run read its bytes by positioned reads (the comparisons and the
    // samples), the mapped one none.
    let ((c_m, r_m), (c_s, r_s)) = (stats(&mapped.stderr), stats(&streamed.stderr));
    assert_eq!(r_m, 0, "{}", mapped.stderr);
    assert!(c_s > 0 && r_s >= c_s, "{}", streamed.stderr);
    assert!(c_m > 0, "{}", mapped.stderr);
    // With --progress jsonl, the same counts come as the last event, `diff_stats`.
    let jsonl = diff(&model, &q8_0, "streamed-jsonl.json", &["--stream", "--stats", "--progress", "jsonl"]);
    let last: Value = serde_json::from_str(jsonl.stderr.lines().last().unwrap()).unwrap();
    assert_eq!(last["event"], "diff_stats", "{last}");
    assert_eq!((last["bytes_compared"].as_u64(), last["bytes_read"].as_u64()), (Some(c_s), Some(r_s)), "{last}");
    assert!(last["peak_rss_kib"].as_u64().unwrap() > 0, "{last}");
    assert!(jsonl.json == streamed.json);
}

#[test]
fn a_model_is_identical_to_itself_its_organ_directory_and_its_split() {
    let Some(model) = need::smollm2() else { return };
    let dir = dissect(&model, "self.organs", &[]);
    let mut c = organ();
    c.arg("assemble").arg(&dir).arg("--out").arg(tmp("self-split.gguf")).args(["--split-max-size", "30M"]);
    ok(c);
    let shard = tmp("self-split-00002-of-00004.gguf");
    let bytes = std::fs::read(&model).unwrap();
    let g = Gguf::parse(&bytes, bytes.len() as u64).unwrap();
    let tensor_bytes: u64 = g.tensors.iter().map(|t| t.n_bytes).sum();
    // θ of each tensor as `organ measure` gives it (tested against zref.py in smollm2.rs).
    let json = tmp("self-measure.json");
    let mut c = organ();
    c.arg("measure").arg(&model).arg("--json").arg(&json).arg("--summary-only");
    ok(c);
    let measured: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let theta: BTreeMap<&str, &Value> = measured["models"][0]["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["name"].as_str().unwrap(), &t["theta"]))
        .collect();
    let cases: [(&str, &Path, &[&str]); 4] = [
        ("the model itself", &model, &[]),
        ("its organ directory", &dir, &[]),
        ("its split (from shard 2)", &shard, &[]),
        ("its split, streamed", &shard, &["--stream"]),
    ];
    for (i, (what, other, extra)) in cases.into_iter().enumerate() {
        let d = diff(&model, other, &format!("self-{i}.json"), &[&["--fail-on-change", "--stats"][..], extra].concat());
        assert_eq!(d.code, 0, "{what}: --fail-on-change on identical models");
        let r = &d.report;
        let c = &r["counts"];
        assert_eq!(c["comparable"], SMOLLM2_TENSORS, "{what}");
        assert_eq!(c["identical"], SMOLLM2_TENSORS, "{what}");
        for k in ["changed", "only_in_a", "only_in_b", "shape_mismatch"] {
            assert_eq!(c[k], 0, "{what}: {k}");
        }
        assert!(r["warnings"].as_array().unwrap().is_empty() && r["most_changed"].as_array().unwrap().is_empty());
        for p in r["pairs"].as_array().unwrap() {
            let name = p["name"].as_str().unwrap();
            assert_eq!(p["identical"], true, "{what}: {name}");
            assert_eq!((p["cos"].as_f64(), p["rel_l2"].as_f64()), (Some(1.0), Some(0.0)), "{what}: {name}");
            assert_eq!((p["max_abs"].as_f64(), p["d_theta"].as_f64()), (Some(0.0), Some(0.0)), "{what}: {name}");
            assert_eq!(p["dropped"], 0, "{what}: {name}");
            assert_eq!(&p["theta_a"], theta[name], "{what}: {name}: θ as organ measure has it");
            assert_eq!(p["theta_a"], p["theta_b"], "{what}: {name}");
        }
        // Identical models: every byte of every tensor compared, on both sides.
        let (compared, read) = stats(&d.stderr);
        assert_eq!(compared, 2 * tensor_bytes, "{what}: {}", d.stderr);
        if extra.contains(&"--stream") {
            assert!(read >= compared, "{what}: streamed, yet {read} bytes read for {compared} compared");
        }
    }
}

// --- Surgery cross-checks ------------------------------------------------------------

/// The strings of an array in a GGUF's metadata.
fn meta_strings(path: &Path, key: &str) -> BTreeSet<String> {
    let bytes = std::fs::read(path).unwrap();
    let g = Gguf::parse(&bytes, bytes.len() as u64).unwrap();
    match g.get(key) {
        Some(MetaValue::Array(a)) => a.iter().map(|v| v.as_str().unwrap().to_owned()).collect(),
        other => panic!("{}: {key}: {other:?}", path.display()),
    }
}

/// A string value of a GGUF's metadata.
fn meta_text(path: &Path, key: &str) -> String {
    let bytes = std::fs::read(path).unwrap();
    let g = Gguf::parse(&bytes, bytes.len() as u64).unwrap();
    match g.get(key) {
        Some(MetaValue::Str(s)) => String::from_utf8(s.to_vec()).unwrap(),
        other => panic!("{}: {key}: {other:?}", path.display()),
    }
}

#[test]
fn a_graft_changes_exactly_the_grafted_tensors() {
    let Some(model) = need::smollm2_and_llama() else { return };
    let donor = smollm2_q8_0(&model);
    let chimera = tmp("chimera.gguf");
    let mut c = organ();
    c.args(["graft", "--layers", "5-20", "--type", "organ"]).arg("--donor").arg(&donor);
    c.arg("--recipient").arg(&model).arg("--out").arg(&chimera);
    ok(c);
    let grafted = meta_strings(&chimera, "organ.graft.tensors");
    assert_eq!(grafted.len(), SMOLLM2_ORGANS_5_20);
    let d = diff(&model, &chimera, "graft.json", &["--fail-on-change"]);
    assert_eq!(d.code, 1, "--fail-on-change on a chimera");
    assert_eq!(changed(&d.report), grafted, "changed against the recipient: the grafted tensors");
    assert_eq!(d.report["counts"]["identical"], SMOLLM2_TENSORS - SMOLLM2_ORGANS_5_20);
    // A grafted tensor is the donor's: its row is the donor's row against the recipient.
    let donor_rows = diff(&model, &donor, "graft-donor.json", &[]);
    let by_name = |r: &Value| -> BTreeMap<String, Value> {
        r["pairs"].as_array().unwrap().iter().map(|p| (p["name"].as_str().unwrap().to_owned(), p.clone())).collect()
    };
    let (rows, want) = (by_name(&d.report), by_name(&donor_rows.report));
    for name in &grafted {
        assert_eq!(rows[name], want[name], "{name}");
    }
    // And against the donor, the chimera differs where the recipient does, except there.
    let from_donor = diff(&donor, &chimera, "graft-from-donor.json", &[]);
    let expected: BTreeSet<String> = changed(&donor_rows.report).difference(&grafted).cloned().collect();
    assert_eq!(changed(&from_donor.report), expected);
}

#[test]
fn purify_changes_exactly_the_purified_tensors() {
    let Some(model) = need::smollm2() else { return };
    let out = tmp("purified.gguf");
    let json = tmp("purified-report.json");
    let mut c = organ();
    c.arg("purify").arg(&model).args(["--method", "spectral", "--keep", "0.99", "--layers", "0-3"]);
    c.arg("--only-if-improves").arg("--out").arg(&out).arg("--json").arg(&json);
    ok(c);
    let report: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let status = |s: &str| -> BTreeSet<String> {
        let rows = report["tensors"].as_array().unwrap();
        rows.iter()
            .filter(|r| r["status"].as_str().unwrap().starts_with(s))
            .map(|r| r["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let (purified, kept) = (status("purified"), status("kept"));
    // Both branches, or the test shows nothing: --only-if-improves keeps some on layers 0-3.
    assert!(!purified.is_empty() && !kept.is_empty(), "purified {purified:?}, kept {kept:?}");
    assert_eq!(meta_strings(&out, "organ.purify.tensors"), purified);
    let d = diff(&model, &out, "purify.json", &["--fail-on-change"]);
    assert_eq!(d.code, 1, "--fail-on-change on a purified model");
    assert_eq!(changed(&d.report), purified);
    assert_eq!(d.report["counts"]["identical"], SMOLLM2_TENSORS - purified.len());
}

// --- Unmatched names and shapes ----------------------------------------------------------

#[test]
fn renamed_and_reshaped_tensors_are_listed_and_the_rest_compared() {
    let Some(_) = need::oracle() else { return };
    let mut a = small_model();
    let mut b = small_model();
    b[2].name = "blk.0.attn_key.weight".into();
    b[3].dims = vec![128, 64];
    let down = &mut b[4].values;
    for v in down.iter_mut().step_by(3) {
        *v *= 1.01;
    }
    down[7] = f32::INFINITY;
    down[10] = f32::NAN;
    b[5].ty = GgmlType::Q8_0;
    a[4].values[10] = f32::NAN;
    a[4].values[20] = f32::NAN;
    let (pa, pb) = (write_model("renamed-a.gguf", "llama", &a), write_model("renamed-b.gguf", "llama", &b));
    let d = diff(&pa, &pb, "renamed.json", &["--fail-on-change"]);
    assert_eq!(d.code, 1);
    let r = &d.report;
    assert_eq!(names(&r["only_in_a"]), ["blk.0.attn_k.weight"]);
    assert_eq!(names(&r["only_in_b"]), ["blk.0.attn_key.weight"]);
    assert_eq!(
        r["shape_mismatch"],
        serde_json::json!([{"name": "blk.0.ffn_up.weight", "a": [64, 128], "b": [128, 64]}])
    );
    let unchanged = ["token_embd.weight", "blk.0.attn_q.weight", "output_norm.weight"];
    assert_eq!(changed(r), BTreeSet::from(["blk.0.ffn_down.weight".into(), "blk.0.attn_norm.weight".into()]));
    assert_eq!(r["counts"]["identical"], unchanged.len());
    // The text names them too.
    for line in
        ["only in A (1):", "only in B (1):", "shape mismatch (1):", "blk.0.ffn_up.weight  A [64, 128]  B [128, 64]"]
    {
        assert!(d.stdout.contains(line), "{line:?} in:\n{}", d.stdout);
    }
    // Every figure of the comparable pairs, the zero tensor's nulls and the dropped
    // non-finite positions included, as the oracle has them.
    let oracle = compare_ref(&pa, &pb, "renamed-ref.json");
    matches_oracle(r, &oracle);
    summary_follows_pairs(r);
    let down = r["pairs"].as_array().unwrap().iter().find(|p| p["name"] == "blk.0.ffn_down.weight").unwrap();
    assert_eq!(down["dropped"], 3, "NaN at 10 on both sides, NaN at 20 in A, ∞ at 7 in B");
    let zero = r["pairs"].as_array().unwrap().iter().find(|p| p["name"] == "output_norm.weight").unwrap();
    assert!(zero["cos"].is_null() && zero["rel_l2"].is_null(), "{zero}");
}

/// `--html` writes the browser's static compare page, which embeds the `--json` report.
#[test]
fn the_html_page_embeds_the_json_report() {
    let a = write_model("html-a.gguf", "llama", &small_model());
    let mut tensors = small_model();
    tensors[4].values[3] += 0.5;
    let b = write_model("html-b.gguf", "llama", &tensors);
    let page = tmp("diff-page.html");
    let d = diff(&a, &b, "html.json", &["--html", page.to_str().unwrap()]);
    let page = std::fs::read_to_string(&page).unwrap();
    let embedded = organ_core::report::html::extract_json(&page).expect("the page embeds its report");
    let embedded: Value = serde_json::from_str(embedded).unwrap();
    assert_eq!(embedded, d.report);
    assert_eq!(embedded["counts"]["changed"], 1);
}

// --- Bad input ---------------------------------------------------------------------------

/// `organ ARGS…`: (exit status, stderr).
fn status_and_stderr(args: &[&std::ffi::OsStr]) -> (i32, String) {
    let o = organ().args(args).output().unwrap();
    (o.status.code().unwrap(), String::from_utf8(o.stderr).unwrap())
}

#[test]
fn a_bad_side_gets_the_error_measure_gives_and_status_1_or_2_with_fail_on_change() {
    let good = write_model("good.gguf", "llama", &small_model());
    let bytes = std::fs::read(&good).unwrap();
    let write = |name: &str, b: &[u8]| {
        let p = tmp(name);
        std::fs::write(&p, b).unwrap();
        p
    };
    let bad = [
        write("not-a-model.gguf", b"# organ\nnot a model at all"),
        write("cut-in-the-data.gguf", &bytes[..bytes.len() - 100]),
        write("cut-in-the-header.gguf", &bytes[..40]),
        tmp("missing.gguf"),
    ];
    for p in &bad {
        let (code, measure) = status_and_stderr(&["measure".as_ref(), p.as_os_str()]);
        assert_eq!(code, 1, "{measure}");
        let file = p.file_name().unwrap().to_str().unwrap();
        assert!(measure.starts_with("organ: error: ") && measure.contains(file), "{measure}");
        for (a, b) in [(p, &good), (&good, p)] {
            let (code, e) =
                status_and_stderr(&["diff".as_ref(), a.as_os_str(), b.as_os_str(), "--fail-on-change".as_ref()]);
            assert_eq!(code, 2, "{file}: an error, not a change: {e}");
            assert_eq!(e, measure, "{file}: diff's error is measure's");
            // Without --fail-on-change, 1 means nothing else: an error exits 1, as measure's.
            let (code, e) = status_and_stderr(&["diff".as_ref(), a.as_os_str(), b.as_os_str()]);
            assert_eq!((code, e.as_str()), (1, measure.as_str()), "{file}");
        }
    }
}

#[test]
fn models_sharing_no_tensor_name_get_a_warning_not_an_error() {
    let a = write_model("disjoint-a.gguf", "llama", &small_model()[..3]);
    let b = write_model("disjoint-b.gguf", "llama", &small_model()[3..]);
    let d = diff(&a, &b, "disjoint.json", &[]);
    assert_eq!(d.code, 0, "{}", d.stderr);
    let w = d.report["warnings"].as_array().unwrap();
    assert!(w.iter().any(|w| w.as_str().unwrap().contains("share no tensor name")), "{w:?}");
    assert!(d.stdout.contains("warning: the two models share no tensor name"), "{}", d.stdout);
    let c = &d.report["counts"];
    assert_eq!(c["comparable"], 0);
    assert_eq!((c["only_in_a"].as_u64(), c["only_in_b"].as_u64()), (Some(3), Some(4)));
    assert_eq!(diff(&a, &b, "disjoint-fail.json", &["--fail-on-change"]).code, 1);
}

#[test]
fn different_architectures_get_a_warning_line() {
    let a = write_model("arch-llama.gguf", "llama", &small_model());
    let b = write_model("arch-qwen2.gguf", "qwen2", &small_model());
    let d = diff(&a, &b, "arch.json", &[]);
    assert_eq!(d.code, 0, "{}", d.stderr);
    let w = d.report["warnings"].as_array().unwrap();
    assert!(w.iter().any(|w| w.as_str().unwrap().contains("llama") && w.as_str().unwrap().contains("qwen2")), "{w:?}");
    let line = d.stdout.lines().find(|l| l.starts_with("warning: ")).unwrap_or_else(|| panic!("{}", d.stdout));
    assert!(line.contains("architectures differ") && line.contains("llama") && line.contains("qwen2"), "{line}");
    assert_eq!(d.report["counts"]["identical"], small_model().len());
    // Same architecture, same tensors: no warning.
    let same = diff(&a, &a, "arch-same.json", &[]);
    assert!(same.report["warnings"].as_array().unwrap().is_empty() && !same.stdout.contains("warning"));
}
