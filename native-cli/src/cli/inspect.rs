//! `organ inspect`.

use super::{Argv, Exit, Out, ToArgs};
use anyhow::Result;
use std::path::PathBuf;

#[derive(clap::Args, Debug, Clone, Default, PartialEq)]
pub struct InspectArgs {
    /// The GGUF file.
    pub model: PathBuf,
    /// Print everything as JSON (arrays in full) instead of a summary.
    #[arg(long)]
    pub json: bool,
}

pub(super) fn run(a: &InspectArgs, out: &mut Out) -> Result<Exit> {
    crate::cmd::inspect::run(&a.model, a.json, out.stdout())?;
    Ok(Exit::Done)
}

impl ToArgs for InspectArgs {
    fn to_args(&self, a: &mut Argv) {
        a.arg("inspect").arg(&self.model).switch("--json", self.json);
    }
}
