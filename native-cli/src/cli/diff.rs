//! `organ diff`: flags to [`cmd::diff::Options`].

use super::{guard, Argv, Compare, Exit, Force, Out, ReportFiles, Stats, ToArgs, Work};
use crate::cmd;
use anyhow::Result;
use std::path::PathBuf;

/// How many of the most changed tensors `diff` prints by default.
pub const DEFAULT_TOP: usize = 10;

#[derive(clap::Args, Debug, Clone, PartialEq)]
#[command(
    mut_arg("stream", |a| a.help(
        "Read by positioned reads only, never mapping tensor data (automatic when either model is over \
         2 GiB): memory stays bounded whatever the size"
    )),
    mut_arg("stats", |a| a.help("Print bytes compared, bytes read and peak memory to stderr when done"))
)]
pub struct DiffArgs {
    /// The base: a GGUF, a split GGUF (any shard) or an organ directory.
    pub a: PathBuf,
    /// The other model, of any of those kinds and any quant types.
    pub b: PathBuf,
    #[command(flatten)]
    pub outputs: ReportFiles<Compare>,
    /// How many of the most changed tensors to print.
    #[arg(long, default_value_t = DEFAULT_TOP)]
    pub top: usize,
    /// List only changed pairs in the per-tensor outputs (CSV rows, the JSON's "pairs");
    /// the counts and summaries still cover every pair.
    #[arg(long)]
    pub only_changed: bool,
    /// Exit with status 1 when anything differs: a comparable pair not byte-identical,
    /// a name in one model only, a shape mismatch or a metadata key. Errors then exit
    /// with 2, as diff(1)'s do (without this flag, with 1, as every command's do).
    #[arg(long)]
    pub fail_on_change: bool,
    #[command(flatten)]
    pub work: Work,
    #[command(flatten)]
    pub force: Force,
}

impl DiffArgs {
    /// `diff A B` with every other flag at its default.
    pub fn new(a: PathBuf, b: PathBuf) -> DiffArgs {
        DiffArgs {
            a,
            b,
            outputs: ReportFiles::default(),
            top: DEFAULT_TOP,
            only_changed: false,
            fail_on_change: false,
            work: Work::default(),
            force: Force::default(),
        }
    }
}

impl TryFrom<&DiffArgs> for cmd::diff::Options {
    type Error = anyhow::Error;

    fn try_from(a: &DiffArgs) -> Result<Self> {
        let o = &a.outputs;
        Ok(cmd::diff::Options {
            a: a.a.clone(),
            b: a.b.clone(),
            files: o.files.clone(),
            top: a.top,
            only_changed: a.only_changed,
            stream: a.work.stream,
            force: a.force.force,
        })
    }
}

pub(super) fn run(a: &DiffArgs, out: &mut Out) -> Result<Exit> {
    guard(&[a.a.as_path(), a.b.as_path()], &a.outputs.paths(), a.force.force)?;
    let printed = out.text(&a.outputs.paths())?;
    a.work.start()?;
    let changed = cmd::diff::run(&cmd::diff::Options::try_from(a)?, printed)?;
    a.work.finish(Stats::Diff);
    if a.fail_on_change && changed {
        printed.flush()?;
        return Ok(Exit::Changed);
    }
    Ok(Exit::Done)
}

impl ToArgs for DiffArgs {
    fn to_args(&self, a: &mut Argv) {
        a.arg("diff")
            .arg(&self.a)
            .arg(&self.b)
            .flags(&self.outputs)
            .number("--top", Some(self.top))
            .switch("--only-changed", self.only_changed)
            .switch("--fail-on-change", self.fail_on_change)
            .flags(&self.work)
            .flags(&self.force);
    }
}
