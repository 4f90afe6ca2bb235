//! The sensitivity prediction: organ's reading of a real `llama-imatrix` output against
//! gguf-py's, value for value; and `organ sensitivity --predict` of SmolLM2 F16 ranked
//! against the measured truth of tests/data/sensitivity/ (Spearman ρ), the calibrations
//! refitted and held to the ones in the code (docs/predict.md;
//! `bench/predict-vs-truth.sh` prints the figures).

use crate::common::*;
use organ_cli::predict::{predict, predict_weighted_error, read_imatrix};
use organ_core::imatrix::Imatrix;
use organ_core::predict::Method;
use organ_core::predict::{agreement, Calibration, Kind, Point};
use organ_core::quant::quantize::can_quantize;
use organ_core::GgmlType;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// `llama-imatrix` on SmolLM2 over `text`: `chunks` chunks of 128 tokens, to tmp(`name`).
pub(crate) fn make_imatrix(model: &Path, text: &Path, chunks: u32, name: &str) -> PathBuf {
    let out = tmp(name);
    let mut c = llama_tool("llama-imatrix");
    c.arg("-m").arg(model).arg("-f").arg(text).arg("-o").arg(&out);
    c.args(["-c", "128", "--chunks", &chunks.to_string(), "-t", LLAMA_THREADS, "--no-ppl"]);
    ok(c);
    out
}

#[test]
fn imatrix_reads_as_gguf_py_does() {
    let Some(model) = need::smollm2_oracle_and_llama() else { return };
    let path = make_imatrix(&model, &repo().join("tests/data/perplexity.txt"), 4, "small.imatrix.gguf");
    let im = Imatrix::parse(&std::fs::read(&path).unwrap()).unwrap();
    let py = oracle_json(&repo().join("tests/oracle/imatrix_dump.py"), &[path.as_os_str()], "small.imatrix.json");
    assert_eq!(py["kv"]["general.type"], "imatrix");
    assert_eq!(im.chunk_count, py["kv"]["imatrix.chunk_count"].as_u64());
    assert_eq!(im.chunk_size, py["kv"]["imatrix.chunk_size"].as_u64());
    assert_eq!(serde_json::json!(im.datasets), py["kv"]["imatrix.datasets"]);
    let tensors = py["tensors"].as_object().unwrap();
    let bits = |name: &str| -> Vec<u32> {
        let t = &tensors[name];
        assert_eq!(t["type"], "F32", "{name}");
        t["bits"].as_array().unwrap().iter().map(|b| b.as_u64().unwrap() as u32).collect()
    };
    let n_sum2 = tensors.keys().filter(|k| k.ends_with(".in_sum2")).count();
    assert_eq!(im.entries.len(), n_sum2);
    // SmolLM2's 30 blocks × 7 weights, each seen by every token.
    assert_eq!(n_sum2, 210);
    for (name, e) in &im.entries {
        let shape = tensors[&format!("{name}.in_sum2")]["shape"].as_array().unwrap();
        assert_eq!(shape[0].as_u64(), Some(e.n_in as u64), "{name}");
        let own_bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<u32>>();
        assert_eq!(own_bits(&e.sum2), bits(&format!("{name}.in_sum2")), "{name}");
        assert_eq!(own_bits(&e.counts), bits(&format!("{name}.counts")), "{name}");
        assert!(e.counts[0] > 0.0);
        let ms = e.mean_squares(0).unwrap();
        assert!(ms.iter().zip(&e.sum2).all(|(m, s)| *m == s / e.counts[0]), "{name}");
    }
    // The legacy format of the same run holds the same mean squares (scaled to its call
    // count and back, in f32), the chunk count and the dataset.
    let dat = tmp("small.imatrix.dat");
    let mut c = llama_tool("llama-imatrix");
    c.arg("-m").arg(&model).arg("--in-file").arg(&path).arg("-o").arg(&dat).args(["--output-format", "dat"]);
    ok(c);
    let old = Imatrix::parse(&std::fs::read(&dat).unwrap()).unwrap();
    assert!(old.legacy && !im.legacy);
    assert_eq!((old.chunk_count, old.entries.len()), (im.chunk_count, im.entries.len()));
    assert_eq!(old.datasets.first(), im.datasets.last());
    for (name, e) in &im.entries {
        let (new, legacy) = (e.mean_squares(0).unwrap(), old.entries[name].mean_squares(0).unwrap());
        assert!(new.iter().zip(&legacy).all(|(a, b)| (a - b).abs() <= 1e-6 * a.abs()), "{name}");
    }
}

/// The measured truth of the old study: (name, KLD) per line of `name\tKLD\tPPL`.
fn z2_truth(file: &str) -> Vec<(String, f64)> {
    let text = std::fs::read_to_string(repo().join("tests/data/sensitivity").join(file)).unwrap();
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (f.len() == 3).then(|| (f[0].to_owned(), f[1].parse().unwrap()))
        })
        .collect()
}

fn show(label: &str, points: &[Point]) {
    let a = agreement(points);
    let kinds: Vec<String> = a.within.iter().map(|(k, r)| format!("{} {r:+.2}", k.name())).collect();
    println!("{label}: ρ {:+.3} overall, {:+.3} within kind ({})", a.overall, a.within_mean, kinds.join(", "));
}

/// `organ sensitivity --predict` of SmolLM2 F16 at `ty` against the checked-in truth: the
/// report's (kind, weighted error, measured KLD) points and (kind, predicted, measured).
fn predicted(f16: &Path, ty: &str, imatrix: Option<&Path>) -> (Vec<Point>, Vec<Point>) {
    let truth = repo().join(format!("tests/data/sensitivity/smollm2-f16-{ty}.json"));
    let out = tmp(&format!("predicted-{ty}-{}.json", imatrix.is_some()));
    let mut c = organ();
    c.arg("sensitivity").arg(f16).args(["--to", ty, "--predict", "--truth"]).arg(&truth).arg("--json").arg(&out);
    if let Some(i) = imatrix {
        c.arg("--imatrix").arg(i);
    }
    let text = String::from_utf8(ok(c).stdout).unwrap();
    assert!(text.contains("measured KLD"), "{text}");
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(r["ranking"]["n"], 210, "every block weight is predicted and was measured");
    assert_eq!(r["not_predicted"][0][0], "token_embd.weight");
    let kind = |v: &serde_json::Value| serde_json::from_value::<Kind>(v["kind"].clone()).unwrap();
    let rows = r["tensors"].as_array().unwrap();
    let f = |x: &str| -> Vec<Point> {
        rows.iter().map(|t| (kind(t), t[x].as_f64().unwrap(), t["measured_kld"].as_f64().unwrap())).collect()
    };
    (f("weighted_error"), f("predicted_kld"))
}

#[test]
fn predictions_rank_against_the_measured_truth() {
    let Some(model) = need::smollm2_and_llama() else { return };
    assert!(can_quantize(GgmlType::Q2_0) && can_quantize(GgmlType::Q4_0), "the truth is at Q2_0 and Q4_0");
    let f16 = smollm2_f16(&model);
    let text = repo().join("tests/data/texts/calibration.txt");
    let im = make_imatrix(&f16, &text, 16, "cal.imatrix.gguf");
    for (label, imatrix, committed) in
        [("data-free", None, Calibration::DATA_FREE), ("imatrix", Some(im.as_path()), Calibration::IMATRIX)]
    {
        let mut errors = Vec::new();
        for ty in ["q2_0", "q4_0"] {
            let (e, p) = predicted(&f16, ty, imatrix);
            show(&format!("{label} {ty} predicted KLD"), &p);
            errors.extend(e);
        }
        // The calibration in the code is the fit to both types' truth (rounded to 3 decimals).
        let fit = Calibration::fit(&errors, None).unwrap();
        println!("{label} calibration: {fit:?}");
        let close = |a: f64, b: f64| (a - b).abs() < 6e-4;
        assert!(close(fit.exponent, committed.exponent), "{label}: refit {fit:?}, code has {committed:?}");
        assert!(fit.log_factor.iter().zip(committed.log_factor).all(|(a, b)| close(*a, b)), "{label}: {fit:?}");
    }
    // Without --truth, no empty "measured KLD" column (issue 50).
    let mut c = organ();
    c.arg("sensitivity").arg(&f16).args(["--to", "q4_0", "--predict", "--name", "blk.0.*"]);
    let text = String::from_utf8(ok(c).stdout).unwrap();
    assert!(text.contains("predicted KLD") && !text.contains("measured KLD"), "{text}");
    // Out of sample: the data-free calibration on the old study's truth (another model:
    // SmolLM2 Q4_1, 77 weights at Q2_0, another text).
    let q2 = z2_truth("sensitivity-smollm2-q2_0.tsv");
    let m = organ_cli::model::Model::open(&model).unwrap();
    let preds = predict(&m, None, &[GgmlType::Q2_0], |n| q2.iter().any(|(t, _)| t == n)).unwrap();
    assert_eq!(preds.len(), q2.len());
    let points: Vec<_> = preds
        .iter()
        .map(|p| {
            let kind = Kind::from_name(&p.kind).unwrap();
            (kind, p.options[0].predicted_kld, q2.iter().find(|t| t.0 == p.name).unwrap().1)
        })
        .collect();
    show("data-free on the Q4_1 study (out of sample)", &points);
}

/// The measured KLD of each weight in tests/data/sensitivity/smollm2-f16-`ty`.json.
fn f16_truth(ty: &str) -> HashMap<String, f64> {
    let path = repo().join(format!("tests/data/sensitivity/smollm2-f16-{ty}.json"));
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let rows = r["tensors"].as_array().unwrap();
    rows.iter().map(|t| (t["name"].as_str().unwrap().to_owned(), t["kld"]["value"].as_f64().unwrap())).collect()
}

/// The weaker predictor (the weighted error alone, one factor for every kind), as weights
/// outside the residual model take it, on every block weight of SmolLM2 F16 against the
/// same truth: its ρ (what the outputs print beside its name) and its calibrations, held
/// to the ones in the code (`bench/predict-vs-truth.sh` prints the figures).
#[test]
fn weighted_error_ranks_against_the_measured_truth() {
    let Some(model) = need::smollm2_and_llama() else { return };
    let f16 = smollm2_f16(&model);
    let text = repo().join("tests/data/texts/calibration.txt");
    let im = read_imatrix(&make_imatrix(&f16, &text, 16, "cal-weighted.imatrix.gguf")).unwrap();
    let m = organ_cli::model::Model::open(&f16).unwrap();
    let types = [GgmlType::Q2_0, GgmlType::Q4_0];
    let mut refits = Vec::new();
    for (label, imatrix) in [("data-free", None), ("imatrix", Some(&im))] {
        let committed = Calibration::weighted_error(imatrix.is_some());
        let preds = predict_weighted_error(&m, imatrix, &types, |_| true).unwrap();
        assert_eq!(preds.len(), 210, "every block weight, none else");
        assert!(preds.iter().all(|p| p.method == Method::WeightedError && p.options.len() == 2));
        let mut errors = Vec::new();
        for (i, ty) in ["q2_0", "q4_0"].into_iter().enumerate() {
            let truth = f16_truth(ty);
            let point =
                |p: &organ_core::predict::Prediction, x: f64| (Kind::from_name(&p.kind).unwrap(), x, truth[&p.name]);
            let predicted: Vec<Point> = preds.iter().map(|p| point(p, p.options[i].predicted_kld)).collect();
            show(&format!("{label} {ty} weighted error alone"), &predicted);
            errors.extend(preds.iter().map(|p| point(p, p.options[i].weighted_error)));
        }
        let fit = Calibration::fit_one(&errors, None).unwrap();
        println!("{label} weighted-error calibration: b {:.3}, a {:.3}", fit.exponent, fit.log_factor[0]);
        let close = |a: f64, b: f64| (a - b).abs() < 6e-4;
        if !close(fit.exponent, committed.exponent) || !close(fit.log_factor[0], committed.log_factor[0]) {
            refits.push(format!("{label}: refit {fit:?}, code has {committed:?}"));
        }
    }
    assert!(refits.is_empty(), "{refits:#?}");
}
