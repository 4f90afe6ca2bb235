//! The parsed header: version, metadata, tensor infos, data offset.

use super::metadata::{read_string, read_value_type, Budget, MetaValue};
use super::tensor::TensorInfo;
use crate::error::{Error, Result};
use crate::limits::{MAX_ALIGNMENT, MAX_KV_COUNT, MAX_TENSOR_COUNT};
use crate::reader::Cursor;
use alloc::collections::BTreeSet;
use alloc::string::ToString;
use alloc::vec::Vec;

/// The alignment of the data section when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;

/// One metadata key/value pair.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MetaKv<'a> {
    /// The key (`general.architecture`).
    pub key: &'a str,
    /// The value.
    pub value: MetaValue<'a>,
    /// Where the pair starts in the file.
    pub offset: u64,
}

/// A parsed GGUF header. Everything borrows from the bytes it was parsed from.
#[derive(Debug, Clone)]
pub struct Gguf<'a> {
    /// 2 or 3.
    pub version: u32,
    /// Metadata in file order.
    pub kvs: Vec<MetaKv<'a>>,
    /// Tensor infos in file order.
    pub tensors: Vec<TensorInfo<'a>>,
    /// The data section's alignment.
    pub alignment: u64,
    /// Where the data section starts: the header's length, padding included.
    pub data_offset: u64,
    /// The file's length as given to [`Gguf::parse`].
    pub file_len: u64,
}

/// Where the tensors' data must lie.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Data {
    /// Inside the file.
    InFile,
    /// Anywhere: the file may be cut short.
    MayBeCut,
}

impl<'a> Gguf<'a> {
    /// Parses the header of a GGUF file of `file_len` bytes from `prefix`, its first bytes.
    ///
    /// `prefix` may be the whole file (a memory map) or any shorter prefix: when it ends
    /// before the header does, the error is [`Error::Incomplete`] and
    /// [`Error::needed_len`] says how many bytes to read before trying again. Every count,
    /// length and offset is checked against [`crate::limits`] and against `file_len`, so a
    /// hostile header is refused before anything large is allocated.
    ///
    /// # Errors
    /// Any [`Error`] naming the offset or tensor at fault.
    pub fn parse(prefix: &'a [u8], file_len: u64) -> Result<Gguf<'a>> {
        // A header past the budget is refused as soon as a read would cross it, and an
        // incomplete prefix never asks for more than the budget.
        let limit = crate::limits::max_header_bytes();
        let over = |offset: u64, needed: u64| Error::HeaderBudget { offset, needed, limit };
        match Self::parse_within(prefix, file_len, limit, Data::InFile) {
            Err(Error::Incomplete { offset, needed, .. }) if needed > limit => Err(over(offset, needed)),
            r => r,
        }
    }

    /// [`Gguf::parse`] of a file that may be cut short (a partial download): the header
    /// must be whole, but tensor data may lie past `file_len`. The tensors are all
    /// located; [`super::cut::Cut::of`] says which are whole, cut or absent, and
    /// [`Gguf::within_file`] keeps the whole ones, the only ones whose bytes may be read.
    ///
    /// # Errors
    /// As [`Gguf::parse`], less the data lying past the end of the file.
    pub fn parse_cut_short(prefix: &'a [u8], file_len: u64) -> Result<Gguf<'a>> {
        let limit = crate::limits::max_header_bytes();
        let over = |offset: u64, needed: u64| Error::HeaderBudget { offset, needed, limit };
        match Self::parse_within(prefix, file_len, limit, Data::MayBeCut) {
            Err(Error::Incomplete { offset, needed, .. }) if needed > limit => Err(over(offset, needed)),
            r => r,
        }
    }

    /// The header less the tensors whose bytes are not wholly in the file.
    pub fn within_file(mut self) -> Gguf<'a> {
        let len = self.file_len;
        self.tensors.retain(|t| t.file_offset.checked_add(t.n_bytes).is_some_and(|e| e <= len));
        self
    }

    /// [`Gguf::parse`], the header reads of which stop at `limit` bytes: a read past it
    /// inside the file is [`Error::Incomplete`] with `needed` past `limit`.
    fn parse_within(prefix: &'a [u8], file_len: u64, limit: u64, data: Data) -> Result<Gguf<'a>> {
        let prefix = &prefix[..prefix.len().min(usize::try_from(limit).unwrap_or(usize::MAX))];
        let mut c = Cursor::new(prefix, file_len);
        let magic: [u8; 4] = c.array("magic")?;
        if &magic != b"GGUF" {
            return Err(Error::BadMagic { found: magic, hint: not_gguf(prefix) });
        }
        let version = c.u32("version")?;
        if version != 0 && version & 0xFFFF == 0 {
            return Err(Error::BigEndian { version });
        }
        if !(2..=3).contains(&version) {
            return Err(Error::UnsupportedVersion { version });
        }
        let at = c.pos();
        let tensor_count = c.u64("tensor count")?;
        // A tensor info takes at least 8 (name length) + 4 (n_dims) + 4 (type) + 8 (offset).
        check_count(&c, at, "tensor count", tensor_count, MAX_TENSOR_COUNT, 24)?;
        let at = c.pos();
        let kv_count = c.u64("metadata count")?;
        // A pair takes at least 8 (key length) + 4 (type) + 1 (value).
        check_count(&c, at, "metadata count", kv_count, MAX_KV_COUNT, 13)?;

        let mut kvs = Vec::with_capacity(kv_count as usize);
        let mut keys = BTreeSet::new();
        let mut budget = Budget::default();
        for _ in 0..kv_count {
            let offset = c.pos();
            let raw = read_string(&mut c, "metadata key")?;
            let key = core::str::from_utf8(raw).map_err(|_| Error::BadUtf8 { offset, what: "metadata key" })?;
            if !keys.insert(key) {
                return Err(Error::DuplicateKey { offset, key: key.to_string() });
            }
            let ty = read_value_type(&mut c)?;
            let value = MetaValue::parse(&mut c, ty, 0, &mut budget)?;
            kvs.push(MetaKv { key, value, offset });
        }

        let mut tensors = Vec::with_capacity(tensor_count as usize);
        let mut names = BTreeSet::new();
        for _ in 0..tensor_count {
            let t = TensorInfo::parse(&mut c)?;
            if !names.insert(t.name) {
                return Err(Error::DuplicateTensor { offset: t.info_offset, tensor: t.name.to_string() });
            }
            tensors.push(t);
        }

        let alignment = alignment_of(&kvs)?;
        let header_end = c.pos();
        let data_offset = header_end.checked_next_multiple_of(alignment).ok_or(Error::TooLarge {
            offset: header_end,
            what: "header end",
            value: header_end,
            limit: u64::MAX,
        })?;
        // The padding is part of the header: a prefix must hold it, and so must the file
        // (a file with no tensors may end right after the infos).
        // A file cut short may end inside the padding, or before it.
        let cut_before_data = data == Data::MayBeCut && data_offset > c.file_len();
        if !tensors.is_empty() && !cut_before_data {
            c.skip(data_offset - header_end, "padding before the data section")?;
        }
        let data_end = if data == Data::MayBeCut { u64::MAX } else { c.file_len() };
        for t in &mut tensors {
            t.locate(data_offset, alignment, data_end)?;
        }
        Ok(Gguf { version, kvs, tensors, alignment, data_offset, file_len: c.file_len() })
    }

    /// The value of a metadata key.
    pub fn get(&self, key: &str) -> Option<&MetaValue<'a>> {
        self.kvs.iter().find(|kv| kv.key == key).map(|kv| &kv.value)
    }

    /// `general.architecture`, if present and UTF-8.
    pub fn architecture(&self) -> Option<&'a str> {
        self.get("general.architecture").and_then(|v| v.as_str())
    }

    /// The tensor with this name.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo<'a>> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// Total element count over all tensors.
    pub fn parameter_count(&self) -> u64 {
        self.tensors.iter().map(|t| t.n_elements).fold(0u64, u64::saturating_add)
    }
}

fn check_count(c: &Cursor<'_>, offset: u64, what: &'static str, value: u64, cap: u64, min_size: u64) -> Result<()> {
    if value > cap {
        return Err(Error::TooLarge { offset, what, value, limit: cap });
    }
    let remaining = c.file_remaining();
    let limit = remaining / min_size;
    if value > limit {
        return Err(Error::CountPastEnd { offset, what, value, remaining, limit });
    }
    Ok(())
}

fn alignment_of(kvs: &[MetaKv<'_>]) -> Result<u64> {
    let Some(kv) = kvs.iter().find(|kv| kv.key == "general.alignment") else {
        return Ok(DEFAULT_ALIGNMENT);
    };
    let bad = |reason: alloc::string::String| Error::BadMetadata { key: kv.key.to_string(), reason };
    let MetaValue::U32(a) = kv.value else {
        return Err(bad(alloc::format!("must be UINT32, found {}", kv.value.value_type().name())));
    };
    let a = u64::from(a);
    if a == 0 || !a.is_power_of_two() || a > MAX_ALIGNMENT {
        return Err(bad(alloc::format!("{a} is not a non-zero power of two up to {MAX_ALIGNMENT}")));
    }
    Ok(a)
}

/// What a file that is not GGUF looks like, from its first bytes, for the error: the
/// formats people mistake for GGUF (the model before conversion, a GGML-era file, a web
/// page saved instead of the download).
fn not_gguf(prefix: &[u8]) -> &'static str {
    let starts = |m: &[u8]| prefix.starts_with(m);
    // safetensors: a little-endian u64 header length (far below 2^32), then the JSON header.
    let safetensors = prefix.get(4..8).is_some_and(|n| n.iter().all(|&b| b == 0)) && prefix.get(8) == Some(&b'{');
    if safetensors {
        return ": a safetensors file; llama.cpp's convert_hf_to_gguf.py makes a GGUF of its model";
    }
    if starts(b"PK\x03\x04") {
        return ": a zip archive (a PyTorch checkpoint?); llama.cpp's convert_hf_to_gguf.py makes a GGUF of its model";
    }
    if starts(&[0x80]) && prefix.get(1).is_some_and(|v| (2..=5).contains(v)) {
        return ": a Python pickle (an old PyTorch checkpoint?); llama.cpp's convert_hf_to_gguf.py makes a GGUF of \
                its model";
    }
    // ggml, ggmf and ggjt: each magic a little-endian u32.
    if starts(b"lmgg") || starts(b"fmgg") || starts(b"tjgg") {
        return ": a GGML-era file (ggml, ggmf or ggjt, from before GGUF), which current llama.cpp does not read";
    }
    let text = prefix.trim_ascii_start();
    if text.starts_with(b"<!") || text.starts_with(b"<html") || text.starts_with(b"<HTML") {
        return ": an HTML page (a download that saved a web page instead of the file?)";
    }
    if text.starts_with(b"{") {
        return ": JSON text";
    }
    ""
}
