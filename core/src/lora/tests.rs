use super::*;
use crate::gguf::MetaValue;
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

fn adapter(alpha: Option<f32>, tensors: Vec<TensorEntry>) -> Model {
    let mut kvs = vec![
        ("general.type".into(), OwnedValue::string("adapter")),
        ("general.architecture".into(), OwnedValue::string("llama")),
        ("adapter.type".into(), OwnedValue::string("lora")),
    ];
    if let Some(a) = alpha {
        kvs.push((KEY_ALPHA.into(), OwnedValue::Scalar(MetaValue::F32(a))));
    }
    Model { version: 3, kvs, tensors }
}

#[test]
fn pairs_are_read_in_both_layouts() {
    let m = adapter(
        Some(8.0),
        vec![
            entry("token_embd.weight.lora_a", GgmlType::F32, &[4, 100]),
            entry("token_embd.weight.lora_b", GgmlType::F32, &[4, 64]),
            entry("blk.0.attn_q.weight.lora_b", GgmlType::F16, &[4, 32]),
            entry("blk.0.attn_q.weight.lora_a", GgmlType::F16, &[64, 4]),
            entry("blk.0.attn_norm.weight", GgmlType::F32, &[64]),
        ],
    );
    let a = Adapter::read(&m);
    assert_eq!(a.problems, vec![]);
    assert_eq!(a.skipped, vec![4]);
    assert_eq!(a.alpha, Some(8.0));
    let p = &a.pairs;
    assert_eq!((p[0].rank, p[0].rows, p[0].cols, p[0].embedding), (4, 100, 64, true));
    assert_eq!((p[1].target.as_str(), p[1].a, p[1].b), ("blk.0.attn_q.weight", 3, 2));
    assert_eq!((p[1].rank, p[1].rows, p[1].cols, p[1].embedding), (4, 32, 64, false));
    assert_eq!(p[1].shape(), [64, 32]);
    assert_eq!(a.scale(4, 1.0), 2.0);
    assert_eq!(a.scale(4, 0.5), 1.0);
}

#[test]
fn problems_are_named() {
    let m = adapter(
        None,
        vec![
            entry("blk.0.attn_q.weight.lora_a", GgmlType::F32, &[64, 4]),
            entry("blk.0.attn_k.weight.lora_a", GgmlType::F32, &[64, 4]),
            entry("blk.0.attn_k.weight.lora_b", GgmlType::F32, &[8, 16]),
            entry("blk.0.attn_v.weight.lora_a", GgmlType::F32, &[64, 0]),
            entry("blk.0.attn_v.weight.lora_b", GgmlType::F32, &[0, 16]),
            entry("blk.0.attn_q.weight", GgmlType::F32, &[64, 16]),
            entry("blk.0.ffn_up.weight.lora_a", GgmlType::Q4_0, &[64, 4]),
            entry("blk.0.ffn_up.weight.lora_b", GgmlType::F32, &[4, 96]),
            entry("blk.0.ffn_down.weight.lora_a", GgmlType::F32, &[4, 8]),
            entry("blk.0.ffn_down.weight.lora_b", GgmlType::F32, &[8, 16]),
        ],
    );
    let a = Adapter::read(&m);
    let said: Vec<String> = a.problems.iter().map(Problem::sentence).collect();
    assert!(said[0].starts_with("adapter.lora.alpha: missing"), "{said:?}");
    assert!(said.iter().any(|s| s.starts_with("blk.0.attn_q.weight: not a LoRA tensor")), "{said:?}");
    assert!(said.iter().any(|s| s == "blk.0.attn_q.weight: lora_b is missing: half a pair"), "{said:?}");
    assert!(said.iter().any(|s| s.starts_with("blk.0.attn_k.weight: lora_a [64, 4] and lora_b [8, 16] disagree")));
    assert!(said.iter().any(|s| s.starts_with("blk.0.attn_v.weight: rank 0")), "{said:?}");
    assert!(said.iter().any(|s| s.starts_with("blk.0.ffn_up.weight.lora_a: type Q4_0 is not one")), "{said:?}");
    assert!(
        said.iter().any(|s| s.starts_with("blk.0.ffn_down.weight: rank 8 above the update's smaller side")),
        "{said:?}"
    );
    assert_eq!(a.pairs.len(), 1);
    assert!(a.first_error().unwrap().starts_with("adapter.lora.alpha"));
    // α absent: llama.cpp's rule is then s alone.
    assert_eq!(a.scale(4, 0.5), 0.5);
}

#[test]
fn a_base_is_checked_against_the_pairs() {
    let a = Adapter::read(&adapter(
        Some(4.0),
        vec![
            entry("blk.0.attn_q.weight.lora_a", GgmlType::F32, &[64, 4]),
            entry("blk.0.attn_q.weight.lora_b", GgmlType::F32, &[4, 32]),
            entry("blk.0.attn_k.weight.lora_a", GgmlType::F32, &[64, 4]),
            entry("blk.0.attn_k.weight.lora_b", GgmlType::F32, &[4, 16]),
            entry("blk.9.attn_k.weight.lora_a", GgmlType::F32, &[64, 4]),
            entry("blk.9.attn_k.weight.lora_b", GgmlType::F32, &[4, 16]),
        ],
    ));
    let base = Model {
        version: 3,
        kvs: vec![("general.architecture".into(), OwnedValue::string("qwen2"))],
        tensors: vec![
            entry("blk.0.attn_q.weight", GgmlType::Q4_0, &[64, 32]),
            entry("blk.0.attn_k.weight", GgmlType::Q4_0, &[64, 32]),
        ],
    };
    let said: Vec<String> = a.against(&base).iter().map(Problem::sentence).collect();
    assert_eq!(
        said,
        vec![
            "general.architecture: the adapter is for \"llama\", the base is \"qwen2\"",
            "blk.0.attn_k.weight: the pair makes a [64, 16] update, the base's weight is [64, 32]",
            "blk.9.attn_k.weight: the base has no such weight",
        ]
    );
    let tied = Adapter::read(&adapter(
        Some(4.0),
        vec![
            entry("token_embd.weight.lora_a", GgmlType::F32, &[4, 100]),
            entry("token_embd.weight.lora_b", GgmlType::F32, &[4, 64]),
        ],
    ));
    let mut base = base;
    base.kvs = vec![("general.architecture".into(), OwnedValue::string("llama"))];
    base.tensors.push(entry("token_embd.weight", GgmlType::Q4_0, &[64, 100]));
    let said = tied.against(&base);
    assert_eq!(said.len(), 1);
    assert!(said[0].message.starts_with("the base ties its output to token_embd"), "{said:?}");
    assert_eq!(said[0].severity, Severity::Error);
    assert_eq!(tied.fits(&base), vec![], "merging it is sound");
    base.tensors.push(entry("output.weight", GgmlType::Q4_0, &[64, 100]));
    assert_eq!(tied.against(&base), vec![]);
    let said = a.against(&adapter(Some(1.0), vec![]));
    assert!(said[0].message.contains("itself an adapter"));
}

/// Values of a known matrix, as f32 bytes.
fn bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn values(n: usize, seed: u64) -> Vec<f32> {
    (0..n as u64).map(|i| crate::random::normal(seed, i)).collect()
}

/// ΔW computed the obvious way from numpy-shaped B (n_out × r) and A (r × n_in).
fn dense(b: &[f32], a: &[f32], n_out: usize, r: usize, n_in: usize, scale: f64) -> Vec<f32> {
    let mut d = vec![0f32; n_out * n_in];
    for o in 0..n_out {
        for j in 0..n_in {
            let s: f64 = (0..r).map(|k| f64::from(b[o * r + k]) * f64::from(a[k * n_in + j])).sum();
            d[o * n_in + j] = (scale * s) as f32;
        }
    }
    d
}

#[test]
fn factors_give_b_times_a_in_both_layouts() {
    let (n_out, r, n_in) = (7, 3, 5);
    let (a, b) = (values(r * n_in, 1), values(n_out * r, 2));
    let want = dense(&b, &a, n_out, r, n_in, 0.5);
    let pair = Pair { target: "w".into(), a: 0, b: 1, rank: 3, rows: 7, cols: 5, embedding: false };
    let f = Factors::of(&pair, GgmlType::F32, &bytes(&a), GgmlType::F32, &bytes(&b), 0.5).unwrap();
    let got: Vec<f32> = (0..n_out * n_in).map(|x| f.element(x / n_in, x % n_in)).collect();
    assert_eq!(got, want);
    let fro = libm::sqrt(want.iter().map(|&x| f64::from(x) * f64::from(x)).sum::<f64>());
    assert!((f.frobenius() - fro).abs() < 1e-6 * fro, "{} {fro}", f.frobenius());
    assert_eq!(f.halves(false), (a.clone(), b.clone()));
    let mut w = vec![1f32; n_out * n_in];
    f.add_to(0, &mut w[..2 * n_in]).unwrap();
    f.add_to(2, &mut w[2 * n_in..]).unwrap();
    for (x, y) in w.iter().zip(&want) {
        assert!((x - 1.0 - y).abs() < 1e-5, "{x} {y}");
    }
    assert!(f.add_to(6, &mut w[..2 * n_in]).is_err());

    // token_embd: lora_a numpy (n_vocab, r), lora_b numpy (n_embd, r); ΔW = lora_a · lora_bᵀ.
    let (n_vocab, n_embd) = (6, 4);
    let (la, lb) = (values(n_vocab * r, 3), values(n_embd * r, 4));
    let pair = Pair { target: "token_embd.weight".into(), a: 0, b: 1, rank: 3, rows: 6, cols: 4, embedding: true };
    let f = Factors::of(&pair, GgmlType::F32, &bytes(&la), GgmlType::F32, &bytes(&lb), 1.0).unwrap();
    let lbt = super::factors::transpose_for_tests(&lb, n_embd, r);
    let got: Vec<f32> = (0..n_vocab * n_embd).map(|x| f.element(x / n_embd, x % n_embd)).collect();
    assert_eq!(got, dense(&la, &lbt, n_vocab, r, n_embd, 1.0));
    assert_eq!(f.halves(true), (la, lb));
    // The wrong size of half is refused.
    assert!(
        Factors::of(&pair, GgmlType::F32, &bytes(&values(5, 1)), GgmlType::F32, &bytes(&values(12, 1)), 1.0).is_err()
    );
}

/// An adapter of α / r = 4 holds the same ΔW as scale 1 when each factor is halved.
#[test]
fn rescaling_keeps_the_product() {
    let (a, b) = (values(3 * 5, 7), values(7 * 3, 8));
    let pair = Pair { target: "w".into(), a: 0, b: 1, rank: 3, rows: 7, cols: 5, embedding: false };
    let f = Factors::of(&pair, GgmlType::F32, &bytes(&a), GgmlType::F32, &bytes(&b), 1.0).unwrap();
    let g = f.clone().rescaled(4.0);
    assert_eq!(g.scale, 4.0);
    assert_eq!(g.l, f.l.iter().map(|x| x * 0.5).collect::<Vec<_>>());
    assert_eq!(g.r, f.r.iter().map(|x| x * 0.5).collect::<Vec<_>>());
    for (i, j) in [(0, 0), (3, 4), (6, 2)] {
        assert!((g.element(i, j) - f.element(i, j)).abs() <= 1e-6 * f.element(i, j).abs().max(1.0));
    }
}

#[test]
fn each_pair_finds_its_base_weight_by_name() {
    let a = Adapter::read(&adapter(
        Some(4.0),
        vec![
            entry("blk.1.attn_q.weight.lora_a", GgmlType::F32, &[64, 4]),
            entry("blk.1.attn_q.weight.lora_b", GgmlType::F32, &[4, 32]),
            entry("blk.0.ffn_up.weight.lora_a", GgmlType::F32, &[64, 4]),
            entry("blk.0.ffn_up.weight.lora_b", GgmlType::F32, &[4, 96]),
            entry("blk.9.attn_k.weight.lora_a", GgmlType::F32, &[64, 4]),
            entry("blk.9.attn_k.weight.lora_b", GgmlType::F32, &[4, 16]),
        ],
    ));
    let base = Model {
        version: 3,
        kvs: vec![],
        tensors: vec![
            entry("blk.0.ffn_up.weight", GgmlType::F16, &[64, 96]),
            entry("blk.1.attn_q.weight", GgmlType::F16, &[64, 32]),
            // Of two alike, the first (as a scan would find).
            entry("blk.1.attn_q.weight", GgmlType::F16, &[64, 32]),
        ],
    };
    assert_eq!(a.base_weights(&base), vec![Some(1), Some(0), None]);
    let fits: Vec<String> = a.fits(&base).iter().map(Problem::sentence).collect();
    assert!(fits.contains(&"blk.9.attn_k.weight: the base has no such weight".into()), "{fits:?}");
}
