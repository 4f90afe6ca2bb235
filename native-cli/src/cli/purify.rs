//! `organ purify`: flags to [`cmd::purify::Options`].

use super::{guard, model_output, split_max, Argv, Exit, Force, Out, SelectArgs, ToArgs};
use crate::cmd::{self, eval::JudgeArgs};
use anyhow::{anyhow, bail, Result};
use organ_core::quant::quantize::can_quantize;
use organ_core::surgery::purify::Method;
use organ_core::GgmlType;
use std::path::PathBuf;

/// `--strength` and `--keep` by default.
pub const DEFAULT_STRENGTH: f64 = 0.5;
pub const DEFAULT_KEEP: f64 = 0.95;

#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct PurifyArgs {
    /// A GGUF, split GGUF or organ directory.
    pub model: PathBuf,
    /// fractal or spectral.
    #[arg(long)]
    pub method: String,
    /// The result (.gguf, else an organ directory; must not exist).
    #[arg(long)]
    pub out: PathBuf,
    #[command(flatten)]
    pub select: SelectArgs,
    /// Every tensor: what no --layers, --type or --name is never taken to mean.
    #[arg(long, conflicts_with_all = ["layers", "types", "names"])]
    pub all: bool,
    /// fractal: 0..1, how far incoherent coefficients are pulled to 0.
    #[arg(long, default_value_t = DEFAULT_STRENGTH)]
    pub strength: f64,
    /// spectral: fraction of each row's energy to keep.
    #[arg(long, default_value_t = DEFAULT_KEEP)]
    pub keep: f64,
    /// Write purified tensors as this type (f16) instead of their own.
    #[arg(long = "as", value_name = "TYPE")]
    pub as_type: Option<String>,
    /// Keep a purified tensor only when its θ rises.
    #[arg(long)]
    pub only_if_improves: bool,
    /// Also write the per-tensor report as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// With a .gguf --out: write a split model.
    #[arg(long, value_name = "SIZE")]
    pub split_max_size: Option<String>,
    #[command(flatten)]
    pub force: Force,
    #[command(flatten)]
    pub judge: JudgeArgs,
}

impl PurifyArgs {
    /// `purify MODEL --method METHOD --out OUT` with every other flag at its default.
    pub fn new(model: PathBuf, method: String, out: PathBuf) -> PurifyArgs {
        PurifyArgs {
            model,
            method,
            out,
            select: SelectArgs::default(),
            all: false,
            strength: DEFAULT_STRENGTH,
            keep: DEFAULT_KEEP,
            as_type: None,
            only_if_improves: false,
            json: None,
            split_max_size: None,
            force: Force::default(),
            judge: JudgeArgs::default(),
        }
    }
}

impl<'a> TryFrom<&'a PurifyArgs> for cmd::purify::Options<'a> {
    type Error = anyhow::Error;

    fn try_from(a: &'a PurifyArgs) -> Result<Self> {
        let method = match a.method.as_str() {
            "fractal" => Method::Fractal { strength: a.strength },
            "spectral" => Method::Spectral { keep: a.keep },
            m => bail!("--method {m:?}: use fractal or spectral"),
        };
        method.check().map_err(|e| anyhow::anyhow!("--{} {e}", e.parameter))?;
        let as_type = match a.as_type.as_deref() {
            None => None,
            Some(t) => Some(GgmlType::from_name(t).filter(|t| can_quantize(*t)).ok_or_else(|| {
                let types: Vec<&str> = GgmlType::ALL.iter().filter(|t| can_quantize(**t)).map(|t| t.name()).collect();
                anyhow!("--as {t:?}: organ writes {}", types.join(", "))
            })?),
        };
        Ok(cmd::purify::Options {
            model: &a.model,
            out: &a.out,
            method,
            selection: a.select.required(a.all, "purify")?,
            as_type,
            only_if_improves: a.only_if_improves,
            split_max: split_max(a.split_max_size.as_deref())?,
            json: a.json.as_deref(),
            force: a.force.force,
            judge: a.judge.settings(),
        })
    }
}

pub(super) fn run(a: &PurifyArgs, out: &mut Out) -> Result<Exit> {
    let o = cmd::purify::Options::try_from(a)?;
    guard(&super::with_judge(&[o.model], &o.judge), &[o.json], o.force)?;
    crate::input::check_dest_of(o.out, o.force, model_output(o.out)?)?;
    cmd::purify::run(&o, out.text(&[o.json])?)?;
    Ok(Exit::Done)
}

impl ToArgs for PurifyArgs {
    fn to_args(&self, a: &mut Argv) {
        a.arg("purify")
            .arg(&self.model)
            .value("--method", &self.method)
            .value("--out", &self.out)
            .flags(&self.select)
            .switch("--all", self.all)
            .number("--strength", Some(self.strength))
            .number("--keep", Some(self.keep))
            .opt("--as", self.as_type.as_ref())
            .switch("--only-if-improves", self.only_if_improves)
            .opt("--json", self.json.as_ref())
            .opt("--split-max-size", self.split_max_size.as_ref())
            .flags(&self.force)
            .flags(&self.judge);
    }
}
