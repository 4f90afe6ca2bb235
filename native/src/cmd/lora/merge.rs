//! `organ lora merge`: LoRA adapters merged into their base (the core's
//! [`organ_core::lora::merge`]): every adapter read and checked against the base before any
//! work, then one GGUF written through a temp file, untouched tensors copied byte for byte
//! and merged ones computed a few at a time (rows in parallel), so memory holds a few
//! tensors, never the model.

use crate::llama_cpp::perplexity::{Scaled, Settings};
use crate::model::{Model, Tensor};
use crate::write::Made;
use anyhow::{bail, Context, Result};
use organ_core::lora::merge::{file_type, merge_rows, plan, Merge, OutputType};
use organ_core::lora::{is_adapter, Adapter, Factors, Severity, KEY_INVOCATION};
use organ_core::model::OwnedValue;
use organ_core::report::surgery::{self, LoraAdapterRow, LoraTensorRow, Surgery};
use organ_core::report::AnyReport;
use organ_core::{GgmlType, MetaValue};
use rayon::prelude::*;
use std::io::Write;
use std::path::Path;

/// Values merged per task: a block of rows of one tensor.
const CHUNK_VALUES: usize = 1 << 16;

/// The prefix of the metadata organ adds to a merged model.
const KEY_PREFIX: &str = "organ.lora_merge.";

pub struct Options<'a> {
    pub base: &'a Path,
    /// The adapters, each with its scale.
    pub adapters: Vec<Scaled>,
    /// One GGUF file.
    pub out: &'a Path,
    pub ty: OutputType,
    pub json: Option<&'a Path>,
    /// Replace outputs that exist (never an input).
    pub force: bool,
    /// `--judge`: the output against the base with the adapters applied by llama.cpp
    /// (`adapters.base` holds them).
    pub judge: Option<Settings>,
}

pub fn run(o: &Options<'_>, w: &mut dyn Write) -> Result<()> {
    if !o.out.extension().is_some_and(|e| e.eq_ignore_ascii_case("gguf")) {
        bail!("{}: lora merge writes one GGUF file: give a name ending in .gguf", o.out.display());
    }
    if let Some(s) = &o.judge {
        crate::judge::check(o.base, o.out, false, s)?;
    }
    let base = Model::open(o.base)?;
    if is_adapter(&base.model) {
        bail!(
            "{}: a LoRA adapter (general.type = \"adapter\"), not a model: give the base model first, the adapter \
             with --lora",
            o.base.display()
        );
    }
    let adapters = open_adapters(o, &base)?;
    let list: Vec<(&Adapter, f64)> =
        adapters.iter().zip(&o.adapters).map(|((_, a), s)| (a, f64::from(s.scale))).collect();
    let merges = plan(&base.model, &list, o.ty).with_context(|| format!("{}: cannot merge", o.base.display()))?;

    let rows = adapter_rows(o, &adapters);
    let tensors = tensor_rows(&base, &merges);
    let copied = base.tensors.len() - merges.len();
    report(o, &base, &rows, &tensors, copied, w)?;

    let kvs = metadata(o, &base, &adapters, &merges);
    let len = write(o, &base, &adapters, &merges, &kvs)?;
    writeln!(w, "wrote {} ({len} bytes)", o.out.display())?;

    let verdict = crate::judge::judged(o.out, o.base, o.judge.as_ref(), w)?;
    if let Some(p) = o.json {
        let report = surgery::LoraMerge {
            base: &o.base.display().to_string(),
            out: &o.out.display().to_string(),
            adapters: &rows,
            tensors: &tensors,
            copied,
            judge: verdict.as_ref(),
        };
        crate::cmd::outputs::write_json(AnyReport::Surgery(&Surgery::LoraMerge(report)), p, o.force)?;
    }
    Ok(())
}

/// Opens and checks every adapter before any work: llama.cpp's own refusals
/// ([`Adapter::first_error`]), then its fit to the base ([`Adapter::fits`]); with
/// `--judge`, also what llama.cpp cannot apply at run time ([`Adapter::against`]).
fn open_adapters(o: &Options<'_>, base: &Model) -> Result<Vec<(Model, Adapter)>> {
    let mut out = Vec::with_capacity(o.adapters.len());
    for s in &o.adapters {
        let p = s.path.as_path();
        let m = Model::open(p)?;
        let a = Adapter::read(&m.model);
        if let Some(e) = a.first_error() {
            bail!("{}: not a LoRA adapter organ can merge: {e}", p.display());
        }
        let errors: Vec<String> =
            a.fits(&base.model).iter().filter(|p| p.severity == Severity::Error).map(|p| p.sentence()).collect();
        if let Some(first) = errors.first() {
            let more =
                if errors.len() > 1 { format!(" (and {} more problems)", errors.len() - 1) } else { String::new() };
            bail!("{}: does not fit the base {}: {first}{more}", p.display(), o.base.display());
        }
        if o.judge.is_some() {
            if a.invocation_tokens.is_some() {
                bail!(
                    "{}: --judge compares the merge with llama.cpp applying the adapter at run time, where an aLoRA \
                     is off until its invocation tokens: the two differ by design (merge without --judge, then \
                     organ eval the output against the base)",
                    p.display()
                );
            }
            if let Some(e) = a.against(&base.model).iter().find(|p| p.severity == Severity::Error) {
                bail!(
                    "{}: --judge compares the merge with llama.cpp applying the adapter to {}, which it cannot: {}",
                    p.display(),
                    o.base.display(),
                    e.sentence()
                );
            }
        }
        if let Some(n) = a.invocation_tokens {
            // llama.cpp applies an aLoRA only to the tokens after its invocation sequence;
            // a merged weight has no such switch.
            crate::progress::warn(format!(
                "{}: an aLoRA, which llama.cpp applies only after its {n} invocation tokens ({KEY_INVOCATION}); \
                 merged, it changes every token",
                p.display()
            ));
        }
        out.push((m, a));
    }
    Ok(out)
}

fn adapter_rows(o: &Options<'_>, adapters: &[(Model, Adapter)]) -> Vec<LoraAdapterRow> {
    adapters
        .iter()
        .zip(&o.adapters)
        .map(|((_, a), s)| LoraAdapterRow {
            file: s.path.display().to_string(),
            scale: s.scale,
            alpha: a.alpha,
            ranks: a.ranks(),
            pairs: a.pairs.len(),
        })
        .collect()
}

fn tensor_rows(base: &Model, merges: &[Merge]) -> Vec<LoraTensorRow> {
    merges
        .iter()
        .map(|m| {
            let mut adapters: Vec<usize> = m.parts.iter().map(|p| p.adapter).collect();
            adapters.dedup();
            LoraTensorRow {
                name: base.tensors[m.tensor].name.clone(),
                from: m.from.name().into(),
                written_as: m.to.name().into(),
                why: why(m),
                adapters,
            }
        })
        .collect()
}

fn why(m: &Merge) -> &'static str {
    match (m.kept, m.to == GgmlType::F16 && !organ_core::quant::quantize::can_quantize(m.from)) {
        (true, _) => "kept",
        (false, true) => "F16: organ cannot write the base's type",
        (false, false) => "--type",
    }
}

fn report(
    o: &Options<'_>,
    base: &Model,
    adapters: &[LoraAdapterRow],
    tensors: &[LoraTensorRow],
    copied: usize,
    w: &mut dyn Write,
) -> Result<()> {
    let n = adapters.len();
    writeln!(
        w,
        "lora merge: {n} adapter{} into {} ({})",
        if n == 1 { "" } else { "s" },
        o.base.display(),
        base.architecture().as_deref().unwrap_or("?")
    )?;
    for a in adapters {
        let ranks: Vec<String> = a.ranks.iter().map(u64::to_string).collect();
        writeln!(
            w,
            "  {}  scale {}  α {}  rank {}  {} pairs",
            a.file,
            a.scale,
            a.alpha.map_or_else(|| "-".into(), |a| a.to_string()),
            ranks.join(","),
            a.pairs
        )?;
    }
    // One line per (type, written as, why): the per-tensor list is in --json.
    let mut groups: Vec<(&str, &str, &str, usize)> = Vec::new();
    for t in tensors {
        match groups.iter_mut().find(|g| (g.0, g.1, g.2) == (t.from.as_str(), t.written_as.as_str(), t.why)) {
            Some(g) => g.3 += 1,
            None => groups.push((&t.from, &t.written_as, t.why, 1)),
        }
    }
    writeln!(w, "merged {} tensors, copied {copied} byte for byte", tensors.len())?;
    for (from, to, why, count) in groups {
        writeln!(w, "  {count:>4} {from} -> {to} ({why})")?;
    }
    Ok(())
}

/// The base's metadata, `general.file_type` set to the forced type's (as llama-quantize
/// and llama-export-lora do) when `--type` changed a tensor's type, and what was merged.
fn metadata(
    o: &Options<'_>,
    base: &Model,
    adapters: &[(Model, Adapter)],
    merges: &[Merge],
) -> Vec<(String, OwnedValue)> {
    let mut kvs: Vec<(String, OwnedValue)> =
        base.kvs.iter().filter(|(k, _)| !k.starts_with(KEY_PREFIX)).cloned().collect();
    if let OutputType::Forced(ty) = o.ty {
        if let (true, Some(ft)) = (merges.iter().any(|m| m.to != m.from), file_type(ty)) {
            let v = OwnedValue::Scalar(MetaValue::U32(ft));
            match kvs.iter_mut().find(|(k, _)| k == "general.file_type") {
                Some(kv) => kv.1 = v,
                None => kvs.push(("general.file_type".into(), v)),
            }
        }
    }
    // Each adapter by its file name, as graft names its donor: the file says what was
    // merged, not where on the merging machine (or under a server's root) it lay.
    let adapters: Vec<String> =
        adapters.iter().zip(&o.adapters).map(|((m, _), s)| format!("{}:{}", m.label, s.scale)).collect();
    // Strings of at most a file name each: OwnedValue::strings refuses none of them.
    if let Ok(v) = OwnedValue::strings(&adapters) {
        kvs.push((format!("{KEY_PREFIX}adapters"), v));
    }
    kvs
}

/// Writes the merged model through a temp file; returns its length. A merged tensor is
/// made by blocks of rows, so it holds little beyond its output: batches of 2 × threads.
fn write(
    o: &Options<'_>,
    base: &Model,
    adapters: &[(Model, Adapter)],
    merges: &[Merge],
    kvs: &[(String, OwnedValue)],
) -> Result<u64> {
    let mut merge_of: Vec<Option<usize>> = vec![None; base.tensors.len()];
    let mut made: Vec<Option<Made>> = vec![None; base.tensors.len()];
    for (k, m) in merges.iter().enumerate() {
        merge_of[m.tensor] = Some(k);
        made[m.tensor] = Some(Made { ty: m.to, holds: 0 });
    }
    let make = |i: usize| match merge_of[i] {
        Some(k) => merged(base, adapters, &merges[k]),
        None => bail!("tensor {i} has no merge"),
    };
    crate::write::write_made(o.out, o.force, base, kvs, &made, u64::MAX, make)
}

/// One merged tensor's bytes: blocks of rows in parallel.
fn merged(base: &Model, adapters: &[(Model, Adapter)], m: &Merge) -> Result<Vec<u8>> {
    let t: &Tensor = &base.tensors[m.tensor];
    let factors: Vec<Factors> = m
        .parts
        .iter()
        .map(|p| {
            let (am, a) = &adapters[p.adapter];
            let pair = &a.pairs[p.pair];
            let (ta, tb) = (&am.tensors[pair.a], &am.tensors[pair.b]);
            Factors::of(pair, ta.ty, ta.bytes(), tb.ty, tb.bytes(), p.scale)
                .with_context(|| format!("{}: the pair of {}", am.label, pair.target))
        })
        .collect::<Result<_>>()?;
    let cols = usize::try_from(t.dims.first().copied().unwrap_or(0))?;
    let bytes = t.bytes();
    let (bs, ts) = (t.ty.block_size(), t.ty.type_size());
    let row_bytes = cols / bs.max(1) * ts;
    if cols == 0 || cols % bs != 0 || bytes.len() % row_bytes != 0 {
        bail!("{}: tensor {:?} is not whole rows of {cols} {} values", base.label, t.name, t.ty);
    }
    let rows = bytes.len() / row_bytes;
    let per = (CHUNK_VALUES / cols).max(1);
    let pieces: Vec<Vec<u8>> = (0..rows.div_ceil(per))
        .into_par_iter()
        .map(|c| {
            let (first, last) = (c * per, ((c + 1) * per).min(rows));
            let mut out = Vec::new();
            merge_rows(t.ty, &bytes[first * row_bytes..last * row_bytes], first, cols, &factors, m.to, &mut out)
                .with_context(|| format!("{}: merging tensor {:?}", base.label, t.name))?;
            Ok(out)
        })
        .collect::<Result<_>>()?;
    Ok(pieces.concat())
}
