use super::*;
use crate::anatomy::Group;
use crate::ggml_type::GgmlType;
use crate::quant::quantize::quantize;
use alloc::vec;

fn entry(name: &str, ty: GgmlType, dims: &[u64]) -> TensorEntry {
    let n: u64 = dims.iter().product();
    TensorEntry {
        name: name.into(),
        ty,
        dims: dims.to_vec(),
        n_elements: n,
        n_bytes: n / ty.block_size() as u64 * ty.type_size() as u64,
        file: 0,
        offset: 0,
    }
}

fn model(ts: Vec<TensorEntry>) -> Model {
    Model { version: 3, kvs: Vec::new(), tensors: ts }
}

#[test]
fn names_pair_in_a_s_order_and_the_rest_is_listed() {
    let a = model(vec![
        entry("x", GgmlType::F32, &[4]),
        entry("renamed_a", GgmlType::F32, &[4]),
        entry("reshaped", GgmlType::F32, &[4, 2]),
        entry("y", GgmlType::F32, &[2]),
    ]);
    let b = model(vec![
        entry("z_new", GgmlType::F32, &[1]),
        entry("y", GgmlType::F16, &[2]),
        entry("reshaped", GgmlType::F32, &[2, 4]),
        entry("renamed_b", GgmlType::F32, &[4]),
        entry("x", GgmlType::F32, &[4]),
    ]);
    let p = pair(&a, &b);
    assert_eq!(p.pairs, [(0, 4), (3, 1)]);
    assert_eq!(p.only_in_a, ["renamed_a"]);
    assert_eq!(p.only_in_b, ["z_new", "renamed_b"]);
    assert_eq!(p.shape_mismatch, [ShapeMismatch { name: "reshaped".into(), a: vec![4, 2], b: vec![2, 4] }]);
}

#[test]
fn figures_follow_the_formulas() {
    let a = vec![1.0f32, 2.0, -3.0, f32::NAN, 0.5];
    let b = vec![1.0f32, 2.5, -2.0, 7.0, f32::INFINITY];
    let f = figures(a.clone(), b.clone()).unwrap();
    let (x, y) = ([1.0f64, 2.0, -3.0], [1.0f64, 2.5, -2.0]);
    let dot: f64 = x.iter().zip(&y).map(|(p, q)| p * q).sum();
    let n = |v: &[f64]| v.iter().map(|p| p * p).sum::<f64>().sqrt();
    let diff: Vec<f64> = x.iter().zip(&y).map(|(p, q)| q - p).collect();
    assert_eq!(f.dropped, 2);
    assert_eq!(f.sampled, 5);
    assert!((f.cos.unwrap() - dot / (n(&x) * n(&y))).abs() < 1e-15);
    assert!((f.rel_l2.unwrap() - n(&diff) / n(&x)).abs() < 1e-15);
    assert_eq!(f.max_abs, 1.0);
    let (ta, tb) = (measure_values(a).theta, measure_values(b).theta);
    assert_eq!(f.d_theta(), tb - ta);
}

#[test]
fn zero_sides_give_null_figures_and_mismatched_lengths_an_error() {
    let f = figures(vec![0.0; 4], vec![1.0; 4]).unwrap();
    assert_eq!((f.cos, f.rel_l2, f.max_abs), (None, None, 1.0));
    let f = figures(vec![1.0; 4], vec![0.0; 4]).unwrap();
    assert_eq!((f.cos, f.rel_l2), (None, Some(1.0)));
    let f = figures(vec![f32::NAN; 3], vec![1.0; 3]).unwrap();
    assert_eq!((f.cos, f.rel_l2, f.max_abs, f.dropped), (None, None, 0.0, 3));
    assert!(figures(vec![1.0; 3], vec![1.0; 4]).is_err());
}

#[test]
fn a_tensor_against_itself_is_identical_with_cos_one() {
    let vals: Vec<f32> = (0..256 * 600).map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0).collect();
    let mut bytes = Vec::new();
    quantize(GgmlType::Q8_0, &vals, &mut bytes).unwrap();
    let t = entry("blk.0.ffn_up.weight", GgmlType::Q8_0, &[256, 600]);
    let r = compare_slices(&t, &bytes, &t, &bytes).unwrap();
    assert!(r.identical);
    assert!((r.cos.unwrap() - 1.0).abs() < 1e-15);
    assert_eq!((r.rel_l2, r.max_abs, r.d_theta), (Some(0.0), Some(0.0), Some(0.0)));
    assert_eq!(r.sampled, crate::zmeasure::SAMPLE_SIZE as u64);
    // The same values in another type: not identical, but close.
    let f32_bytes: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
    let u = entry("blk.0.ffn_up.weight", GgmlType::F32, &[256, 600]);
    let r = compare_slices(&u, &f32_bytes, &t, &bytes).unwrap();
    assert!(!r.identical);
    assert!(r.cos.unwrap() > 0.999 && r.cos.unwrap() < 1.0);
}

#[test]
fn experts_are_compared_one_by_one() {
    let (d0, d1, e) = (64u64, 3u64, 4u64);
    let vals: Vec<f32> = (0..d0 * d1 * e).map(|i| (i as f32 * 0.37).sin()).collect();
    let mut other = vals.clone();
    // Change expert 2 only.
    for v in &mut other[(2 * d0 * d1) as usize..(3 * d0 * d1) as usize] {
        *v *= 1.5;
    }
    let bytes = |v: &[f32]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
    let t = entry("blk.0.ffn_up_exps.weight", GgmlType::F32, &[d0, d1, e]);
    let r = compare_slices(&t, &bytes(&vals), &t, &bytes(&other)).unwrap();
    let ex = r.experts.unwrap();
    assert_eq!(ex.iter().map(|x| x.identical).collect::<Vec<_>>(), [true, true, false, true]);
    assert!((ex[2].rel_l2.unwrap() - 0.5).abs() < 1e-6, "{:?}", ex[2]);
    assert_eq!(ex[0].rel_l2, Some(0.0));
    // A 2-dim tensor or one without `_exps` is not an expert tensor.
    assert_eq!(ExpertLayout::of(&entry("blk.0.ffn_up_exps.weight", GgmlType::F32, &[8, 8])).unwrap(), None);
    assert_eq!(ExpertLayout::of(&entry("blk.0.ffn_up.weight", GgmlType::F32, &[8, 8, 2])).unwrap(), None);
    // Sizes that do not divide are an error, not a panic.
    let mut bad = entry("blk.0.ffn_up_exps.weight", GgmlType::F32, &[8, 8, 2]);
    bad.n_bytes += 4;
    assert!(ExpertLayout::of(&bad).is_err());
    let many = entry("blk.0.ffn_up_exps.weight", GgmlType::F32, &[1, 1, crate::limits::MAX_EXPERTS + 1]);
    assert!(ExpertLayout::of(&many).is_err());
}

#[test]
fn the_report_counts_summarizes_and_orders() {
    let p = |name: &str, identical: bool, cos: Option<f64>, rel: Option<f64>| PairReport {
        cos,
        rel_l2: rel,
        ..PairReport::new(
            &entry(name, GgmlType::F32, &[4]),
            &entry(name, GgmlType::F32, &[4]),
            identical,
            Some(&Figures { cos, rel_l2: rel, max_abs: 0.0, theta_a: 0.0, theta_b: 0.0, sampled: 4, dropped: 0 }),
            None,
        )
    };
    let rows = vec![
        p("blk.0.attn_q.weight", true, Some(1.0), Some(0.0)),
        p("blk.0.attn_k.weight", false, Some(0.9), Some(0.3)),
        p("blk.0.ffn_up.weight", false, Some(0.9), Some(0.5)),
        p("blk.1.ffn_up.weight", false, None, None),
        p("blk.1.ffn_down.weight", false, Some(0.99), Some(0.1)),
    ];
    let pairing = Pairing { only_in_a: vec!["gone".into()], ..Pairing::default() };
    let side = |arch: &str| Side {
        model: "m".into(),
        architecture: Some(arch.into()),
        name: None,
        parameters: 0,
        file_bytes: 0,
        tensors: 0,
    };
    let r = CompareReport::new("organ test", side("llama"), side("qwen2"), pairing, rows);
    assert_eq!(
        r.counts,
        Counts { comparable: 5, identical: 1, changed: 4, only_in_a: 1, only_in_b: 0, shape_mismatch: 0 }
    );
    assert!(r.any_change());
    assert_eq!(
        r.most_changed,
        ["blk.0.ffn_up.weight", "blk.0.attn_k.weight", "blk.1.ffn_down.weight", "blk.1.ffn_up.weight"]
    );
    let organ = r.groups.iter().find(|g| g.group == Group::Organ).unwrap();
    assert_eq!((organ.count, organ.identical), (3, 0));
    assert_eq!(organ.cos_min, Some(0.9));
    assert!((organ.cos_mean.unwrap() - 0.945).abs() < 1e-12);
    assert!((organ.rel_l2_mean.unwrap() - 0.3).abs() < 1e-12);
    assert!(r.warnings.iter().any(|w| w.contains("llama (A) and qwen2 (B)")));
    let json = serde_json::to_string(&r).unwrap();
    assert_eq!(serde_json::from_str::<CompareReport>(&json).unwrap(), r);
}

#[test]
fn the_shortcut_for_identical_pairs_gives_the_general_figures() {
    let a: Vec<f32> = (0..5000).map(|i| ((i * 31) % 97) as f32 - 40.0).chain([f32::NAN]).collect();
    assert_eq!(figures_of_same(a.clone()), figures(a.clone(), a).unwrap());
}
