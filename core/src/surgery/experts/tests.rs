use super::counts::*;
use super::*;
use crate::gguf::ValueType;

fn entry(name: &str, ty: GgmlType, dims: &[u64]) -> TensorEntry {
    let n: u64 = dims.iter().product();
    let n_bytes = n / ty.block_size() as u64 * ty.type_size() as u64;
    TensorEntry { name: name.into(), ty, dims: dims.to_vec(), n_elements: n, n_bytes, file: 0, offset: 0 }
}

fn u32v(x: u32) -> OwnedValue {
    OwnedValue::Scalar(MetaValue::U32(x))
}

const P: Provenance<'static> = Provenance { source: "moe.gguf", blake3: "abc" };

/// A llama-layout MoE of `e` experts, two layers, Q8_0 experts of [64, 32].
fn mixtral(e: u64) -> Model {
    let mut tensors = vec![entry("token_embd.weight", GgmlType::Q8_0, &[64, 100])];
    for l in 0..2 {
        tensors.push(entry(&format!("blk.{l}.attn_norm.weight"), GgmlType::F32, &[64]));
        tensors.push(entry(&format!("blk.{l}.ffn_gate_inp.weight"), GgmlType::F32, &[64, e]));
        tensors.push(entry(&format!("blk.{l}.ffn_gate_exps.weight"), GgmlType::Q8_0, &[64, 32, e]));
        tensors.push(entry(&format!("blk.{l}.ffn_up_exps.weight"), GgmlType::Q8_0, &[64, 32, e]));
        tensors.push(entry(&format!("blk.{l}.ffn_down_exps.weight"), GgmlType::Q8_0, &[32, 64, e]));
    }
    let kvs = vec![
        ("general.architecture".into(), OwnedValue::string("llama")),
        ("llama.feed_forward_length".into(), u32v(99)),
        ("llama.expert_count".into(), u32v(e as u32)),
        ("llama.expert_used_count".into(), u32v(2)),
        ("organ.moe.base".into(), OwnedValue::string("x")),
    ];
    Model { version: 3, kvs, tensors }
}

fn get<'a>(kvs: &'a [(String, OwnedValue)], k: &str) -> Option<&'a OwnedValue> {
    kvs.iter().find(|(x, _)| x == k).map(|(_, v)| v)
}

fn reasons(r: Result<ExpertsPlan, Vec<Mismatch>>) -> Vec<String> {
    r.unwrap_err().into_iter().map(|m| format!("{}: {}", m.tensor, m.reason)).collect()
}

#[test]
fn extract_takes_slice_e_of_each_expert_tensor() {
    let m = mixtral(4);
    let p = extract(&m, 2, &P).unwrap();
    let bytes = 64 * 32 / 32 * 34; // one Q8_0 expert of 64 × 32
    let names: Vec<&str> = p.tensors.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "token_embd.weight",
            "blk.0.attn_norm.weight",
            "blk.0.ffn_gate.weight",
            "blk.0.ffn_up.weight",
            "blk.0.ffn_down.weight",
            "blk.1.attn_norm.weight",
            "blk.1.ffn_gate.weight",
            "blk.1.ffn_up.weight",
            "blk.1.ffn_down.weight"
        ]
    );
    let up = &p.tensors[3];
    assert_eq!((up.dims.as_slice(), up.ty), (&[64u64, 32][..], GgmlType::Q8_0));
    assert_eq!(up.pieces, [Piece { tensor: 4, start: 2 * bytes, len: bytes }]);
    assert_eq!(p.dropped, ["blk.0.ffn_gate_inp.weight", "blk.1.ffn_gate_inp.weight"]);
    assert_eq!(p.sliced.len(), 6);
    assert!(get(&p.kvs, "llama.expert_count").is_none() && get(&p.kvs, "llama.expert_used_count").is_none());
    assert!(get(&p.kvs, "organ.moe.base").is_none());
    assert_eq!(get(&p.kvs, "llama.feed_forward_length"), Some(&u32v(32)));
    assert_eq!(get(&p.kvs, "organ.experts.op").and_then(|v| v.as_str()), Some("extract"));
    assert_eq!(get(&p.kvs, "organ.experts.kept").and_then(|v| v.as_str()), Some("2"));
    assert_eq!(get(&p.kvs, "organ.experts.source_blake3").and_then(|v| v.as_str()), Some("abc"));
}

#[test]
fn extract_refuses_by_name() {
    let mut ds = mixtral(4);
    ds.kvs[0].1 = OwnedValue::string("deepseek2");
    assert!(reasons(extract(&ds, 0, &P))[0].contains("deepseek2 is not one"));
    assert!(reasons(extract(&mixtral(4), 4, &P))[0].contains("expert 4 is out of range: the model has 4 experts (0-3)"));
    let mut dense = mixtral(4);
    dense.tensors.retain(|t| !t.name.contains("exps") && !t.name.contains("gate_inp"));
    dense.kvs.retain(|(k, _)| !k.contains("expert"));
    assert!(reasons(extract(&dense, 0, &P))[0].contains("not a mixture of experts"));
    let mut odd = mixtral(4);
    odd.tensors.push(entry("blk.1.ffn_up_shexp.weight", GgmlType::Q8_0, &[64, 32]));
    odd.tensors.push(entry("blk.1.ffn_up_exps.bias", GgmlType::F32, &[32, 4]));
    odd.tensors.retain(|t| t.name != "blk.0.ffn_gate_exps.weight");
    let r = reasons(extract(&odd, 0, &P));
    assert!(r.iter().any(|x| x.starts_with("blk.1.ffn_up_shexp.weight: a shared expert")), "{r:?}");
    assert!(r.iter().any(|x| x.starts_with("blk.1.ffn_up_exps.bias: a per-expert tensor")), "{r:?}");
    assert!(r.iter().any(|x| x.starts_with("blk.0.ffn_gate_exps.weight: missing")), "{r:?}");
}

#[test]
fn prune_slices_every_per_expert_tensor_and_updates_counts() {
    let mut m = mixtral(6);
    m.tensors.push(entry("blk.1.exp_probs_b.bias", GgmlType::F32, &[6]));
    m.tensors.push(entry("blk.1.ffn_gate_inp.bias", GgmlType::F32, &[6]));
    m.tensors.push(entry("blk.1.ffn_down_exps.bias", GgmlType::F32, &[64, 6]));
    m.tensors.push(entry("blk.1.ffn_gate_inp_shexp.weight", GgmlType::F32, &[64]));
    let p = prune(&m, &[5, 1, 2], None, &P).unwrap();
    assert_eq!(p.kept, [1, 2, 5]);
    let t = |n: &str| p.tensors.iter().find(|t| t.name == n).unwrap();
    let (i, bytes) = (4, 64 * 32 / 32 * 34); // blk.0.ffn_up_exps.weight; an expert's Q8_0 bytes
    assert_eq!(t("blk.0.ffn_up_exps.weight").dims, [64, 32, 3]);
    assert_eq!(
        t("blk.0.ffn_up_exps.weight").pieces,
        [Piece { tensor: i, start: bytes, len: 2 * bytes }, Piece { tensor: i, start: 5 * bytes, len: bytes }]
    );
    assert_eq!(t("blk.0.ffn_gate_inp.weight").dims, [64, 3]);
    assert_eq!(t("blk.0.ffn_gate_inp.weight").pieces[0], Piece { tensor: 2, start: 64 * 4, len: 2 * 64 * 4 });
    assert_eq!(t("blk.1.exp_probs_b.bias").pieces[1], Piece { tensor: 11, start: 20, len: 4 });
    assert_eq!(t("blk.1.ffn_down_exps.bias").dims, [64, 3]);
    assert_eq!(t("blk.1.ffn_gate_inp_shexp.weight").dims, [64], "a shared expert's gate is not per expert");
    assert_eq!(p.sliced.len(), 6 + 2 + 3);
    assert_eq!(get(&p.kvs, "llama.expert_count"), Some(&u32v(3)));
    assert_eq!(get(&p.kvs, "llama.expert_used_count"), Some(&u32v(2)));
    assert_eq!(get(&p.kvs, "organ.experts.kept").and_then(|v| v.as_str()), Some("1,2,5"));
    assert_eq!(get(&p.kvs, "organ.moe.base").and_then(|v| v.as_str()), Some("x"));
    // One expert kept: used drops to 1; asked for 1 explicitly, the same.
    let one = prune(&m, &[3], None, &P).unwrap();
    assert_eq!(get(&one.kvs, "llama.expert_used_count"), Some(&u32v(1)));
    assert_eq!(prune(&m, &[3], Some(1), &P).unwrap().kvs, one.kvs);
    let three = prune(&m, &[0, 1, 2], Some(3), &P).unwrap();
    assert_eq!(get(&three.kvs, "llama.expert_used_count"), Some(&u32v(3)));
}

#[test]
fn prune_refuses_bad_lists_and_counts() {
    let m = mixtral(4);
    assert!(reasons(prune(&m, &[], None, &P))[0].contains("no expert given"));
    assert!(reasons(prune(&m, &[1, 1], None, &P))[0].contains("expert 1 is given twice"));
    assert!(reasons(prune(&m, &[0, 7], None, &P))[0].contains("expert 7 is out of range"));
    assert!(reasons(prune(&m, &[0, 1], Some(3), &P))[0].contains("--experts-used: 3: give 1 to the 2 experts kept"));
    assert!(reasons(prune(&m, &[0, 1], Some(0), &P))[0].contains("--experts-used: 0"));
    let mut bad = mixtral(4);
    bad.tensors[2].dims = vec![64, 5];
    assert!(reasons(prune(&bad, &[0], None, &P))[0].contains("last dim is not the expert count 4"));
    let mut unknown = mixtral(4);
    unknown.tensors.push(entry("blk.0.ffn_gate_chexps.weight", GgmlType::F32, &[64, 4]));
    assert!(reasons(prune(&unknown, &[0], None, &P))[0].contains("not one organ knows how to divide"));
}

#[test]
fn prune_keeps_expert_groups_whole_or_refuses() {
    let mut m = mixtral(8);
    m.kvs[0].1 = OwnedValue::string("deepseek2");
    for (k, _) in m.kvs.iter_mut() {
        *k = k.replace("llama.", "deepseek2.");
    }
    m.kvs.push(("deepseek2.expert_group_count".into(), u32v(2)));
    m.kvs.push(("deepseek2.expert_group_used_count".into(), u32v(1)));
    let p = prune(&m, &[0, 3, 4, 7], None, &P).unwrap();
    assert_eq!(get(&p.kvs, "deepseek2.expert_count"), Some(&u32v(4)));
    assert_eq!(get(&p.kvs, "deepseek2.expert_group_count"), Some(&u32v(2)));
    for keep in [&[0u64, 1, 2, 4, 5][..], &[0, 1], &[0, 4]] {
        let r = reasons(prune(&m, keep, None, &P));
        assert!(r[0].starts_with("deepseek2.expert_group_count: 2 groups of 4"), "{keep:?}: {r:?}");
    }
}

#[test]
fn per_layer_used_counts_are_capped_each() {
    let raw: Vec<u8> = [4u32, 2, 1].iter().flat_map(|x| x.to_le_bytes()).collect();
    let v = OwnedValue::Array { elem_type: ValueType::U32, len: 3, raw: raw.into() };
    let want: Vec<u8> = [3u32, 2, 1].iter().flat_map(|x| x.to_le_bytes()).collect();
    assert_eq!(
        map_count(&v, |u| u.min(3)),
        Some(OwnedValue::Array { elem_type: ValueType::U32, len: 3, raw: want.into() })
    );
    assert_eq!(max_count(&v), Some(4));
    assert_eq!(map_count(&OwnedValue::Scalar(MetaValue::U8(9)), |_| 300), None);
    assert_eq!(map_count(&OwnedValue::string("x"), |u| u), None);
}

#[test]
fn keep_lists_parse() {
    assert_eq!(parse_keep("0,2,5").unwrap(), [0, 2, 5]);
    assert_eq!(parse_keep("0-2, 7").unwrap(), [0, 1, 2, 7]);
    for bad in ["", "1,,2", "a", "3-1", "-1", "0-99999999"] {
        assert!(parse_keep(bad).is_err(), "{bad:?}");
    }
}
