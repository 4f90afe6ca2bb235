//! `organ check MODEL`: Check k1, a data-free health check of a GGUF, a split GGUF or an
//! organ directory. The logic is the core's ([`organ_core::check`]); this file reads every
//! tensor's bytes once, in parallel over tensors, a chunk at a time, through the core's
//! scanner; tensors that may be copies of each other (same type, shape and ends, by the
//! core's rule in `check::digest`) are then hashed whole, and the core compares the digests.
//! Bytes come through the memory maps, or by positioned reads into one buffer per thread
//! (`--stream`, automatic over 2 GiB), so memory stays bounded whatever the size.

use crate::model::{Model, Tensor};
use anyhow::Result;
use organ_core::check::{check_model, digest, CheckReport, ScanError, Scanner, TensorScan};
use organ_core::report::formats::{AnyReport, Shown};
use organ_core::zmeasure::GENERATOR;
use rayon::prelude::*;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

pub struct Options {
    pub model: PathBuf,
    /// The report files asked for (`--json`).
    pub files: super::outputs::Files,
    /// Positioned reads only, never mapping tensor data.
    pub stream: bool,
    pub force: bool,
    /// An adapter's base (`--base`): its pairs are checked against the base's weights.
    pub base: Option<PathBuf>,
    /// The model this one should be quantized from (`--derived-from`): every tensor is
    /// remade from it and compared ([`super::derived`]).
    pub derived_from: Option<PathBuf>,
    /// The importance matrix it was quantized with (`--imatrix`, with `derived_from`).
    pub imatrix: Option<PathBuf>,
}

/// Bytes read by positioned reads, for `--stats`.
pub static BYTES_READ: AtomicU64 = AtomicU64::new(0);

/// The chunk each tensor is scanned and hashed in: small enough to stay in cache between
/// the scan and the hash, large enough that the per-chunk work is nothing.
const CHUNK: usize = 1 << 20;

/// One tensor's scan (or why it could not be read) and the digest of its ends.
type Scanned = (std::result::Result<TensorScan, ScanError>, Option<[u8; 32]>);

/// Checks the model at `path` and returns the report (nothing written).
pub fn check_path(path: &Path, stream: bool) -> Result<CheckReport> {
    let (model, cut) = match Model::open(path) {
        Ok(m) => (m, None),
        // A file cut short: the tensors it holds whole are scanned, the header is checked
        // whole, and what the file lacks is one error.
        Err(e) => match Model::open_cut_short(path) {
            Some(c) => (c.whole, Some((c.header, c.cut))),
            None => return Err(e),
        },
    };
    let mut files: Vec<&crate::model_file::ModelFile> = model.tensors.iter().map(|t| &*t.in_file).collect();
    files.dedup_by_key(|f| f.path.clone());
    // Model::open refuses URLs: every file is in memory.
    let stream = crate::byte_source::stream(stream, true, files.iter().map(|f| f.bytes().len() as u64).sum());
    if stream {
        for f in files.iter().filter_map(|f| f.file()) {
            let _ = rustix::fs::fadvise(f, 0, None, rustix::fs::Advice::Sequential);
        }
    }
    let progress = crate::progress::tensor_bar();
    progress.set_message(model.label.clone());
    crate::progress::grow(&progress, model.tensors.len() as u64);
    let scanned: Vec<Scanned> = model
        .tensors
        .par_iter()
        .map_init(Vec::new, |buf, t| {
            let r = scan(t, stream, buf).map_err(|e| ScanError { reason: format!("{e:#}") });
            crate::progress::tensor_done(&progress);
            match r {
                Ok((s, d)) => (Ok(s), Some(d)),
                Err(e) => (Err(e), None),
            }
        })
        .collect();
    progress.finish_and_clear();
    let (scans, heads): (Vec<_>, Vec<_>) = scanned.into_iter().unzip();
    let digests = full_digests(&model, &heads, stream)?;
    let Some((header, cut)) = cut else {
        return Ok(check_model(GENERATOR, &model.label, &model.model, scans, &digests));
    };
    // The scans and digests of the whole tensors, in the header's order; the others are
    // not in the file.
    let mut by_name: std::collections::HashMap<&str, Scanned> =
        model.tensors.iter().map(|t| t.name.as_str()).zip(scans.into_iter().zip(digests)).collect();
    let (scans, digests): (Vec<_>, Vec<_>) = header
        .tensors
        .iter()
        .map(|t| {
            by_name
                .remove(t.name.as_str())
                .unwrap_or_else(|| (Err(ScanError { reason: "not in the file".into() }), None))
        })
        .unzip();
    let mut report = check_model(GENERATOR, &model.label, &header, scans, &digests);
    report.cut_short(&model.label, &cut);
    Ok(report)
}

/// The BLAKE3 of every tensor the core's rule says may be byte-identical to another
/// ([`digest::hash_whole`]: it shares its type, shape and ends with one); `None` for the
/// others, which spares hashing most of a model's bytes.
fn full_digests(model: &Model, ends: &[Option<[u8; 32]>], stream: bool) -> Result<Vec<Option<[u8; 32]>>> {
    let whole = digest::hash_whole(&model.tensors, ends);
    model
        .tensors
        .par_iter()
        .zip(whole)
        .map_init(Vec::new, |buf, (t, whole)| {
            if !whole {
                return Ok(None);
            }
            let mut hasher = digest::Hasher::new();
            let chunk = Scanner::chunk_len(t.ty, CHUNK);
            for_chunks(t, stream, 0, t.n_bytes, chunk, buf, |c| {
                hasher.update(c);
                Ok(())
            })?;
            Ok(Some(hasher.finish()))
        })
        .collect()
}

/// One tensor's scan, and the digest of its size and ends ([`digest::Ends`]).
fn scan(t: &Tensor, stream: bool, buf: &mut Vec<u8>) -> Result<(TensorScan, [u8; 32])> {
    let mut s = Scanner::new(t.ty, t.n_bytes);
    let mut ends = digest::Ends::new(t.n_bytes);
    let chunk = Scanner::chunk_len(t.ty, CHUNK);
    let mut at = 0;
    for_chunks(t, stream, 0, t.n_bytes, chunk, buf, |c| {
        ends.feed(at, c);
        at += c.len() as u64;
        Ok(s.update(c)?)
    })?;
    Ok((s.finish()?, ends.digest()))
}

/// Calls `f` on bytes `from..to` of tensor `t`'s data in order, `chunk` bytes at a time:
/// slices of the map, or positioned reads into `buf` when streaming.
fn for_chunks(
    t: &Tensor,
    stream: bool,
    from: u64,
    to: u64,
    chunk: usize,
    buf: &mut Vec<u8>,
    mut f: impl FnMut(&[u8]) -> Result<()>,
) -> Result<()> {
    if stream && t.owned.is_none() {
        buf.resize(chunk, 0);
        let mut at = from;
        while at < to {
            let n = (to - at).min(chunk as u64) as usize;
            t.in_file.read_exact_at(&mut buf[..n], t.offset + at)?;
            BYTES_READ.fetch_add(n as u64, Ordering::Relaxed);
            f(&buf[..n])?;
            at += n as u64;
        }
        return Ok(());
    }
    // Offsets inside the tensor, which the model's opening checked against the file.
    let bytes = t.bytes().get(from as usize..to as usize).unwrap_or_default();
    bytes.chunks(chunk).try_for_each(f)
}

/// The check's report, as `organ check` makes it: the model's own findings, then those
/// against `--base` and `--derived-from` when given (the CLI and Python call this).
///
/// # Errors
/// A model that cannot be read; a `base` given for a model that is not an adapter.
pub fn report(opts: &Options) -> Result<CheckReport> {
    let mut report = check_path(&opts.model, opts.stream)?;
    if let Some(base) = &opts.base {
        let (m, b) = (Model::open(&opts.model)?, Model::open_any(base)?);
        super::measure::must_be_adapter(&m, &opts.model)?;
        report.add(organ_core::check::adapter::against_base(&m.model, &b.model));
    }
    if let Some(src) = &opts.derived_from {
        report.add(super::derived::findings(&opts.model, src, opts.imatrix.as_deref())?);
    }
    Ok(report)
}

/// Runs the check, prints the report and writes the JSON; returns whether any finding is
/// an error.
pub fn run(opts: &Options, out: &mut dyn Write) -> Result<bool> {
    let report = report(opts)?;
    // The verdict and severities coloured on a terminal (crate::paint); the files plain.
    let on_screen = Shown { marks: crate::paint::marks(crate::paint::Stream::Stdout), ..Shown::WHOLE };
    super::outputs::print(AnyReport::Check(&report), &on_screen, out)?;
    super::outputs::write_all(AnyReport::Check(&report), &opts.files, &Shown::WHOLE, opts.force)?;
    Ok(report.has_errors())
}
