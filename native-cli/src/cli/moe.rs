//! `organ moe`: flags to [`cmd::moe::Options`].

use super::{guard, Argv, Exit, Force, Out, ToArgs};
use crate::cmd::{self, eval::JudgeArgs};
use anyhow::{anyhow, Result};
use organ_core::surgery::moe::RouterMode;
use organ_core::GgmlType;
use std::path::PathBuf;

/// `--experts-used`, `--router` and `--seed` by default.
pub const DEFAULT_EXPERTS_USED: u64 = 2;
pub const DEFAULT_ROUTER: &str = "uniform";
pub const DEFAULT_SEED: u64 = 0;

#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct MoeArgs {
    /// The model whose attention, embeddings and norms the MoE keeps.
    #[arg(long)]
    pub base: PathBuf,
    /// A donor whose FFN becomes an expert (repeat, in expert order).
    #[arg(long = "expert", value_name = "MODEL", required = true)]
    pub experts: Vec<PathBuf>,
    /// Experts used per token (llama.expert_used_count).
    #[arg(long, default_value_t = DEFAULT_EXPERTS_USED)]
    pub experts_used: u64,
    /// How the routers are made: uniform (all zero), random (seeded normal) or embed
    /// (mergekit's cheap_embed from --prompts).
    #[arg(long, default_value = DEFAULT_ROUTER)]
    pub router: String,
    /// With --router embed: one prompt file per expert, in expert order (one prompt a line).
    #[arg(long, num_args = 1.., value_name = "FILE")]
    pub prompts: Vec<PathBuf>,
    /// With --router embed: one negative prompt file per expert.
    #[arg(long, num_args = 1.., value_name = "FILE")]
    pub negative_prompts: Vec<PathBuf>,
    /// The random router's seed.
    #[arg(long, default_value_t = DEFAULT_SEED)]
    pub seed: u64,
    /// Requantize to this type where the donors' types for a tensor disagree.
    #[arg(long = "type", value_name = "TYPE")]
    pub ty: Option<String>,
    /// The GGUF file to create.
    #[arg(long)]
    pub out: PathBuf,
    #[command(flatten)]
    pub force: Force,
    /// Also write the report (experts, router, requantized tensors, --judge's verdict) as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    #[command(flatten)]
    pub judge: JudgeArgs,
}

impl MoeArgs {
    /// `moe --base BASE --expert E… --out OUT` with every other flag at its default.
    pub fn new(base: PathBuf, experts: Vec<PathBuf>, out: PathBuf) -> MoeArgs {
        MoeArgs {
            base,
            experts,
            experts_used: DEFAULT_EXPERTS_USED,
            router: DEFAULT_ROUTER.to_owned(),
            prompts: Vec::new(),
            negative_prompts: Vec::new(),
            seed: DEFAULT_SEED,
            ty: None,
            out,
            force: Force::default(),
            json: None,
            judge: JudgeArgs::default(),
        }
    }
}

impl<'a> TryFrom<&'a MoeArgs> for cmd::moe::Options<'a> {
    type Error = anyhow::Error;

    fn try_from(a: &'a MoeArgs) -> Result<Self> {
        let router = RouterMode::parse(&a.router)
            .ok_or_else(|| anyhow!("--router {:?}: use uniform, random or embed", a.router))?;
        let ty = match a.ty.as_deref() {
            None => None,
            Some(t) => Some(GgmlType::from_name(t).ok_or_else(|| anyhow!("--type {t:?}: no such type"))?),
        };
        Ok(cmd::moe::Options {
            base: &a.base,
            experts: &a.experts,
            experts_used: a.experts_used,
            router,
            prompts: &a.prompts,
            negative_prompts: &a.negative_prompts,
            seed: a.seed,
            ty,
            out: &a.out,
            force: a.force.force,
            judge: a.judge.settings(),
            json: a.json.as_deref(),
        })
    }
}

pub(super) fn run(a: &MoeArgs, out: &mut Out) -> Result<Exit> {
    let o = cmd::moe::Options::try_from(a)?;
    let mut inputs = vec![o.base];
    inputs.extend(a.experts.iter().chain(&a.prompts).chain(&a.negative_prompts).map(PathBuf::as_path));
    guard(&super::with_judge(&inputs, &o.judge), &[Some(o.out), o.json], o.force)?;
    cmd::moe::run(&o, out.text(&[o.json])?)?;
    Ok(Exit::Done)
}

impl ToArgs for MoeArgs {
    fn to_args(&self, a: &mut Argv) {
        a.arg("moe")
            .value("--base", &self.base)
            .each("--expert", &self.experts)
            .number("--experts-used", Some(self.experts_used))
            .value("--router", &self.router)
            .each("--prompts", &self.prompts)
            .each("--negative-prompts", &self.negative_prompts)
            .number("--seed", Some(self.seed))
            .opt("--type", self.ty.as_ref())
            .value("--out", &self.out)
            .flags(&self.force)
            .opt("--json", self.json.as_ref())
            .flags(&self.judge);
    }
}
