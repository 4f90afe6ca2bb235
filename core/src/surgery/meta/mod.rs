//! Metadata edits of a GGUF file (`organ meta`): set, remove and rename keys, as pure
//! functions over a parsed header. The result is the new header, padding included, and
//! the range of the input that follows it unchanged (the data section, tensor offsets
//! being relative to its start): a writer copies that range after the header (the CLI in
//! the kernel, the browser as a `Blob` of the header and a slice of the `File`), so no
//! tensor byte is decoded or held in memory.
//!
//! What organ refuses to change ([`refusal`]): `general.alignment` (the data is laid out
//! for it), `general.architecture`, `split.*` and organ's split set id, gguf-py's virtual
//! `GGUF.*` fields, and the
//! counts the tensors fix (`ARCH.block_count`, `ARCH.expert_count`).
//!
//! Values are given as text ([`parse_value`]): a scalar as Rust parses it, an array as
//! JSON, typed by a name like gguf-py's ([`Ty::parse`]) or by the key's current type.

use crate::error::{Error, Result};
use crate::gguf::metadata::encode_value;
use crate::gguf::writer::padding;
use crate::gguf::{Gguf, ValueType};
use crate::limits::{MAX_ARRAY_LEN, MAX_KV_COUNT, MAX_STRING_LEN};
use crate::model::OwnedValue;
use alloc::borrow::ToOwned;
use alloc::collections::BTreeSet;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::ops::Range;

mod value;
pub use value::{parse_set, parse_set_typed, parse_value, value_text, Ty, TYPE_NAMES};

/// The longest key the GGUF specification allows ("at most 2^16-1 bytes").
pub const MAX_KEY_LEN: usize = (1 << 16) - 1;

/// One edit of the metadata.
#[derive(Debug, Clone, PartialEq)]
pub enum Edit {
    /// Give `key` this value: in its place when it exists, else appended after the others.
    Set {
        /// The key.
        key: String,
        /// Its new value.
        value: OwnedValue,
    },
    /// Remove `key` (which must exist).
    Remove {
        /// The key.
        key: String,
    },
    /// Rename `from` (which must exist) to `to` (which must not), in its place.
    Rename {
        /// The key now.
        from: String,
        /// Its new name.
        to: String,
    },
}

impl Edit {
    /// The keys the edit names.
    fn keys(&self) -> impl Iterator<Item = &str> {
        let (a, b) = match self {
            Edit::Set { key, .. } | Edit::Remove { key } => (key.as_str(), None),
            Edit::Rename { from, to } => (from.as_str(), Some(to.as_str())),
        };
        core::iter::once(a).chain(b)
    }
}

/// What an edit did, for the report.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Change {
    /// `set`, `added`, `removed` or `renamed`.
    pub op: &'static str,
    /// The key (for a rename, its old name).
    pub key: String,
    /// A rename's new name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// The value's type after the edit (gguf-py's name), for `set` and `added`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value_type: Option<&'static str>,
}

impl Change {
    /// The change on one line, as `organ meta` prints it: `set      general.name (STRING)`,
    /// `renamed  a → b` (keys made printable).
    pub fn line(&self) -> String {
        let key = crate::gguf::display::printable(&self.key);
        match (&self.to, self.value_type) {
            (Some(to), _) => format!("{:<8} {key} → {}", self.op, crate::gguf::display::printable(to)),
            (None, Some(ty)) => format!("{:<8} {key} ({ty})", self.op),
            (None, None) => format!("{:<8} {key}", self.op),
        }
    }
}

/// A header edited: write [`Edited::header`], then the input's bytes [`Edited::data`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edited {
    /// The new header, padded to the alignment.
    pub header: Vec<u8>,
    /// The input's bytes that follow the header unchanged: its data section.
    pub data: Range<u64>,
    /// The input header's length, padding included (where its data section starts).
    pub old_header_len: u64,
    /// Each edit's effect, in the order applied.
    pub changes: Vec<Change>,
}

impl Edited {
    /// The output's length.
    pub fn file_len(&self) -> u64 {
        self.header.len() as u64 + (self.data.end - self.data.start)
    }

    /// Whether the header kept its exact length, so that it can be written over the
    /// input's own (`--in-place`): the data section stays where it is.
    pub fn same_size(&self) -> bool {
        self.header.len() as u64 == self.old_header_len
    }

    /// What `organ meta` (and the browser's editor) says it wrote to `out`:
    /// `wrote OUT (N bytes): header A → B bytes, tensor data copied as is`, then `tail`
    /// (what became of the rest: [`copied_shards`], for a split model).
    pub fn wrote(&self, out: &str, tail: &str) -> String {
        format!(
            "wrote {out} ({} bytes): header {} → {} bytes, tensor data copied as is{tail}",
            self.file_len(),
            self.old_header_len,
            self.header.len()
        )
    }
}

/// The tail of [`Edited::wrote`] for a model of `shards` files written whole: the shards
/// after the first, copied (nothing for one file).
pub fn copied_shards(shards: usize) -> String {
    match shards {
        0 | 1 => String::new(),
        n => format!(" and {} more shards copied as they are", n - 1),
    }
}

/// Why organ will not edit `key` in a model of architecture `arch`, if it will not.
pub fn refusal(key: &str, arch: Option<&str>) -> Option<String> {
    let per_arch =
        |suffix: &str| arch.is_some_and(|a| key.strip_prefix(a).and_then(|k| k.strip_prefix('.')) == Some(suffix));
    Some(if key == "general.alignment" {
        "the tensor data is laid out for this alignment; changing it would move every tensor, and organ meta copies \
         the data as it is"
            .to_owned()
    } else if key == "general.architecture" {
        "every ARCH.* key and every tensor is read by the architecture; another architecture is another conversion"
            .to_owned()
    } else if key.starts_with("split.") || key == crate::gguf::split::SET_ID_KEY {
        "split.* keys say how a model is cut into shards, and only a split writer (llama-gguf-split, organ \
         --split-max-size) can keep them true"
            .to_owned()
    } else if key.starts_with("GGUF.") {
        "GGUF.* are gguf-py's names for header fields (version, tensor and key counts), not metadata".to_owned()
    } else if per_arch("block_count") {
        "the number of blocks is fixed by the blk.N.* tensors; it changes only with them".to_owned()
    } else if per_arch("expert_count") {
        "the number of experts is fixed by the expert tensors' shapes; organ experts prunes them".to_owned()
    } else {
        return None;
    })
}

/// Checks a key organ would write: non-empty, ASCII without spaces or control characters,
/// at most [`MAX_KEY_LEN`] bytes (the GGUF specification's rules).
///
/// # Errors
/// [`Error::BadEdit`] saying which rule it breaks.
pub fn check_key(key: &str) -> Result<()> {
    let bad = |reason: String| Err(Error::BadEdit { key: key.chars().take(80).collect(), reason });
    if key.is_empty() {
        return bad("a key cannot be empty".into());
    }
    if key.len() > MAX_KEY_LEN {
        return bad(format!("a key of {} bytes; GGUF keys are at most {MAX_KEY_LEN} bytes", key.len()));
    }
    if let Some(c) = key.chars().find(|c| !c.is_ascii_graphic()) {
        return bad(format!("{c:?} in a key; GGUF keys are ASCII with no spaces"));
    }
    Ok(())
}

/// Applies `edits` to the header `g` of a file of architecture `g.architecture()`: every
/// removal first, then every rename, then every set, each in the order given. A key named
/// by two edits is refused, as is any key [`refusal`] names.
///
/// # Errors
/// [`Error::BadEdit`] naming the key: refused, absent (removed or renamed), already there
/// (a rename's target), named twice, or malformed; or a header too large to write.
pub fn edit(g: &Gguf<'_>, edits: &[Edit]) -> Result<Edited> {
    let arch = g.architecture();
    let bad = |key: &str, reason: String| Error::BadEdit { key: key.to_owned(), reason };
    let mut named = BTreeSet::new();
    for e in edits {
        for k in e.keys() {
            if let Some(why) = refusal(k, arch) {
                return Err(bad(k, format!("organ does not change it: {why}")));
            }
            if !named.insert(k) {
                return Err(bad(k, "named by two edits; give one edit per key".into()));
            }
        }
    }
    // The metadata as it will be written: keys with their values, in order.
    let mut kvs: Vec<(String, OwnedValue)> =
        g.kvs.iter().map(|kv| (kv.key.to_owned(), OwnedValue::from_meta(&kv.value))).collect();
    let position = |kvs: &[(String, OwnedValue)], key: &str| kvs.iter().position(|(k, _)| k == key);
    let mut changes = Vec::with_capacity(edits.len());
    let order = |e: &Edit| match e {
        Edit::Remove { .. } => 0,
        Edit::Rename { .. } => 1,
        Edit::Set { .. } => 2,
    };
    let mut sorted: Vec<&Edit> = edits.iter().collect();
    sorted.sort_by_key(|e| order(e));
    for e in sorted {
        match e {
            Edit::Remove { key } => {
                let i = position(&kvs, key).ok_or_else(|| bad(key, "no such key to remove".into()))?;
                kvs.remove(i);
                changes.push(Change { op: "removed", key: key.clone(), to: None, value_type: None });
            }
            Edit::Rename { from, to } => {
                check_key(to)?;
                let i = position(&kvs, from).ok_or_else(|| bad(from, "no such key to rename".into()))?;
                if position(&kvs, to).is_some() {
                    return Err(bad(to, format!("cannot rename {from:?} to it: the key exists; remove it first")));
                }
                kvs[i].0 = to.clone();
                changes.push(Change { op: "renamed", key: from.clone(), to: Some(to.clone()), value_type: None });
            }
            Edit::Set { key, value } => {
                check_key(key)?;
                check_value(key, value)?;
                let ty = type_name(value);
                match position(&kvs, key) {
                    Some(i) => {
                        kvs[i].1 = value.clone();
                        changes.push(Change { op: "set", key: key.clone(), to: None, value_type: Some(ty) });
                    }
                    None => {
                        kvs.push((key.clone(), value.clone()));
                        changes.push(Change { op: "added", key: key.clone(), to: None, value_type: Some(ty) });
                    }
                }
            }
        }
    }
    if kvs.len() as u64 > MAX_KV_COUNT {
        return Err(Error::Unwritable { reason: format!("{} metadata keys (organ reads {MAX_KV_COUNT})", kvs.len()) });
    }
    let header = encode_header(g, &kvs)?;
    let data_start = g.data_offset.min(g.file_len);
    Ok(Edited { header, data: data_start..g.file_len, old_header_len: g.data_offset, changes })
}

/// The header of `g` with metadata `kvs`: the same version, and the same tensor infos
/// with the same offsets (the data section does not move relative to its start). It is
/// held to the header budget as it grows, as the reader holds it: organ writes no header
/// it would refuse to read, and never holds much more of one than that.
fn encode_header(g: &Gguf<'_>, kvs: &[(String, OwnedValue)]) -> Result<Vec<u8>> {
    let limit = crate::limits::max_header_bytes();
    let over = |len: usize, at: &str| Error::BadEdit {
        key: at.chars().take(80).collect(),
        reason: format!(
            "with the edits the header reaches {len} bytes at this key, more than the header budget of {limit} bytes \
             (--max-header-bytes): organ writes no header it would refuse to read"
        ),
    };
    let mut h = Vec::new();
    h.extend_from_slice(b"GGUF");
    h.extend_from_slice(&g.version.to_le_bytes());
    h.extend_from_slice(&(g.tensors.len() as u64).to_le_bytes());
    h.extend_from_slice(&(kvs.len() as u64).to_le_bytes());
    for (key, value) in kvs {
        h.extend_from_slice(&(key.len() as u64).to_le_bytes());
        h.extend_from_slice(key.as_bytes());
        let v = value.view()?;
        h.extend_from_slice(&v.value_type().code().to_le_bytes());
        encode_value(&v, &mut h);
        if h.len() as u64 > limit {
            return Err(over(h.len(), key));
        }
    }
    for t in &g.tensors {
        h.extend_from_slice(&(t.name.len() as u64).to_le_bytes());
        h.extend_from_slice(t.name.as_bytes());
        h.extend_from_slice(&t.n_dims.to_le_bytes());
        for d in t.shape() {
            h.extend_from_slice(&d.to_le_bytes());
        }
        h.extend_from_slice(&t.ty.id().to_le_bytes());
        h.extend_from_slice(&t.offset.to_le_bytes());
    }
    let pad = padding(h.len() as u64, g.alignment);
    h.resize(h.len() + pad as usize, 0);
    if h.len() as u64 > limit {
        return Err(over(h.len(), "(the tensor infos)"));
    }
    Ok(h)
}

/// Checks a value against the caps organ reads with, so that its output opens again.
fn check_value(key: &str, v: &OwnedValue) -> Result<()> {
    let over = |what: &str, n: u64, cap: u64| {
        Err(Error::BadEdit { key: key.to_owned(), reason: format!("{what} of {n}, more than the {cap} organ reads") })
    };
    match v {
        OwnedValue::Str(s) if s.len() as u64 > MAX_STRING_LEN => over("a string", s.len() as u64, MAX_STRING_LEN),
        OwnedValue::Array { len, .. } if *len > MAX_ARRAY_LEN => over("an array", *len, MAX_ARRAY_LEN),
        _ => Ok(()),
    }
}

/// gguf-py's name of a value's type, `ARRAY[UINT32]` for arrays.
fn type_name(v: &OwnedValue) -> &'static str {
    match v {
        OwnedValue::Scalar(s) => s.value_type().name(),
        OwnedValue::Str(_) => "STRING",
        OwnedValue::Array { elem_type, .. } => match elem_type {
            ValueType::U8 => "ARRAY[UINT8]",
            ValueType::I8 => "ARRAY[INT8]",
            ValueType::U16 => "ARRAY[UINT16]",
            ValueType::I16 => "ARRAY[INT16]",
            ValueType::U32 => "ARRAY[UINT32]",
            ValueType::I32 => "ARRAY[INT32]",
            ValueType::F32 => "ARRAY[FLOAT32]",
            ValueType::Bool => "ARRAY[BOOL]",
            ValueType::String => "ARRAY[STRING]",
            ValueType::Array => "ARRAY[ARRAY]",
            ValueType::U64 => "ARRAY[UINT64]",
            ValueType::I64 => "ARRAY[INT64]",
            ValueType::F64 => "ARRAY[FLOAT64]",
        },
    }
}

/// Why a header is not one whole model to edit: a shard of a split model (`split.count`
/// above 1), which only a split writer can keep consistent with its other shards.
pub fn shard_refusal(g: &Gguf<'_>) -> Option<String> {
    let n = g.get("split.count").and_then(|v| v.as_u64()).filter(|&n| n > 1)?;
    Some(format!("shard of a model split in {n} (split.count); organ meta edits one whole GGUF file"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::writer::{plan, TensorSpec};
    use crate::gguf::MetaValue;
    use crate::GgmlType;
    use alloc::string::ToString;
    use alloc::vec;

    /// A small GGUF: three keys, two F32 tensors of 8 values, their data (1.0, 2.0, …).
    fn model() -> Vec<u8> {
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
        let g = Gguf::parse(file, file.len() as u64)?;
        let e = edit(&g, edits)?;
        let mut out = e.header.clone();
        out.extend_from_slice(&file[e.data.start as usize..e.data.end as usize]);
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
        for key in
            ["general.alignment", "general.architecture", "split.count", "GGUF.tensor_count", "llama.block_count"]
        {
            assert!(e(&[set(key, "1", Some("u32"))]).contains("organ does not change it"), "{key}");
        }
        assert!(e(&[Edit::Remove { key: "nope".into() }]).contains("no such key"));
        assert!(e(&[Edit::Rename { from: "nope".into(), to: "x".into() }]).contains("no such key"));
        assert!(e(&[Edit::Rename { from: "general.name".into(), to: "llama.block_count".into() }])
            .contains("organ does not"));
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
}
