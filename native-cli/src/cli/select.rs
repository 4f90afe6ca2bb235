//! `--layers`, `--type` and `--name`: which tensors graft and purify touch.

use super::{Argv, ToArgs};
use organ_core::surgery::select::{Layers, Selection};

/// Which tensors an operation touches; every criterion given must hold.
#[derive(clap::Args, Debug, Clone, Default, PartialEq)]
pub struct SelectArgs {
    /// Layers: ranges and lists, e.g. 5-20 or 3,7,9-11.
    #[arg(long)]
    pub layers: Option<String>,
    /// Anatomy groups: organ, skeleton, embed, norm, adapter, other (repeat or comma-separate;
    /// also spelt --group, as inspect spells it).
    #[arg(long = "type", visible_alias = "group", value_name = "GROUP")]
    pub types: Vec<String>,
    /// Tensor name patterns, `*` matching anything (repeatable).
    #[arg(long = "name", value_name = "PATTERN")]
    pub names: Vec<String>,
}

impl SelectArgs {
    /// Whether no criterion is given.
    pub fn is_empty(&self) -> bool {
        self.layers.is_none() && self.types.is_empty() && self.names.is_empty()
    }

    /// The selection of a command that changes tensors (graft, purify): at least one
    /// criterion, or `all` (`--all`). Nothing given is refused rather than read as every
    /// tensor: a graft without a selection wrote the donor, a purify every norm and the
    /// embedding.
    ///
    /// # Errors
    /// Neither a criterion nor `all`; a criterion that does not parse.
    pub fn required(&self, all: bool, command: &str) -> anyhow::Result<Selection> {
        if self.is_empty() && !all {
            anyhow::bail!(
                "{command}: which tensors? Choose with --layers, --type or --name (e.g. --layers 5-20 --type organ), \
                 or give --all for every tensor"
            );
        }
        Selection::try_from(self)
    }
}

impl TryFrom<&SelectArgs> for Selection {
    type Error = anyhow::Error;

    fn try_from(a: &SelectArgs) -> anyhow::Result<Selection> {
        Ok(Selection {
            layers: a.layers.as_deref().map(Layers::parse).transpose().map_err(anyhow::Error::msg)?,
            groups: Selection::parse_groups(&a.types).map_err(anyhow::Error::msg)?,
            patterns: a.names.clone(),
        })
    }
}

impl ToArgs for SelectArgs {
    fn to_args(&self, a: &mut Argv) {
        a.opt("--layers", self.layers.as_ref()).each("--type", &self.types).each("--name", &self.names);
    }
}
