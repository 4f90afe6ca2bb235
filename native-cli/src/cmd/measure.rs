//! `organ measure`: Z-measure v1 θ for every tensor of one or more models, in parallel over
//! a memory map, reading only the blocks the sampler needs.

use crate::model::ModelFile;
use crate::output::write_atomic;
use anyhow::Result;
use indicatif::{ProgressBar, ProgressStyle};
use organ_core::zmeasure::measure_tensor;
use organ_core::zmeasure::report::{ModelReport, Report, TensorReport};
use organ_core::Error;
use rayon::prelude::*;
use std::io::Write;
use std::path::{Path, PathBuf};

pub const GENERATOR: &str = concat!("organ ", env!("CARGO_PKG_VERSION"));

pub struct Options {
    pub models: Vec<PathBuf>,
    pub json: Option<PathBuf>,
    pub csv: Option<PathBuf>,
    pub summary_only: bool,
    pub wells: usize,
}

/// Measures one model file; the progress bar advances per tensor.
pub fn measure_model(path: &Path, progress: &ProgressBar) -> Result<ModelReport> {
    let model = ModelFile::open(path)?;
    let g = model.parse()?;
    let file: &[u8] = &model.bytes;
    progress.inc_length(g.tensors.len() as u64);
    let rows: Vec<Result<TensorReport>> = g
        .tensors
        .par_iter()
        .map(|t| {
            let data = t.data(file)?;
            let m = match measure_tensor(t.name, t.ty, t.n_elements, data) {
                Ok(m) => Some(m),
                Err(Error::NotDequantizable { .. }) => None,
                Err(e) => {
                    return Err(anyhow::Error::new(e).context(format!(
                        "{}: tensor {:?}",
                        path.display(),
                        t.name
                    )))
                }
            };
            progress.inc(1);
            Ok(TensorReport::new(t, m.as_ref()))
        })
        .collect();
    let rows = rows.into_iter().collect::<Result<Vec<_>>>()?;
    Ok(ModelReport::new(&model.file_name(), &g, rows))
}

pub fn run(opts: &Options, out: &mut dyn Write) -> Result<()> {
    let progress = ProgressBar::with_draw_target(Some(0), indicatif::ProgressDrawTarget::stderr());
    progress.set_style(
        ProgressStyle::with_template(
            "{spinner} {msg} [{bar:30}] {pos}/{len} tensors, {elapsed} (eta {eta})",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    let mut models = Vec::with_capacity(opts.models.len());
    for path in &opts.models {
        progress.set_message(
            path.file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
        );
        models.push(measure_model(path, &progress)?);
    }
    progress.finish_and_clear();
    let report = Report::new(GENERATOR, models);

    if let Some(p) = &opts.json {
        write_atomic(p, |w| {
            serde_json::to_writer_pretty(&mut *w, &report)?;
            writeln!(w)?;
            Ok(())
        })?;
    }
    if let Some(p) = &opts.csv {
        write_atomic(p, |w| write_csv(&report, w))?;
    }
    print_report(&report, opts, out)
}

fn write_csv(report: &Report, w: &mut dyn Write) -> Result<()> {
    let mut c = csv::Writer::from_writer(w);
    c.write_record([
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
    ])?;
    let num = |v: Option<f64>| v.map_or_else(String::new, |v| format!("{v:?}"));
    for m in &report.models {
        for t in &m.tensors {
            let organ = t.organ.map(|o| {
                serde_json::to_value(o)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default()
            });
            c.write_record([
                m.model.clone(),
                t.name.clone(),
                t.group.name().to_owned(),
                organ.unwrap_or_default(),
                t.layer.map_or_else(String::new, |l| l.to_string()),
                t.ty.clone(),
                t.n_elements.to_string(),
                serde_json::to_value(t.status)?
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                num(t.theta),
                num(t.entropy),
                num(t.kurtosis),
                num(t.cv),
                t.sampled.to_string(),
                t.dropped.to_string(),
            ])?;
        }
    }
    c.flush()?;
    Ok(())
}

fn opt(v: Option<f64>, width: usize, prec: usize) -> String {
    v.map_or_else(
        || format!("{:>width$}", "-"),
        |v| format!("{v:>width$.prec$}"),
    )
}

fn human(n: u64) -> String {
    match n {
        n if n >= 1_000_000_000 => format!("{:.2}B", n as f64 / 1e9),
        n if n >= 1_000_000 => format!("{:.1}M", n as f64 / 1e6),
        n if n >= 1_000 => format!("{:.1}K", n as f64 / 1e3),
        n => n.to_string(),
    }
}

fn print_report(report: &Report, opts: &Options, out: &mut dyn Write) -> Result<()> {
    for m in &report.models {
        let s = &m.summary;
        let types: Vec<String> = m.types.iter().map(|(t, n)| format!("{t}×{n}")).collect();
        writeln!(
            out,
            "{}  {}  {} params  {} tensors ({})",
            m.model,
            m.architecture.as_deref().unwrap_or("?"),
            human(m.parameters),
            s.tensors,
            types.join(", ")
        )?;
        writeln!(
            out,
            "  θ_mean {:.4}°  θ_weighted {:.4}°  signal {:.4}  (measured {}, degenerate {}, not measurable {})",
            s.theta_mean, s.theta_weighted, s.signal, s.measured, s.degenerate, s.not_measurable
        )?;
        if !opts.summary_only {
            writeln!(
                out,
                "\n  {:<40} {:<9} {:>5} {:<7} {:>9} {:>8} {:>10} {:>9}",
                "tensor", "group", "layer", "type", "θ°", "H", "K", "C"
            )?;
            for t in &m.tensors {
                let layer = t.layer.map_or_else(|| "-".into(), |l| l.to_string());
                writeln!(
                    out,
                    "  {:<40} {:<9} {:>5} {:<7} {} {} {} {}",
                    t.name,
                    t.group.name(),
                    layer,
                    t.ty,
                    opt(t.theta, 9, 4),
                    opt(t.entropy, 8, 4),
                    opt(t.kurtosis, 10, 3),
                    opt(t.cv, 9, 3)
                )?;
            }
        }
        writeln!(
            out,
            "\n  {:<10} {:>6} {:>9} {:>9} {:>9}",
            "group", "count", "mean θ°", "min θ°", "max θ°"
        )?;
        for g in &s.groups {
            writeln!(
                out,
                "  {:<10} {:>6} {:>9.4} {:>9.4} {:>9.4}",
                g.group.name(),
                g.count,
                g.mean,
                g.min,
                g.max
            )?;
        }
        writeln!(out, "\n  wells (lowest θ):")?;
        for (i, w) in s.wells.iter().take(opts.wells).enumerate() {
            writeln!(
                out,
                "  {:>3}. {:<40} {:<9} {:>9.4}°",
                i + 1,
                w.name,
                w.group.name(),
                w.theta
            )?;
        }
        writeln!(out)?;
    }
    if report.models.len() > 1 {
        writeln!(out, "ranking ({} models, by θ_mean):", report.models.len())?;
        writeln!(
            out,
            "  {:>4}  {:<44} {:>9} {:>9} {:>9} {:>8}",
            "rank", "model", "params", "θ_mean°", "signal", "tensors"
        )?;
        for r in &report.ranking {
            writeln!(
                out,
                "  {:>4}  {:<44} {:>9} {:>9.4} {:>9.4} {:>8}",
                r.rank,
                r.model,
                human(r.parameters),
                r.theta_mean,
                r.signal,
                r.tensors
            )?;
        }
    }
    Ok(())
}
