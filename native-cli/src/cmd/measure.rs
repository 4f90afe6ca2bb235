//! `organ measure`: Z-measure v1 θ for every tensor of one or more models (GGUF, split
//! GGUF, organ directory), in parallel, reading only the blocks the sampler needs: through
//! a memory map for ordinary models, by positioned reads for huge ones.

use crate::atomic::{write_file, write_json, write_text};
use crate::model::Model;
use anyhow::{Context, Result};
use indicatif::ProgressBar;
use organ_core::anatomy::Group;
use organ_core::gguf::display::printable;
use organ_core::report::{human_count, ModelReport, Report, TensorReport};
use organ_core::zmeasure::{measure_tensor_in, Draws, Measurement, Mode};
use rayon::prelude::*;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;

mod cache;
mod experts;
pub mod fleet;
mod merge;
mod results;
pub mod shard;
mod stream;

pub use cache::{CacheKey, Definition};

pub struct Options {
    pub models: Vec<PathBuf>,
    pub json: Option<PathBuf>,
    pub csv: Option<PathBuf>,
    pub html: Option<PathBuf>,
    pub summary_only: bool,
    pub wells: usize,
    pub stream: bool,
    /// Where finished model reports are kept, keyed by the model's BLAKE3 and the
    /// measure's definition ([`CacheKey`]; fleets resume from it).
    pub cache: Option<PathBuf>,
    /// Also write the ranking and per-group θ across models as CSV.
    pub ranking_csv: Option<PathBuf>,
    /// Replace report files that exist (never an input).
    pub force: bool,
    /// Plain θ, θ with σ_θ (`--sigma`), or θ over every value (`--exact`).
    pub mode: Mode,
    /// Also each expert's θ (§6), outliers and duplicates (`--experts`).
    pub experts: bool,
}

/// One tensor's measurement and, with `--sigma`, its alternate draws.
type Measured = (Measurement, Option<Draws>);

/// The name reports give the model at `path`: its file name (a split model's first
/// shard's), or the file name its URL ends with. A cached report is relabelled with it, so
/// that a model is named the same whether measured or taken from a cache or a fleet's
/// results.
pub fn label_of(path: &Path) -> String {
    if crate::remote::is_url(path) {
        let first = crate::remote::split_urls(path).and_then(|s| s.into_iter().next()).unwrap_or_else(|| path.into());
        return crate::remote::file_name(&first.to_string_lossy());
    }
    path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned())
}

/// The key of the model at `path` under `opts`' definition, and the model when it had to
/// be opened to find it (a model at a URL: the key is what the server says the object is,
/// docs/remote.md); a local model's key is the BLAKE3 of its bytes.
fn identify(path: &Path, opts: &Options) -> Result<(CacheKey, Option<Model>)> {
    if crate::remote::is_url(path) {
        let model = Model::open_any(path)?;
        return Ok((CacheKey::of_remote(&model, opts.mode, opts.experts)?, Some(model)));
    }
    Ok((CacheKey::of(path, opts.mode, opts.experts)?, None))
}

/// Measures the model at `path` (`opened` when [`identify`] opened it) under `opts`.
fn measure_identified(
    path: &Path,
    opened: Option<&Model>,
    opts: &Options,
    progress: &ProgressBar,
) -> Result<ModelReport> {
    match opened {
        Some(model) => measure_opened(model, path, opts.stream, opts.mode, opts.experts, progress),
        None => measure_model(path, opts.stream, opts.mode, opts.experts, progress),
    }
}

/// Measures a model, or takes its report from the cache when an identical model was
/// measured before.
fn measure_cached(path: &Path, opts: &Options, progress: &ProgressBar) -> Result<(ModelReport, bool)> {
    let Some(cache) = &opts.cache else {
        return Ok((measure_model(path, opts.stream, opts.mode, opts.experts, progress)?, false));
    };
    let (key, opened) = identify(path, opts)?;
    if let Some(mut r) = key.lookup::<ModelReport>(cache) {
        r.model = label_of(path);
        return Ok((r, true));
    }
    let r = measure_identified(path, opened.as_ref(), opts, progress)?;
    key.store(cache, &r)?;
    Ok((r, false))
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
    let layouts = if experts { experts::layouts(model, path)? } else { vec![None; model.tensors.len()] };
    let mut files: Vec<&crate::model_file::ModelFile> = model.tensors.iter().map(|t| &*t.in_file).collect();
    files.dedup_by_key(|f| f.path.clone());
    let file_bytes: u64 = files.iter().map(|f| f.file_len()).sum();
    let remote = files.iter().any(|f| f.is_remote());
    let stream = crate::byte_source::stream(stream, !remote, file_bytes);
    if stream {
        // Scattered small reads: readahead would pull in far more than the sampled blocks.
        for f in files.iter().filter_map(|f| f.file()) {
            let _ = rustix::fs::fadvise(f, 0, None, rustix::fs::Advice::Random);
        }
    }
    progress.inc_length(model.tensors.len() as u64);
    let tick = || crate::progress::tensor_done(progress);
    let (measured, per_expert): (Vec<Option<Measured>>, _) = if stream {
        let reads = if remote { stream::Reads::remote() } else { stream::Reads::LOCAL };
        stream::measure(model, path, mode, &layouts, reads, &tick)?
    } else {
        let measured: Vec<Result<Option<Measured>>> = model
            .tensors
            .par_iter()
            .map(|t| {
                let m = (t.ty.can_dequantize())
                    .then(|| measure_tensor_in(mode, &t.name, t.ty, t.n_elements, t.bytes()))
                    .transpose();
                let m =
                    m.map_err(|e| anyhow::Error::new(e).context(format!("{}: tensor {:?}", path.display(), t.name)))?;
                tick();
                Ok(m)
            })
            .collect();
        (measured.into_iter().collect::<Result<_>>()?, experts::measure_mapped(model, path, mode, &layouts)?)
    };
    let duplicates = experts::duplicates(model, path, &layouts, stream)?;
    let rows = (model.tensors.iter().zip(&measured).zip(per_expert.iter().zip(&duplicates)))
        .map(|((t, m), (x, d))| {
            let mut row = TensorReport::new(t, m.as_ref().map(|(m, _)| m))
                .in_mode(mode, m.as_ref().and_then(|(_, d)| d.as_ref()));
            if let (Some(x), Some(d)) = (x, d) {
                row.experts = Some(experts::rows(mode, x, d));
            }
            row
        })
        .collect();
    Ok(ModelReport::new(&model.label, model, file_bytes, rows))
}

pub fn run(opts: &Options, out: &mut dyn Write) -> Result<()> {
    let progress = crate::progress::tensor_bar();
    let mut paths = Vec::new();
    for p in &opts.models {
        paths.extend(crate::discover::discover(p)?);
    }
    let mut models = Vec::with_capacity(paths.len());
    let mut cached = 0;
    for path in &paths {
        progress.set_message(path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned()));
        let (r, hit) = measure_cached(path, opts, &progress)?;
        cached += usize::from(hit);
        models.push(r);
    }
    progress.finish_and_clear();
    if cached > 0 {
        crate::progress::note(format!("{cached} of {} models taken from the cache", paths.len()));
    }
    let mut report = Report::new(organ_core::zmeasure::GENERATOR, models);
    report.measure = opts.mode.label().to_owned();
    present(&report, opts, out)
}

/// Writes `report`'s files (`--json`, `--csv`, `--html`, `--ranking-csv`) and prints it:
/// what `organ measure` does with its models' reports, and `organ report merge` with a
/// fleet's.
pub fn present(report: &Report, opts: &Options, out: &mut dyn Write) -> Result<()> {
    if let Some(p) = &opts.json {
        write_json(p, opts.force, report)?;
    }
    if let Some(p) = &opts.csv {
        write_file(p, opts.force, |w| write_csv(report, w))?;
    }
    if let Some(p) = &opts.html {
        write_text(p, opts.force, &organ_core::report::html::render(report))?;
    }
    if let Some(p) = &opts.ranking_csv {
        write_file(p, opts.force, |w| write_ranking_csv(report, w))?;
    }
    print_report(report, opts, out)
}

/// Whether the report carries σ_θ (`--sigma`, `--exact`): then its lists show it.
fn has_sigma(report: &Report) -> bool {
    report.models.iter().any(|m| m.summary.theta_mean_sigma.is_some())
}

fn write_csv(report: &Report, w: &mut dyn Write) -> Result<()> {
    let mut c = csv::Writer::from_writer(w);
    let sigma = has_sigma(report);
    let mut head = vec![
        "model",
        "tensor",
        "group",
        "organ",
        "layer",
        "type",
        "n_elements",
        "status",
        "theta",
        "entropy",
        "kurtosis",
        "cv",
        "sampled",
        "dropped",
    ];
    if sigma {
        head.push("sigma");
    }
    let with_experts = experts::any(&report.models);
    if with_experts {
        head.extend(experts::CSV_HEAD);
    }
    c.write_record(&head)?;
    let num = |v: Option<f64>| v.map_or_else(String::new, |v| format!("{v:?}"));
    for m in &report.models {
        for t in &m.tensors {
            let organ = t
                .organ
                .map(|o| serde_json::to_value(o).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default());
            let mut row = vec![
                m.model.clone(),
                t.name.clone(),
                t.group.name().to_owned(),
                organ.unwrap_or_default(),
                t.layer.map_or_else(String::new, |l| l.to_string()),
                t.ty.clone(),
                t.n_elements.to_string(),
                serde_json::to_value(t.status)?.as_str().unwrap_or_default().to_owned(),
                num(t.theta),
                num(t.entropy),
                num(t.kurtosis),
                num(t.cv),
                t.sampled.to_string(),
                t.dropped.to_string(),
            ];
            if sigma {
                row.push(num(t.sigma));
            }
            if with_experts {
                row.extend(experts::CSV_HEAD.map(|_| String::new()));
            }
            c.write_record(&row)?;
            for r in experts::csv_rows(&m.model, t, sigma) {
                c.write_record(&r)?;
            }
        }
    }
    c.flush()?;
    Ok(())
}

/// One row per model, in rank order: the ranking's columns, then mean θ per group.
fn write_ranking_csv(report: &Report, w: &mut dyn Write) -> Result<()> {
    let mut c = csv::Writer::from_writer(w);
    let mut head: Vec<String> =
        ["rank", "model", "parameters", "theta_mean", "theta_weighted", "signal", "tensors"].map(String::from).to_vec();
    head.extend(Group::ALL.iter().map(|g| format!("theta_{}", g.name())));
    let sigma = has_sigma(report);
    if sigma {
        head.extend(["theta_mean_sigma", "distinguishable_from_next"].map(String::from));
    }
    c.write_record(&head)?;
    for r in &report.ranking {
        let m = report.models.iter().find(|m| m.model == r.model).context("ranked model missing")?;
        let mut row = vec![
            r.rank.to_string(),
            r.model.clone(),
            r.parameters.to_string(),
            format!("{:?}", r.theta_mean),
            format!("{:?}", r.theta_weighted),
            format!("{:?}", r.signal),
            r.tensors.to_string(),
        ];
        for g in Group::ALL {
            row.push(
                m.summary.groups.iter().find(|x| x.group == g).map_or_else(String::new, |x| format!("{:?}", x.mean)),
            );
        }
        if sigma {
            row.push(r.theta_mean_sigma.map_or_else(String::new, |s| format!("{s:?}")));
            row.push(r.distinguishable_from_next.map_or_else(String::new, |d| d.to_string()));
        }
        c.write_record(&row)?;
    }
    c.flush()?;
    Ok(())
}

fn opt(v: Option<f64>, width: usize, prec: usize) -> String {
    v.map_or_else(|| format!("{:>width$}", "-"), |v| format!("{v:>width$.prec$}"))
}

/// ` ± σ°` after a θ, when the report carries σ; nothing otherwise.
fn pm(sigma: Option<f64>, width: usize) -> String {
    sigma.map_or_else(String::new, |s| format!(" ±{s:>width$.4}°"))
}

fn print_report(report: &Report, opts: &Options, out: &mut dyn Write) -> Result<()> {
    let sigma = has_sigma(report);
    if report.measure != organ_core::zmeasure::MEASURE {
        writeln!(out, "measure: {} (θ over every value, no sampling)\n", report.measure)?;
    }
    for m in &report.models {
        let s = &m.summary;
        let types: Vec<String> = m.types.iter().map(|(t, n)| format!("{t}×{n}")).collect();
        writeln!(
            out,
            "{}  {}  {} params  {} tensors ({})",
            printable(&m.model),
            printable(m.architecture.as_deref().unwrap_or("?")),
            human_count(m.parameters),
            s.tensors,
            types.join(", ")
        )?;
        writeln!(
            out,
            "  θ_mean {:.4}°{}  θ_weighted {:.4}°  signal {:.4}  (measured {}, degenerate {}, not measurable {})",
            s.theta_mean,
            s.theta_mean_sigma.map_or_else(String::new, |x| format!(" ± {x:.4}°")),
            s.theta_weighted,
            s.signal,
            s.measured,
            s.degenerate,
            s.not_measurable
        )?;
        if !opts.summary_only {
            write!(out, "\n  {:<40} {:<9} {:>5} {:<7} {:>9}", "tensor", "group", "layer", "type", "θ°")?;
            if sigma {
                write!(out, " {:>8}", "σ°")?;
            }
            writeln!(out, " {:>8} {:>10} {:>9}", "H", "K", "C")?;
            for t in &m.tensors {
                let layer = t.layer.map_or_else(|| "-".into(), |l| l.to_string());
                let sigma_col = if sigma { format!(" {}", opt(t.sigma, 8, 4)) } else { String::new() };
                writeln!(
                    out,
                    "  {:<40} {:<9} {:>5} {:<7} {}{} {} {} {}",
                    printable(&t.name),
                    t.group.name(),
                    layer,
                    t.ty,
                    opt(t.theta, 9, 4),
                    sigma_col,
                    opt(t.entropy, 8, 4),
                    opt(t.kurtosis, 10, 3),
                    opt(t.cv, 9, 3)
                )?;
            }
            experts::print(m, out)?;
        }
        writeln!(out, "\n  {:<10} {:>6} {:>9} {:>9} {:>9}", "group", "count", "mean θ°", "min θ°", "max θ°")?;
        for g in &s.groups {
            writeln!(out, "  {:<10} {:>6} {:>9.4} {:>9.4} {:>9.4}", g.group.name(), g.count, g.mean, g.min, g.max)?;
        }
        writeln!(out, "\n  wells (lowest θ):")?;
        for (i, w) in s.wells.iter().take(opts.wells).enumerate() {
            writeln!(
                out,
                "  {:>3}. {:<40} {:<9} {:>9.4}°{}",
                i + 1,
                printable(&w.name),
                w.group.name(),
                w.theta,
                pm(w.sigma, 7)
            )?;
        }
        writeln!(out)?;
    }
    if report.models.len() > 1 {
        writeln!(out, "per group, mean θ° across models:")?;
        let groups: Vec<Group> = Group::ALL
            .into_iter()
            .filter(|g| report.models.iter().any(|m| m.summary.groups.iter().any(|x| x.group == *g)))
            .collect();
        write!(out, "  {:<44}", "model")?;
        for g in &groups {
            write!(out, " {:>9}", g.name())?;
        }
        writeln!(out)?;
        for r in &report.ranking {
            let Some(m) = report.models.iter().find(|m| m.model == r.model) else { continue };
            write!(out, "  {:<44}", printable(&m.model))?;
            for g in &groups {
                match m.summary.groups.iter().find(|x| x.group == *g) {
                    Some(x) => write!(out, " {:>9.4}", x.mean)?,
                    None => write!(out, " {:>9}", "-")?,
                }
            }
            writeln!(out)?;
        }
        writeln!(out)?;
        writeln!(out, "ranking ({} models, by θ_mean):", report.models.len())?;
        write!(out, "  {:>4}  {:<44} {:>9} {:>9}", "rank", "model", "params", "θ_mean°")?;
        if sigma {
            write!(out, " {:>9}", "σ°")?;
        }
        writeln!(out, " {:>9} {:>8}", "signal", "tensors")?;
        for r in &report.ranking {
            write!(
                out,
                "  {:>4}  {:<44} {:>9} {:>9.4}",
                r.rank,
                printable(&r.model),
                human_count(r.parameters),
                r.theta_mean
            )?;
            if sigma {
                write!(out, " {}", opt(r.theta_mean_sigma, 9, 4))?;
            }
            write!(out, " {:>9.4} {:>8}", r.signal, r.tensors)?;
            if r.distinguishable_from_next == Some(false) {
                write!(out, "  ≈ next (within 2σ)")?;
            }
            writeln!(out)?;
        }
        if report.ranking.iter().any(|r| r.distinguishable_from_next == Some(false)) {
            writeln!(out, "  ≈: θ_mean within twice the larger σ of the next model's: not distinguishable")?;
        }
    }
    Ok(())
}
