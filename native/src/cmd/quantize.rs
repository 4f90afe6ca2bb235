//! `organ quantize`: llama-quantize's file from organ's own code. The core plans every
//! tensor's type and the header ([`organ_core::quantize::plan`]); this streams the tensors
//! through the core's quantizers, a slab of rows at a time, rows in parallel, into a temp
//! file renamed over the destination.

use crate::atomic::Temp;
use crate::model::Model;
use anyhow::{Context, Result};
use organ_core::ggml_type::GgmlType;
use organ_core::gguf::writer::padding;
use organ_core::quantize::{self, Params, Plan, Planned};
use rayon::prelude::*;
use std::io::Write;
use std::path::Path;

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
}

/// The f32 values a slab holds at most (64 MiB): memory stays a few slabs whatever the
/// tensor's size.
const SLAB_VALUES: usize = 16 << 20;

/// Elements each parallel piece quantizes at least (llama-quantize's `min_chunk_size`).
const CHUNK_VALUES: usize = 32 * 512;

/// Quantizes as planned; prints llama-quantize's sizes; returns the plan.
///
/// # Errors
/// What the plan refuses, a tensor whose values its type cannot hold (named), I/O.
pub fn run(o: &Options<'_>, out: &mut dyn Write) -> Result<Plan> {
    let model = Model::open_any(o.input)?;
    let plan = quantize::plan(&model.model, &o.params).with_context(|| o.input.display().to_string())?;
    if o.params.dry_run {
        for t in &plan.tensors {
            writeln!(out, "{:<40} {:>8} -> {}", t.name, t.from.name(), t.to.name())?;
        }
    } else {
        match o.threads {
            Some(n) => rayon::ThreadPoolBuilder::new().num_threads(n).build()?.install(|| write(&model, &plan, o))?,
            None => write(&model, &plan, o)?,
        }
    }
    let n_elements: u64 = model.model.tensors.iter().map(|t| t.entry.n_elements).sum::<u64>().max(1);
    let mib = |b: u64| b as f64 / 1024.0 / 1024.0;
    let bpw = |b: u64| b as f64 * 8.0 / n_elements as f64;
    writeln!(out, "model size  = {:8.2} MiB ({:.2} BPW)", mib(plan.bytes_in), bpw(plan.bytes_in))?;
    writeln!(out, "quant size  = {:8.2} MiB ({:.2} BPW)", mib(plan.bytes_out), bpw(plan.bytes_out))?;
    if plan.n_fallback > 0 {
        writeln!(
            out,
            "{} of {} tensors fell back to another type (rows not whole blocks)",
            plan.n_fallback,
            plan.tensors.len()
        )?;
    }
    Ok(plan)
}

fn write(model: &Model, plan: &Plan, o: &Options<'_>) -> Result<()> {
    let (tmp, mut f) = Temp::file(o.output, o.force)?;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, &mut f);
    w.write_all(&plan.layout.header)?;
    let zeros = [0u8; quantize::ALIGNMENT as usize];
    for (t, &(_, n)) in plan.tensors.iter().zip(&plan.layout.tensors) {
        let tensor = &model.model.tensors[t.input];
        let bytes = tensor.bytes_or_read()?;
        let written = if t.from == t.to {
            w.write_all(&bytes)?;
            bytes.len() as u64
        } else {
            convert(t, &bytes, &mut w).with_context(|| format!("{}: tensor {:?}", o.input.display(), t.name))?
        };
        anyhow::ensure!(written == n, "tensor {:?}: wrote {written} bytes, the plan has {n}", t.name);
        w.write_all(&zeros[..padding(n, quantize::ALIGNMENT) as usize])?;
        drop(bytes);
        tensor.release();
    }
    w.flush()?;
    drop(w);
    tmp.commit()
}

/// Converts one tensor, slab by slab, and writes it; returns the bytes written.
fn convert(t: &Planned, bytes: &[u8], w: &mut impl Write) -> Result<u64> {
    let n_per_row = t.dims.first().copied().unwrap_or(1) as usize;
    let row_in = row_bytes(t.from, n_per_row);
    let row_out = row_bytes(t.to, n_per_row);
    anyhow::ensure!(row_in > 0 && bytes.len() % row_in == 0, "{} bytes are not whole rows", bytes.len());
    let rows = bytes.len() / row_in;
    let slab_rows = (SLAB_VALUES / n_per_row.max(1)).max(1);
    let chunk_rows = CHUNK_VALUES.div_ceil(n_per_row.max(1)).max(1);
    let mut values = Vec::new();
    let mut pieces: Vec<Vec<u8>> = Vec::new();
    let mut written = 0u64;
    for first in (0..rows).step_by(slab_rows) {
        let n = slab_rows.min(rows - first);
        let src = &bytes[first * row_in..(first + n) * row_in];
        values.resize(n * n_per_row, 0f32);
        values
            .par_chunks_mut(chunk_rows * n_per_row)
            .zip(src.par_chunks(chunk_rows * row_in))
            .try_for_each(|(v, b)| quantize::decode(t.from, b, v))?;
        pieces.resize_with(n.div_ceil(chunk_rows), Vec::new);
        pieces.par_iter_mut().zip(values.par_chunks(chunk_rows * n_per_row)).enumerate().try_for_each(
            |(i, (piece, v))| {
                piece.clear();
                quantize::convert(t.to, v, piece).map_err(|e| {
                    let row = first + i * chunk_rows;
                    anyhow::anyhow!("{e} (in rows {row}..{}, {} values a row)", row + v.len() / n_per_row, n_per_row)
                })
            },
        )?;
        for p in &pieces {
            debug_assert_eq!(p.len() % row_out, 0);
            w.write_all(p)?;
            written += p.len() as u64;
        }
    }
    Ok(written)
}

/// `ggml_row_size`.
fn row_bytes(ty: GgmlType, n: usize) -> usize {
    n / ty.block_size() * ty.type_size()
}
