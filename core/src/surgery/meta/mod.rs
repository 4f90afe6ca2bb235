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

mod pieces;
mod tensors;
mod value;
pub use pieces::{convert_tensor, Piece};
pub use tensors::{plan as plan_tensors, Kept, TensorChange, TensorEdit, TensorPlan, MAX_GGML_NAME_LEN};
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

/// A model edited: write [`Edited::header`], then each of [`Edited::pieces`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edited {
    /// The new header, padded to the alignment.
    pub header: Vec<u8>,
    /// What follows the header, in order: the input's data section as it is
    /// ([`Edited::data`]), or, when tensors were removed or retyped, each tensor's bytes
    /// copied or converted and its padding.
    pub pieces: Vec<Piece>,
    /// Whether the data section is the input's as it is (the tensor offsets unchanged).
    as_is: bool,
    /// The input header's length, padding included (where its data section starts).
    pub old_header_len: u64,
    /// Each metadata edit's effect, in the order applied.
    pub changes: Vec<Change>,
    /// Each tensor edit's effect: removals, retypes, then renames, in the input's order.
    pub tensor_changes: Vec<TensorChange>,
}

impl Edited {
    /// The output's length.
    pub fn file_len(&self) -> u64 {
        self.header.len() as u64 + self.pieces.iter().map(Piece::len).sum::<u64>()
    }

    /// The input's bytes that follow the header unchanged (its data section), when the
    /// data is copied as it is: no tensor removed or retyped.
    pub fn data(&self) -> Option<Range<u64>> {
        match (self.as_is, self.pieces.as_slice()) {
            (true, [Piece::Copy(r)]) => Some(r.clone()),
            _ => None,
        }
    }

    /// Whether the header kept its exact length and the data is the input's, so that the
    /// header can be written over the input's own (`--in-place`).
    pub fn same_size(&self) -> bool {
        self.header.len() as u64 == self.old_header_len && self.data().is_some()
    }

    /// Each change on its line, as `organ meta` prints them: the metadata's, then the
    /// tensors'.
    pub fn lines(&self) -> Vec<String> {
        self.changes.iter().map(Change::line).chain(self.tensor_changes.iter().map(TensorChange::line)).collect()
    }

    /// What `organ meta` (and the browser's editor) says it wrote to `out`:
    /// `wrote OUT (N bytes): header A → B bytes, tensor data copied as is`, then `tail`
    /// (what became of the rest: [`copied_shards`], for a split model). With tensors
    /// removed or retyped, how many tensors were copied and converted.
    pub fn wrote(&self, out: &str, tail: &str) -> String {
        let data = match self.data() {
            Some(_) => "tensor data copied as is".to_owned(),
            None => {
                let (mut copied, mut converted) = (0, 0);
                for p in &self.pieces {
                    match p {
                        Piece::Copy(_) => copied += 1,
                        Piece::Convert { .. } => converted += 1,
                        Piece::Zeros(_) => {}
                    }
                }
                format!("tensor data laid out again: {copied} tensors copied as they are, {converted} converted")
            }
        };
        format!(
            "wrote {out} ({} bytes): header {} → {} bytes, {data}{tail}",
            self.file_len(),
            self.old_header_len,
            self.header.len()
        )
    }
}

/// What an edit with tensor edits `tensors` edits, for its error: `its metadata`, or `its
/// metadata and tensors`.
pub fn what(tensors: &[TensorEdit]) -> &'static str {
    match tensors.is_empty() {
        true => "its metadata",
        false => "its metadata and tensors",
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
    edit_all(g, edits, &[])
}

/// [`edit`], and the tensor edits `tensors` ([`tensors::plan`]): renames rewrite the
/// tensor infos alone (the data copied as it is, the offsets unchanged); a removal or a
/// retype lays the data out again, each kept tensor's bytes copied as they are or
/// converted, at offsets recomputed with the file's alignment.
///
/// # Errors
/// As [`edit`]; [`Error::BadSetting`] naming a tensor edit's flag (see [`tensors::plan`]).
pub fn edit_all(g: &Gguf<'_>, edits: &[Edit], tensors: &[TensorEdit]) -> Result<Edited> {
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
    let plan = tensors::plan(g, tensors)?;
    let (pieces, offsets) = match plan.relaid {
        false => {
            let data_start = g.data_offset.min(g.file_len);
            let offsets = plan.kept.iter().map(|k| g.tensors[k.input].offset).collect();
            (alloc::vec![Piece::Copy(data_start..g.file_len)], offsets)
        }
        true => pieces::lay_out(g, &plan)?,
    };
    let infos = plan.kept.iter().zip(offsets).map(|(k, offset)| Info {
        name: &k.name,
        dims: g.tensors[k.input].shape(),
        ty: k.ty,
        offset,
    });
    let header = encode_header(g, &kvs, infos)?;
    Ok(Edited {
        header,
        pieces,
        as_is: !plan.relaid,
        old_header_len: g.data_offset,
        changes,
        tensor_changes: plan.changes,
    })
}

/// A tensor info as [`encode_header`] writes it.
struct Info<'a> {
    name: &'a str,
    dims: &'a [u64],
    ty: crate::GgmlType,
    offset: u64,
}

/// The header of `g` with metadata `kvs` and tensor infos `infos`: the same version and
/// alignment. It is held to the header budget as it grows, as the reader holds it: organ
/// writes no header it would refuse to read, and never holds much more of one than that.
fn encode_header<'a>(
    g: &Gguf<'_>,
    kvs: &[(String, OwnedValue)],
    infos: impl ExactSizeIterator<Item = Info<'a>>,
) -> Result<Vec<u8>> {
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
    h.extend_from_slice(&(infos.len() as u64).to_le_bytes());
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
    for t in infos {
        h.extend_from_slice(&(t.name.len() as u64).to_le_bytes());
        h.extend_from_slice(t.name.as_bytes());
        h.extend_from_slice(&(t.dims.len() as u32).to_le_bytes());
        for d in t.dims {
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

/// The check's errors and warnings ([`crate::check::model_findings`]: the metadata and
/// shapes against what llama.cpp's loader expects, no tensor byte read) that the edited
/// model has and the input `g` had not: what the edits broke, if anything (a layer's
/// tensor removed or renamed, a key llama.cpp needs removed). organ meta does what it is
/// told, as gguf-editor does, and says this after.
///
/// # Errors
/// The edited header does not read back (it always should).
pub fn new_findings(g: &Gguf<'_>, e: &Edited) -> Result<Vec<crate::check::Finding>> {
    let after = Gguf::parse(&e.header, e.file_len())?;
    let (before, _) = crate::check::model_findings(&crate::model::Model::from_gguf(g, 0));
    let (after, _) = crate::check::model_findings(&crate::model::Model::from_gguf(&after, 0));
    Ok(after.into_iter().filter(|f| f.severity != crate::check::Severity::Info && !before.contains(f)).collect())
}

/// What `organ meta` prints after the line that says what it wrote, of the [`new_findings`]
/// of a model written to `out`: nothing when there are none, else a line saying how many
/// and where to look, then [`finding_lines`], indented.
pub fn findings_text(findings: &[crate::check::Finding], out: &str) -> Vec<String> {
    if findings.is_empty() {
        return Vec::new();
    }
    let what = match findings.len() {
        1 => "1 problem".to_owned(),
        n => format!("{n} problems"),
    };
    let intro = format!(
        "the edited model has {what} the input had not; llama.cpp may refuse it (organ check {out} says more):"
    );
    core::iter::once(intro).chain(finding_lines(findings).into_iter().map(|l| format!("  {l}"))).collect()
}

/// [`new_findings`] as `organ meta` prints them, after [`findings_text`]'s first line: one
/// line each, at most three of a kind (a rename over every layer is one story, not sixty
/// lines), the rest counted.
fn finding_lines(findings: &[crate::check::Finding]) -> Vec<String> {
    const SHOWN: usize = 3;
    let mut kinds: Vec<(crate::check::Severity, crate::check::Kind, usize)> = Vec::new();
    let mut lines = Vec::new();
    for f in findings {
        let n = match kinds.iter_mut().find(|k| (k.0, k.1) == (f.severity, f.kind)) {
            Some(k) => {
                k.2 += 1;
                k.2
            }
            None => {
                kinds.push((f.severity, f.kind, 1));
                1
            }
        };
        if n > SHOWN {
            continue;
        }
        let sev = match f.severity {
            crate::check::Severity::Error => "error",
            _ => "warning",
        };
        let subject = match f.subject.is_empty() {
            true => String::new(),
            false => format!("{}: ", crate::gguf::display::printable(&f.subject)),
        };
        lines.push(format!("{sev}: {subject}{}", crate::gguf::display::printable(&f.message)));
    }
    let more: usize = kinds.iter().map(|k| k.2.saturating_sub(SHOWN)).sum();
    if more > 0 {
        lines.push(format!("… and {more} more like these"));
    }
    lines
}

/// Why a header is not one whole model to edit: a shard of a split model (`split.count`
/// above 1), which only a split writer can keep consistent with its other shards.
pub fn shard_refusal(g: &Gguf<'_>) -> Option<String> {
    let n = g.get("split.count").and_then(|v| v.as_u64()).filter(|&n| n > 1)?;
    Some(format!("shard of a model split in {n} (split.count); organ meta edits one whole GGUF file"))
}

#[cfg(test)]
mod tensor_tests;
#[cfg(test)]
mod tests;
