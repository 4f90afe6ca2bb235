//! `organ measure`: Z-measure v1 θ for every tensor of one or more models (GGUF, split
//! GGUF, organ directory), in parallel, reading only the blocks the sampler needs: through
//! a memory map for ordinary models, by positioned reads for huge ones.

use super::outputs::Files;
use crate::location::Location;
use crate::model::Model;
use anyhow::Result;
use indicatif::ProgressBar;
use organ_core::report::formats::{AnyReport, Shown};
use organ_core::report::{ModelReport, Report, TensorReport};
use organ_core::zmeasure::{measure_tensor_in, Draws, Measurement, Mode};
use rayon::prelude::*;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;

mod adapter;
pub use adapter::must_be_adapter;
mod cache;
mod experts;
pub mod fleet;
mod merge;
pub mod results;
pub mod shard;
mod stream;
pub mod verdicts;

pub use cache::{CacheKey, Definition};

pub struct Options {
    pub models: Vec<PathBuf>,
    /// The report files asked for (`--json`, `--csv`, `--html`, `--ranking-csv`: the
    /// registry's formats for θ reports).
    pub files: Files,
    pub summary_only: bool,
    pub wells: usize,
    pub all_wells: bool,
    /// Measured verdicts to show in the ranking (`--verdict`), read before any work.
    pub verdicts: Vec<verdicts::Given>,
    pub stream: bool,
    /// Where finished model reports are kept, keyed by the model's BLAKE3 and the
    /// measure's definition ([`CacheKey`]; fleets resume from it).
    pub cache: Option<PathBuf>,
    /// Replace report files that exist (never an input).
    pub force: bool,
    /// Plain θ, θ with σ_θ (`--sigma`), or θ over every value (`--exact`).
    pub mode: Mode,
    /// Also each expert's θ (§6), outliers and duplicates (`--experts`).
    pub experts: bool,
    /// The base of the adapters measured (`--base`): their pairs are checked against it,
    /// and each update's norm set against its weight's.
    pub base: Option<PathBuf>,
}

/// One tensor's measurement and, with `--sigma`, its alternate draws.
type Measured = (Measurement, Option<Draws>);

/// The name reports give the model at `path` ([`Location::label`]). A cached report is
/// relabelled with it, so that a model is named the same whether measured or taken from a
/// cache or a fleet's results.
pub fn label_of(path: &Path) -> String {
    Location::of(path).label()
}

/// The model at `path`, opened, and its key under `opts`' definition
/// ([`CacheKey::of_model`]: what the server says the object is when its bytes came from a
/// URL, docs/remote.md; else the BLAKE3 of its bytes).
fn identify(path: &Path, opts: &Options) -> Result<(CacheKey, Model)> {
    let model = Model::open_any(path)?;
    Ok((CacheKey::of_model(&model, path, opts.mode, opts.experts)?, model))
}

/// Measures the model at `path`, opened by [`identify`], under `opts`.
fn measure_identified(path: &Path, model: &Model, opts: &Options, progress: &ProgressBar) -> Result<ModelReport> {
    measure_opened(model, path, opts.stream, opts.mode, opts.experts, progress)
}

/// Measures a model, or takes its report from the cache when an identical model was
/// measured before.
fn measure_cached(path: &Path, opts: &Options, progress: &ProgressBar) -> Result<(ModelReport, bool)> {
    if let Some(base) = &opts.base {
        return Ok((measure_against(path, base, opts, progress)?, false));
    }
    let Some(cache) = &opts.cache else {
        return Ok((measure_model(path, opts.stream, opts.mode, opts.experts, progress)?, false));
    };
    let (key, opened) = identify(path, opts)?;
    if let Some(mut r) = key.lookup::<ModelReport>(cache) {
        r.model = label_of(path);
        return Ok((r, true));
    }
    let r = measure_identified(path, &opened, opts, progress)?;
    key.store(cache, &r)?;
    Ok((r, false))
}

/// Measures the adapter at `path` against the base at `base` (never cached: the report
/// depends on both).
fn measure_against(path: &Path, base: &Path, opts: &Options, progress: &ProgressBar) -> Result<ModelReport> {
    let model = Model::open_any(path)?;
    adapter::must_be_adapter(&model, path)?;
    let b = Model::open_any(base)?;
    crate::progress::grow(progress, model.tensors.len() as u64 / 2);
    let tick = || crate::progress::tensor_done(progress);
    adapter::measure_adapter(&model, path, opts.mode, Some((&b, base)), file_bytes(&model), &tick)
}

/// The bytes of a model's files.
fn file_bytes(model: &Model) -> u64 {
    let mut files: Vec<&crate::model_file::ModelFile> = model.tensors.iter().map(|t| &*t.in_file).collect();
    files.dedup_by_key(|f| f.path.clone());
    files.iter().map(|f| f.file_len()).sum()
}

/// Bytes read by the streaming path, for benchmarks (`--stats`).
pub static BYTES_READ: AtomicU64 = AtomicU64::new(0);

/// Measures one model (a GGUF, a split GGUF, or an organ directory); the progress bar
/// advances per tensor. With `stream` (or for models over 2 GiB) only the sampled blocks
/// are read. `mode` says how ([`Mode`]); with `experts`, each expert of every expert
/// tensor is measured too (§6). A model at an http(s) URL is always streamed, its sampled
/// blocks read by range requests (docs/remote.md).
pub fn measure_model(
    path: &Path,
    stream: bool,
    mode: Mode,
    experts: bool,
    progress: &ProgressBar,
) -> Result<ModelReport> {
    measure_opened(&Model::open_any(path)?, path, stream, mode, experts, progress)
}

/// [`measure_model`] of a model already opened.
fn measure_opened(
    model: &Model,
    path: &Path,
    stream: bool,
    mode: Mode,
    experts: bool,
    progress: &ProgressBar,
) -> Result<ModelReport> {
    if organ_core::lora::is_adapter(&model.model) {
        crate::progress::grow(progress, model.tensors.len() as u64 / 2);
        let tick = || crate::progress::tensor_done(progress);
        return adapter::measure_adapter(model, path, mode, None, file_bytes(model), &tick);
    }
    let layouts = if experts { experts::layouts(model, path)? } else { vec![None; model.tensors.len()] };
    let mut files: Vec<&crate::model_file::ModelFile> = model.tensors.iter().map(|t| &*t.in_file).collect();
    files.dedup_by_key(|f| f.path.clone());
    let file_bytes: u64 = files.iter().map(|f| f.file_len()).sum();
    let remote = !files.iter().all(|f| f.in_memory());
    let stream = crate::byte_source::stream(stream, !remote, file_bytes);
    if stream {
        // Scattered small reads: readahead would pull in far more than the sampled blocks.
        for f in files.iter().filter_map(|f| f.file()) {
            let _ = rustix::fs::fadvise(f, 0, None, rustix::fs::Advice::Random);
        }
    }
    crate::progress::grow(progress, model.tensors.len() as u64);
    let tick = || crate::progress::tensor_done(progress);
    let (measured, per_expert): (Vec<Option<Measured>>, _) = if stream {
        let reads = if remote { stream::Reads::remote() } else { stream::Reads::LOCAL };
        let stopped = || crate::progress::stopped(progress);
        stream::measure(model, path, mode, &layouts, reads, &tick, &stopped)?
    } else {
        let measured: Vec<Result<Option<Measured>>> = model
            .tensors
            .par_iter()
            .map(|t| {
                if crate::progress::stopped(progress) {
                    anyhow::bail!("{}: stopped before tensor {:?}", path.display(), t.name);
                }
                let m = (t.ty.can_dequantize())
                    .then(|| measure_tensor_in(mode, &t.name, t.ty, t.n_elements, t.bytes()))
                    .transpose();
                let m =
                    m.map_err(|e| anyhow::Error::new(e).context(format!("{}: tensor {:?}", path.display(), t.name)))?;
                tick();
                Ok(m)
            })
            .collect();
        let stopped = || crate::progress::stopped(progress);
        (measured.into_iter().collect::<Result<_>>()?, experts::measure_mapped(model, path, mode, &layouts, &stopped)?)
    };
    let duplicates = experts::duplicates(model, path, &layouts, stream)?;
    let rows = (model.tensors.iter().zip(&measured).zip(per_expert.iter().zip(&duplicates)))
        .map(|((t, m), (x, d))| {
            let experts = x.as_ref().zip(d.as_ref()).map(|(x, d)| experts::rows(mode, x, d));
            TensorReport::new(t, m.as_ref().map(|(m, _)| m))
                .in_mode(mode, m.as_ref().and_then(|(_, d)| d.as_ref()))
                .with_experts(experts)
        })
        .collect();
    Ok(ModelReport::new(&model.label, model, file_bytes, rows))
}

pub fn run(opts: &Options, out: &mut dyn Write) -> Result<()> {
    let progress = crate::progress::tensor_bar();
    let report = report(opts, &progress)?;
    // Verdicts are tied to bytes: each model's BLAKE3, hashed only when one is given.
    let identities = if opts.verdicts.is_empty() { Vec::new() } else { verdicts::identities(&discovered(opts)?)? };
    present(report, &identities, opts, out)
}

/// The models `opts` names, each directory's found.
fn discovered(opts: &Options) -> Result<Vec<PathBuf>> {
    let mut paths = Vec::new();
    for p in &opts.models {
        paths.extend(crate::discover::discover(p)?);
    }
    Ok(paths)
}

/// The θ report of `opts`' models (each directory's models found, each model measured or
/// taken from the cache), the progress bar advancing per tensor: what `organ measure`
/// prints and writes, and what the Python module's `organ.measure` returns.
///
/// # Errors
/// A model cannot be found, read or measured.
pub fn report(opts: &Options, progress: &ProgressBar) -> Result<Report> {
    let paths = discovered(opts)?;
    let mut models = Vec::with_capacity(paths.len());
    let mut cached = 0;
    for path in &paths {
        progress.set_message(path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned()));
        let (r, hit) = measure_cached(path, opts, progress)?;
        cached += usize::from(hit);
        models.push(r);
    }
    progress.finish_and_clear();
    if cached > 0 {
        crate::progress::note(format!("{cached} of {} models taken from the cache", paths.len()));
    }
    // Two models of one file name are told apart by their paths' tails.
    let base: Vec<String> = models.iter().map(|m| m.model.clone()).collect();
    let labels = Location::labels(&paths.iter().map(PathBuf::as_path).collect::<Vec<_>>(), &base);
    for ((m, path), label) in models.iter_mut().zip(&paths).zip(labels) {
        m.model = label;
        warn_not_finite(m, path);
    }
    let mut report = Report::new(organ_core::zmeasure::GENERATOR, models);
    report.measure = opts.mode.label().to_owned();
    Ok(report)
}

/// Warns, naming the tensors, when values that are not finite were left out of θ: the
/// figure of such a tensor says nothing of its damage (the CSV's `dropped` column was the
/// only trace).
fn warn_not_finite(m: &ModelReport, path: &Path) {
    const SHOWN: usize = 5;
    let bad: Vec<_> = m.tensors.iter().filter(|t| t.dropped > 0).collect();
    if bad.is_empty() {
        return;
    }
    let mut named: Vec<String> = bad.iter().take(SHOWN).map(|t| format!("{} ({})", t.name, t.dropped)).collect();
    if bad.len() > SHOWN {
        named.push(format!("and {} more", bad.len() - SHOWN));
    }
    crate::progress::warn(format!(
        "{}: {} {} values that are not finite (NaN or ±inf), left out of θ: {}; organ check {} says what is \
         broken",
        m.model,
        bad.len(),
        if bad.len() == 1 { "tensor holds" } else { "tensors hold" },
        named.join(", "),
        path.display()
    ));
}

/// Writes `report`'s files (those asked for) and prints it: what `organ measure` does with
/// its models' reports, and `organ report merge` with a fleet's. `identities` are the
/// BLAKE3s of the report's models, in its order, for `--verdict`.
pub fn present(mut report: Report, identities: &[Option<String>], opts: &Options, out: &mut dyn Write) -> Result<()> {
    verdicts::attach(&mut report, identities, &opts.verdicts)?;
    let report = AnyReport::Measure(&report);
    let shown = Shown { summary_only: opts.summary_only, wells: opts.wells, all_wells: opts.all_wells, ..Shown::WHOLE };
    super::outputs::write_all(report, &opts.files, &shown, opts.force)?;
    super::outputs::print(report, &shown, out)
}
