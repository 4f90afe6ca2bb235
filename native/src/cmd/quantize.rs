//! `organ quantize`: llama-quantize's file from organ's own code. The core plans every
//! tensor's type and the header ([`organ_core::quantize::plan`]); this streams the tensors
//! through the core's quantizers, a slab of rows at a time, rows in parallel, into a temp
//! file renamed over the destination.

use super::outputs;
use crate::atomic::Temp;
use crate::model::Model;
use anyhow::{anyhow, bail, Context, Result};
use organ_core::ggml_type::GgmlType;
use organ_core::gguf::writer::padding;
use organ_core::quantize::report::QuantizeReport;
use organ_core::quantize::slabs::{Pieces, SLAB_VALUES};
use organ_core::quantize::{self, Ftype, Params, Pattern, Plan, Planned, QuantImatrix, Shard};
use organ_core::report::formats::{AnyReport, Shown};
use rayon::prelude::*;
use std::io::Write;
use std::path::{Path, PathBuf};

/// What to quantize, where to, and how.
pub struct Options<'a> {
    /// The model: a GGUF or the first shard of a split one.
    pub input: &'a Path,
    /// The result (unused with `params.dry_run`).
    pub output: &'a Path,
    /// llama-quantize's settings.
    pub params: Params,
    /// Replace an output organ could have written.
    pub force: bool,
    /// Threads quantizing rows (llama-quantize's THREADS); every core without.
    pub threads: Option<usize>,
    /// The report files asked for besides the text (`--json`).
    pub reports: outputs::Files,
}

/// llama-quantize's flags as text, as the command line and the Python module take them.
#[derive(Debug, Default, Clone, Copy)]
pub struct Flags<'a> {
    /// `--imatrix`.
    pub imatrix: Option<&'a Path>,
    /// `--include-weights`.
    pub include_weights: &'a [String],
    /// `--exclude-weights`.
    pub exclude_weights: &'a [String],
    /// `--pure`.
    pub pure: bool,
    /// `--leave-output-tensor`.
    pub leave_output_tensor: bool,
    /// `--allow-requantize`.
    pub allow_requantize: bool,
    /// `--dry-run`.
    pub dry_run: bool,
    /// `--output-tensor-type`.
    pub output_tensor_type: Option<&'a str>,
    /// `--token-embedding-type`.
    pub token_embedding_type: Option<&'a str>,
    /// `--tensor-type` words, in order.
    pub tensor_types: &'a [String],
    /// `--tensor-type-file`.
    pub tensor_type_file: Option<&'a Path>,
    /// `--override-kv` words, in order.
    pub override_kv: &'a [String],
    /// `--prune-layers`.
    pub prune_layers: Option<&'a str>,
    /// `--keep-split`.
    pub keep_split: bool,
}

/// The core's settings the flags ask for, file type `ftype`: the types parsed, the
/// patterns compiled, the importance matrix read and filtered.
///
/// # Errors
/// A type or pattern that does not parse, an unreadable tensor-type file or importance
/// matrix, each named with its flag.
pub fn params(ftype: Ftype, f: &Flags<'_>) -> Result<Params> {
    if !f.include_weights.is_empty() && !f.exclude_weights.is_empty() {
        bail!("--include-weights and --exclude-weights cannot be used together");
    }
    let mut p = Params::new(ftype);
    p.pure = f.pure;
    p.quantize_output = !f.leave_output_tensor;
    p.allow_requantize = f.allow_requantize;
    p.dry_run = f.dry_run;
    p.keep_split = f.keep_split;
    if let Some(file) = f.imatrix {
        let im = crate::predict::read_imatrix(file)?;
        p.imatrix = Some(QuantImatrix::new(&im, &file.to_string_lossy(), f.include_weights, f.exclude_weights));
    } else if !f.include_weights.is_empty() || !f.exclude_weights.is_empty() {
        bail!("--include-weights and --exclude-weights choose entries of an importance matrix: give one (--imatrix)");
    }
    p.output_tensor_type = f.output_tensor_type.map(|s| ggml_type("--output-tensor-type", s)).transpose()?;
    p.token_embedding_type = f.token_embedding_type.map(|s| ggml_type("--token-embedding-type", s)).transpose()?;
    for w in f.tensor_types {
        p.patterns.push(Pattern::word(w)?);
    }
    if let Some(file) = f.tensor_type_file {
        let text = read_small(file)?;
        for w in text.split_ascii_whitespace() {
            p.patterns.push(Pattern::word(w).with_context(|| file.display().to_string())?);
        }
    }
    for o in f.override_kv {
        p.overrides.push(quantize::overrides::parse_override(o).context("--override-kv")?);
    }
    if let Some(l) = f.prune_layers {
        p.prune = quantize::overrides::parse_prune(l).context("--prune-layers")?;
    }
    Ok(p)
}

/// `ggml_type` from a name in any case (`parse_ggml_type`).
fn ggml_type(flag: &str, s: &str) -> Result<GgmlType> {
    GgmlType::ALL
        .iter()
        .copied()
        .find(|t| t.name().eq_ignore_ascii_case(s))
        .ok_or_else(|| anyhow!("{flag}: invalid ggml_type {s:?}"))
}

/// Quantizes as planned; prints the report's text (llama-quantize's sizes, and every
/// tensor's types for a dry run), writes its JSON when asked; returns the report.
///
/// # Errors
/// What the plan refuses, a tensor whose values its type cannot hold (named), I/O.
pub fn run(o: &Options<'_>, out: &mut dyn Write) -> Result<QuantizeReport> {
    let (model, plan) = open(o)?;
    let mut written = Vec::new();
    if !o.params.dry_run {
        for t in write(&model, &plan, o)? {
            t.commit()?;
        }
        written = outputs(&plan, o).iter().map(|p| p.display().to_string()).collect();
    }
    let n_elements: u64 = model.model.tensors.iter().map(|t| t.entry.n_elements).sum();
    let report = QuantizeReport::new(&plan, &o.params, o.input.display().to_string(), written, n_elements);
    outputs::print(AnyReport::Quantize(&report), &Shown::WHOLE, out)?;
    outputs::write_all(AnyReport::Quantize(&report), &o.reports, &Shown::WHOLE, o.force)?;
    Ok(report)
}

/// The model at `o.input`, and its plan.
///
/// # Errors
/// The model cannot be read, or the plan refuses it.
pub fn open(o: &Options<'_>) -> Result<(Model, Plan)> {
    let model = Model::open_any(o.input)?;
    let plan = quantize::plan(&model.model, &o.params).with_context(|| o.input.display().to_string())?;
    Ok((model, plan))
}

/// The files the plan writes: `o.output`, or with `--keep-split` a shard each
/// ([`quantize::keep_split_names`]).
pub fn outputs(plan: &Plan, o: &Options<'_>) -> Vec<PathBuf> {
    if !o.params.keep_split {
        return vec![o.output.to_path_buf()];
    }
    let out = o.output.to_string_lossy();
    quantize::keep_split_names(&out, plan.shards.len()).into_iter().map(PathBuf::from).collect()
}

/// Writes `model` quantized as planned into temp files beside [`outputs`], in `o.threads`
/// threads; the caller commits them (all, once all are written).
///
/// # Errors
/// A tensor whose values its type cannot hold (named), I/O.
pub fn write(model: &Model, plan: &Plan, o: &Options<'_>) -> Result<Vec<Temp>> {
    let all = || -> Result<Vec<Temp>> {
        let files = outputs(plan, o);
        plan.shards.iter().zip(&files).map(|(s, file)| write_shard(model, plan, s, file, o)).collect()
    };
    match o.threads {
        Some(n) => rayon::ThreadPoolBuilder::new().num_threads(n).build()?.install(all),
        None => all(),
    }
}

fn write_shard(model: &Model, plan: &Plan, shard: &Shard, file: &Path, o: &Options<'_>) -> Result<Temp> {
    let (tmp, mut f) = Temp::file(file, o.force)?;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, &mut f);
    w.write_all(&shard.layout.header)?;
    let zeros = [0u8; quantize::ALIGNMENT as usize];
    for (t, &(_, n)) in plan.tensors[shard.tensors.clone()].iter().zip(&shard.layout.tensors) {
        let tensor = &model.model.tensors[t.input];
        let bytes = tensor.bytes_or_read()?;
        let written = if t.from == t.to {
            w.write_all(&bytes)?;
            bytes.len() as u64
        } else {
            let qw = quantize::weights_for(&o.params, t)?;
            convert(t, &bytes, qw, &mut w).with_context(|| format!("{}: tensor {:?}", o.input.display(), t.name))?
        };
        anyhow::ensure!(written == n, "tensor {:?}: wrote {written} bytes, the plan has {n}", t.name);
        w.write_all(&zeros[..padding(n, quantize::ALIGNMENT) as usize])?;
        drop(bytes);
        tensor.release();
    }
    w.flush()?;
    drop(w);
    Ok(tmp)
}

/// Converts one tensor, slab by slab ([`Pieces`]), each slab's chunks in parallel, and
/// writes it; returns the bytes written. `qw`: the importance matrix's weights, a row per
/// matrix (expert).
pub(crate) fn convert(t: &Planned, bytes: &[u8], qw: Option<&[f32]>, w: &mut impl Write) -> Result<u64> {
    let p = Pieces::new(t, qw.is_some(), SLAB_VALUES)?;
    anyhow::ensure!(
        bytes.len() as u64 == p.rows as u64 * p.row_in as u64,
        "{} bytes, not the tensor's rows",
        bytes.len()
    );
    let mut pieces: Vec<Vec<u8>> = Vec::new();
    let mut written = 0u64;
    for slab in p.slabs() {
        let qw = p.weights(&slab, qw)?;
        let r = p.bytes_in(&slab);
        let src = &bytes[r.start as usize..r.end as usize];
        pieces.resize_with(slab.rows.len().div_ceil(p.chunk_rows), Vec::new);
        pieces.par_iter_mut().zip(src.par_chunks(p.chunk_rows * p.row_in)).enumerate().try_for_each_init(
            Vec::new,
            |values, (i, (piece, b))| {
                piece.clear();
                p.convert(t, slab.rows.start + i * p.chunk_rows, b, qw, values, piece)
            },
        )?;
        for piece in &pieces {
            w.write_all(piece)?;
            written += piece.len() as u64;
        }
    }
    Ok(written)
}

/// A tensor-type file: at most 16 MiB (a pattern per tensor of the largest model is far
/// less), UTF-8.
fn read_small(file: &Path) -> Result<String> {
    use std::io::Read;
    const MAX: u64 = 16 << 20;
    let f = crate::input::open(file)?;
    let mut s = String::new();
    f.take(MAX + 1).read_to_string(&mut s).with_context(|| format!("{}: not UTF-8 text", file.display()))?;
    if s.len() as u64 > MAX {
        bail!("{}: larger than {} MiB, not a tensor-type file", file.display(), MAX >> 20);
    }
    Ok(s)
}
