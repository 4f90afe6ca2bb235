//! The model every front end works on, whatever it was read from: a GGUF file, every shard
//! of a split GGUF, or an organ directory's manifest. It owns its metadata and lists its
//! tensors by where their bytes are (a file index and an offset); the bytes themselves
//! stay with the caller (a memory map, positioned reads, a browser `Blob`).
//!
//! Split sets are checked and joined here, once: [`Model::join`] runs
//! [`check_shards`] and drops the `split.*` keys (and [`SET_ID_KEY`]).
//!
//! An organ directory is read here too: its manifest ([`manifest`]) and the header of each
//! organ file ([`organ_bin`]).

pub mod manifest;
pub mod organ_bin;
mod value;

pub use value::{OwnedValue, SharedBuffer, ValueBytes};

use crate::error::{Error, Result};
use crate::ggml_type::GgmlType;
use crate::gguf::split::{check_shards, Shard, SplitError, SET_ID_KEY};
use crate::gguf::Gguf;
use crate::limits::MAX_TENSOR_ELEMENTS;
use alloc::borrow::{Cow, ToOwned};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use manifest::Manifest;

/// One tensor of a model: what it holds and where its bytes are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorEntry {
    /// Its name.
    pub name: String,
    /// Its type.
    pub ty: GgmlType,
    /// Its shape, ggml order.
    pub dims: Vec<u64>,
    /// Its element count (the product of `dims`, checked).
    pub n_elements: u64,
    /// Bytes of data.
    pub n_bytes: u64,
    /// Which file holds it: the index of the shard in a split set, of the tensor in an
    /// organ directory (one organ file each), 0 for a single GGUF.
    pub file: usize,
    /// Where its data starts in that file.
    pub offset: u64,
}

/// A model: GGUF version, metadata in file order, and tensors in file order. `T` is what a
/// tensor is to the caller ([`TensorEntry`] as built here; a front end may pair each entry
/// with the handle to its bytes).
#[derive(Debug, Clone, PartialEq)]
pub struct Model<T = TensorEntry> {
    /// The GGUF version (to write back).
    pub version: u32,
    /// Every metadata key and value, in order.
    pub kvs: Vec<(String, OwnedValue)>,
    /// Every tensor, in order.
    pub tensors: Vec<T>,
}

impl<T> Model<T> {
    /// The value of metadata key `key`.
    pub fn get(&self, key: &str) -> Option<&OwnedValue> {
        self.kvs.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The string value of `key` (bytes that are not UTF-8 replaced), if it is a string.
    pub fn text(&self, key: &str) -> Option<Cow<'_, str>> {
        match self.get(key)? {
            OwnedValue::Str(s) => Some(String::from_utf8_lossy(s)),
            _ => None,
        }
    }

    /// `general.architecture`.
    pub fn architecture(&self) -> Option<Cow<'_, str>> {
        self.text("general.architecture")
    }

    /// `general.name`.
    pub fn name(&self) -> Option<Cow<'_, str>> {
        self.text("general.name")
    }

    /// The same model with each tensor turned into a `U` (in the same order).
    pub fn map_tensors<U>(self, f: impl FnMut(T) -> U) -> Model<U> {
        Model { version: self.version, kvs: self.kvs, tensors: self.tensors.into_iter().map(f).collect() }
    }
}

impl Model {
    /// The model of one parsed GGUF, its tensors in file `file`. Nothing is checked or
    /// dropped: this is the file as it is (see [`Model::join`] for models).
    pub fn from_gguf(g: &Gguf<'_>, file: usize) -> Model {
        let kvs = g.kvs.iter().map(|kv| (kv.key.to_owned(), OwnedValue::from_meta(&kv.value))).collect();
        Model::with_kvs(g, file, kvs)
    }

    /// [`Model::from_gguf`] of `g` parsed from `buf`'s bytes: its values' bytes are
    /// ranges of `buf`, shared, not copies (a value outside `buf` is copied).
    pub fn from_gguf_in(g: &Gguf<'_>, file: usize, buf: &SharedBuffer) -> Model {
        let kvs = g.kvs.iter().map(|kv| (kv.key.to_owned(), OwnedValue::from_meta_in(&kv.value, buf))).collect();
        Model::with_kvs(g, file, kvs)
    }

    /// The model of `g`'s tensors, in file `file`, with `kvs`.
    fn with_kvs(g: &Gguf<'_>, file: usize, kvs: Vec<(String, OwnedValue)>) -> Model {
        let tensors = g
            .tensors
            .iter()
            .map(|t| TensorEntry {
                name: t.name.to_owned(),
                ty: t.ty,
                dims: t.shape().to_vec(),
                n_elements: t.n_elements,
                n_bytes: t.n_bytes,
                file,
                offset: t.file_offset,
            })
            .collect();
        Model { version: g.version, kvs, tensors }
    }

    /// The model the files make, in file-name order (each from [`Model::from_gguf`] with
    /// its index): one GGUF, or every shard of one split model ([`check_shards`]), joined:
    /// metadata from the first file, less the `split.*` keys and [`SET_ID_KEY`] when the
    /// files are a split set; tensors in file order.
    ///
    /// # Errors
    /// The first file found wrong, by its index, and why.
    pub fn join(files: Vec<Model>) -> core::result::Result<Model, SplitError> {
        let facts: Vec<Shard<'_>> = files.iter().map(Shard::of).collect();
        check_shards(&facts)?;
        let split = facts.iter().any(|f| f.count.is_some() || f.set_id.is_some());
        drop(facts);
        let mut it = files.into_iter();
        let Some(mut m) = it.next() else {
            return Err(SplitError { file: 0, reason: "no file given".into() });
        };
        for shard in it {
            m.tensors.extend(shard.tensors);
        }
        if split {
            m.kvs.retain(|(k, _)| !k.starts_with("split.") && k != SET_ID_KEY);
        }
        Ok(m)
    }

    /// The model an organ directory's manifest describes: tensor `i` in organ file `i`
    /// (its data after the organ header, [`organ_bin`]), whose header the
    /// caller checks against the entry before reading it.
    ///
    /// # Errors
    /// [`Error::BadMetadata`] for a value that does not decode; [`Error::BadManifest`] for
    /// a tensor of an unknown type, or whose shape is too large or not whole blocks.
    pub fn from_manifest(m: &Manifest) -> Result<Model> {
        let kvs = m.metadata.iter().map(manifest::decode_kv).collect::<Result<Vec<_>>>()?;
        let tensors = m.tensors.iter().enumerate().map(|(i, t)| entry_of(i, t)).collect::<Result<Vec<_>>>()?;
        Ok(Model { version: m.gguf_version, kvs, tensors })
    }
}

impl<'a> Shard<'a> {
    /// The shard facts of one file's model ([`Model::from_gguf`]). Here rather than beside
    /// [`Shard`], so that `gguf` does not depend on the model built from it.
    pub fn of<T: core::borrow::Borrow<TensorEntry>>(m: &'a Model<T>) -> Shard<'a> {
        let num = |k: &str| m.get(k).and_then(|v| v.as_u64());
        Shard {
            no: num("split.no"),
            count: num("split.count"),
            tensors_count: num("split.tensors.count"),
            tensors: m.tensors.iter().map(|t| t.borrow().name.as_str()).collect(),
            version: m.version,
            set_id: m.get(SET_ID_KEY).and_then(|v| v.as_str()),
        }
    }
}

/// The entry of manifest tensor `t`, in organ file `file`.
fn entry_of(file: usize, t: &manifest::ManifestTensor) -> Result<TensorEntry> {
    let bad = |why: String| Error::BadManifest { reason: format!("tensor {:?}: {why}", t.name) };
    let ty = GgmlType::from_name(&t.ty).ok_or_else(|| bad(format!("unknown type {:?}", t.ty)))?;
    let n_elements = t
        .shape
        .iter()
        .try_fold(1u64, |n, &d| n.checked_mul(d))
        .filter(|&n| n <= MAX_TENSOR_ELEMENTS)
        .ok_or_else(|| bad(format!("shape {:?} holds more than {MAX_TENSOR_ELEMENTS} elements", t.shape)))?;
    let bs = ty.block_size() as u64;
    if n_elements % bs != 0 {
        return Err(bad(format!("{n_elements} elements are not whole blocks of {bs} ({})", ty.name())));
    }
    // Under the element cap, blocks × block bytes fits u64.
    let n_bytes = n_elements / bs * ty.type_size() as u64;
    let offset = organ_bin::encode_header(&t.name, &t.shape, ty)?.len() as u64;
    Ok(TensorEntry { name: t.name.clone(), ty, dims: t.shape.clone(), n_elements, n_bytes, file, offset })
}

/// An F32 tensor named `name` of shape `dims`, at offset 0 of file 0: the unit tests'
/// hand-built models.
#[cfg(test)]
pub(crate) fn f32_entry(name: &str, dims: &[u64]) -> TensorEntry {
    let n: u64 = dims.iter().product();
    TensorEntry {
        name: name.into(),
        ty: GgmlType::F32,
        dims: dims.to_vec(),
        n_elements: n,
        n_bytes: 4 * n,
        file: 0,
        offset: 0,
    }
}

#[cfg(test)]
mod tests;
