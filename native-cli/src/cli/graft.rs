//! `organ graft`: flags to [`cmd::graft::Options`].

use super::{guard, model_output, split_max, Argv, Exit, Force, Out, SelectArgs, ToArgs};
use crate::cmd::{self, eval::JudgeArgs};
use anyhow::Result;
use std::path::PathBuf;

#[derive(clap::Args, Debug, Clone, Default, PartialEq)]
pub struct GraftArgs {
    /// Where the tensors come from.
    #[arg(long, visible_alias = "source")]
    pub donor: PathBuf,
    /// The model that receives them.
    #[arg(long, visible_alias = "target")]
    pub recipient: PathBuf,
    /// The result (must not exist). Not needed with --dry-run.
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub select: SelectArgs,
    /// Every tensor: what no --layers, --type or --name is never taken to mean.
    #[arg(long, conflicts_with_all = ["layers", "types", "names"])]
    pub all: bool,
    /// Print the plan and check it; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// With a .gguf --out: write a split model with shards of at most this much tensor data.
    #[arg(long, value_name = "SIZE")]
    pub split_max_size: Option<String>,
    /// Also record the donor's sha256 (organ.graft.donor_sha256) beside its BLAKE3.
    #[arg(long)]
    pub sha256: bool,
    #[command(flatten)]
    pub force: Force,
    /// Also write the report (the tensors grafted, and --judge's verdict) as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    #[command(flatten)]
    pub judge: JudgeArgs,
}

impl<'a> TryFrom<&'a GraftArgs> for cmd::graft::Options<'a> {
    type Error = anyhow::Error;

    fn try_from(a: &'a GraftArgs) -> Result<Self> {
        Ok(cmd::graft::Options {
            donor: &a.donor,
            recipient: &a.recipient,
            out: a.out.as_deref(),
            selection: a.select.required(a.all, "graft")?,
            layers_arg: a.select.layers.clone(),
            dry_run: a.dry_run,
            split_max: split_max(a.split_max_size.as_deref())?,
            sha256: a.sha256,
            force: a.force.force,
            judge: a.judge.settings(),
            json: a.json.as_deref(),
        })
    }
}

pub(super) fn run(a: &GraftArgs, out: &mut Out) -> Result<Exit> {
    let o = cmd::graft::Options::try_from(a)?;
    guard(&super::with_judge(&[a.donor.as_path(), a.recipient.as_path()], &o.judge), &[o.json], o.force)?;
    // A dry run writes nothing, so an --out that exists is no reason to refuse it.
    if let Some(d) = o.out.filter(|_| !o.dry_run) {
        crate::input::check_dest_of(d, o.force, model_output(d)?)?;
    }
    cmd::graft::run(&o, out.text(&[o.json])?)?;
    Ok(Exit::Done)
}

impl ToArgs for GraftArgs {
    fn to_args(&self, a: &mut Argv) {
        a.arg("graft")
            .value("--donor", &self.donor)
            .value("--recipient", &self.recipient)
            .opt("--out", self.out.as_ref())
            .flags(&self.select)
            .switch("--all", self.all)
            .switch("--dry-run", self.dry_run)
            .opt("--split-max-size", self.split_max_size.as_ref())
            .switch("--sha256", self.sha256)
            .flags(&self.force)
            .opt("--json", self.json.as_ref())
            .flags(&self.judge);
    }
}
