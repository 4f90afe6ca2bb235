use super::*;
use crate::ggml_type::GgmlType;
use crate::gguf::MetaValue;
use crate::model::OwnedValue;
use crate::quant;
use alloc::vec;

/// Every f16 scale offset the scan reads is one the block kernel uses: with that scale
/// NaN, the block decodes to non-finite values.
#[test]
fn scale_offsets_are_the_kernels_scales() {
    for &ty in GgmlType::ALL {
        let Some((_, offsets)) = quant::scale_fields(ty) else { continue };
        for &o in offsets {
            let mut b = vec![0x11u8; ty.type_size()];
            for &p in offsets {
                b[p..p + 2].copy_from_slice(&0x3C00u16.to_le_bytes());
            }
            b[o..o + 2].copy_from_slice(&0x7E00u16.to_le_bytes());
            let v = quant::dequantize(ty, &b).unwrap();
            assert!(v.iter().any(|x| !x.is_finite()), "{} offset {o}", ty.name());
            let s = scan_tensor(ty, &b).unwrap();
            assert_eq!(s.non_finite, 1, "{}", ty.name());
        }
    }
}

/// A scan fed in chunks finds what one call finds.
#[test]
fn chunked_scan_equals_whole() {
    let mut bytes: Vec<u8> = (0..20 * 64).map(|i| (i * 7 % 251) as u8).collect();
    bytes[20 * 5 + 1] = 0x7C; // block 5's d (f16 bytes 0..2) is infinite
    for ty in [GgmlType::Q4_1, GgmlType::F16, GgmlType::F32, GgmlType::Q8_0] {
        let n = bytes.len() / ty.type_size() * ty.type_size();
        let whole = scan_tensor(ty, &bytes[..n]).unwrap();
        let mut s = Scanner::new(ty, n as u64);
        for c in bytes[..n].chunks(Scanner::chunk_len(ty, 100)) {
            s.update(c).unwrap();
        }
        assert_eq!(s.finish().unwrap(), whole);
    }
    assert!(Scanner::new(GgmlType::Q4_1, 40).update(&bytes[..30]).is_err());
    assert!(Scanner::new(GgmlType::Q4_1, 40).finish().is_err());
}

#[test]
fn zero_and_constant() {
    let s = scan_tensor(GgmlType::F32, &[0u8; 64]).unwrap();
    assert!(s.all_zero && s.constant);
    let one: Vec<u8> = (0..16).flat_map(|_| 1.5f32.to_le_bytes()).collect();
    let s = scan_tensor(GgmlType::F32, &one).unwrap();
    assert!(!s.all_zero && s.constant && s.non_finite == 0);
    let q8 = |v: &[f32]| {
        let mut q = Vec::new();
        quant::quantize::quantize(GgmlType::Q8_0, v, &mut q).unwrap();
        q
    };
    assert!(scan_tensor(GgmlType::Q8_0, &q8(&[0.25f32; 64])).unwrap().constant);
    assert!(!scan_tensor(GgmlType::Q8_0, &q8(&[0.25f32, -1.0].repeat(32))).unwrap().constant);
}

use crate::model::f32_entry as entry;

fn kv(k: &str, v: u32) -> (String, OwnedValue) {
    (k.into(), OwnedValue::Scalar(MetaValue::U32(v)))
}

/// A two-layer llama as llama.cpp expects it.
fn llama(embd: u32) -> Model {
    let mut tensors = vec![entry("token_embd.weight", &[8, 10]), entry("output_norm.weight", &[8])];
    for i in 0..2 {
        for (n, d) in [
            ("attn_norm", vec![8]),
            ("attn_q", vec![8, 8]),
            ("attn_k", vec![8, 4]),
            ("attn_v", vec![8, 4]),
            ("attn_output", vec![8, 8]),
            ("ffn_norm", vec![8]),
            ("ffn_gate", vec![8, 12]),
            ("ffn_up", vec![8, 12]),
            ("ffn_down", vec![12, 8]),
        ] {
            tensors.push(entry(&format!("blk.{i}.{n}.weight"), &d));
        }
    }
    let kvs = vec![
        ("general.architecture".into(), OwnedValue::string("llama")),
        kv("llama.embedding_length", embd),
        kv("llama.block_count", 2),
        kv("llama.attention.head_count", 2),
        kv("llama.attention.head_count_kv", 1),
        kv("llama.feed_forward_length", 12),
        ("tokenizer.ggml.model".into(), OwnedValue::string("llama")),
        ("tokenizer.ggml.tokens".into(), OwnedValue::strings(&vec![String::from("t"); 10]).unwrap()),
        ("tokenizer.chat_template".into(), OwnedValue::string("{{ messages }}")),
    ];
    Model { version: 3, kvs, tensors }
}

fn errors(m: &Model) -> Vec<(Kind, String)> {
    let (f, known) = model_findings(m);
    assert!(known);
    f.into_iter().filter(|f| f.severity == Severity::Error).map(|f| (f.kind, f.subject)).collect()
}

#[test]
fn shapes_of_a_good_llama() {
    assert_eq!(errors(&llama(8)), vec![]);
}

/// One wrong key is one finding, on the key.
#[test]
fn wrong_embedding_length_is_one_finding() {
    assert_eq!(errors(&llama(16)), vec![(Kind::Metadata, "llama.embedding_length".into())]);
}

#[test]
fn missing_and_misshapen_tensors() {
    let mut m = llama(8);
    m.tensors.retain(|t| t.name != "blk.1.ffn_down.weight");
    m.tensors.iter_mut().find(|t| t.name == "blk.0.attn_k.weight").unwrap().dims = vec![8, 8];
    assert_eq!(
        errors(&m),
        vec![(Kind::Shape, "blk.0.attn_k.weight".into()), (Kind::MissingTensor, "blk.1.ffn_down.weight".into())]
    );
}

#[test]
fn token_count_against_the_embedding() {
    let mut m = llama(8);
    m.kvs.retain(|(k, _)| k != "tokenizer.ggml.tokens");
    m.kvs.push(("tokenizer.ggml.tokens".into(), OwnedValue::strings(&vec![String::from("t"); 11]).unwrap()));
    assert_eq!(errors(&m), vec![(Kind::Tokenizer, "tokenizer.ggml.tokens".into())]);
}

#[test]
fn duplicates_name_the_first() {
    let m = llama(8);
    let mut d: Vec<Option<[u8; 32]>> = (0..m.tensors.len()).map(|i| Some([i as u8; 32])).collect();
    let (a, b) = (
        m.tensors.iter().position(|t| t.name == "blk.0.ffn_up.weight").unwrap(),
        m.tensors.iter().position(|t| t.name == "blk.1.ffn_up.weight").unwrap(),
    );
    d[b] = d[a];
    let f = duplicate_findings(&m.tensors, &d);
    assert_eq!(f.len(), 1);
    assert_eq!(
        (f[0].kind, f[0].severity, f[0].subject.as_str()),
        (Kind::Duplicate, Severity::Warning, "blk.1.ffn_up.weight")
    );
    assert!(f[0].message.contains("blk.0.ffn_up.weight"));
}

/// All findings of `m` as (kind, severity, subject).
fn all(m: &Model) -> Vec<(Kind, Severity, String)> {
    model_findings(m).0.into_iter().map(|f| (f.kind, f.severity, f.subject)).collect()
}

#[test]
fn chat_template_expert_and_split_metadata() {
    let mut m = llama(8);
    m.kvs.retain(|(k, _)| k != "tokenizer.chat_template");
    assert_eq!(all(&m), vec![(Kind::ChatTemplate, Severity::Info, "tokenizer.chat_template".into())]);
    m.kvs.push(("tokenizer.chat_template".into(), OwnedValue::string("{{ bos_token }}{{ messages }}")));
    m.kvs.push(("tokenizer.chat_templates".into(), OwnedValue::strings(&[String::from("tool_use")]).unwrap()));
    assert_eq!(
        all(&m),
        vec![
            (Kind::ChatTemplate, Severity::Warning, "tokenizer.chat_template".into()),
            (Kind::ChatTemplate, Severity::Warning, "tokenizer.chat_templates".into()),
        ]
    );
    let mut m = llama(8);
    m.kvs.push(kv("llama.expert_used_count", 2));
    assert_eq!(all(&m), vec![(Kind::Experts, Severity::Error, "llama.expert_used_count".into())]);
    let mut m = llama(8);
    m.kvs.push(("split.count".into(), OwnedValue::Scalar(MetaValue::U16(3))));
    m.kvs.push(("split.no".into(), OwnedValue::Scalar(MetaValue::U16(1))));
    assert_eq!(all(&m), vec![(Kind::Split, Severity::Error, "split.count".into())]);
    let mut m = llama(8);
    m.kvs.push(kv("tokenizer.ggml.eos_token_id", 10));
    assert_eq!(all(&m), vec![(Kind::Tokenizer, Severity::Warning, "tokenizer.ggml.eos_token_id".into())]);
}

#[test]
fn unknown_architectures_and_extra_tensors() {
    let mut m = llama(8);
    m.kvs[0].1 = OwnedValue::string("mamba");
    let (f, known) = model_findings(&m);
    assert!(!known);
    assert_eq!(f.iter().map(|f| (f.kind, f.severity)).collect::<Vec<_>>(), vec![(Kind::Architecture, Severity::Info)]);
    let mut m = llama(8);
    m.tensors.push(entry("blk.0.mystery.weight", &[8]));
    m.tensors.retain(|t| !t.name.starts_with("blk.1."));
    assert_eq!(
        all(&m),
        vec![
            (Kind::Metadata, Severity::Error, "llama.block_count".into()),
            (Kind::UnknownTensor, Severity::Warning, "blk.0.mystery.weight".into()),
        ]
    );
}
