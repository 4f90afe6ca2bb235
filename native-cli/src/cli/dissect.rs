//! `organ dissect`: flags to [`cmd::dissect::Options`].

use super::{guard, Argv, Exit, Force, Out, ToArgs};
use crate::cmd;
use crate::input::{check_dest_of, Output};
use anyhow::Result;
use std::path::PathBuf;

#[derive(clap::Args, Debug, Clone, Default, PartialEq)]
pub struct DissectArgs {
    /// The GGUF file.
    pub model: PathBuf,
    /// The directory to create (must not exist).
    #[arg(long)]
    pub out: PathBuf,
    /// Also record each tensor's θ in the manifest.
    #[arg(long)]
    pub measure: bool,
    /// Also record the source's sha256 (the Hub's LFS id) in the manifest: one more
    /// pass over its bytes (BLAKE3 is always recorded).
    #[arg(long)]
    pub sha256: bool,
    #[command(flatten)]
    pub force: Force,
}

impl<'a> TryFrom<&'a DissectArgs> for cmd::dissect::Options<'a> {
    type Error = anyhow::Error;

    fn try_from(a: &'a DissectArgs) -> Result<Self> {
        Ok(cmd::dissect::Options {
            model: &a.model,
            out: &a.out,
            measure: a.measure,
            sha256: a.sha256,
            force: a.force.force,
        })
    }
}

pub(super) fn run(a: &DissectArgs, out: &mut Out) -> Result<Exit> {
    guard(&[a.model.as_path()], &[], a.force.force)?;
    check_dest_of(&a.out, a.force.force, Output::OrganDir)?;
    cmd::dissect::run(&a.try_into()?, out.stdout())?;
    Ok(Exit::Done)
}

impl ToArgs for DissectArgs {
    fn to_args(&self, a: &mut Argv) {
        a.arg("dissect")
            .arg(&self.model)
            .value("--out", &self.out)
            .switch("--measure", self.measure)
            .switch("--sha256", self.sha256)
            .flags(&self.force);
    }
}
