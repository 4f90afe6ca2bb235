//! The legacy `.dat` importance matrix (llama-imatrix `--output-format dat`), read as
//! `common_imatrix_load_legacy` (common/imatrix-loader.cpp) reads it, when a file is not a
//! GGUF: an `i32` entry count, then per entry an `i32` name length, the name, `ncall` and
//! `nval` (`i32`), `nval` f32 sums already scaled to `ncall` calls (each column's mean
//! square times `ncall`); then, optionally, the chunk count (`i32`) and the dataset's name
//! (`i32` length, bytes). Every length is checked against the bytes left, where the C
//! reader allocates first; every value must be finite and non-negative, as in the GGUF.

use super::{bad, Entry, Imatrix, MAX_MEAN_SQUARE};
use crate::error::Result;
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

/// How every error about such a file begins.
const NOT_GGUF: &str = "not a GGUF, so read as llama-imatrix's legacy .dat format";

/// A cursor over the file's bytes.
struct Bytes<'a> {
    rest: &'a [u8],
}

impl<'a> Bytes<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = (self.rest.get(..n)?, self.rest.get(n..)?);
        self.rest = rest;
        Some(head)
    }

    fn i32(&mut self) -> Option<i32> {
        self.take(4).map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
}

/// A name as the C reader keeps it: the bytes up to the first NUL.
fn c_string(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

/// Parses a legacy `.dat` file. `Entry::counts` holds the one `ncall` of each entry and
/// `Entry::sum2` its sums, so that `sum2 / counts` is the mean square, as for a GGUF (a
/// MoE weight's experts are one entry of `n_expert · n_in` columns here: the format
/// keeps no expert count).
pub(super) fn parse(file: &[u8]) -> Result<Imatrix> {
    let mut b = Bytes { rest: file };
    let n = b.i32().filter(|&n| n >= 1).ok_or_else(|| bad(format!("{NOT_GGUF}: no entry count ≥ 1 at its start")))?;
    let mut entries = BTreeMap::new();
    for i in 0..n {
        let at = |what: &str| bad(format!("{NOT_GGUF}: entry {i} of {n}: {what}"));
        let len = b.i32().and_then(|l| usize::try_from(l).ok()).ok_or_else(|| at("no name length ≥ 0"))?;
        let name = c_string(b.take(len).ok_or_else(|| at(&format!("its name of {len} bytes runs past the end")))?);
        let ncall = b.i32().ok_or_else(|| at("cut short before its call count"))?;
        let nval = b.i32().and_then(|v| usize::try_from(v).ok()).filter(|&v| v >= 1);
        let nval = nval.ok_or_else(|| at(&format!("{name}: no value count ≥ 1")))?;
        let data = nval.checked_mul(4).and_then(|n| b.take(n));
        let data = data.ok_or_else(|| at(&format!("{name}: its {nval} values run past the end")))?;
        let sum2: Vec<f32> = data.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        // The C reader divides by ncall when it is positive, and takes the sums as they
        // are otherwise; either way a mean square beyond the bound is refused.
        let scale = if ncall > 0 { ncall as f32 } else { 1.0 };
        let out_of_range =
            |s: &f32| !s.is_finite() || *s < 0.0 || (s / scale).partial_cmp(&MAX_MEAN_SQUARE).is_none_or(|o| o.is_gt());
        if let Some(j) = sum2.iter().position(out_of_range) {
            let reason =
                format!("{name}: value {j} is {:e}, expected a finite sum of squares ≥ 0 over {ncall} calls", sum2[j]);
            return Err(at(&reason));
        }
        let e = Entry { name: name.clone(), n_in: nval, counts: Vec::from([ncall as f32]), sum2 };
        // A repeated name replaces the earlier entry, as the C reader's map does.
        entries.insert(name, e);
    }
    // The trailer is optional, and the C reader takes what it finds of it: the chunk
    // count from whatever bytes are left of its four, the dataset only when whole.
    let mut chunk_count = None;
    let mut datasets = Vec::new();
    if !b.rest.is_empty() {
        let mut c = [0u8; 4];
        let k = b.rest.len().min(4);
        c[..k].copy_from_slice(&b.rest[..k]);
        chunk_count = u64::try_from(i32::from_le_bytes(c)).ok();
        if b.take(4).is_some() {
            if let Some(len) = b.i32().and_then(|l| usize::try_from(l).ok()).filter(|&l| l > 0) {
                if let Some(d) = b.take(len) {
                    datasets.push(c_string(d));
                }
            }
        }
    }
    Ok(Imatrix { datasets, chunk_count, chunk_size: None, entries, legacy: true })
}

/// The legacy format of `entries` (name, ncall, sums) and the trailer (chunks, dataset),
/// for tests.
#[cfg(test)]
pub(super) fn write(entries: &[(&str, i32, &[f32])], trailer: Option<(i32, &str)>) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&(entries.len() as i32).to_le_bytes());
    for (name, ncall, sums) in entries {
        out.extend_from_slice(&(name.len() as i32).to_le_bytes());
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(&ncall.to_le_bytes());
        out.extend_from_slice(&(sums.len() as i32).to_le_bytes());
        sums.iter().for_each(|s| out.extend_from_slice(&s.to_le_bytes()));
    }
    if let Some((chunks, dataset)) = trailer {
        out.extend_from_slice(&chunks.to_le_bytes());
        out.extend_from_slice(&(dataset.len() as i32).to_le_bytes());
        out.extend_from_slice(dataset.as_bytes());
    }
    out
}
