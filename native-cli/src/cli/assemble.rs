//! `organ assemble`.

use super::{guard, split_max, Argv, Exit, Force, Out, ToArgs};
use anyhow::Result;
use std::path::PathBuf;

#[derive(clap::Args, Debug, Clone, Default, PartialEq)]
pub struct AssembleArgs {
    /// The organ directory.
    pub dir: PathBuf,
    /// The GGUF file to create (must not exist).
    #[arg(long)]
    pub out: PathBuf,
    /// Write a split model instead: shards OUT-0000i-of-0000N.gguf of at most this much
    /// tensor data each (500M, 2G…), as llama-gguf-split writes them.
    #[arg(long, value_name = "SIZE")]
    pub split_max_size: Option<String>,
    #[command(flatten)]
    pub force: Force,
}

pub(super) fn run(a: &AssembleArgs, out: &mut Out) -> Result<Exit> {
    guard(&[a.dir.as_path()], &[Some(a.out.as_path())], a.force.force)?;
    let max = split_max(a.split_max_size.as_deref())?;
    crate::cmd::assemble::run(&a.dir, &a.out, max, a.force.force, out.stdout())?;
    Ok(Exit::Done)
}

impl ToArgs for AssembleArgs {
    fn to_args(&self, a: &mut Argv) {
        a.arg("assemble")
            .arg(&self.dir)
            .value("--out", &self.out)
            .opt("--split-max-size", self.split_max_size.as_ref())
            .flags(&self.force);
    }
}
