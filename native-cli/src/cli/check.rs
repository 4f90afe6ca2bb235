//! `organ check`: flags to [`cmd::check::Options`].

use super::{guard, Argv, Check, Exit, Force, Out, ReportFiles, Stats, ToArgs, Work};
use crate::cmd;
use anyhow::Result;
use std::path::PathBuf;

#[derive(clap::Args, Debug, Clone, Default, PartialEq)]
pub struct CheckArgs {
    /// A GGUF, a split GGUF (any shard) or an organ directory.
    pub model: PathBuf,
    #[command(flatten)]
    pub reports: ReportFiles<Check>,
    #[command(flatten)]
    pub work: Work,
    /// Exit 0 even when a finding is an error (the report still says so).
    #[arg(long)]
    pub exit_zero: bool,
    /// For a LoRA adapter: its base model, to check each pair against the weight it
    /// updates (present, same shape, same architecture).
    #[arg(long, value_name = "MODEL")]
    pub base: Option<PathBuf>,
    /// The model MODEL should be quantized from: every tensor is quantized again from it,
    /// in memory, with the type MODEL holds (llama-quantize's bytes, as `organ quantize`
    /// writes them), and the bytes and metadata compared; nothing is written. The verdict
    /// says "MODEL is SRC quantized with …" or names what differs.
    #[arg(long, value_name = "SRC", conflicts_with = "base")]
    pub derived_from: Option<PathBuf>,
    /// With --derived-from: the importance matrix MODEL was quantized with (llama-quantize's
    /// --imatrix, the GGUF llama-imatrix writes).
    #[arg(long, value_name = "FILE", requires = "derived_from")]
    pub imatrix: Option<PathBuf>,
    #[command(flatten)]
    pub force: Force,
}

impl TryFrom<&CheckArgs> for cmd::check::Options {
    type Error = anyhow::Error;

    fn try_from(a: &CheckArgs) -> Result<Self> {
        Ok(cmd::check::Options {
            model: a.model.clone(),
            files: a.reports.files.clone(),
            stream: a.work.stream,
            force: a.force.force,
            base: a.base.clone(),
            derived_from: a.derived_from.clone(),
            imatrix: a.imatrix.clone(),
        })
    }
}

pub(super) fn run(a: &CheckArgs, out: &mut Out) -> Result<Exit> {
    let mut inputs = vec![a.model.as_path()];
    inputs.extend(a.base.as_deref());
    inputs.extend(a.derived_from.as_deref());
    inputs.extend(a.imatrix.as_deref());
    guard(&inputs, &a.reports.paths(), a.force.force)?;
    let printed = out.text(&a.reports.paths())?;
    a.work.start()?;
    let broken = cmd::check::run(&cmd::check::Options::try_from(a)?, printed)?;
    a.work.finish(Stats::Check);
    if broken && !a.exit_zero {
        printed.flush()?;
        return Ok(Exit::Changed);
    }
    Ok(Exit::Done)
}

impl ToArgs for CheckArgs {
    fn to_args(&self, a: &mut Argv) {
        a.arg("check")
            .arg(&self.model)
            .flags(&self.reports)
            .flags(&self.work)
            .switch("--exit-zero", self.exit_zero)
            .opt("--base", self.base.as_ref())
            .opt("--derived-from", self.derived_from.as_ref())
            .opt("--imatrix", self.imatrix.as_ref())
            .flags(&self.force);
    }
}
