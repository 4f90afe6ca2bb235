//! `organ layers`: the core plans ([`organ_core::surgery::layers`]) which layers stay,
//! their new numbers and the metadata cut to them; this copies the kept tensors' bytes,
//! in the kernel where it can, into one GGUF written atomically. Nothing is decoded.

use crate::model::Model;
use anyhow::Result;
use organ_core::report::surgery::{self, Surgery};
use organ_core::report::AnyReport;
use organ_core::surgery::experts::Provenance;
use organ_core::surgery::layers::{self, Choice, LayersPlan};
use std::io::Write;
use std::path::Path;

/// What `organ layers` does, its flags validated (organ-cli's `cli::layers`).
pub struct Options<'a> {
    /// The model: a GGUF, a split GGUF or an organ directory.
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
    /// `--drop` or `--keep`, parsed.
    pub keep: bool,
    pub layers: Vec<u64>,
    /// The list as given, for messages.
    pub given: &'a str,
}

/// Runs `c`, writing what it did to `w`.
pub fn run(c: &Options<'_>, w: &mut dyn Write) -> Result<()> {
    let judge = &c.judge;
    let (out, source, blake3) = super::experts::open_source("layers", c.model, c.out, c.dry_run, judge.as_ref())?;
    let p = Provenance { source: &source.label, blake3: &blake3 };
    let (flag, choice) = match c.keep {
        true => ("--keep", Choice::Keep(&c.layers)),
        false => ("--drop", Choice::Drop(&c.layers)),
    };
    let plan = layers::plan(&source.model, choice, &p).map_err(|bad| {
        let n = match bad.len() {
            1 => "1 problem".to_owned(),
            n => format!("{n} problems"),
        };
        anyhow::anyhow!(
            "{flag} {} on {} refused, nothing written ({n}):\n{}",
            c.given,
            source.label,
            super::problem_lines(&bad)
        )
    })?;
    print_plan(&plan, &source, w)?;
    let Some(out) = out else {
        writeln!(w, "dry run: nothing written")?;
        return Ok(());
    };
    let n = super::experts::write(&plan.kvs, &plan.tensors, &source, out, c.force)?;
    writeln!(w, "wrote {} ({n} bytes)", out.display())?;
    let verdict = crate::judge::judged(out, c.model, judge.as_ref(), w)?;
    if let Some(j) = c.json {
        let out = out.display().to_string();
        let written =
            surgery::Written { source: &source.label, source_blake3: &blake3, out: &out, judge: verdict.as_ref() };
        let report = Surgery::Layers(surgery::Layers::new(&plan, written, n));
        super::outputs::write_json(AnyReport::Surgery(&report), j, c.force)?;
    }
    Ok(())
}

/// "0-2,5" for [0, 1, 2, 5].
fn ranges(ls: &[u64]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ls.len() {
        let mut j = i;
        while j + 1 < ls.len() && ls[j + 1] == ls[j] + 1 {
            j += 1;
        }
        parts.push(if i == j { ls[i].to_string() } else { format!("{}-{}", ls[i], ls[j]) });
        i = j + 1;
    }
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join(",")
    }
}

fn print_plan(plan: &LayersPlan, source: &Model, w: &mut dyn Write) -> Result<()> {
    writeln!(
        w,
        "{} ({}, {} layers): dropping {}, keeping {} ({} layers, renumbered 0-{}); {} tensors removed, {} kept",
        source.label,
        plan.architecture,
        plan.block_count,
        ranges(&plan.dropped),
        ranges(&plan.kept),
        plan.kept.len(),
        plan.kept.len() - 1,
        plan.removed.len(),
        plan.tensors.len()
    )?;
    if plan.dropped.is_empty() {
        writeln!(w, "  no layer dropped: the output is the input")?;
    }
    for (k, what) in &plan.changed {
        writeln!(w, "  {:<44} {what}", organ_core::gguf::display::printable(k))?;
    }
    Ok(())
}
