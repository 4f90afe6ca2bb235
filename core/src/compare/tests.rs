use super::meta::ValueShown;
use super::*;
use crate::anatomy::Group;
use crate::ggml_type::GgmlType;
use crate::model::OwnedValue;
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
    assert_eq!(
        p.shape_mismatch,
        [ShapeMismatch { name: "reshaped".into(), a: vec![4, 2], b: vec![2, 4], name_b: None }]
    );
}

fn kv(k: &str, v: OwnedValue) -> (String, OwnedValue) {
    (k.into(), v)
}

fn scalar(v: crate::gguf::MetaValue<'static>) -> OwnedValue {
    OwnedValue::Scalar(v)
}

#[test]
fn metadata_is_compared_key_by_key_in_full_and_shown_in_part() {
    use crate::gguf::MetaValue;
    let template = "{% for m in messages %}".repeat(10);
    let mut a = model(vec![]);
    a.kvs = vec![
        kv("general.architecture", OwnedValue::string("llama")),
        kv("general.name", OwnedValue::string("base")),
        kv("general.license", OwnedValue::string("apache-2.0")),
        kv("x.nan", scalar(MetaValue::F32(f32::NAN))),
        kv("x.count", scalar(MetaValue::U32(7))),
        kv("tokenizer.chat_template", OwnedValue::string(&template)),
        kv("tokenizer.ggml.tokens", OwnedValue::strings(&vec![String::from("a"); 20]).unwrap()),
    ];
    let mut b = a.clone();
    b.kvs.retain(|(k, _)| k != "general.license");
    b.kvs[1].1 = OwnedValue::string("finetune");
    // The same number in another type is a change; the same NaN is not.
    b.kvs[3].1 = scalar(MetaValue::U64(7));
    // Past the shown part only: the summaries read the same, the hashes differ.
    b.kvs[4].1 = OwnedValue::string(&alloc::format!("{template}!"));
    b.kvs.push(kv("organ.note", OwnedValue::string("new")));
    let d = diff_metadata(&a, &b);
    assert_eq!(d.counts.line(), "metadata: 5 keys changed (1 removed, 1 added, 3 changed)");
    assert_eq!((d.counts.keys_a, d.counts.keys_b, d.counts.same), (7, 7, 3));
    assert_eq!(d.only_in_a[0].key, "general.license");
    assert_eq!(d.only_in_a[0].value.value, "\"apache-2.0\"");
    assert_eq!(d.only_in_b[0].key, "organ.note");
    let keys: Vec<&str> = d.changed.iter().map(|c| c.key.as_str()).collect();
    assert_eq!(keys, ["general.name", "x.count", "tokenizer.chat_template"]);
    assert_eq!((d.changed[1].a.ty.as_str(), d.changed[1].b.ty.as_str()), ("UINT32", "UINT64"));
    let t = &d.changed[2];
    assert_eq!(t.a.value.split('…').next(), t.b.value.split('…').next());
    assert!(t.a.blake3.is_some() && t.a.blake3 != t.b.blake3);
    assert_eq!(diff_metadata(&a, &a).counts.line(), "metadata: the same 7 keys");
    // A file of another GGUF version is a change of the header, as gguf-dump lists it.
    let mut v2 = a.clone();
    v2.version = 2;
    let d2 = diff_metadata(&a, &v2);
    assert_eq!(d2.counts.line(), "metadata: the same 7 keys; GGUF version 3 in A, 2 in B");
    assert_eq!(d2.counts.differ(), 1);
    let tokens = ValueShown::of(&a.kvs[6].1);
    assert_eq!(tokens.ty, "[20 STRING]");
    assert!(tokens.value.ends_with(", …]") && tokens.blake3.is_some(), "{tokens:?}");
    // Hand-built arrays whose bytes do not hold their elements are shown, not trusted.
    let broken = OwnedValue::Array { elem_type: crate::gguf::ValueType::U32, len: 9, raw: vec![1u8].into() };
    assert_eq!(ValueShown::of(&broken).value, "(unreadable)");
    // The report says so, and a metadata change alone is a change.
    let side = Side::of("m", &a, 0);
    let r = CompareReport::new("t", side.clone(), side, plan(&a, &b), vec![]);
    assert!(r.any_change());
    let json = serde_json::to_string(&r).unwrap();
    assert_eq!(serde_json::from_str::<CompareReport>(&json).unwrap(), r);
    assert!(!CompareReport::new("t", Side::of("m", &a, 0), Side::of("m", &a, 0), plan(&a, &a), vec![]).any_change());
}

#[test]
fn a_cut_model_s_blocks_meet_the_blocks_they_were() {
    let blk = |n: u64| vec![entry(&alloc::format!("blk.{n}.attn_q.weight"), GgmlType::F32, &[4])];
    let mut base = model((0..5).flat_map(blk).chain([entry("output.weight", GgmlType::F32, &[4])]).collect());
    base.kvs = vec![
        kv("general.architecture", OwnedValue::string("llama")),
        kv("llama.block_count", scalar(crate::gguf::MetaValue::U32(5))),
    ];
    let mut cut = model((0..3).flat_map(blk).chain([entry("output.weight", GgmlType::F32, &[4])]).collect());
    cut.kvs = base.kvs.clone();
    cut.kvs.push(kv("organ.layers.source_block_count", scalar(crate::gguf::MetaValue::U64(5))));
    cut.kvs.push(kv(DROPPED_KEY, OwnedValue::string("1,2")));
    let p = plan(&base, &cut);
    let names = |m: &Model, ps: &[(usize, usize)], side: usize| -> Vec<String> {
        ps.iter().map(|&(i, j)| m.tensors[if side == 0 { i } else { j }].name.clone()).collect()
    };
    let l = p.layers.as_ref().unwrap();
    assert_eq!((l.dropped_a.as_deref(), l.dropped_b.as_deref()), (None, Some(&[1u64, 2][..])));
    assert_eq!(
        names(&base, &p.pairing.pairs, 0),
        ["blk.0.attn_q.weight", "blk.3.attn_q.weight", "blk.4.attn_q.weight", "output.weight"]
    );
    assert_eq!(
        names(&cut, &p.pairing.pairs, 1),
        ["blk.0.attn_q.weight", "blk.1.attn_q.weight", "blk.2.attn_q.weight", "output.weight"]
    );
    assert_eq!(p.pairing.only_in_a, ["blk.1.attn_q.weight", "blk.2.attn_q.weight"]);
    assert!(p.pairing.only_in_b.is_empty() && p.warnings.is_empty(), "{:?}", p.warnings);
    // The other way round: A is the cut.
    let q = plan(&cut, &base);
    assert_eq!(q.pairing.only_in_b, ["blk.1.attn_q.weight", "blk.2.attn_q.weight"]);
    // Both cut from the same source, by different lists: each is read as the source.
    let mut other = model((0..4).flat_map(blk).collect());
    other.kvs = vec![kv(DROPPED_KEY, OwnedValue::string("0"))];
    let both = plan(&cut, &other);
    assert_eq!(names(&cut, &both.pairing.pairs, 0), ["blk.1.attn_q.weight", "blk.2.attn_q.weight"]);
    assert_eq!(names(&other, &both.pairing.pairs, 1), ["blk.2.attn_q.weight", "blk.3.attn_q.weight"]);
    // The same list on both sides, or none: names as they are.
    assert!(plan(&cut, &cut).layers.is_none() && plan(&base, &base).layers.is_none());
    // A list that is not one: a warning, and the names as they are.
    let mut odd = cut.clone();
    odd.kvs.last_mut().unwrap().1 = OwnedValue::string("one,two");
    let w = plan(&base, &odd);
    assert!(w.layers.is_none() && w.warnings[0].contains("organ.layers.dropped"), "{:?}", w.warnings);
    // A source of another size than the base: said.
    let mut short = base.clone();
    short.kvs[1].1 = scalar(crate::gguf::MetaValue::U32(6));
    assert!(plan(&short, &cut).warnings[0].contains("cut from a model of 5 layers and A has 6"));
    // A pair across the renumbering keeps both names.
    let r = PairReport::new(&base.tensors[3], &cut.tensors[1], true, None, None);
    assert_eq!(r.name_b.as_deref(), Some("blk.1.attn_q.weight"));
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
