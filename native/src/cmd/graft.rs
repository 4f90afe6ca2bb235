//! `organ graft`: donor tensors into a recipient, GGUF or organ directory on either side
//! and as output, after checks that refuse (with the full list) what would not load.

use crate::model::Model;
use crate::summary::{self, Line};
use anyhow::{bail, Result};
use organ_core::model::OwnedValue;
use organ_core::report::surgery::{self, Surgery};
use organ_core::report::AnyReport;
use organ_core::surgery::graft::{plan, Side};
use organ_core::surgery::select::Selection;
use std::io::Write;
use std::path::Path;

pub struct Options<'a> {
    pub donor: &'a Path,
    pub recipient: &'a Path,
    pub out: Option<&'a Path>,
    pub selection: Selection,
    /// The --layers argument as given, for provenance.
    pub layers_arg: Option<String>,
    pub dry_run: bool,
    /// Write a split GGUF with shards of at most this many data bytes.
    pub split_max: Option<u64>,
    /// Record the donor's sha256 as well as its BLAKE3.
    pub sha256: bool,
    /// Replace an output that exists (never an input).
    pub force: bool,
    /// `--judge`: evaluate the output against the recipient (crate::judge).
    pub judge: Option<crate::cmd::eval::Settings>,
    /// Also write the report (the tensors grafted, and the verdict with --judge) as JSON.
    pub json: Option<&'a Path>,
}

pub fn run(o: &Options<'_>, w: &mut dyn Write) -> Result<()> {
    if let (Some(s), Some(out), false) = (&o.judge, o.out, o.dry_run) {
        crate::judge::check(o.recipient, out, o.split_max.is_some(), s)?;
    }
    let recipient = Model::open(o.recipient)?;
    let donor = Model::open_fetched(o.donor)?;
    let p = match plan(&Side::of(&recipient), &Side::of(&donor), &o.selection) {
        Ok(p) => p,
        Err(bad) => {
            bail!(
                "graft refused: {} of {} into {} would not load ({}):\n{}",
                o.selection.describe(),
                donor.label,
                recipient.label,
                super::problems(bad.len()),
                super::problem_lines(&bad)
            );
        }
    };
    writeln!(
        w,
        "graft plan: {} tensors from {} into {} ({}, {})",
        p.swaps.len(),
        donor.label,
        recipient.label,
        p.architecture,
        o.selection.describe()
    )?;
    // Swaps alike but for their layer are one line with a count (--verbose: each).
    let lines = p.swaps.iter().map(|&(ri, di)| {
        let (r, d) = (&recipient.tensors[ri], &donor.tensors[di]);
        Line {
            tensor: organ_core::gguf::display::printable(&r.name).into_owned(),
            text: format!("{:>7} -> {:<7} {:>12} bytes", r.ty.name(), d.ty.name(), d.n_bytes),
        }
    });
    let rows = summary::lines(lines.collect());
    for r in &rows {
        writeln!(w, "  {:<40} {}{}", r.tensor, r.text, r.count())?;
    }
    if summary::any_grouped(&rows) {
        writeln!(w, "  (each row of a count stands for that many tensors, one per layer; --verbose lists each)")?;
    }
    if o.dry_run {
        writeln!(w, "dry run: nothing written")?;
        return Ok(());
    }
    let Some(out) = o.out else { bail!("--out is required unless --dry-run") };

    let mut tensors = recipient.tensors.clone();
    for &(ri, di) in &p.swaps {
        tensors[ri] = donor.tensors[di].clone();
    }
    let mut kvs: Vec<(String, OwnedValue)> =
        recipient.kvs.iter().filter(|(k, _)| !k.starts_with("organ.graft.")).cloned().collect();
    let names: Vec<String> = p.swaps.iter().map(|&(ri, _)| recipient.tensors[ri].name.clone()).collect();
    let layers = o.layers_arg.clone().unwrap_or_default();
    kvs.push(("organ.graft.donor".into(), OwnedValue::string(&donor.label)));
    // Provenance records what was computed: BLAKE3 always, sha256 when asked for.
    let fp = donor.fingerprint(o.sha256)?;
    kvs.push(("organ.graft.donor_blake3".into(), OwnedValue::string(&fp.blake3)));
    if let Some(sha256) = &fp.sha256 {
        kvs.push(("organ.graft.donor_sha256".into(), OwnedValue::string(sha256)));
    }
    kvs.push(("organ.graft.recipient".into(), OwnedValue::string(&recipient.label)));
    kvs.push(("organ.graft.selection".into(), OwnedValue::string(&o.selection.describe())));
    kvs.push(("organ.graft.layers".into(), OwnedValue::string(&layers)));
    let types: Vec<&str> = o.selection.groups.iter().map(|g| g.name()).collect();
    kvs.push(("organ.graft.types".into(), OwnedValue::string(&types.join(","))));
    kvs.push(("organ.graft.tensors".into(), OwnedValue::strings(&names)?));

    let result = recipient.derived(kvs, tensors);
    crate::write::write_model(&result, &recipient, out, o.split_max, o.force, w)?;
    let verdict = crate::judge::judged(out, o.recipient, o.judge.as_ref(), w)?;
    if let Some(p) = o.json {
        let report = surgery::Graft {
            donor: &donor.label,
            recipient: &recipient.label,
            out: &out.display().to_string(),
            selection: o.selection.describe(),
            tensors: &names,
            judge: verdict.as_ref(),
        };
        super::outputs::write_json(AnyReport::Surgery(&Surgery::Graft(report)), p, o.force)?;
    }
    Ok(())
}
