//! The model built from each kind of source, and refused where the source is wrong.

use super::manifest;
use super::*;
use crate::gguf::writer::{plan, TensorSpec};
use crate::gguf::MetaValue;
use alloc::string::ToString;
use alloc::vec;

/// A GGUF of `tensors` (F32, 4 elements each) with `kvs`, as bytes.
fn gguf(kvs: &[(&str, MetaValue<'_>)], tensors: &[&str]) -> Vec<u8> {
    let specs: Vec<TensorSpec<'_>> =
        tensors.iter().map(|n| TensorSpec { name: n, dims: &[4], ty: GgmlType::F32 }).collect();
    let layout = plan(3, kvs, &specs).unwrap();
    let mut b = layout.header.clone();
    b.resize(layout.file_len as usize, 0);
    b
}

fn shard(no: u16, count: u16, total: i32, tensors: &[&str]) -> Vec<u8> {
    let kvs = [
        ("general.architecture", MetaValue::Str(b"llama")),
        ("split.no", MetaValue::U16(no)),
        ("split.count", MetaValue::U16(count)),
        ("split.tensors.count", MetaValue::I32(total)),
    ];
    gguf(&kvs, tensors)
}

fn model(bytes: &[u8], file: usize) -> Model {
    Model::from_gguf(&Gguf::parse(bytes, bytes.len() as u64).unwrap(), file)
}

#[test]
fn shards_join_into_one_model_without_their_split_keys() {
    let (a, b) = (shard(0, 2, 3, &["x", "y"]), shard(1, 2, 3, &["z"]));
    let m = Model::join(vec![model(&a, 0), model(&b, 1)]).unwrap();
    let keys: Vec<&str> = m.kvs.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["general.architecture"]);
    assert_eq!(m.architecture().as_deref(), Some("llama"));
    let where_: Vec<(&str, usize)> = m.tensors.iter().map(|t| (t.name.as_str(), t.file)).collect();
    assert_eq!(where_, [("x", 0), ("y", 0), ("z", 1)]);
    assert!(m.tensors.iter().all(|t| t.n_elements == 4 && t.n_bytes == 16));
    // One shard alone is refused, naming it.
    let e = Model::join(vec![model(&b, 0)]).unwrap_err();
    assert_eq!(e.file, 0);
    assert!(e.reason.contains("2 shards, but 1 file(s)"), "{}", e.reason);
    // A plain file keeps all its keys.
    let plain = gguf(&[("split.no", MetaValue::U16(0))], &["x"]);
    assert_eq!(Model::join(vec![model(&plain, 0)]).unwrap().kvs.len(), 1);
}

#[test]
fn a_manifest_gives_one_organ_file_per_tensor() {
    let text = r#"{"format": "organ-dir/1", "source": {"file": "m.gguf", "bytes": 0},
        "gguf_version": 3, "alignment": 32,
        "metadata": [{"key": "general.name", "type": "STRING", "value": "tiny"}],
        "tensors": [{"name": "blk.0.ffn_up.weight", "file": "a.bin", "group": "organ", "organ": null,
            "layer": 0, "type": "Q8_0", "shape": [64, 2], "bytes": 136, "blake3": "SHA"}]}"#;
    let text = text.replace("SHA", &"0".repeat(64));
    let m = Model::from_manifest(&manifest::parse(text.as_bytes()).unwrap()).unwrap();
    assert_eq!(m.name().as_deref(), Some("tiny"));
    let t = &m.tensors[0];
    assert_eq!((t.ty, t.n_elements, t.n_bytes, t.file), (GgmlType::Q8_0, 128, 136, 0));
    let header = super::organ_bin::encode_header(&t.name, &t.dims, t.ty).unwrap();
    assert_eq!(t.offset, header.len() as u64);
    for (shape, ty, want) in [
        ("[64, 2]", "Q9_9", "unknown type"),
        ("[63]", "Q8_0", "not whole blocks"),
        ("[4294967296, 4294967296]", "F32", "more than"),
    ] {
        let bad = text.replace("[64, 2]", shape).replace("\"Q8_0\"", &alloc::format!("{ty:?}"));
        let e = Model::from_manifest(&manifest::parse(bad.as_bytes()).unwrap()).unwrap_err();
        assert!(e.to_string().contains(want), "{shape} {ty}: {e}");
    }
}
