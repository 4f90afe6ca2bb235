//! `organ lora …`: adapters as organs. One variant per operation, each with its own
//! flags struct, turned into that operation's options.

use super::{eval::scaled, guard, Argv, Exit, Force, Out, ToArgs};
use crate::cmd::{self, eval::JudgeArgs};
use anyhow::{anyhow, Result};
use organ_core::lora::merge::OutputType;
use organ_core::quant::quantize::can_quantize;
use organ_core::GgmlType;
use std::path::PathBuf;

/// `organ lora …`.
#[derive(clap::Subcommand, Debug, Clone, PartialEq)]
pub enum Op {
    /// Merge LoRA adapters into their base: W' = W + Σ s·(α/r)·B·A in f32, each merged
    /// tensor written in its own type (or --type), every other tensor copied byte for
    /// byte. Adapters may adapt different tensors (docs/adapters.md).
    Merge(LoraMergeArgs),
}

/// `organ lora merge`'s flags.
#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct LoraMergeArgs {
    /// The base model (a GGUF or split GGUF).
    pub base: PathBuf,
    /// An adapter to merge, at scale S (default 1, as llama.cpp's --lora; FILE:S as its
    /// --lora-scaled); repeat for several.
    #[arg(long = "lora", value_name = "FILE[:S]", required = true)]
    pub lora: Vec<String>,
    /// The merged model: one GGUF file (must not exist).
    #[arg(long)]
    pub out: PathBuf,
    /// The merged tensors' type: keep (the base tensor's own when organ can write it,
    /// else F16) or a type organ writes (f16, f32, q8_0…).
    #[arg(long = "type", value_name = "TYPE", default_value = "keep")]
    pub ty: String,
    /// Also write the report (the tensors merged, their types, --judge's verdict) as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    #[command(flatten)]
    pub force: Force,
    #[command(flatten)]
    pub judge: JudgeArgs,
}

impl<'a> TryFrom<&'a LoraMergeArgs> for cmd::lora::merge::Options<'a> {
    type Error = anyhow::Error;

    fn try_from(a: &'a LoraMergeArgs) -> Result<Self> {
        let ty = if a.ty.eq_ignore_ascii_case("keep") {
            OutputType::Keep
        } else {
            OutputType::Forced(GgmlType::from_name(&a.ty).filter(|t| can_quantize(*t)).ok_or_else(|| {
                let types: Vec<&str> = GgmlType::ALL.iter().filter(|t| can_quantize(**t)).map(|t| t.name()).collect();
                anyhow!("--type {:?}: give keep, or a type organ writes: {}", a.ty, types.join(", "))
            })?)
        };
        let adapters = scaled(&a.lora)?;
        let judge = a.judge.settings().map(|mut s| {
            // The merged model against the base with the adapters applied at run time.
            s.adapters.base = adapters.clone();
            s
        });
        Ok(cmd::lora::merge::Options {
            base: &a.base,
            adapters,
            out: &a.out,
            ty,
            json: a.json.as_deref(),
            force: a.force.force,
            judge,
        })
    }
}

pub(super) fn run(op: &Op, out: &mut Out) -> Result<Exit> {
    match op {
        Op::Merge(a) => {
            let o = cmd::lora::merge::Options::try_from(a)?;
            let mut inputs = vec![o.base];
            inputs.extend(o.adapters.iter().map(|s| s.path.as_path()));
            guard(&inputs, &[Some(o.out), o.json], o.force)?;
            cmd::lora::merge::run(&o, out.text(&[o.json])?)?;
        }
    }
    Ok(Exit::Done)
}

impl ToArgs for Op {
    fn to_args(&self, a: &mut Argv) {
        a.arg("lora");
        match self {
            Op::Merge(m) => {
                a.arg("merge")
                    .arg(&m.base)
                    .each("--lora", &m.lora)
                    .value("--out", &m.out)
                    .value("--type", &m.ty)
                    .opt("--json", m.json.as_ref())
                    .flags(&m.force)
                    .flags(&m.judge);
            }
        }
    }
}
