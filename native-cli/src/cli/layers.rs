//! `organ layers`: flags to [`cmd::layers::Options`].

use super::{guard, Argv, Exit, Out, ToArgs, Written};
use crate::cmd::{self, eval::JudgeArgs};
use anyhow::Result;
use std::path::PathBuf;

/// `organ layers MODEL (--drop LIST | --keep LIST) --out NEW.gguf`.
#[derive(clap::Args, Debug, Clone, Default, PartialEq)]
#[command(group(clap::ArgGroup::new("which").required(true).args(["drop", "keep"])))]
pub struct LayersArgs {
    /// The model: a GGUF, a split GGUF or an organ directory.
    pub model: PathBuf,
    /// The layers to remove: numbers and ranges, e.g. 10-12,15.
    #[arg(long, value_name = "LIST")]
    pub drop: Option<String>,
    /// The layers to keep, the others removed (the complement of --drop).
    #[arg(long, value_name = "LIST")]
    pub keep: Option<String>,
    #[command(flatten)]
    pub written: Written,
    /// Also write the report (layers kept and dropped, metadata changed, --judge's
    /// verdict) as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    #[command(flatten)]
    pub judge: JudgeArgs,
}

impl<'a> TryFrom<&'a LayersArgs> for cmd::layers::Options<'a> {
    type Error = anyhow::Error;

    fn try_from(a: &'a LayersArgs) -> Result<Self> {
        let (flag, given, keep) = match (&a.drop, &a.keep) {
            (Some(d), None) => ("--drop", d, false),
            (None, Some(k)) => ("--keep", k, true),
            _ => anyhow::bail!("give one of --drop and --keep"),
        };
        let layers = organ_core::surgery::layers::parse_list(given).map_err(|e| anyhow::anyhow!("{flag} {e}"))?;
        Ok(cmd::layers::Options {
            model: &a.model,
            out: a.written.out.as_deref(),
            dry_run: a.written.dry_run,
            force: a.written.force.force,
            json: a.json.as_deref(),
            judge: a.judge.settings(),
            keep,
            layers,
            given,
        })
    }
}

pub(super) fn run(a: &LayersArgs, out: &mut Out) -> Result<Exit> {
    let o = cmd::layers::Options::try_from(a)?;
    let printed = out.text(&[o.json])?;
    guard(&super::with_judge(&[o.model], &o.judge), &[o.out, o.json], o.force)?;
    cmd::layers::run(&o, printed)?;
    Ok(Exit::Done)
}

impl ToArgs for LayersArgs {
    fn to_args(&self, a: &mut Argv) {
        a.arg("layers")
            .arg(&self.model)
            .opt("--drop", self.drop.as_ref())
            .opt("--keep", self.keep.as_ref())
            .flags(&self.written)
            .opt("--json", self.json.as_ref())
            .flags(&self.judge);
    }
}
