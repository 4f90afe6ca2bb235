//! `organ lora extract`: an adapter from a finetune. For each selected 2-D weight whose
//! values differ, ΔW = TUNED − BASE in f32, its seeded truncated SVD
//! ([`organ_core::lora::svd`]), and the pair llama.cpp loads, in the layouts
//! [`organ_core::lora`] documents; α = the rank asked for, so α / r = 1.
//!
//! Memory: one tensor at a time per thread (rayon over tensors): its bytes in both models
//! (positioned reads, not the maps, so the models' pages are never resident) and their f32
//! values, then the small factors; never the model.

use crate::model::{Model, Tensor};
use anyhow::{bail, Context, Result};
use organ_core::gguf::MetaValue;
use organ_core::lora::{self, svd, Factors};
use organ_core::model::{OwnedValue, TensorEntry};
use organ_core::quant::dequantize;
use organ_core::quant::quantize::quantize_in_range as quantize;
use organ_core::report::surgery::{self, Surgery};
use organ_core::report::AnyReport;
use organ_core::surgery::select::Selection;
use organ_core::GgmlType;
use rayon::prelude::*;
use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

/// The largest `--rank`: the full rank of the widest weights of today's largest models
/// (16,384), with room; each pair is also held to its own min(rows, columns).
pub const MAX_RANK: u64 = 65_536;

pub struct Options<'a> {
    pub base: &'a Path,
    pub tuned: &'a Path,
    /// The rank asked for (1 to [`MAX_RANK`]): each pair's is min(rank, rows, columns).
    pub rank: usize,
    /// Which weights (`--name`); every 2-D weight when empty.
    pub selection: Selection,
    /// The halves' type (F16 where a half's rows are not whole blocks of it).
    pub ty: GgmlType,
    pub out: &'a Path,
    pub json: Option<&'a Path>,
    /// Replace outputs that exist (never an input).
    pub force: bool,
    /// `--judge`: the base with the extracted adapter applied by llama.cpp (its settings
    /// carry the adapter on the model's side) against the finetune.
    pub judge: Option<crate::cmd::eval::Settings>,
}

/// One extracted weight.
pub use organ_core::report::surgery::ExtractRow as Row;

pub fn run(o: &Options<'_>, w: &mut dyn Write) -> Result<()> {
    if let Some(s) = &o.judge {
        // Before any work: the text, the tool, and the finetune llama.cpp is to load.
        crate::judge::check(o.tuned, o.out, false, s)?;
    }
    let base = Model::open(o.base)?;
    let tuned = Model::open(o.tuned)?;
    for (m, path, role) in [(&base, o.base, "--base"), (&tuned, o.tuned, "--tuned")] {
        if lora::is_adapter(m) {
            bail!("{}: {role} is an adapter (general.type = \"adapter\"); extract reads two models", path.display());
        }
    }
    let Some(arch) = base.architecture() else {
        bail!("{}: no general.architecture: not a model llama.cpp loads", o.base.display());
    };
    if tuned.architecture().as_deref() != Some(&*arch) {
        bail!(
            "{} is {:?}, {} is {arch:?}: a finetune keeps its base's architecture",
            o.tuned.display(),
            tuned.architecture().unwrap_or_default(),
            o.base.display()
        );
    }
    let pairs = pairs(&base, &tuned, o)?;
    let alpha = o.rank as f32;

    let progress = crate::progress::tensor_bar();
    crate::progress::grow(&progress, pairs.len() as u64);
    let done: Vec<Option<(Row, Factors)>> = pairs
        .par_iter()
        .map(|&(b, t)| {
            let r = extract(b, t, o);
            crate::progress::tensor_done(&progress);
            r.with_context(|| format!("{} and {}: tensor {:?}", o.base.display(), o.tuned.display(), b.name))
        })
        .collect::<Result<_>>()?;
    progress.finish_and_clear();
    let unchanged = done.iter().filter(|d| d.is_none()).count();
    let mut extracted: Vec<(&Tensor, Row, Factors)> =
        pairs.iter().zip(done).filter_map(|(&(b, _), d)| d.map(|(row, f)| (b, row, f))).collect();
    if extracted.is_empty() {
        bail!(
            "{} and {}: the {} selected 2-D weights have the same values in both: nothing to extract",
            o.base.display(),
            o.tuned.display(),
            pairs.len()
        );
    }

    // A base that ties its output to token_embd (no output.weight): llama.cpp 11434
    // applies a token_embd pair to the output too, in the wrong layout, and aborts
    // (GGML_ASSERT ggml_can_mul_mat) whenever the adapter is used. Such a pair is left out,
    // and said so; an adapter of nothing else is refused.
    let mut left_out = Vec::new();
    if lora::ties_output(&base.model) {
        extracted.retain(|(b, _, _)| {
            let keep = b.name != "token_embd.weight";
            if !keep {
                left_out.push(b.name.clone());
            }
            keep
        });
        if extracted.is_empty() {
            bail!(
                "{}: only token_embd.weight differs among the selected weights, and the base ties its output to \
                 token_embd (it has no output.weight): llama.cpp 11434 aborts on such a pair, so there is nothing \
                 to write",
                o.base.display()
            );
        }
    }
    let mut tensors = Vec::with_capacity(2 * extracted.len());
    let mut rows = Vec::with_capacity(extracted.len());
    for (b, mut row, f) in extracted {
        // llama.cpp applies (α / r)·B·A: the factors carry r / α, split evenly.
        let f = f.rescaled(f64::from(alpha) / row.rank as f64);
        let embedding = b.name.ends_with("token_embd.weight");
        let (a_vals, b_vals) = f.halves(embedding);
        let (k, rows_, cols) = (row.rank as u64, f.rows as u64, f.cols as u64);
        let (a_dims, b_dims) = if embedding { ([k, rows_], [k, cols]) } else { ([cols, k], [k, rows_]) };
        let ha = half(b, format!("{}{}", b.name, lora::SUFFIX_A), a_dims, &a_vals, o.ty)?;
        let hb = half(b, format!("{}{}", b.name, lora::SUFFIX_B), b_dims, &b_vals, o.ty)?;
        row.lora_a = ha.ty.name().into();
        row.lora_b = hb.ty.name().into();
        tensors.extend([ha, hb]);
        rows.push(row);
    }

    let kvs = vec![
        ("general.architecture".to_owned(), OwnedValue::string(&arch)),
        (lora::KEY_GENERAL_TYPE.to_owned(), OwnedValue::string(lora::GENERAL_TYPE)),
        (lora::KEY_ADAPTER_TYPE.to_owned(), OwnedValue::string(lora::ADAPTER_TYPE)),
        (lora::KEY_ALPHA.to_owned(), OwnedValue::from_meta(&MetaValue::F32(alpha))),
    ];
    print(w, o, &base, &tuned, &rows, unchanged)?;
    for name in &left_out {
        writeln!(
            w,
            "  {name} left out: the base ties its output to token_embd (it has no output.weight), and llama.cpp \
             11434 aborts on such a pair (GGML_ASSERT ggml_can_mul_mat); the adapter holds the other weights"
        )?;
    }
    let n = crate::write::write_gguf(3, &kvs, &tensors, o.out, o.force)?;
    writeln!(w, "wrote {} ({n} bytes)", o.out.display())?;
    let verdict = match &o.judge {
        Some(s) => {
            // BASE --lora OUT against TUNED: what the adapter restores of the finetune.
            let v = crate::judge::judge_near(o.base, o.tuned, s, o.out)?;
            crate::judge::print(&v, w)?;
            Some(v)
        }
        None => None,
    };
    if let Some(p) = o.json {
        let report = surgery::LoraExtract {
            judge: verdict.as_ref(),
            base: &base.label,
            tuned: &tuned.label,
            rank: o.rank,
            alpha,
            ty: o.ty.name(),
            unchanged,
            left_out: &left_out,
            tensors: &rows,
        };
        crate::cmd::outputs::write_json(AnyReport::Surgery(&Surgery::LoraExtract(report)), p, o.force)?;
    }
    Ok(())
}

/// The selected 2-D weights of the base, each with the finetune's tensor of its name;
/// refused, before any work, when one is missing on either side or differs in shape.
fn pairs<'m>(base: &'m Model, tuned: &'m Model, o: &Options<'_>) -> Result<Vec<(&'m Tensor, &'m Tensor)>> {
    let selected = |t: &Tensor| t.dims.len() == 2 && o.selection.matches(&t.name);
    let in_tuned: HashMap<&str, &Tensor> = tuned.tensors.iter().map(|t| (t.name.as_str(), t)).collect();
    let mut out = Vec::new();
    let mut bad = Vec::new();
    for b in base.tensors.iter().filter(|t| selected(t)) {
        match in_tuned.get(b.name.as_str()) {
            None => bad.push(format!("{}: the finetune has no such tensor", b.name)),
            Some(t) if t.dims != b.dims => bad.push(format!(
                "{}: the base's is {:?}, the finetune's {:?} (an adapter changes values, not shapes)",
                b.name, b.dims, t.dims
            )),
            Some(t) if !b.ty.can_dequantize() || !t.ty.can_dequantize() => {
                bad.push(format!("{}: organ cannot dequantize {} or {}", b.name, b.ty, t.ty))
            }
            Some(t) => out.push((b, *t)),
        }
    }
    let in_base: std::collections::HashSet<&str> = base.tensors.iter().map(|t| t.name.as_str()).collect();
    for t in tuned.tensors.iter().filter(|t| selected(t) && !in_base.contains(t.name.as_str())) {
        bad.push(format!("{}: the base has no such tensor", t.name));
    }
    if !bad.is_empty() {
        bail!(
            "{} and {} are not a base and its finetune ({}):\n  {}",
            o.base.display(),
            o.tuned.display(),
            crate::cmd::problems(bad.len()),
            bad.join("\n  ")
        );
    }
    if out.is_empty() {
        let names = base.tensors.iter().filter(|t| t.dims.len() == 2).map(|t| t.name.as_str());
        bail!("{}: {}", base.label, o.selection.none_matched(names));
    }
    Ok(out)
}

/// The bytes of `t`, read from its file by a positioned read (not through the map).
fn read(t: &Tensor) -> Result<Vec<u8>> {
    if let Some(b) = &t.owned {
        return Ok(b.to_vec());
    }
    let n = usize::try_from(t.n_bytes).context("tensor larger than memory")?;
    let mut buf = vec![0u8; n];
    t.in_file.read_exact_at(&mut buf, t.offset)?;
    Ok(buf)
}

/// ΔW of one weight and its truncated SVD, or `None` when its values are the same.
fn extract(b: &Tensor, t: &Tensor, o: &Options<'_>) -> Result<Option<(Row, Factors)>> {
    let (bb, tb) = (read(b)?, read(t)?);
    if b.ty == t.ty && bb == tb {
        return Ok(None);
    }
    let base_values = dequantize(b.ty, &bb)?;
    drop(bb);
    let mut delta = dequantize(t.ty, &tb)?;
    drop(tb);
    for (d, x) in delta.iter_mut().zip(&base_values) {
        *d -= x;
    }
    drop(base_values);
    if delta.iter().all(|&d| d == 0.0) {
        return Ok(None);
    }
    let cols = usize::try_from(b.dims[0]).context("too many columns")?;
    let rows = usize::try_from(b.dims[1]).context("too many rows")?;
    let s = svd::truncated(&delta, rows, cols, o.rank, organ_core::random::seed_of(&b.name))?;
    let row = Row {
        tensor: b.name.clone(),
        shape: [b.dims[0], b.dims[1]],
        rank: s.factors.rank,
        delta_norm: s.total.sqrt(),
        retained: s.retained(),
        lora_a: String::new(),
        lora_b: String::new(),
    };
    Ok(Some((row, s.factors)))
}

/// One half of a pair as a tensor of type `ty`, or F16 when its rows (ggml's `ne[0]`) are
/// not whole blocks of `ty` (convert_lora_to_gguf.py falls back the same way).
fn half(like: &Tensor, name: String, dims: [u64; 2], values: &[f32], ty: GgmlType) -> Result<Tensor> {
    let ty = if dims[0] % ty.block_size() as u64 == 0 { ty } else { GgmlType::F16 };
    let mut bytes = Vec::new();
    quantize(ty, values, &mut bytes).with_context(|| format!("{name}: cannot write it as {ty}"))?;
    let entry = TensorEntry {
        name,
        ty,
        dims: dims.to_vec(),
        n_elements: dims[0] * dims[1],
        n_bytes: bytes.len() as u64,
        file: 0,
        offset: 0,
    };
    Ok(Tensor { entry, in_file: like.in_file.clone(), owned: Some(Arc::new(bytes)) })
}

fn print(
    w: &mut dyn Write,
    o: &Options<'_>,
    base: &Model,
    tuned: &Model,
    rows: &[Row],
    unchanged: usize,
) -> Result<()> {
    writeln!(
        w,
        "lora extract of {} − {}: {} weights differ ({unchanged} selected are unchanged); rank {}, α = {} (α/r = 1), {}",
        tuned.label,
        base.label,
        rows.len(),
        o.rank,
        o.rank,
        o.ty.name()
    )?;
    writeln!(w, "  {:<34} {:>11} {:>5} {:>10} {:>9}  halves", "tensor", "shape", "rank", "‖ΔW‖_F", "kept")?;
    for r in rows {
        writeln!(
            w,
            "  {:<34} {:>11} {:>5} {:>10.5} {:>8.4}%  {}/{}",
            organ_core::gguf::display::printable(&r.tensor),
            format!("{}×{}", r.shape[0], r.shape[1]),
            r.rank,
            r.delta_norm,
            100.0 * r.retained,
            r.lora_a,
            r.lora_b
        )?;
    }
    let total: f64 = rows.iter().map(|r| r.delta_norm * r.delta_norm).sum();
    let kept: f64 = rows.iter().map(|r| r.retained * r.delta_norm * r.delta_norm).sum();
    if total > 0.0 {
        writeln!(w, "kept {:.4}% of ‖ΔW‖²_F over the {} weights", 100.0 * kept / total, rows.len())?;
    }
    Ok(())
}
