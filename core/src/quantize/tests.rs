use super::*;
use alloc::vec;

fn entry(name: &str, dims: &[u64], ty: GgmlType) -> TensorEntry {
    let n: u64 = dims.iter().product();
    let n_bytes = n / ty.block_size() as u64 * ty.type_size() as u64;
    TensorEntry { name: name.into(), ty, dims: dims.to_vec(), n_elements: n, n_bytes, file: 0, offset: 0 }
}

fn kv_u32(k: &str, v: u32) -> (String, OwnedValue) {
    (k.into(), OwnedValue::Scalar(MetaValue::U32(v)))
}

/// A llama of `n_layer` layers, 8 heads over 2 key/value heads, rows of 256 except
/// ffn_down's of 512, with an untied output.
fn llama(n_layer: u32) -> Model {
    let mut kvs = vec![(String::from("general.architecture"), OwnedValue::Str(b"llama".to_vec().into()))];
    kvs.push(kv_u32("general.file_type", 1));
    kvs.push(kv_u32("llama.block_count", n_layer));
    kvs.push(kv_u32("llama.attention.head_count", 8));
    kvs.push(kv_u32("llama.attention.head_count_kv", 2));
    let mut tensors = vec![entry("token_embd.weight", &[256, 64], GgmlType::F16)];
    for i in 0..n_layer {
        for t in ["attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up"] {
            tensors.push(entry(&format!("blk.{i}.{t}.weight"), &[256, 256], GgmlType::F16));
        }
        tensors.push(entry(&format!("blk.{i}.ffn_down.weight"), &[512, 256], GgmlType::F16));
        tensors.push(entry(&format!("blk.{i}.attn_norm.weight"), &[256], GgmlType::F32));
    }
    tensors.push(entry("output.weight", &[256, 64], GgmlType::F16));
    Model { version: 3, kvs, tensors }
}

fn type_of(plan: &Plan, name: &str) -> GgmlType {
    plan.tensors.iter().find(|t| t.name == name).unwrap().to
}

#[test]
fn file_types_parse_as_llama_quantize_reads_them() {
    assert_eq!(Ftype::parse("q4_k"), Some(Ftype::Q4_K_M));
    assert_eq!(Ftype::parse("Q4_K_S"), Some(Ftype::Q4_K_S));
    assert_eq!(Ftype::parse("15"), Some(Ftype::Q4_K_M));
    assert_eq!(Ftype::parse("COPY"), None);
    assert_eq!(Ftype::parse("Q4_2"), None);
    assert_eq!(Ftype::Q3_K_M.name(), "Q3_K");
    assert_eq!(Ftype::IQ2_S.default_type(), GgmlType::IQ2_XS);
}

#[test]
fn tensors_are_ordered_by_layer_then_name() {
    let m = llama(12);
    let p = plan(&m, &Params::new(Ftype::Q8_0)).unwrap();
    let names: Vec<&str> = p.tensors.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(&names[..3], &["output.weight", "token_embd.weight", "blk.0.attn_k.weight"]);
    let at = |n: &str| names.iter().position(|x| *x == n).unwrap();
    assert!(at("blk.2.ffn_up.weight") < at("blk.10.attn_k.weight"));
    assert_eq!(layer_of("blk.7x"), 7);
    assert_eq!(layer_of("blk.x"), -1);
}

#[test]
fn header_sets_the_file_type_last_and_drops_split_keys() {
    let mut m = llama(2);
    m.kvs.push(kv_u32("split.count", 1));
    m.kvs.push(kv_u32("general.quantization_version", 1));
    let p = plan(&m, &Params::new(Ftype::Q4_K_M)).unwrap();
    let keys: Vec<&str> = p.kvs().iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys[keys.len() - 2..], ["general.quantization_version", "general.file_type"]);
    assert!(!keys.contains(&"split.count"));
    assert_eq!(p.kvs().last().unwrap().1.as_u64(), Some(15));
}

#[test]
fn q4_k_m_gives_more_bits_where_llama_cpp_does() {
    // 16 layers: use_more_bits is i < 2, i >= 14, or (i - 2) % 3 == 2.
    let m = llama(16);
    let p = plan(&m, &Params::new(Ftype::Q4_K_M)).unwrap();
    let more: Vec<u32> =
        (0..16).filter(|&i| type_of(&p, &format!("blk.{i}.attn_v.weight")) == GgmlType::Q6_K).collect();
    assert_eq!(more, [0, 1, 4, 7, 10, 13, 14, 15]);
    let down: Vec<u32> =
        (0..16).filter(|&i| type_of(&p, &format!("blk.{i}.ffn_down.weight")) == GgmlType::Q6_K).collect();
    assert_eq!(down, more);
    assert_eq!(type_of(&p, "blk.3.attn_q.weight"), GgmlType::Q4_K);
    assert_eq!(type_of(&p, "output.weight"), GgmlType::Q6_K);
    assert_eq!(type_of(&p, "token_embd.weight"), GgmlType::Q4_K);
    assert_eq!(type_of(&p, "blk.3.attn_norm.weight"), GgmlType::F32);
}

#[test]
fn tied_embeddings_take_the_output_type() {
    let mut m = llama(2);
    m.tensors.retain(|t| t.name != "output.weight");
    let p = plan(&m, &Params::new(Ftype::Q4_K_M)).unwrap();
    assert_eq!(type_of(&p, "token_embd.weight"), GgmlType::Q6_K);
}

#[test]
fn rows_that_are_not_whole_blocks_fall_back() {
    let mut m = llama(2);
    m.tensors.push(entry("blk.1.extra.weight", &[576, 8], GgmlType::F16));
    m.tensors.push(entry("blk.1.odd.weight", &[48, 8], GgmlType::F16));
    let p = plan(&m, &Params::new(Ftype::Q4_K_S)).unwrap();
    assert_eq!(type_of(&p, "blk.1.extra.weight"), GgmlType::Q5_0);
    assert_eq!(type_of(&p, "blk.1.odd.weight"), GgmlType::F16);
    assert_eq!(p.n_fallback, 2);
    let p = plan(&m, &Params::new(Ftype::Q6_K)).unwrap();
    assert_eq!(type_of(&p, "blk.1.extra.weight"), GgmlType::Q8_0);
}

#[test]
fn patterns_win_over_the_mix_and_pure_skips_it() {
    let m = llama(4);
    let mut params = Params::new(Ftype::Q4_K_M);
    params.patterns.push((Pattern::new("ATTN_V").unwrap(), GgmlType::Q8_0));
    let p = plan(&m, &params).unwrap();
    assert_eq!(type_of(&p, "blk.0.attn_v.weight"), GgmlType::Q8_0);
    let mut pure = Params::new(Ftype::Q4_K_M);
    pure.pure = true;
    let p = plan(&m, &pure).unwrap();
    assert_eq!(type_of(&p, "blk.0.attn_v.weight"), GgmlType::Q4_K);
    assert_eq!(type_of(&p, "output.weight"), GgmlType::Q4_K);
    assert!(Pattern::new("attn_(v").is_err());
    let (p, ty) = Pattern::word("BLK\\.3\\.ffn_down=q6_k").unwrap();
    assert_eq!((p.text(), ty), ("blk\\.3\\.ffn_down", GgmlType::Q6_K));
    for (word, says) in [
        ("attn_v", "malformed"),
        ("=Q8_0", "missing tensor name"),
        ("attn_v=", "missing quantization type"),
        ("attn_v=Q9_9", "invalid ggml_type"),
        ("attn_(v=Q8_0", "attn_(v"),
    ] {
        let e = Pattern::word(word).unwrap_err().to_string();
        assert!(e.contains(says), "{word}: {e}");
    }
    assert!(Pattern::new("BLK\\.0\\.").unwrap().found_in("blk.0.attn_q.weight"));
}

#[test]
fn refusals_name_the_tensor() {
    let mut m = llama(2);
    m.tensors[1].ty = GgmlType::Q8_0;
    m.tensors[1].n_bytes = 256 * 256 / 32 * 34;
    let e = plan(&m, &Params::new(Ftype::Q4_0)).unwrap_err().to_string();
    assert!(e.contains("blk.0.attn_q.weight") && e.contains("requantizing"), "{e}");
    let m = llama(2);
    let e = plan(&m, &Params::new(Ftype::Q2_K_S)).unwrap_err().to_string();
    assert!(e.contains("importance matrix"), "{e}");
    let mut dry = Params::new(Ftype::Q2_K_S);
    dry.dry_run = true;
    assert!(plan(&m, &dry).is_ok());
}

/// `--keep-split`: a shard per input shard, the first with the metadata and the split
/// keys, a later one with the split keys alone; a first shard without tensors (a split
/// with its metadata alone first) is still written, a later one without is refused; a
/// model without tensors plans one file.
#[test]
fn keep_split_plans_a_file_per_input_shard() {
    let mut m = llama(2);
    let n = m.tensors.len();
    for (i, t) in m.tensors.iter_mut().enumerate() {
        (t.file, t.offset) = (1 + usize::from(i >= n / 2), i as u64);
    }
    let mut p = Params::new(Ftype::Q8_0);
    p.keep_split = true;
    let plan = plan(&m, &p).unwrap();
    assert_eq!(plan.shards.len(), 3);
    assert_eq!((plan.shards[0].tensors.len(), plan.shards[1].tensors.len()), (0, n / 2));
    let keys = |s: usize| plan.shards[s].kvs.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>();
    assert_eq!(keys(1), ["split.no", "split.count", "split.tensors.count"]);
    assert_eq!(&keys(0)[keys(0).len() - 3..], ["split.no", "split.count", "split.tensors.count"]);
    // The input's order, not the layers'.
    assert_eq!(plan.tensors[0].name, "token_embd.weight");
    for t in &mut m.tensors[n / 2..] {
        t.file = 3;
    }
    let e = super::plan(&m, &p).unwrap_err().to_string();
    assert!(e.contains("shard 3 of 4 of the input holds no tensor"), "{e}");
    assert_eq!(keep_split_names("out.gguf", 2), ["out-00001-of-00002.gguf", "out-00002-of-00002.gguf"]);
    assert_eq!(keep_split_names("ggml-model-Q8_0", 1), ["ggml-model-Q8_0-00001-of-00001.gguf"]);
    m.tensors.clear();
    let plan = super::plan(&m, &Params::new(Ftype::Q8_0)).unwrap();
    assert_eq!((plan.shards.len(), plan.tensors.len()), (1, 0));
}
