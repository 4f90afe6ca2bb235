//! Tests of the metadata edits (mod.rs).

use super::*;
use crate::gguf::writer::{plan, TensorSpec};
use crate::gguf::MetaValue;
use crate::GgmlType;
use alloc::string::ToString;
use alloc::vec;

/// A small GGUF: three keys, two F32 tensors of 8 values, their data (1.0, 2.0, …).
pub(super) fn model() -> Vec<u8> {
    let kvs = [
        ("general.architecture", MetaValue::Str(b"llama")),
        ("general.name", MetaValue::Str(b"tiny")),
        ("llama.block_count", MetaValue::U32(1)),
    ];
    let tensors = [
        TensorSpec { name: "a", dims: &[8], ty: GgmlType::F32 },
        TensorSpec { name: "b", dims: &[8], ty: GgmlType::F32 },
    ];
    let layout = plan(3, &kvs, &tensors).unwrap();
    let mut file = layout.header.clone();
    for (i, &(off, n)) in layout.tensors.iter().enumerate() {
        file.resize(layout.header.len() + off as usize, 0);
        for j in 0..n / 4 {
            file.extend_from_slice(&((i * 8) as f32 + j as f32).to_le_bytes());
        }
    }
    file.resize(layout.file_len as usize, 0);
    file
}

/// The file an edit makes of `file`.
fn apply(file: &[u8], edits: &[Edit]) -> Result<Vec<u8>> {
    apply_all(file, edits, &[])
}

/// The file edits of the metadata and the tensors make of `file`, written as a host
/// writes [`Edited::pieces`].
pub(super) fn apply_all(file: &[u8], edits: &[Edit], tensors: &[TensorEdit]) -> Result<Vec<u8>> {
    let g = Gguf::parse(file, file.len() as u64)?;
    let e = edit_all(&g, edits, tensors)?;
    let mut out = e.header.clone();
    for p in &e.pieces {
        match p {
            Piece::Copy(r) => out.extend_from_slice(&file[r.start as usize..r.end as usize]),
            Piece::Zeros(n) => out.resize(out.len() + *n as usize, 0),
            Piece::Convert { src, tensor, .. } => {
                let bytes = &file[src.start as usize..src.end as usize];
                out.extend_from_slice(&convert_tensor(tensor, bytes)?);
            }
        }
    }
    assert_eq!(out.len() as u64, e.file_len());
    Ok(out)
}

fn set(key: &str, text: &str, ty: Option<&str>) -> Edit {
    let ty = ty.map(|t| Ty::parse(t).unwrap());
    Edit::Set { key: key.into(), value: parse_value(key, text, ty.as_ref(), None).unwrap() }
}

#[test]
fn a_shard_is_refused_and_a_whole_file_is_not() {
    let file = model();
    let g = Gguf::parse(&file, file.len() as u64).unwrap();
    assert_eq!(shard_refusal(&g), None);
    for (n, refused) in [(1u16, false), (2, true)] {
        let kvs = [("general.architecture", MetaValue::Str(b"llama")), ("split.count", MetaValue::U16(n))];
        let layout = plan(3, &kvs, &[]).unwrap();
        let g = Gguf::parse(&layout.header, layout.header.len() as u64).unwrap();
        let why = shard_refusal(&g);
        assert_eq!(why.is_some(), refused, "split.count {n}: {why:?}");
        assert!(why.is_none_or(|w| w.contains("split in 2")));
    }
}

#[test]
fn no_edit_gives_the_file_back_byte_for_byte() {
    let file = model();
    assert_eq!(apply(&file, &[]).unwrap(), file);
}

#[test]
fn set_keeps_a_key_in_its_place_and_adds_a_new_one_last() {
    let file = model();
    let out = apply(&file, &[set("general.name", "a longer name", None), set("x.y", "[1, 2]", None)]).unwrap();
    let g = Gguf::parse(&out, out.len() as u64).unwrap();
    let keys: Vec<&str> = g.kvs.iter().map(|kv| kv.key).collect();
    assert_eq!(keys, ["general.architecture", "general.name", "llama.block_count", "x.y"]);
    assert_eq!(g.get("general.name").unwrap().as_str(), Some("a longer name"));
    let MetaValue::Array(a) = g.get("x.y").unwrap() else { panic!() };
    assert_eq!(
        (a.elem_type, a.iter().collect::<Vec<_>>()),
        (ValueType::U32, vec![MetaValue::U32(1), MetaValue::U32(2)])
    );
    // The tensors' bytes did not change, whatever the header's length.
    let old = Gguf::parse(&file, file.len() as u64).unwrap();
    for (a, b) in old.tensors.iter().zip(&g.tensors) {
        assert_eq!((a.name, a.data(&file).unwrap()), (b.name, b.data(&out).unwrap()));
    }
}

#[test]
fn remove_and_rename() {
    let out = apply(
        &model(),
        &[
            Edit::Remove { key: "general.name".into() },
            Edit::Rename { from: "llama.block_count".into(), to: "x".into() },
        ],
    );
    // block_count is refused, even as a rename's source.
    assert!(matches!(out, Err(Error::BadEdit { ref key, .. }) if key == "llama.block_count"), "{out:?}");
    let out = apply(&model(), &[Edit::Remove { key: "general.name".into() }]).unwrap();
    let g = Gguf::parse(&out, out.len() as u64).unwrap();
    assert!(g.get("general.name").is_none());
    let file = model();
    let out = apply(&file, &[Edit::Rename { from: "general.name".into(), to: "general.basename".into() }]).unwrap();
    let g = Gguf::parse(&out, out.len() as u64).unwrap();
    assert_eq!(g.kvs[1].key, "general.basename");
    assert_eq!(g.kvs[1].value.as_str(), Some("tiny"));
}

#[test]
fn rejects_what_it_cannot_do() {
    let file = model();
    let e = |edits: &[Edit]| apply(&file, edits).unwrap_err().to_string();
    for key in ["general.alignment", "general.architecture", "split.count", "GGUF.tensor_count", "llama.block_count"] {
        assert!(e(&[set(key, "1", Some("u32"))]).contains("organ does not change it"), "{key}");
    }
    assert!(e(&[Edit::Remove { key: "nope".into() }]).contains("no such key"));
    assert!(e(&[Edit::Rename { from: "nope".into(), to: "x".into() }]).contains("no such key"));
    assert!(
        e(&[Edit::Rename { from: "general.name".into(), to: "llama.block_count".into() }]).contains("organ does not")
    );
    assert!(e(&[set("general.name", "a", None), Edit::Remove { key: "general.name".into() }]).contains("two edits"));
    let long = "k".repeat(MAX_KEY_LEN + 1);
    assert!(e(&[set(&long, "a", None)]).contains("at most 65535 bytes"));
    assert!(e(&[set("a key", "a", None)]).contains("no spaces"));
    assert!(e(&[set("", "a", None)]).contains("empty"));
}

#[test]
fn same_size_when_a_value_keeps_its_length() {
    let file = model();
    let g = Gguf::parse(&file, file.len() as u64).unwrap();
    assert!(edit(&g, &[set("general.name", "TINY", None)]).unwrap().same_size());
    assert!(!edit(&g, &[set("general.name", "not so tiny a name at all, far longer", None)]).unwrap().same_size());
}

#[test]
fn rejects_a_header_past_the_budget_it_would_be_read_with() {
    // Three strings under the string cap, at the default budget (the budget is the
    // process's, and other tests run beside this one).
    let file = model();
    let g = Gguf::parse(&file, file.len() as u64).unwrap();
    let big = || OwnedValue::Str(alloc::vec![b'x'; 12 << 20].into());
    let edits: Vec<Edit> = (0..3).map(|i| Edit::Set { key: format!("x.big{i}"), value: big() }).collect();
    let e = edit(&g, &edits).unwrap_err().to_string();
    assert!(e.starts_with("metadata key \"x.big2\": "), "{e}");
    assert!(e.contains(&format!("header budget of {} bytes", crate::limits::max_header_bytes())), "{e}");
    assert!(edit(&g, &edits[..2]).is_ok(), "24 MiB of values fit the 32 MiB budget");
}

#[test]
fn what_was_written_is_one_sentence_for_every_face() {
    let file = model();
    let g = Gguf::parse(&file, file.len() as u64).unwrap();
    let e = edit(&g, &[set("general.name", "TINY", None)]).unwrap();
    let (len, before, after) = (e.file_len(), e.old_header_len, e.header.len());
    assert_eq!(
        e.wrote("x.gguf", &copied_shards(1)),
        format!("wrote x.gguf ({len} bytes): header {before} → {after} bytes, tensor data copied as is")
    );
    assert!(e.wrote("x-00001-of-00003.gguf", &copied_shards(3)).ends_with(" and 2 more shards copied as they are"));
}
