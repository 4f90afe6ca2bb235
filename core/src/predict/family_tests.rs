//! The prediction of each architecture on small test-built models: which predictor each
//! kind of weight gets, the keys read under the architecture's name, and the steps run
//! through on gemma3's post-norms and deepseek2's MLA and experts.

use super::family::{Activation, FAMILIES};
use super::jobs::{Energy, Prediction};
use super::residual;
use super::*;
use crate::ggml_type::GgmlType;
use crate::model::{Model, OwnedValue, TensorEntry};
use crate::MetaValue;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;

const EMBD: u64 = 64;
const HEAD: u64 = 16;

fn entry(name: &str, dims: &[u64]) -> TensorEntry {
    let n: u64 = dims.iter().product();
    let ty = if dims.len() == 1 { GgmlType::F32 } else { GgmlType::F16 };
    let n_bytes = n * ty.type_size() as u64;
    TensorEntry { name: name.into(), ty, dims: dims.to_vec(), n_elements: n, n_bytes, file: 0, offset: 0 }
}

/// A two-block model of `arch` as tests/oracle/make-family-models.py builds it: 4 heads
/// over 2 KV heads of 16, FFN 128; deepseek2 with MLA (q and kv low-rank pieces) and, in
/// block 1, four experts, a shared one and the router.
fn model(arch: &str) -> Model {
    let u32_kv = |k: &str, v: u32| (format!("{arch}.{k}"), OwnedValue::Scalar(MetaValue::U32(v)));
    let kvs = vec![
        (String::from("general.architecture"), OwnedValue::Str(arch.as_bytes().to_vec().into())),
        u32_kv("block_count", 2),
        u32_kv("attention.head_count", 4),
        u32_kv("attention.head_count_kv", 2),
    ];
    let mut t = vec![entry("token_embd.weight", &[EMBD, 100])];
    for i in 0..2 {
        let mut add = |n: &str, d: &[u64]| t.push(entry(&format!("blk.{i}.{n}.weight"), d));
        add("attn_norm", &[EMBD]);
        if arch == "deepseek2" {
            add("attn_q_a_norm", &[32]);
            add("attn_kv_a_norm", &[32]);
            add("attn_q_a", &[EMBD, 32]);
            add("attn_q_b", &[32, 4 * 24]);
            add("attn_kv_a_mqa", &[EMBD, 32 + 8]);
            add("attn_kv_b", &[32, 4 * 32]);
        } else {
            add("attn_q", &[EMBD, 4 * HEAD]);
            add("attn_k", &[EMBD, 2 * HEAD]);
            add("attn_v", &[EMBD, 2 * HEAD]);
        }
        add("attn_output", &[4 * HEAD, EMBD]);
        if arch == "gemma3" {
            add("post_attention_norm", &[EMBD]);
            add("attn_q_norm", &[HEAD]);
            add("attn_k_norm", &[HEAD]);
        }
        add("ffn_norm", &[EMBD]);
        if arch == "deepseek2" && i == 1 {
            add("ffn_gate_inp", &[EMBD, 4]);
            add("ffn_gate_exps", &[EMBD, 32, 4]);
            add("ffn_up_exps", &[EMBD, 32, 4]);
            add("ffn_down_exps", &[32, EMBD, 4]);
            add("ffn_gate_shexp", &[EMBD, 32]);
            add("ffn_up_shexp", &[EMBD, 32]);
            add("ffn_down_shexp", &[32, EMBD]);
        } else {
            add("ffn_gate", &[EMBD, 128]);
            add("ffn_up", &[EMBD, 128]);
            add("ffn_down", &[128, EMBD]);
        }
        if arch == "gemma3" {
            add("post_ffw_norm", &[EMBD]);
        }
    }
    t.push(entry("output_norm.weight", &[EMBD]));
    Model { version: 3, kvs, tensors: t }
}

/// Seeded values for tensor `t`: norms around 1, weights around 0.
fn values(t: &TensorEntry) -> Vec<f32> {
    let seed = t.name.bytes().map(u64::from).sum::<u64>();
    let base = if t.dims.len() == 1 { 1.0 } else { 0.0 };
    (0..t.n_elements).map(|i| base + 0.05 * crate::random::normal(seed, i)).collect()
}

/// Every step of `p` on `m` with [`values`], each block weight in Q4_0.
fn run(m: &Model, p: &Predictor<'_>) -> (steps::Stream, Vec<Prediction>) {
    let find = |n: &str| m.tensors.iter().find(|t| t.name == n).unwrap();
    let results: Vec<Energy> = p
        .energy_jobs()
        .iter()
        .map(|job| {
            let ts: Vec<&TensorEntry> = job.reads().into_iter().map(find).collect();
            let vs: Vec<Vec<f32>> = ts.iter().map(|t| values(t)).collect();
            let vs: Vec<&[f32]> = vs.iter().map(Vec::as_slice).collect();
            p.energy(job, &ts, &vs).unwrap()
        })
        .collect();
    let stream = p.stream(m, results).unwrap();
    let preds = (p.round_trip_jobs(m, |_| true).iter())
        .map(|job| {
            let t = &m.tensors[job.tensor];
            p.predict(&stream, job, t, &values(t)).unwrap()
        })
        .collect();
    (stream, preds)
}

fn predictor(m: &Model) -> Predictor<'static> {
    Predictor::new(m, &[GgmlType::Q4_0], Calibration::DATA_FREE, None).unwrap()
}

fn method(preds: &[Prediction], name: &str) -> Option<Method> {
    preds.iter().find(|p| p.name == name).map(|p| p.method)
}

#[test]
fn shapes_are_read_under_each_architectures_keys() {
    for arch in ["llama", "qwen2", "gemma3"] {
        let s = Shape::of(&model(arch)).unwrap();
        assert_eq!((s.n_layer, s.n_head, s.n_head_kv, s.family.arch), (2, 4, 2, arch));
    }
    let g = Family::of("gemma3").unwrap();
    assert!(g.post_norms && g.qk_norms && g.embedding_scaled && g.activation == Activation::Gelu);
    assert_eq!(Family::of("qwen2").unwrap().activation, Activation::Silu);
    let e = Shape::of(&model("deepseek2")).unwrap_err().to_string();
    assert!(e.contains("\"deepseek2\"") && e.contains("covers llama, qwen2"), "{e}");
    // A count under another architecture's name is not read.
    let mut m = model("qwen2");
    m.kvs.retain(|(k, _)| k != "qwen2.block_count");
    m.kvs.push(("llama.block_count".into(), OwnedValue::Scalar(MetaValue::U32(2))));
    assert!(Shape::of(&m).unwrap_err().to_string().contains("qwen2.block_count"));
    assert!(FAMILIES.iter().all(|f| Family::of(f.arch) == Some(*f)));
}

#[test]
fn llama_and_qwen2_take_the_residual_model_for_every_block_weight() {
    for arch in ["llama", "qwen2"] {
        let m = model(arch);
        let p = predictor(&m);
        assert!(p.residual.is_some() && p.others.is_empty(), "{arch}");
        let (_, preds) = run(&m, &p);
        assert_eq!(preds.len(), 14, "{arch}");
        assert!(preds.iter().all(|x| x.method == Method::Residual && x.options[0].relative.is_some()), "{arch}");
    }
}

#[test]
fn gemma3_post_norms_scale_what_each_half_adds() {
    let m = model("gemma3");
    let p = predictor(&m);
    let (stream, preds) = run(&m, &p);
    // Queries and keys behind the per-head norms: the weighted error; the rest: the model.
    for (kind, want) in [("attn_q", Method::WeightedError), ("attn_k", Method::WeightedError)]
        .into_iter()
        .chain(["attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"].map(|k| (k, Method::Residual)))
    {
        assert_eq!(method(&preds, &format!("blk.1.{kind}.weight")), Some(want), "{kind}");
        assert_eq!(p.method_of(&m, &format!("blk.0.{kind}.weight")), Some(want), "{kind}");
    }
    // The projections' rows each by g_r²/ms(y); the rest of the half by the mean.
    let b = &stream.blocks[0];
    let gains = values(m.tensors.iter().find(|t| t.name == "blk.0.post_attention_norm.weight").unwrap());
    let ms = b.scales[Kind::AttnOutput.index()].len();
    assert_eq!((ms, b.scales[Kind::AttnV.index()].len(), b.scales[Kind::FfnUp.index()].len()), (64, 1, 1));
    let ratio = b.scales[Kind::AttnOutput.index()][3] / b.scales[Kind::AttnOutput.index()][5];
    let sq = |i: usize| f64::from(gains[i]) * f64::from(gains[i]);
    assert!((ratio - sq(3) / sq(5)).abs() < 1e-12, "{ratio}");
    // The half adds its gains' energy to the stream.
    let g2: f64 = gains.iter().map(|&g| f64::from(g) * f64::from(g)).sum();
    assert!((b.layer.attn_energy - g2).abs() < 1e-9 * g2);
    // An error before a post-norm is judged against the output it is normalized with.
    let p0 = residual::post_norm(8.0, &[1.0, 2.0]).unwrap();
    assert_eq!((p0.rows, p0.mean, p0.energy), (vec![0.25, 1.0], 0.625, 5.0));
    assert!(residual::post_norm(0.0, &[1.0]).is_err());
}

#[test]
fn deepseek2_takes_the_weighted_error_with_its_norms_columns() {
    let m = model("deepseek2");
    let p = predictor(&m);
    assert!(p.residual.is_none());
    let (stream, preds) = run(&m, &p);
    // Every block weight llama-quantize quantizes, the router and the norms left out.
    let names: Vec<&str> = preds.iter().map(|x| x.name.as_str()).collect();
    assert_eq!(names.len(), 5 + 3 + 5 + 6, "{names:?}");
    assert!(!names.iter().any(|n| n.contains("gate_inp") || n.contains("norm")), "{names:?}");
    assert!(preds.iter().all(|x| x.method == Method::WeightedError && x.options[0].relative.is_none()));
    let exps = preds.iter().find(|x| x.name == "blk.1.ffn_up_exps.weight").unwrap();
    assert_eq!((exps.kind.as_str(), exps.dims.as_slice()), ("ffn_up_exps", &[64, 32, 4][..]));
    // Data-free columns: the feeding norm's gains squared, or uniform.
    let norm_of = |name: &str| p.others.iter().find(|o| m.tensors[o.tensor].name == name).unwrap().norm.clone();
    assert_eq!(norm_of("blk.0.attn_q_b.weight").as_deref(), Some("blk.0.attn_q_a_norm.weight"));
    assert_eq!(norm_of("blk.1.ffn_gate_exps.weight").as_deref(), Some("blk.1.ffn_norm.weight"));
    assert_eq!(norm_of("blk.0.attn_output.weight"), None);
    let o = p.others.iter().position(|o| m.tensors[o.tensor].name == "blk.0.attn_kv_b.weight").unwrap();
    let t = &m.tensors[p.others[o].tensor];
    let w = values(t);
    let cols = stream.others[o].clone().unwrap();
    assert_eq!(
        cols,
        residual::gain_squares(&values(m.tensors.iter().find(|x| x.name == "blk.0.attn_kv_a_norm.weight").unwrap()))
    );
    let q = round_trip(GgmlType::Q4_0, &w, 32, None).unwrap();
    let e: f64 = row_errors(&w, &q, 32, &cols).unwrap().iter().sum();
    let got = preds.iter().find(|x| x.name == t.name).unwrap();
    assert_eq!(got.options[0].weighted_error, e);
    let want = Calibration::WEIGHTED_ERROR_DATA_FREE.predict_mean(e);
    assert_eq!(got.options[0].predicted_kld, want);
}

#[test]
fn blocks_without_the_seven_weights_fall_back_to_the_weighted_error() {
    let mut m = model("llama");
    m.tensors.retain(|t| t.name != "blk.1.attn_k.weight");
    let p = predictor(&m);
    assert!(p.residual.is_none());
    let (_, preds) = run(&m, &p);
    assert_eq!(preds.len(), 13);
    assert!(preds.iter().all(|x| x.method == Method::WeightedError));
    // An architecture no family covers: the same.
    let mut m = model("llama");
    m.kvs[0].1 = OwnedValue::Str(b"olmo".to_vec().into());
    assert!(predictor(&m).residual.is_none());
}

#[test]
fn gaussian_expectations_of_gelu() {
    // gelu(g) → relu(g) for a wide gate: E = var/2; gelu' → step: 1/2.
    let wide = residual::gauss_for_tests(Activation::Gelu, 1e4, false);
    assert!((wide / 5e3 - 1.0).abs() < 0.01, "{wide}");
    assert!((residual::gauss_for_tests(Activation::Gelu, 1e4, true) - 0.5).abs() < 0.01);
    // A narrow gate: gelu(g) ≈ g/2, gelu'(g) ≈ 1/2.
    assert!((residual::gauss_for_tests(Activation::Gelu, 1e-6, false) / 0.25e-6 - 1.0).abs() < 1e-3);
    assert!((residual::gauss_for_tests(Activation::Gelu, 1e-6, true) - 0.25).abs() < 1e-6);
}
