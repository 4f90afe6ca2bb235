use super::*;
use crate::model::TensorEntry;
use alloc::string::ToString;

fn entry(name: &str, dims: &[u64], ty: GgmlType) -> TensorEntry {
    let n_elements = dims.iter().product();
    let n_bytes = tensor_bytes(ty, dims).unwrap();
    TensorEntry { name: name.to_string(), ty, dims: dims.to_vec(), n_elements, n_bytes, file: 0, offset: 0 }
}

/// A dense llama-like model: embeddings, two layers (norms, attention, FFN), FFN of `ty`.
fn dense(arch: &str, ty: GgmlType, ff: u64) -> Model {
    let mut tensors = alloc::vec![entry("token_embd.weight", &[64, 100], GgmlType::Q8_0)];
    for l in 0..2 {
        tensors.push(entry(&format!("blk.{l}.attn_norm.weight"), &[64], GgmlType::F32));
        tensors.push(entry(&format!("blk.{l}.attn_q.weight"), &[64, 64], GgmlType::Q8_0));
        tensors.push(entry(&format!("blk.{l}.ffn_norm.weight"), &[64], GgmlType::F32));
        tensors.push(entry(&format!("blk.{l}.ffn_gate.weight"), &[64, ff], ty));
        tensors.push(entry(&format!("blk.{l}.ffn_up.weight"), &[64, ff], ty));
        tensors.push(entry(&format!("blk.{l}.ffn_down.weight"), &[ff, 64], ty));
    }
    let kvs = alloc::vec![("general.architecture".into(), OwnedValue::string(arch))];
    Model { version: 3, kvs, tensors }
}

fn named(m: &Model) -> Named<'_, TensorEntry> {
    Named { label: "m", model: m }
}

#[test]
fn stacks_each_layers_ffn_after_its_router_and_keeps_the_rest() {
    let (base, d1) = (dense("llama", GgmlType::Q4_1, 128), dense("llama", GgmlType::Q4_1, 128));
    let p = plan(&named(&base), &[named(&base), named(&d1), named(&d1)], 2, None).unwrap();
    let names: Vec<&str> = p.tensors.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names[..7],
        [
            "token_embd.weight",
            "blk.0.attn_norm.weight",
            "blk.0.attn_q.weight",
            "blk.0.ffn_norm.weight",
            "blk.0.ffn_gate_inp.weight",
            "blk.0.ffn_gate_exps.weight",
            "blk.0.ffn_up_exps.weight"
        ]
    );
    assert_eq!(p.tensors.len(), 1 + 2 * 7);
    assert_eq!((p.n_embd, p.n_expert, p.n_used, p.layers.clone()), (64, 3, 2, alloc::vec![0, 1]));
    let down = p.tensors.iter().find(|t| t.name == "blk.1.ffn_down_exps.weight").unwrap();
    assert_eq!(down.dims, [128, 64, 3]);
    assert_eq!(down.n_bytes, 3 * base.tensors.iter().find(|t| t.name == "blk.1.ffn_down.weight").unwrap().n_bytes);
    let i = base.tensors.iter().position(|t| t.name == "blk.1.ffn_down.weight").unwrap();
    assert_eq!(down.source, Source::Stack(alloc::vec![Part { tensor: i, requantize: false }; 3]));
    let router = p.tensors.iter().find(|t| t.name == "blk.1.ffn_gate_inp.weight").unwrap();
    assert_eq!((router.dims.clone(), router.ty, router.n_bytes), (alloc::vec![64, 3], GgmlType::F32, 64 * 3 * 4));
    assert_eq!(p.requantized().count(), 0);
}

#[test]
fn types_that_differ_need_a_type_and_are_requantized_to_it() {
    let (a, b) = (dense("llama", GgmlType::Q4_1, 128), dense("llama", GgmlType::Q8_0, 128));
    let bad = plan(&named(&a), &[named(&a), named(&b)], 2, None).unwrap_err();
    assert_eq!(bad.len(), 6, "{bad:?}");
    assert_eq!(bad[0].tensor, "blk.0.ffn_gate.weight");
    assert!(bad[0].reason.contains("types differ (expert 0 Q4_1, expert 1 Q8_0)"), "{bad:?}");
    let p = plan(&named(&a), &[named(&a), named(&b)], 2, Some(GgmlType::Q8_0)).unwrap();
    assert_eq!(p.requantized().count(), 6);
    let up = p.tensors.iter().find(|t| t.name == "blk.0.ffn_up_exps.weight").unwrap();
    assert_eq!(up.ty, GgmlType::Q8_0);
    let Source::Stack(parts) = &up.source else { panic!() };
    assert_eq!(parts.iter().map(|p| p.requantize).collect::<Vec<_>>(), [true, false]);
}

/// A type given where every stack's donors agree would change nothing: refused, rather
/// than silently ignored.
#[test]
fn a_type_that_settles_nothing_is_refused() {
    let a = dense("llama", GgmlType::Q4_1, 128);
    let bad = plan(&named(&a), &[named(&a), named(&a)], 2, Some(GgmlType::Q8_0)).unwrap_err();
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert_eq!(bad[0].tensor, "(--type)");
    assert!(bad[0].reason.starts_with("Q8_0 would change nothing"), "{bad:?}");
}

#[test]
fn refuses_with_every_problem_listed() {
    let base = dense("llama", GgmlType::Q4_1, 128);
    let (qwen, wide) = (dense("qwen2", GgmlType::Q4_1, 128), dense("llama", GgmlType::Q4_1, 256));
    let bad = plan(&named(&base), &[named(&qwen), named(&wide)], 3, None).unwrap_err();
    let what: Vec<&str> = bad.iter().map(|m| m.tensor.as_str()).collect();
    assert!(what.contains(&"--experts-used"), "{what:?}");
    assert!(bad.iter().any(|m| m.tensor == "general.architecture" && m.reason.contains("qwen2")), "{bad:?}");
    // The wider donor: each of its 6 FFN tensors, named.
    assert_eq!(bad.iter().filter(|m| m.reason.contains("shape [")).count(), 6, "{bad:?}");
    let not_llama = plan(&named(&qwen), &[named(&qwen)], 1, None).unwrap_err();
    assert!(not_llama[0].reason.contains("organ moe builds llama"), "{not_llama:?}");
    assert!(plan(&named(&base), &[], 0, None).is_err());
}

#[test]
fn metadata_has_counts_and_provenance_and_drops_old_keys() {
    let base = dense("llama", GgmlType::Q4_1, 128);
    let p = plan(&named(&base), &[named(&base), named(&base)], 1, None).unwrap();
    let mut kvs = base.kvs.clone();
    kvs.push(("organ.moe.router".into(), OwnedValue::string("old")));
    let prov = Provenance {
        base: ("b.gguf", "00"),
        experts: alloc::vec![("b.gguf".into(), "00".into()); 2],
        router: RouterMode::Random,
        seed: Some(7),
        ty: None,
    };
    let out = metadata(&kvs, &p, &prov).unwrap();
    let get = |k: &str| out.iter().filter(|(x, _)| x == k).map(|(_, v)| v.clone()).collect::<Vec<_>>();
    assert_eq!(get("llama.expert_count")[0].as_u64(), Some(2));
    assert_eq!(get("llama.expert_used_count")[0].as_u64(), Some(1));
    assert_eq!(get("organ.moe.router"), [OwnedValue::string("random")]);
    assert_eq!(get("organ.moe.seed")[0].as_u64(), Some(7));
}

#[test]
fn routers_uniform_random_and_embed() {
    let base = dense("llama", GgmlType::Q4_1, 128);
    let p = plan(&named(&base), &[named(&base), named(&base)], 1, None).unwrap();
    assert_eq!(Router::Uniform.layer_bytes(&p, 1).unwrap(), alloc::vec![0u8; 64 * 2 * 4]);
    let r = Router::Random { seed: 1 };
    let l1 = r.layer_bytes(&p, 1).unwrap();
    assert_eq!(l1[..4], normal(1, 128).to_le_bytes());
    assert_ne!(l1, r.layer_bytes(&p, 0).unwrap());
    // Standard normal: mean near 0, variance near 1 over many values.
    let v: Vec<f64> = (0..20000).map(|i| f64::from(normal(3, i))).collect();
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / v.len() as f64;
    assert!(mean.abs() < 0.03 && (var - 1.0).abs() < 0.05, "{mean} {var}");
    // cheap_embed on an F32 table: rows 1 + 2 - 0, normalized.
    let table: Vec<f32> = (0..3 * 4).map(|i| i as f32).collect();
    let bytes: Vec<u8> = table.iter().flat_map(|v| v.to_le_bytes()).collect();
    let e = [Prompts { positive: alloc::vec![1, 2], negative: alloc::vec![0] }, Prompts::default()];
    let rows = cheap_embed(GgmlType::F32, &bytes, &[4, 3], &e).unwrap();
    let want = [12.0f64, 13.0, 14.0, 15.0];
    let norm = want.iter().map(|x| x * x).sum::<f64>().sqrt();
    assert_eq!(rows[..4], want.map(|x| (x / norm) as f32));
    assert_eq!(rows[4..], [0.0; 4], "no prompts: zero over the floor");
    assert!(cheap_embed(GgmlType::F32, &bytes, &[4, 3], &[Prompts { positive: alloc::vec![3], ..Default::default() }])
        .is_err());
    assert!(Router::Embed { rows }.layer_bytes(&p, 0).is_err(), "2 rows of 4 for a width of 64");
}

#[test]
fn requantize_goes_through_the_core_quantizers() {
    let values: Vec<f32> = (0..64).map(|i| (i as f32 - 32.0) / 8.0).collect();
    let mut q41 = Vec::new();
    crate::quant::quantize::quantize(GgmlType::Q4_1, &values, &mut q41).unwrap();
    let q80 = requantize(GgmlType::Q4_1, &q41, GgmlType::Q8_0).unwrap();
    let mut want = Vec::new();
    crate::quant::quantize::quantize(
        GgmlType::Q8_0,
        &crate::quant::dequantize(GgmlType::Q4_1, &q41).unwrap(),
        &mut want,
    )
    .unwrap();
    assert_eq!(q80, want);
}
