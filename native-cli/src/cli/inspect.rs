//! `organ inspect`.

use super::{Argv, Exit, Out, SelectArgs, ToArgs};
use anyhow::Result;
use organ_core::surgery::select::Selection;
use std::path::PathBuf;

#[derive(clap::Args, Debug, Clone, Default, PartialEq)]
pub struct InspectArgs {
    /// The model: a GGUF file, a split GGUF (any shard), or an organ directory (shown as
    /// the GGUF `organ assemble` writes from it, offsets included).
    pub model: PathBuf,
    /// Print everything as JSON (arrays in full) instead of a summary.
    #[arg(long)]
    pub json: bool,
    /// Show only the tensors of these layers: ranges and lists, e.g. 5-20 or 3,7,9-11.
    #[arg(long, help_heading = "Tensors shown")]
    pub layers: Option<String>,
    /// Show only the tensors of these anatomy groups: organ, skeleton, embed, norm,
    /// adapter, other (repeat or comma-separate). graft's and purify's --type.
    #[arg(long = "group", value_name = "GROUP", help_heading = "Tensors shown")]
    pub groups: Vec<String>,
    /// Show only the tensors whose name matches one of these patterns, `*` matching
    /// anything (repeatable).
    #[arg(long = "name", value_name = "PATTERN", help_heading = "Tensors shown")]
    pub names: Vec<String>,
}

impl InspectArgs {
    /// `inspect MODEL`, every tensor shown.
    pub fn new(model: PathBuf, json: bool) -> InspectArgs {
        InspectArgs { model, json, ..InspectArgs::default() }
    }

    /// The selection, through graft's and purify's seam ([`SelectArgs`]); inspect calls
    /// its group option `--group`, since `--type` would read as the ggml type column.
    fn selection(&self) -> Result<Selection> {
        let s = SelectArgs { layers: self.layers.clone(), types: self.groups.clone(), names: self.names.clone() };
        Selection::try_from(&s)
    }
}

pub(super) fn run(a: &InspectArgs, out: &mut Out) -> Result<Exit> {
    let o = crate::cmd::inspect::Options { model: &a.model, json: a.json, selection: a.selection()? };
    crate::cmd::inspect::run(&o, out.stdout())?;
    Ok(Exit::Done)
}

impl ToArgs for InspectArgs {
    fn to_args(&self, a: &mut Argv) {
        a.arg("inspect")
            .arg(&self.model)
            .switch("--json", self.json)
            .opt("--layers", self.layers.as_ref())
            .each("--group", &self.groups)
            .each("--name", &self.names);
    }
}
