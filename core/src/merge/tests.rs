use super::config::{hf_name, Config, Scalar, Setting};
use super::math::{linear, slerp, task_arithmetic, Part, Settings};
use super::Method;
use crate::random::normal;
use alloc::string::ToString;
use alloc::vec;
use alloc::vec::Vec;
use serde_json::json;

fn values(seed: u64, n: usize, scale: f32) -> Vec<f32> {
    (0..n as u64).map(|i| normal(seed, i) * scale).collect()
}

fn settings(method: Method) -> Settings {
    Settings { normalize: method.default_normalize(), rescale: method.default_rescale(), lambda: 1.0, seed: 7 }
}

#[test]
fn linear_of_a_model_with_itself_is_the_model() {
    let a = values(1, 300, 1.0);
    let mut out = vec![0.0; a.len()];
    let parts = [Part { values: &a, weight: 0.3, density: 1.0 }, Part { values: &a, weight: 0.7, density: 1.0 }];
    linear("w", &parts, true, &mut out).unwrap();
    assert_eq!(out, a);
    // Weights that cancel are refused under normalize, not divided by.
    let parts = [Part { values: &a, weight: 1.0, density: 1.0 }, Part { values: &a, weight: -1.0, density: 1.0 }];
    assert!(linear("w", &parts, true, &mut out).unwrap_err().to_string().contains("sum to 0"));
}

#[test]
fn slerp_ends_are_its_endpoints_and_colinear_vectors_are_lerped() {
    let (a, b) = (values(2, 257, 1.0), values(3, 257, 2.0));
    let mut out = vec![0.0; a.len()];
    slerp("w", 0.0, &a, &b, &mut out).unwrap();
    assert_eq!(out, a);
    slerp("w", 1.0, &a, &b, &mut out).unwrap();
    assert_eq!(out, b);
    // b = 2a: colinear, so the midpoint is (a + 2a) / 2 = 1.5a, not the arc's.
    let twice: Vec<f32> = a.iter().map(|x| 2.0 * x).collect();
    slerp("w", 0.5, &a, &twice, &mut out).unwrap();
    for (o, x) in out.iter().zip(&a) {
        assert_eq!(*o, (1.5 * f64::from(*x)) as f32);
    }
}

#[test]
fn ties_of_one_model_at_density_one_is_task_arithmetic() {
    let base = values(4, 512, 1.0);
    let tuned: Vec<f32> = base.iter().zip(values(5, 512, 0.01)).map(|(b, d)| b + d).collect();
    let part = [Part { values: &tuned, weight: 1.0, density: 1.0 }];
    let (mut ties, mut ta) = (vec![0.0; 512], vec![0.0; 512]);
    task_arithmetic("w", Method::Ties, &base, &part, &settings(Method::Ties), &mut ties).unwrap();
    task_arithmetic("w", Method::TaskArithmetic, &base, &part, &settings(Method::TaskArithmetic), &mut ta).unwrap();
    assert_eq!(ties, ta);
}

#[test]
fn ties_keeps_the_largest_deltas_and_the_elected_sign() {
    let base = vec![0.0f32; 6];
    let a = [1.0f32, -3.0, 0.5, 2.0, 0.0, -1.0];
    let b = [-2.0f32, -1.0, 0.5, 4.0, 1.0, 1.0];
    let parts = [Part { values: &a, weight: 1.0, density: 0.5 }, Part { values: &b, weight: 1.0, density: 0.5 }];
    let mut out = vec![0.0; 6];
    task_arithmetic("w", Method::Ties, &base, &parts, &settings(Method::Ties), &mut out).unwrap();
    // a keeps -3, 2 and the 1 at index 0 (before the equal one at 5); b keeps 4, -2 and the
    // -1 at index 1 (before 4 and 5). Sums [-1, -4, 0, 6, 0, 0] elect the signs; each value
    // is the agreeing deltas over their weights.
    assert_eq!(out, [-2.0, -2.0, 0.0, 3.0, 0.0, 0.0]);
}

#[test]
fn dare_drops_by_the_seed_and_rescales_to_the_l1_norm() {
    let base = values(6, 4096, 1.0);
    let tuned: Vec<f32> = base.iter().zip(values(7, 4096, 0.1)).map(|(b, d)| b + d).collect();
    let part = [Part { values: &tuned, weight: 1.0, density: 0.25 }];
    let s = settings(Method::DareLinear);
    let (mut x, mut y) = (vec![0.0; 4096], vec![0.0; 4096]);
    task_arithmetic("w", Method::DareLinear, &base, &part, &s, &mut x).unwrap();
    task_arithmetic("w", Method::DareLinear, &base, &part, &s, &mut y).unwrap();
    assert_eq!(x, y);
    let kept = x.iter().zip(&base).filter(|(o, b)| o != b).count();
    assert!((900..1150).contains(&kept), "{kept} of 4096 kept at density 0.25");
    let l1 = |v: &[f32]| v.iter().zip(&base).map(|(a, b)| f64::from((a - b).abs())).sum::<f64>();
    assert!((l1(&x) / l1(&tuned) - 1.0).abs() < 1e-3);
    task_arithmetic("w", Method::DareLinear, &base, &part, &Settings { seed: 8, ..s }, &mut y).unwrap();
    assert_ne!(x, y);
    let bad = [Part { values: &tuned, weight: 1.0, density: 1.5 }];
    assert!(task_arithmetic("w", Method::DareLinear, &base, &bad, &s, &mut y).is_err());
}

#[test]
fn config_reads_filters_gradients_and_refuses_by_key() {
    let c = Config::from_json(&json!({
        "merge_method": "slerp",
        "base_model": "a.gguf",
        "models": [{"model": "a.gguf"}, {"model": "b.gguf"}],
        "parameters": {"t": [{"filter": "self_attn", "value": [0.0, 1.0]}, {"value": 0.25}]},
        "dtype": "float16",
    }))
    .unwrap();
    assert_eq!(c.merged(), [1]);
    assert_eq!(c.resolve("blk.2.attn_q.weight", Some(5)).unwrap().t, 0.5);
    assert_eq!(c.resolve("blk.2.ffn_up.weight", Some(5)).unwrap().t, 0.25);
    assert_eq!(hf_name("blk.2.attn_q.weight").as_deref(), Some("model.layers.2.self_attn.q_proj.weight"));
    assert_eq!(Setting::Gradient(vec![1.0, 3.0]).evaluate("x", 0.25), Some(Scalar::Number(1.5)));
    let refused = |v: serde_json::Value, key: &str| {
        let e = Config::from_json(&v).unwrap_err().to_string();
        assert!(e.contains(key), "{e}");
    };
    refused(json!({"merge_method": "nuslerp", "models": ["a"]}), "merge_method");
    refused(json!({"merge_method": "linear", "models": ["a"], "slices": []}), "slices");
    refused(json!({"merge_method": "ties", "models": ["a"]}), "base_model");
    refused(
        json!({"merge_method": "ties", "base_model": "b", "models": [{"model": "a", "parameters": {"gamma": 1}}]}),
        "models[0].parameters.gamma",
    );
    let c = Config::from_json(
        &json!({"merge_method": "ties", "base_model": "b", "models": [{"model": "a", "parameters": {"weight": 1, "density": 0}}]}),
    )
    .unwrap();
    assert!(c.resolve("w", None).unwrap_err().to_string().contains("density"));
}

#[test]
fn streamed_merges_equal_the_whole_ones_bit_for_bit_across_spans() {
    use super::math::{linear_streamed, task_arithmetic_streamed, Input, Share, SPAN_VALUES};
    // Two spans of rows of 100 values (the second one short), and a third model.
    let n = SPAN_VALUES / 3 * 2 + 1_000;
    let base = values(20, n, 1.0);
    let tuned: Vec<Vec<f32>> =
        (0..3u64).map(|k| base.iter().zip(values(21 + k, n, 0.01)).map(|(b, d)| b + d).collect()).collect();
    let ws = [(0.7, 0.5), (-0.4, 0.3), (0.5, 0.9)];
    let parts: Vec<Part<'_>> =
        tuned.iter().zip(ws).map(|(v, (weight, density))| Part { values: v, weight, density }).collect();
    let shares: Vec<Share> = ws.iter().map(|&(weight, density)| Share { weight, density }).collect();
    let mut reads = 0;
    let mut read = |input: Input, range: core::ops::Range<usize>, into: &mut Vec<f32>| {
        reads += 1;
        let v = match input {
            Input::Base => &base,
            Input::Part(j) => &tuned[j],
        };
        into.clear();
        into.extend_from_slice(&v[range]);
        Ok(())
    };
    let (mut whole, mut streamed) = (vec![0.0; n], vec![0.0; n]);
    linear("w", &parts, true, &mut whole).unwrap();
    linear_streamed("w", &shares, true, 100, &mut read, &mut streamed).unwrap();
    assert_eq!(
        whole.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
        streamed.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
    );
    for method in [Method::TaskArithmetic, Method::Ties, Method::DareLinear, Method::DareTies] {
        let s = Settings { rescale: true, ..settings(method) };
        task_arithmetic("w", method, &base, &parts, &s, &mut whole).unwrap();
        task_arithmetic_streamed("w", method, &shares, &s, 100, &mut read, &mut streamed).unwrap();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&whole), bits(&streamed), "{method:?}");
    }
    // Each model was read a span at a time: two spans of three models per merge, and more.
    assert!(reads > 5 * 2 * 3, "{reads} reads");
}
