//! `organ recipe` (docs/recipe.md) on SmolLM2 requantized to F16 by llama-quantize: the
//! budget is kept to the byte, every type chosen is one llama.cpp writes for its tensor
//! (576-wide rows take no k-quant, ffn_down's 1536 do), `--apply`'s output loads in
//! llama.cpp at the size accounted, and bad input is refused with nothing written. The
//! sensitivity reports are written here from the model's real tensors, with made-up
//! divergences (the lead's `organ sensitivity` measures the real ones).

use crate::common::*;
use organ_core::ggml_type::GgmlType;
use organ_core::gguf::Gguf;
use organ_core::predict::row_errors;
use organ_core::quant::dequantize;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// (name, dims, type) of every tensor of `model`.
fn tensors(model: &Path) -> Vec<(String, Vec<u64>, GgmlType)> {
    let bytes = std::fs::read(model).unwrap();
    let g = Gguf::parse(&bytes, bytes.len() as u64).unwrap();
    g.tensors.iter().map(|t| (t.name.to_owned(), t.shape().to_vec(), t.ty)).collect()
}

const CANDIDATES: [GgmlType; 6] =
    [GgmlType::Q8_0, GgmlType::Q6_K, GgmlType::Q5_0, GgmlType::Q4_K, GgmlType::Q4_0, GgmlType::Q2_K];

/// A sensitivity report of `model` requantized to `ty`: every 2-D tensor, K-quants on
/// 576-wide rows included (a recipe must not take them), a made-up divergence falling
/// with the type's bits and varying with the layer. `edit` changes the JSON.
fn report(model: &Path, ty: GgmlType, name: &str, edit: impl FnOnce(&mut Value)) -> PathBuf {
    let bits = ty.type_size() as f64 * 8.0 / ty.block_size() as f64;
    let entries: Vec<Value> = tensors(model)
        .into_iter()
        .filter(|(_, d, _)| d.len() == 2)
        .map(|(n, d, own)| {
            let elements = d[0] * d[1];
            let layer = n.split('.').nth(1).and_then(|l| l.parse::<u64>().ok()).unwrap_or(7);
            let kld = elements as f64 * 1e-9 * (-bits).exp2() * 300.0 * (1 + layer % 4) as f64;
            let rows_bytes = d[0] / ty.block_size() as u64 * ty.type_size() as u64 * d[1];
            json!({"name": n, "type": own.name(), "dims": d, "n_elements": elements, "bytes": elements * 2,
                   "changed_type": ty.name(), "changed_bytes": rows_bytes, "kld": {"value": kld, "error": kld / 10.0}})
        })
        .collect();
    let mut r = json!({"organ_sensitivity": 1, "model": model.display().to_string(),
        "model_blake3": blake3::hash(&std::fs::read(model).unwrap()).to_hex().to_string(),
        "text": "tests/data/perplexity.txt", "ctx": 128, "chunks": 9, "change": ty.name(), "tensors": entries});
    edit(&mut r);
    let p = tmp(name);
    std::fs::write(&p, serde_json::to_vec(&r).unwrap()).unwrap();
    p
}

fn reports(model: &Path) -> Vec<PathBuf> {
    CANDIDATES.iter().map(|&ty| report(model, ty, &format!("sens-{}.json", ty.name()), |_| ())).collect()
}

fn recipe(model: &Path, from: &[PathBuf], target: &[&str], name: &str) -> std::process::Command {
    let mut c = organ();
    c.arg("recipe").arg(model).args(target);
    for f in from {
        c.arg("--from").arg(f);
    }
    c.arg("--out").arg(tmp(&format!("{name}.txt"))).arg("--json").arg(tmp(&format!("{name}.json"))).arg("--force");
    c
}

/// Every row of the table holds a type llama.cpp writes for the tensor; returns the table.
#[track_caller]
fn checked_table(model: &Path, name: &str) -> Value {
    let r: Value = serde_json::from_slice(&std::fs::read(tmp(&format!("{name}.json"))).unwrap()).unwrap();
    let dims: std::collections::HashMap<String, Vec<u64>> =
        tensors(model).into_iter().map(|(n, d, _)| (n, d)).collect();
    let (mut k_on_1536, mut quantized) = (0, 0);
    for t in r["tensors"].as_array().unwrap() {
        let name = t["name"].as_str().unwrap();
        let ty = GgmlType::from_name(t["type"].as_str().unwrap()).unwrap();
        let d = &dims[name];
        assert_eq!(d[0] % ty.block_size() as u64, 0, "{name}: {ty} on rows of {}", d[0]);
        if d.len() == 1 {
            assert_eq!(ty, GgmlType::F32, "{name}: 1-D tensors stay as they are");
        }
        if ty.block_size() == 256 {
            assert_eq!(d[0], 1536, "{name}: a k-quant on rows of {}", d[0]);
            k_on_1536 += 1;
        }
        quantized += usize::from(ty != GgmlType::F16 && ty != GgmlType::F32);
    }
    assert!(k_on_1536 > 0 && quantized > 100, "k-quants on ffn_down: {k_on_1536}, quantized: {quantized}");
    // One line per 2-D weight, anchored, in llama-quantize's form.
    let lines = std::fs::read_to_string(tmp(&format!("{name}.txt"))).unwrap();
    assert_eq!(lines.lines().count(), dims.values().filter(|d| d.len() == 2).count());
    assert!(lines.lines().all(|l| l.starts_with('^') && l.contains("\\.weight$=")), "{lines}");
    r
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

#[test]
fn a_bpw_target_is_kept_and_every_type_is_valid() {
    let Some(q41) = need::smollm2_and_llama() else { return };
    let model = smollm2_f16(&q41);
    ok(recipe(&model, &reports(&model), &["--target-bpw", "4.5"], "bpw"));
    let r = checked_table(&model, "bpw");
    let elements: u64 = tensors(&model).iter().map(|(_, d, _)| d.iter().product::<u64>()).sum();
    assert_eq!(n(&r["budget"]), (4.5 * elements as f64 / 8.0).floor() as u64);
    assert!(n(&r["tensor_bytes"]) <= n(&r["budget"]), "{}", r["tensor_bytes"]);
    assert!(r["bpw"].as_f64().unwrap() <= 4.5);
    // A tight budget: the fill leaves less than the smallest step of any curve unspent.
    assert!(n(&r["budget"]) - n(&r["tensor_bytes"]) < 1 << 20, "{} of {}", r["tensor_bytes"], r["budget"]);
    assert!(r["lower_bound"].as_f64().unwrap() <= r["predicted_kld"].as_f64().unwrap());
}

#[test]
fn applied_recipe_loads_in_llama_cpp_at_the_size_accounted() {
    let Some(q41) = need::smollm2_and_llama() else { return };
    let model = smollm2_f16(&q41);
    let budget = 90u64 << 20;
    let out = tmp("applied.gguf");
    let _ = std::fs::remove_file(&out);
    let mut c = recipe(&model, &reports(&model), &["--target-size", "90M"], "size");
    c.arg("--apply").arg(&out).arg("--text").arg(repo().join("tests/data/perplexity.txt"));
    c.args(["--ctx", "128", "--chunks", "4"]).arg("--llama-cpp").arg(llama_dir());
    // Where the evaluation runs is llama-perplexity's choice, passed through: the CPU here.
    c.args(["--threads", "2", "--gpu-layers", "all", "--device", "none"]);
    let stdout = String::from_utf8(ok(c).stdout).unwrap();
    println!("{stdout}");
    let r = checked_table(&model, "size");
    let len = std::fs::metadata(&out).unwrap().len();
    assert!(len <= budget, "{len} > {budget}");
    assert_eq!(len, n(&r["file_bytes"]), "the header and padding are accounted exactly");
    assert_eq!(n(&r["applied"]["file_bytes"]), len);
    // Every tensor in the file in the type the table says, by organ's own reading.
    let written: std::collections::HashMap<String, GgmlType> =
        tensors(&out).into_iter().map(|(n, _, t)| (n, t)).collect();
    for t in r["tensors"].as_array().unwrap() {
        assert_eq!(written[t["name"].as_str().unwrap()].name(), t["type"].as_str().unwrap());
    }
    assert!(llama_perplexity(&out).is_finite());
    let a = &r["applied"]["additivity"];
    assert!(a["measured"].as_f64().unwrap() > 0.0 && a["sum_single"].as_f64().unwrap() > 0.0, "{a}");
    assert!(stdout.contains("additivity: sum of single-tensor KLDs"), "{stdout}");
    assert!(
        stdout.contains(&format!("verdict: {} (", r["applied"]["verdict"]["verdict"].as_str().unwrap())),
        "{stdout}"
    );
    // Without --text they have nothing to say where.
    let mut c = recipe(&model, &reports(&model), &["--target-size", "90M"], "size");
    c.arg("--apply").arg(&out).args(["--device", "none"]);
    let e = fails(c);
    assert!(e.contains("--device say where --text's evaluation runs"), "{e}");
}

#[test]
fn a_data_free_recipe_is_applied_within_its_size_and_loads() {
    let Some(q41) = need::smollm2_and_llama() else { return };
    let model = smollm2_f16(&q41);
    // Above the smallest such recipe (the embedding at Q8_0 takes 30 MB): ~84 MB.
    let budget = 90u64 << 20;
    let out = tmp("data-free.gguf");
    let _ = std::fs::remove_file(&out);
    // Q4_1 is left out: the F16 is a dequantized Q4_1, which Q4_1 would reproduce.
    let mut c = recipe(&model, &[], &["--target-size", "90M", "--data-free"], "data-free");
    c.args(["--types", "q2_k,q3_k,q4_k,q6_k,q4_0,q5_0,q8_0"]).arg("--apply").arg(&out);
    c.arg("--check-with-llama-quantize").arg("--llama-cpp").arg(llama_dir());
    c.arg("--text").arg(repo().join("tests/data/perplexity.txt")).args(["--ctx", "128", "--chunks", "2"]);
    let stdout = String::from_utf8(ok(c).stdout).unwrap();
    assert!(stdout.contains("predicted from the weights alone"), "{stdout}");
    // organ wrote it, and llama-quantize wrote the same bytes from the same lines.
    assert!(stdout.contains(", by organ ") && stdout.contains("llama-quantize wrote the same bytes"), "{stdout}");
    let r = checked_table(&model, "data-free");
    let len = std::fs::metadata(&out).unwrap().len();
    assert!(len <= budget, "{len} > {budget}");
    assert_eq!(len, n(&r["file_bytes"]), "the header and padding are accounted exactly");
    let allowed = ["Q2_K", "Q3_K", "Q4_K", "Q6_K", "Q4_0", "Q5_0", "Q8_0", "F16", "F32"];
    for t in r["tensors"].as_array().unwrap() {
        let (name, ty) = (t["name"].as_str().unwrap(), t["type"].as_str().unwrap());
        assert!(allowed.contains(&ty), "{name}: {ty} was not a candidate");
        if !name.starts_with("blk.") {
            assert!(ty == "Q8_0" || ty == "F32", "{name}: outside the prediction, kept at Q8_0, not {ty}");
        }
    }
    assert!(llama_perplexity(&out).is_finite());
    // --text: the verdict eval and --judge give, and the prediction held against the
    // measurement, with a warning exactly when they are a factor 2 apart (issue 50).
    let a = &r["applied"];
    let grade = a["verdict"]["verdict"].as_str().unwrap();
    assert!(stdout.contains(&format!("verdict: {grade} (perplexity ×")), "{stdout}");
    let p = &a["prediction"];
    assert!(a.get("additivity").is_none(), "{a}");
    assert_eq!(p["sum_single"], r["predicted_kld"]);
    assert_eq!(p["measured"], a["eval"]["kl_divergence"]["mean"]["value"]);
    assert!(stdout.contains("prediction: predicted KLD"), "{stdout}");
    let ratio = p["ratio"].as_f64().unwrap();
    let noise = 2.0 * p["measured_error"].as_f64().unwrap();
    let far = !(0.5..2.0).contains(&ratio)
        && (p["measured"].as_f64().unwrap() - p["sum_single"].as_f64().unwrap()).abs() > noise;
    assert_eq!(stdout.contains("warning: the recipe's measured KL divergence is"), far, "ratio {ratio}: {stdout}");
}

/// `--apply` with an importance matrix: organ's imatrix-steered quantizers write the
/// recipe, and llama-quantize's file from the same lines and matrix has the same bytes
/// (but for the matrix's path in the header, which each was given its own way).
#[test]
fn a_recipe_applied_with_an_imatrix_is_llama_quantizes_bytes() {
    let Some(q41) = need::smollm2_and_llama() else { return };
    let model = smollm2_f16(&q41);
    let im = crate::predict::make_imatrix(
        &model,
        &repo().join("tests/data/texts/calibration.txt"),
        4,
        "recipe.imatrix.gguf",
    );
    let out = tmp("applied-imatrix.gguf");
    let _ = std::fs::remove_file(&out);
    let mut c = recipe(&model, &reports(&model), &["--target-bpw", "5"], "imatrix-applied");
    c.arg("--apply").arg(&out).arg("--imatrix-file").arg(&im).arg("--check-with-llama-quantize");
    c.arg("--llama-cpp").arg(llama_dir());
    let stdout = String::from_utf8(ok(c).stdout).unwrap();
    assert!(stdout.contains("llama-quantize wrote the same bytes"), "{stdout}");
    let r = checked_table(&model, "imatrix-applied");
    assert!(r["applied"]["checked_with"].as_str().unwrap().ends_with("llama-quantize"), "{}", r["applied"]);
    let bytes = std::fs::read(&out).unwrap();
    let g = Gguf::parse(&bytes, bytes.len() as u64).unwrap();
    let file = g.kvs.iter().find(|kv| kv.key == "quantize.imatrix.file").unwrap();
    assert_eq!(file.value.as_str(), Some(im.to_str().unwrap()), "the path as given to organ");
    assert!(n(&r["file_bytes"]) >= bytes.len() as u64);
}

#[test]
fn bad_input_is_a_clear_error_and_writes_nothing() {
    let Some(q41) = need::smollm2_and_llama() else { return };
    let model = smollm2_f16(&q41);
    let good = reports(&model);
    let cases: Vec<(Vec<PathBuf>, &str, &str)> = vec![
        (good.clone(), "20M", "every tensor at its smallest allowed type already takes"),
        (
            vec![report(&model, GgmlType::Q4_0, "other.json", |r| r["model_blake3"] = json!("00ff"))],
            "90M",
            "model_blake3",
        ),
        (
            vec![report(&model, GgmlType::Q4_0, "unknown.json", |r| {
                r["tensors"][3]["name"] = json!("blk.99.attn_q.weight")
            })],
            "90M",
            "tensors[3].name (blk.99.attn_q.weight): the model has no such tensor",
        ),
        (vec![report(&model, GgmlType::Q4_0, "noise.json", |r| r["change"] = json!("noise"))], "90M", "ablation"),
        (
            vec![report(&model, GgmlType::Q4_0, "nokld.json", |r| r["tensors"][0]["kld"] = json!({}))],
            "90M",
            "nokld.json",
        ),
        // Before: taken, and the recipe's predicted KLD was -inf (null in the JSON).
        (
            vec![report(&model, GgmlType::Q4_0, "negative.json", |r| r["tensors"][2]["kld"]["value"] = json!(-1e308))],
            "90M",
            "kld.value",
        ),
        (
            vec![report(&model, GgmlType::Q4_0, "huge.json", |r| r["tensors"][2]["kld"]["value"] = json!(1e300))],
            "90M",
            "a mean KL divergence is ≥ 0",
        ),
    ];
    for (from, size, says) in cases {
        let (txt, js) = (tmp("bad.txt"), tmp("bad.json"));
        let _ = (std::fs::remove_file(&txt), std::fs::remove_file(&js));
        let err = fails(recipe(&model, &from, &["--target-size", size], "bad"));
        assert!(err.contains(says), "{from:?}: {err}");
        assert!(!txt.exists() && !js.exists(), "{from:?} wrote an output");
    }
}

/// `--imatrix` predicts each weight's round trip as the file is written, under the
/// importance matrix (docs/predict.md): every block weight of `--apply`'s output, read
/// back, has to the bit the weighted error predicted for the type it was given.
#[test]
fn an_imatrix_recipe_is_written_as_it_was_predicted() {
    let Some(q41) = need::smollm2_and_llama() else { return };
    let model = smollm2_f16(&q41);
    let text = repo().join("tests/data/texts/calibration.txt");
    let im = crate::predict::make_imatrix(&model, &text, 4, "predicted.imatrix.gguf");
    let out = tmp("predicted-imatrix.gguf");
    let _ = std::fs::remove_file(&out);
    let types = [GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0];
    let names: Vec<&str> = types.iter().map(|t| t.name()).collect();
    let target = ["--target-size", "90M", "--imatrix", im.to_str().unwrap()];
    let mut c = recipe(&model, &[], &target, "predicted-imatrix");
    c.args(["--types", &names.join(",")]).arg("--apply").arg(&out);
    ok(c);
    checked_table(&model, "predicted-imatrix");
    let f16 = organ_cli::model::Model::open(&model).unwrap();
    let written = organ_cli::model::Model::open(&out).unwrap();
    let imatrix = organ_core::imatrix::Imatrix::parse(&std::fs::read(&im).unwrap()).unwrap();
    let preds = organ_cli::predict::predict(&f16, Some(&imatrix), &types, |_| true).unwrap();
    assert_eq!(preds.len(), 210);
    let mut checked = 0;
    for p in &preds {
        let t = written.tensors.iter().find(|t| t.name == p.name).unwrap();
        let Some(o) = p.options.iter().find(|o| o.ty == t.ty) else { continue };
        let source = f16.tensors.iter().find(|t| t.name == p.name).unwrap();
        let w = dequantize(source.ty, source.bytes()).unwrap();
        let q = dequantize(t.ty, t.bytes()).unwrap();
        let cols = imatrix.column_weights(&p.name, &p.dims).unwrap();
        let e: f64 = row_errors(&w, &q, p.dims[0] as usize, &cols).unwrap().iter().sum();
        assert_eq!(o.weighted_error, e, "{} in {}", p.name, t.ty);
        checked += 1;
    }
    assert!(checked > 200, "{checked} of 210 block weights quantized");
}

/// Every test-built family (tests/oracle/make-family-models.py --f16-256: llama, qwen2,
/// gemma3 and deepseek2 with MLA, four experts and a shared one; F16, rows of 256) through
/// `organ recipe --data-free --apply`: each row says which predictor gave its losses (the
/// residual model for llama's and qwen2's block weights and gemma3's but its queries and
/// keys, the weighted error alone for those and every deepseek2 weight), the text prints
/// each predictor's measured ρ, llama-quantize writes the same bytes from the lines, and
/// llama.cpp runs the result.
#[test]
fn every_family_takes_a_data_free_recipe_that_llama_cpp_runs() {
    let Some(tokenizer) = need::smollm2_oracle_and_llama() else { return };
    let dir = tmp("families-recipe");
    let mut c = std::process::Command::new(oracle_python());
    c.arg(repo().join("tests/oracle/make-family-models.py")).arg(&tokenizer).arg(&dir).arg("--f16-256");
    ok(c);
    for (arch, residual, weighted) in [("llama", 14, 0), ("qwen2", 14, 0), ("gemma3", 10, 4), ("deepseek2", 0, 19)] {
        let f16 = dir.join(format!("{arch}.gguf"));
        let out = tmp(&format!("family-{arch}.gguf"));
        let _ = std::fs::remove_file(&out);
        // The embedding at Q8_0 alone is ~7.8 bpw of these models: 8.3 leaves the block
        // weights a mix of types.
        let name = format!("family-{arch}");
        let mut c = recipe(&f16, &[], &["--target-bpw", "8.3", "--data-free"], &name);
        c.arg("--apply").arg(&out).arg("--check-with-llama-quantize").arg("--llama-cpp").arg(llama_dir());
        let stdout = String::from_utf8(ok(c).stdout).unwrap();
        assert!(stdout.contains("llama-quantize wrote the same bytes"), "{arch}: {stdout}");
        let r: Value = serde_json::from_slice(&std::fs::read(tmp(&format!("{name}.json"))).unwrap()).unwrap();
        let rows = r["tensors"].as_array().unwrap();
        let by = |p: &str| rows.iter().filter(|t| t["predictor"] == p).count();
        assert_eq!((by("residual"), by("weighted_error")), (residual, weighted), "{arch}");
        assert_eq!(by("none"), rows.len() - residual - weighted, "{arch}: every row says its predictor");
        for (count, says) in
            [(residual, "by the residual model, which ranks"), (weighted, "by the weighted error alone, which ranks")]
        {
            assert_eq!(stdout.contains(says), count > 0, "{arch}: {stdout}");
        }
        let quantized = rows.iter().filter(|t| t["type"] != t["from"] && t["predictor"] != "none").count();
        assert!(quantized > 0, "{arch}: no block weight took another type");
        // A tensor outside the prediction held at Q8_0 says so, not the "why" of a choice
        // weighed against λ (issue 50).
        let held: Vec<&Value> = rows.iter().filter(|t| t["predictor"] == "none" && t["type"] != t["from"]).collect();
        assert!(!held.is_empty(), "{arch}: the F16 embedding is held at Q8_0");
        for t in held {
            assert_eq!(t["type"], "Q8_0", "{arch}: {t}");
            assert!(t["why"].as_str().unwrap().starts_with("outside the prediction: held at Q8_0"), "{arch}: {t}");
        }
        let mut c = llama_tool("llama-completion");
        c.arg("-m").arg(&out).args(["-p", "Hello", "-n", "1", "--temp", "0", "-no-cnv", "-t", LLAMA_THREADS]);
        ok(c);
    }
}

/// A target no recipe meets is refused before anything is predicted, in the target's own
/// unit with the smallest that would do; the budget line says what its bytes count
/// (issue 50).
#[test]
fn an_impossible_target_is_refused_first_in_its_own_unit() {
    let Some(q41) = need::smollm2_and_llama() else { return };
    let model = smollm2_f16(&q41);
    // The importance matrix named does not exist: were the prediction read first, that
    // would be the error.
    let missing = tmp("no-such.imatrix.gguf");
    let _ = std::fs::remove_file(&missing);
    let mut c = recipe(&model, &[], &["--target-bpw", "4.5", "--imatrix", missing.to_str().unwrap()], "impossible");
    c.args(["--types", "q4_0,q8_0"]);
    let e = fails(c);
    assert!(e.contains("a target of 4.5 bpw leaves") && e.contains("the smallest target is"), "{e}");
    let smallest: f64 = e.rsplit("the smallest target is ").next().unwrap().split(' ').next().unwrap().parse().unwrap();
    assert!(smallest > 4.5 && smallest < 8.5, "{e}");
    assert!(!e.contains("no-such"), "the matrix was read before the target was checked: {e}");
    // That target is met, from the weights alone; and a size's budget says it is what the
    // header leaves for the tensors.
    let at = format!("{smallest}");
    let out = String::from_utf8(
        ok(recipe(&model, &[], &["--target-bpw", &at, "--data-free", "--types", "q4_0,q8_0"], "least")).stdout,
    )
    .unwrap();
    assert!(out.contains("bytes of tensor data,"), "{out}");
    let mut c = recipe(&model, &[], &["--target-size", "20M", "--data-free"], "too-small");
    c.args(["--types", "q4_0,q8_0"]);
    let e = fails(c);
    assert!(
        e.contains("a target of 20971520 bytes leaves") && e.contains("bytes") && e.contains("the smallest target is"),
        "{e}"
    );
    let mut c = recipe(&model, &[], &["--target-size", "100M", "--data-free", "--types", "q4_0,q8_0"], "size");
    c.args(["--progress", "jsonl"]);
    let o = ok(c);
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(out.contains("bytes for the tensors, padded, beside the header,"), "{out}");
    // The prediction's minute is not silent (issue 50): progress events to the last job.
    let events = String::from_utf8(o.stderr).unwrap();
    let last = events.lines().rfind(|l| l.contains("\"progress\"")).expect("progress events");
    let last: serde_json::Value = serde_json::from_str(last).unwrap();
    assert!(last["total"].as_u64().unwrap() > 200 && last["done"] == last["total"], "{last}");
}

/// `--from` with `--data-free` (docs/recipe.md, One sweep anchoring the prediction): a
/// tensor's measured type costs what was measured, and each other type the data-free
/// prediction times the tensor's measured over predicted KL divergence at the measured one.
#[test]
fn one_measured_type_scales_the_prediction_of_the_others() {
    let Some(q41) = need::smollm2_and_llama() else { return };
    let model = smollm2_f16(&q41);
    let q4 = report(&model, GgmlType::Q4_0, "anchor-q4_0.json", |_| ());
    let measured: Value = serde_json::from_slice(&std::fs::read(&q4).unwrap()).unwrap();
    let kld = |name: &str| -> f64 {
        let rows = measured["tensors"].as_array().unwrap();
        rows.iter().find(|t| t["name"] == name).unwrap()["kld"]["value"].as_f64().unwrap()
    };
    let predicted = |ty: &str| -> std::collections::HashMap<String, f64> {
        let out = tmp(&format!("anchor-predicted-{ty}.json"));
        let mut c = organ();
        c.args(["sensitivity"]).arg(&model).args(["--to", ty, "--predict", "--force", "--json"]).arg(&out);
        ok(c);
        let r: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
        let rows = r["tensors"].as_array().unwrap().iter();
        rows.map(|t| (t["name"].as_str().unwrap().to_owned(), t["predicted_kld"].as_f64().unwrap())).collect()
    };
    let (p4, p5) = (predicted("q4_0"), predicted("q5_0"));
    let args = ["--target-size", "95M", "--data-free", "--types", "q4_0,q5_0,q8_0"];
    let text = String::from_utf8(ok(recipe(&model, std::slice::from_ref(&q4), &args, "anchored")).stdout).unwrap();
    assert!(text.contains("other types predicted and scaled per tensor"), "{text}");
    let r: Value = serde_json::from_slice(&std::fs::read(tmp("anchored.json")).unwrap()).unwrap();
    let (mut at_q4, mut at_q5) = (0, 0);
    for t in r["tensors"].as_array().unwrap() {
        let (name, cost) = (t["name"].as_str().unwrap(), t["cost"].as_f64().unwrap());
        let close = |want: f64| assert!((cost - want).abs() <= 1e-9 * want.abs(), "{name}: {cost} against {want}");
        match (t["type"].as_str().unwrap(), p4.get(name)) {
            ("Q4_0", Some(_)) => {
                close(kld(name));
                at_q4 += 1;
            }
            ("Q5_0", Some(&p)) => {
                close(p5[name] * kld(name) / p);
                assert_eq!(t["predictor"], "residual, measured scale", "{name}");
                at_q5 += 1;
            }
            ("Q4_0", None) => assert_eq!((name, &t["predictor"]), ("token_embd.weight", &json!("measured"))),
            _ => {}
        }
    }
    assert!(at_q4 > 10 && at_q5 > 10, "Q4_0: {at_q4}, Q5_0: {at_q5}\n{text}");
    // --types picks predicted types: without a prediction it is refused.
    let err = fails(recipe(&model, &[q4], &["--target-size", "95M", "--types", "q4_0"], "anchored-bad"));
    assert!(err.contains("--types names the predicted types"), "{err}");
}
