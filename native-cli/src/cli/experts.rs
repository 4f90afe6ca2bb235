//! `organ experts extract|prune`: flags to [`cmd::experts::Options`].

use super::{guard, Argv, Exit, Out, ToArgs, Written};
use crate::cmd::{self, eval::JudgeArgs};
use anyhow::Result;
use std::path::PathBuf;

/// Flags both operations take.
#[derive(clap::Args, Debug, Clone, Default, PartialEq)]
pub struct Common {
    /// The mixture of experts: a GGUF, a split GGUF or an organ directory.
    pub model: PathBuf,
    #[command(flatten)]
    pub written: Written,
    /// Also write the report (the tensors sliced and dropped, --judge's verdict) as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    #[command(flatten)]
    pub judge: JudgeArgs,
}

/// `organ experts …`.
#[derive(clap::Subcommand, Debug, Clone, PartialEq)]
pub enum Op {
    /// Write expert E of a llama-layout (Mixtral) MoE as a dense llama model: per layer,
    /// ffn_{gate,up,down}.weight is slice E of ffn_{gate,up,down}_exps.weight, raw blocks;
    /// routers and expert keys are dropped (docs/experts.md).
    Extract {
        #[command(flatten)]
        common: Common,
        /// Which expert, from 0.
        #[arg(long)]
        expert: u64,
    },
    /// Keep some experts of an MoE (llama, deepseek2, qwen2moe… layouts): every per-expert
    /// tensor (expert weights and biases, router rows, exp_probs_b) is cut along the expert
    /// axis, raw blocks, and the expert counts updated (docs/experts.md).
    Prune {
        #[command(flatten)]
        common: Common,
        /// The experts to keep: numbers and ranges, e.g. 0,2,5 or 0-3,6 (kept in their order).
        #[arg(long, value_name = "LIST")]
        keep: String,
        /// Experts each token uses in the result [default: the model's, capped at the
        /// number kept].
        #[arg(long, value_name = "K")]
        experts_used: Option<u64>,
    },
}

impl Op {
    /// The flags both operations take.
    pub fn common(&self) -> &Common {
        match self {
            Op::Extract { common, .. } | Op::Prune { common, .. } => common,
        }
    }
}

impl<'a> TryFrom<&'a Op> for cmd::experts::Options<'a> {
    type Error = anyhow::Error;

    fn try_from(op: &'a Op) -> Result<Self> {
        let c = op.common();
        Ok(cmd::experts::Options {
            model: &c.model,
            out: c.written.out.as_deref(),
            dry_run: c.written.dry_run,
            force: c.written.force.force,
            json: c.json.as_deref(),
            judge: c.judge.settings(),
            op: match op {
                Op::Extract { expert, .. } => cmd::experts::Op::Extract { expert: *expert },
                Op::Prune { keep, experts_used, .. } => cmd::experts::Op::Prune { keep, experts_used: *experts_used },
            },
        })
    }
}

pub(super) fn run(op: &Op, out: &mut Out) -> Result<Exit> {
    let o = cmd::experts::Options::try_from(op)?;
    let printed = out.text(&[o.json])?;
    guard(&super::with_judge(&[o.model], &o.judge), &[o.out, o.json], o.force)?;
    cmd::experts::run(&o, printed)?;
    Ok(Exit::Done)
}

impl ToArgs for Op {
    fn to_args(&self, a: &mut Argv) {
        let c = self.common();
        a.arg("experts");
        match self {
            Op::Extract { expert, .. } => a.arg("extract").arg(&c.model).number("--expert", Some(expert)),
            Op::Prune { keep, experts_used, .. } => {
                a.arg("prune").arg(&c.model).value("--keep", keep).number("--experts-used", *experts_used)
            }
        };
        a.flags(&c.written).opt("--json", c.json.as_ref()).flags(&c.judge);
    }
}
