//! `organ lora …`: adapters as organs. One variant per operation, each with its own
//! flags struct, turned into that operation's options.

use super::{eval::scaled, guard, Argv, Exit, Force, Out, ToArgs};
use crate::cmd::{self, eval::JudgeArgs};
use crate::llama_cpp::perplexity::Scaled;
use anyhow::{anyhow, bail, Result};
use organ_core::lora::merge::OutputType;
use organ_core::quant::quantize::can_quantize;
use organ_core::surgery::select::Selection;
use organ_core::GgmlType;
use std::path::PathBuf;

/// `organ lora …`.
#[derive(clap::Subcommand, Debug, Clone, PartialEq)]
pub enum Op {
    /// Merge LoRA adapters into their base: W' = W + Σ s·(α/r)·B·A in f32, each merged
    /// tensor written in its own type (or --type), every other tensor copied byte for
    /// byte. Adapters may adapt different tensors (docs/adapters.md).
    Merge(LoraMergeArgs),
    /// Extract a LoRA adapter from a finetune: for each selected 2-D weight whose values
    /// differ, a seeded truncated SVD of ΔW = TUNED − BASE at --rank, written as an adapter
    /// llama.cpp loads (`--lora`), α = rank (docs/adapters.md).
    Extract(ExtractArgs),
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

/// `organ lora extract`.
#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct ExtractArgs {
    /// The base model: a GGUF, a split GGUF or an organ directory.
    #[arg(long)]
    pub base: PathBuf,
    /// The finetune of the base (same tensors and shapes).
    #[arg(long)]
    pub tuned: PathBuf,
    /// The rank of every pair (less where a weight is smaller); α is set to it, so α / r = 1.
    #[arg(long)]
    pub rank: u64,
    /// Only weights whose name matches (`*` matches anything; repeatable) [default: every
    /// 2-D weight].
    #[arg(long = "name", value_name = "PATTERN")]
    pub names: Vec<String>,
    /// The halves' type: f32, f16, bf16 or q8_0 (a half whose rows are not whole q8_0
    /// blocks is written f16, as convert_lora_to_gguf.py does).
    #[arg(long = "type", value_name = "TYPE", default_value = "f16")]
    pub ty: String,
    /// The adapter (.gguf; must not exist).
    #[arg(long)]
    pub out: PathBuf,
    /// Also write the per-tensor report as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    #[command(flatten)]
    pub force: Force,
    /// Judge the adapter: the KL divergence of the base with it applied by llama.cpp
    /// (`--lora`) from the finetune, on TEXT, and a verdict (docs/judge.md).
    #[command(flatten)]
    pub judge: JudgeArgs,
}

impl ExtractArgs {
    /// `lora extract --base BASE --tuned TUNED --rank RANK --out OUT`, every other flag at
    /// its default.
    pub fn new(base: PathBuf, tuned: PathBuf, rank: u64, out: PathBuf) -> ExtractArgs {
        ExtractArgs {
            base,
            tuned,
            rank,
            names: Vec::new(),
            ty: "f16".into(),
            out,
            json: None,
            force: Force::default(),
            judge: JudgeArgs::default(),
        }
    }
}

impl<'a> TryFrom<&'a ExtractArgs> for cmd::lora::extract::Options<'a> {
    type Error = anyhow::Error;

    fn try_from(a: &'a ExtractArgs) -> Result<Self> {
        if a.rank == 0 {
            bail!("--rank 0: an adapter keeps at least rank 1 (llama.cpp refuses rank 0)");
        }
        // α = the rank, an f32 in the file, and the halves carry √(r / α) each: a rank past
        // every weight's would scale them toward f16's underflow (1e15: the merged-back
        // adapter was 39 % off the finetune).
        if a.rank > cmd::lora::extract::MAX_RANK {
            bail!("--rank {}: more than {}, the largest rank organ extracts", a.rank, cmd::lora::extract::MAX_RANK);
        }
        let rank = usize::try_from(a.rank).map_err(|_| anyhow!("--rank {}: too large", a.rank))?;
        let ty = GgmlType::from_name(&a.ty)
            .filter(|t| organ_core::lora::WRITTEN_TYPES.contains(t) && can_quantize(*t))
            .ok_or_else(|| anyhow!("--type {:?}: an adapter's halves are f32, f16, bf16 or q8_0", a.ty))?;
        if !a.out.extension().is_some_and(|e| e.eq_ignore_ascii_case("gguf")) {
            bail!("{}: an adapter is one GGUF file (a name ending in .gguf)", a.out.display());
        }
        Ok(cmd::lora::extract::Options {
            base: &a.base,
            tuned: &a.tuned,
            rank,
            selection: Selection { patterns: a.names.clone(), ..Selection::default() },
            ty,
            out: &a.out,
            json: a.json.as_deref(),
            force: a.force.force,
            judge: a.judge.settings().map(|mut s| {
                // The base with the extracted adapter, against the finetune.
                s.adapters.model = vec![Scaled { path: a.out.clone(), scale: 1.0 }];
                s
            }),
        })
    }
}

pub(super) fn run(op: &Op, out: &mut Out) -> Result<Exit> {
    match op {
        Op::Merge(a) => {
            let o = cmd::lora::merge::Options::try_from(a)?;
            let mut inputs = vec![o.base];
            inputs.extend(o.adapters.iter().map(|s| s.path.as_path()));
            guard(&super::with_judge(&inputs, &o.judge), &[Some(o.out), o.json], o.force)?;
            cmd::lora::merge::run(&o, out.text(&[o.json])?)?;
        }
        Op::Extract(a) => {
            let o = cmd::lora::extract::Options::try_from(a)?;
            let printed = out.text(&[o.json])?;
            guard(&super::with_judge(&[o.base, o.tuned], &o.judge), &[Some(o.out), o.json], o.force)?;
            cmd::lora::extract::run(&o, printed)?;
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
            Op::Extract(x) => {
                a.arg("extract")
                    .value("--base", &x.base)
                    .value("--tuned", &x.tuned)
                    .number("--rank", Some(x.rank))
                    .each("--name", &x.names)
                    .value("--type", &x.ty)
                    .value("--out", &x.out)
                    .opt("--json", x.json.as_ref())
                    .flags(&x.force)
                    .flags(&x.judge);
            }
        }
    }
}
