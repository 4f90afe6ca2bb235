//! `organ experts extract` and `organ experts prune`: the core plans
//! ([`organ_core::surgery::experts`]) which byte ranges of the source's tensors make each
//! output tensor; this copies them, in the kernel where it can, into one GGUF written
//! atomically. Nothing is requantized.

use crate::model::Model;
use crate::summary::{self, Line};
use anyhow::{bail, Context, Result};
use organ_core::gguf::writer::{padding, plan as lay_out, TensorSpec};
use organ_core::gguf::MetaValue;
use organ_core::model::OwnedValue;
use organ_core::report::surgery::{self, Surgery};
use organ_core::report::AnyReport;
use organ_core::surgery::experts::{self, ExpertsPlan, OutTensor, Provenance};
use organ_core::surgery::graft::Mismatch;
use std::io::Write;
use std::path::Path;

/// What `organ experts` does, its flags validated (organ-cli's `cli::experts`).
pub struct Options<'a> {
    /// The mixture of experts: a GGUF, a split GGUF or an organ directory.
    pub model: &'a Path,
    /// The GGUF to write; None with --dry-run.
    pub out: Option<&'a Path>,
    /// Print the plan and check it; write nothing.
    pub dry_run: bool,
    /// Replace outputs that exist (never an input).
    pub force: bool,
    /// Also write the report as JSON.
    pub json: Option<&'a Path>,
    /// `--judge`: evaluate the output against the source (crate::judge).
    pub judge: Option<crate::cmd::eval::Settings>,
    pub op: Op<'a>,
}

/// Which operation, with its own flags.
pub enum Op<'a> {
    /// `extract --expert E`.
    Extract { expert: u64 },
    /// `prune --keep LIST [--experts-used K]`: LIST as given (parsed once the source is open).
    Prune { keep: &'a str, experts_used: Option<u64> },
}

/// The start of a surgery that writes one GGUF planned from one source (experts, layers):
/// `out` checked (a .gguf, given unless `dry_run`; `judge`'s needs), the source opened,
/// and its BLAKE3 for the provenance (empty on a dry run, which writes nothing).
///
/// # Errors
/// An out that is not one GGUF, missing without `dry_run`; the judge's; the source's.
pub(crate) fn open_source<'a>(
    command: &str,
    model: &Path,
    out: Option<&'a Path>,
    dry_run: bool,
    judge: Option<&crate::cmd::eval::Settings>,
) -> Result<(Option<&'a Path>, Model, String)> {
    let out = match (out, dry_run) {
        (Some(out), false) => {
            if !out.extension().is_some_and(|e| e.eq_ignore_ascii_case("gguf")) {
                bail!("--out {}: organ {command} writes one GGUF file: give a name ending in .gguf", out.display());
            }
            if let Some(s) = judge {
                crate::judge::check(model, out, false, s)?;
            }
            Some(out)
        }
        (None, false) => bail!("--out is required unless --dry-run"),
        (_, true) => None,
    };
    let source = Model::open(model)?;
    let blake3 = match out {
        Some(_) => source.fingerprint(false)?.blake3,
        None => String::new(),
    };
    Ok((out, source, blake3))
}

/// Runs `o`, writing what it did to `w`.
pub fn run(c: &Options<'_>, w: &mut dyn Write) -> Result<()> {
    let judge = &c.judge;
    let (out, source, blake3) = open_source("experts", c.model, c.out, c.dry_run, judge.as_ref())?;
    let p = Provenance { source: &source.label, blake3: &blake3 };
    let planned = match c.op {
        Op::Extract { expert } => experts::extract(&source.model, expert, &p),
        Op::Prune { keep, experts_used } => {
            let keep = experts::parse_keep(keep).map_err(|e| anyhow::anyhow!("--keep {e}"))?;
            experts::prune(&source.model, &keep, experts_used, &p)
        }
    };
    let plan = planned.map_err(|bad| refused(&c.op, &source.label, &bad))?;
    print_plan(&plan, &source, w)?;
    let Some(out) = out else {
        writeln!(w, "dry run: nothing written")?;
        return Ok(());
    };
    let n = write(&plan.kvs, &plan.tensors, &source, out, c.force)?;
    writeln!(w, "wrote {} ({n} bytes)", out.display())?;
    let verdict = crate::judge::judged(out, c.model, judge.as_ref(), w)?;
    if let Some(j) = c.json {
        let out = out.display().to_string();
        let written =
            surgery::Written { source: &source.label, source_blake3: &blake3, out: &out, judge: verdict.as_ref() };
        let report = Surgery::Experts(surgery::Experts::new(&plan, written));
        super::outputs::write_json(AnyReport::Surgery(&report), j, c.force)?;
    }
    Ok(())
}

/// The error listing every problem the core found.
fn refused(op: &Op<'_>, label: &str, bad: &[Mismatch]) -> anyhow::Error {
    let what = match op {
        Op::Extract { expert } => format!("extract of expert {expert}"),
        Op::Prune { keep, .. } => format!("prune to experts {keep}"),
    };
    let n = match bad.len() {
        1 => "1 problem".to_owned(),
        n => format!("{n} problems"),
    };
    anyhow::anyhow!("{what} of {label} refused, nothing written ({n}):\n{}", super::problem_lines(bad))
}

fn print_plan(plan: &ExpertsPlan, source: &Model, w: &mut dyn Write) -> Result<()> {
    let kept: Vec<String> = plan.kept.iter().map(|e| e.to_string()).collect();
    writeln!(
        w,
        "{} from {} ({}, {} experts): expert{} {}; {} tensors sliced, {} dropped",
        plan.op,
        source.label,
        plan.architecture,
        plan.expert_count,
        if kept.len() == 1 { "" } else { "s" },
        kept.join(","),
        plan.sliced.len(),
        plan.dropped.len()
    )?;
    // The tensors cut, those alike but for their layer as one row ([`crate::summary`]).
    let cut = plan
        .tensors
        .iter()
        .filter(|t| t.pieces.len() != 1 || t.pieces[0].len != source.tensors[t.pieces[0].tensor].n_bytes)
        .map(|t| Line {
            tensor: organ_core::gguf::display::printable(&t.name).into_owned(),
            text: format!("{:>7} {:<22} {:>12} bytes", t.ty.name(), format!("{:?}", t.dims), t.n_bytes()),
        })
        .collect();
    let rows = summary::lines(cut);
    for r in &rows {
        writeln!(w, "  {:<40} {}{}", r.tensor, r.text, r.count())?;
    }
    if summary::any_grouped(&rows) {
        writeln!(w, "  (each row of a count stands for that many tensors, one per layer; --verbose lists each)")?;
    }
    Ok(())
}

/// Writes a planned GGUF (`kvs`, then `tensors` made of byte ranges of `source`'s, as
/// expert surgery and `organ layers` plan them) to `dest` through a temp file: the header,
/// then each tensor's pieces copied from the source's files, padded to the alignment.
/// Returns its length.
pub(crate) fn write(
    kvs: &[(String, OwnedValue)],
    tensors: &[OutTensor],
    source: &Model,
    dest: &Path,
    force: bool,
) -> Result<u64> {
    let views = kvs.iter().map(|(k, v)| Ok((k.as_str(), v.view()?))).collect::<Result<Vec<(&str, MetaValue<'_>)>>>()?;
    let specs: Vec<TensorSpec<'_>> =
        tensors.iter().map(|t| TensorSpec { name: &t.name, dims: &t.dims, ty: t.ty }).collect();
    let layout = lay_out(source.version, &views, &specs)
        .with_context(|| format!("{}: cannot lay out the GGUF", dest.display()))?;
    let (tmp, mut f) = crate::atomic::Temp::file(dest, force)?;
    f.write_all(&layout.header)?;
    let zeros = vec![0u8; layout.alignment as usize];
    for (t, &(_, n)) in tensors.iter().zip(&layout.tensors) {
        for p in &t.pieces {
            let src = source.tensors.get(p.tensor).context("a piece of no tensor")?;
            let in_src = p.start.checked_add(p.len).is_some_and(|end| end <= src.n_bytes);
            if !in_src {
                bail!("{}: bytes {}+{} are outside tensor {:?}", source.label, p.start, p.len, src.name);
            }
            match &src.owned {
                Some(b) => f.write_all(&b[p.start as usize..(p.start + p.len) as usize])?,
                None => src
                    .in_file
                    .with_file(|file| crate::write::copy_range(file, src.offset + p.start, p.len, &mut f))
                    .with_context(|| format!("{}: copying tensor {:?}", tmp.path.display(), t.name))?,
            }
        }
        f.write_all(&zeros[..padding(n, layout.alignment) as usize])?;
    }
    tmp.commit()?;
    Ok(layout.file_len)
}
