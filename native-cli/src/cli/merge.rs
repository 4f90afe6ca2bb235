//! `organ merge`: a mergekit-style configuration, or the same as flags, to
//! [`cmd::merge::Options`]. The flags are turned into the configuration's JSON, so both
//! are checked by the one reader in the core ([`Config::from_json`]).

use super::{guard, Argv, Exit, Force, Out, ToArgs};
use crate::cmd::{self, eval::JudgeArgs};
use anyhow::{anyhow, bail, Context, Result};
use organ_core::lora::merge::OutputType;
use organ_core::merge::config::Config;
use organ_core::quant::quantize::can_quantize;
use organ_core::GgmlType;
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};

/// The largest configuration file read.
const MAX_CONFIG_BYTES: u64 = 1 << 20;

#[derive(clap::Args, Debug, Clone, Default, PartialEq)]
pub struct ModelMergeArgs {
    /// A mergekit-style YAML configuration (merge_method, base_model, models or slices,
    /// parameters, dtype; docs/merge.md). Without it, give --method and --model.
    #[arg(value_name = "CONFIG.yml", required_unless_present = "method")]
    pub config: Option<PathBuf>,
    /// linear, task_arithmetic, ties, dare_linear, dare_ties, slerp or passthrough (one
    /// model; to stack layers of several, a configuration's slices).
    #[arg(long, conflicts_with = "config")]
    pub method: Option<String>,
    /// The base model (every method but linear).
    #[arg(long, conflicts_with = "config")]
    pub base: Option<PathBuf>,
    /// A model to merge, at weight W (default 1) and density D (default 1); repeat for
    /// each.
    #[arg(long = "model", value_name = "FILE[:W][,density=D]", conflicts_with = "config")]
    pub models: Vec<String>,
    /// SLERP's t: 0 is the base, 1 the other model.
    #[arg(long, conflicts_with = "config")]
    pub t: Option<f64>,
    /// A parameter of the merge (normalize=false, lambda=0.5, rescale=true…).
    #[arg(long = "param", value_name = "KEY=VALUE", conflicts_with = "config")]
    pub params: Vec<String>,
    /// The merged model: one GGUF file (must not exist).
    #[arg(long)]
    pub out: PathBuf,
    /// The merged tensors' type: keep (the base tensor's own when organ can write it, else
    /// F16) or a type organ writes (f32, f16, q8_0…) [default: the configuration's dtype,
    /// else keep].
    #[arg(long = "type", value_name = "TYPE")]
    pub ty: Option<String>,
    /// DARE's seed: the same seed drops the same values.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Also write the report (the tensors merged, their parameters and types, --judge's
    /// verdict) as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    #[command(flatten)]
    pub force: Force,
    /// Judge the merge: its KL divergence from the base (linear: from its first model) on
    /// TEXT, and a verdict (docs/judge.md).
    #[command(flatten)]
    pub judge: JudgeArgs,
}

impl ModelMergeArgs {
    /// The configuration as JSON: the file's, or the flags'.
    fn spec(&self) -> Result<Value> {
        if let Some(p) = &self.config {
            let f = std::fs::File::open(p).with_context(|| format!("{}: cannot open", p.display()))?;
            let mut text = String::new();
            std::io::Read::read_to_string(&mut std::io::Read::take(f, MAX_CONFIG_BYTES + 1), &mut text)
                .with_context(|| format!("{}: not UTF-8 text", p.display()))?;
            if text.len() as u64 > MAX_CONFIG_BYTES {
                bail!("{}: a merge configuration of more than {MAX_CONFIG_BYTES} bytes", p.display());
            }
            return crate::yaml::to_json(&text).with_context(|| format!("{}", p.display()));
        }
        let mut parameters = Map::new();
        if let Some(t) = self.t {
            parameters.insert("t".into(), json!(t));
        }
        for p in &self.params {
            let Some((k, v)) = p.split_once('=').filter(|(k, v)| !k.is_empty() && !v.is_empty()) else {
                bail!("--param {p:?}: expected KEY=VALUE");
            };
            parameters.insert(k.into(), crate::yaml::to_json(v).with_context(|| format!("--param {p:?}"))?);
        }
        let mut models: Vec<Value> = self.models.iter().map(|m| model_flag(m)).collect::<Result<_>>()?;
        // A model's weight is 1 unless given, where the method reads one.
        let method = self.method.as_deref().and_then(organ_core::merge::Method::from_name);
        if method.is_some_and(|m| m.model_parameters().contains(&"weight")) {
            for m in &mut models {
                if let Some(p) = m["parameters"].as_object_mut() {
                    p.entry("weight").or_insert(json!(1.0));
                }
            }
        }
        let mut spec = json!({ "merge_method": self.method, "models": models, "parameters": parameters });
        if let Some(b) = &self.base {
            spec["base_model"] = json!(path_text(b)?);
        }
        Ok(spec)
    }
}

/// `FILE[:W][,density=D]` as a configuration's model entry (`organ serve` reads its own
/// specs back through this, so the path it checked is the one the child opens).
pub fn model_flag(s: &str) -> Result<Value> {
    let (path, rest) = match s.rsplit_once(':') {
        Some((p, r)) if !p.is_empty() && r.split(',').next().is_some_and(|w| w.parse::<f64>().is_ok()) => (p, Some(r)),
        _ => (s, None),
    };
    let mut parameters = Map::new();
    if let Some(rest) = rest {
        let mut items = rest.split(',');
        let w: f64 = items.next().unwrap_or_default().parse()?;
        parameters.insert("weight".into(), json!(w));
        for item in items {
            let (k, v) = item.split_once('=').ok_or_else(|| anyhow!("--model {s:?}: {item:?} is not KEY=VALUE"))?;
            let v: f64 = v.parse().map_err(|_| anyhow!("--model {s:?}: {k} {v:?} is not a number"))?;
            parameters.insert(k.into(), json!(v));
        }
    }
    Ok(json!({ "model": path, "parameters": parameters }))
}

fn path_text(p: &Path) -> Result<&str> {
    p.to_str().ok_or_else(|| anyhow!("{}: a path that is not UTF-8", p.display()))
}

impl<'a> TryFrom<&'a ModelMergeArgs> for cmd::merge::Options<'a> {
    type Error = anyhow::Error;

    fn try_from(a: &'a ModelMergeArgs) -> Result<Self> {
        let spec = a.spec()?;
        let config = Config::from_json(&spec).with_context(|| match &a.config {
            Some(p) => p.display().to_string(),
            None => "organ merge".into(),
        })?;
        let ty = match a.ty.as_deref() {
            None => config.out_type.map_or(OutputType::Keep, OutputType::Forced),
            Some(k) if k.eq_ignore_ascii_case("keep") => OutputType::Keep,
            Some(t) => OutputType::Forced(GgmlType::from_name(t).filter(|t| can_quantize(*t)).ok_or_else(|| {
                let types: Vec<&str> = GgmlType::ALL.iter().filter(|t| can_quantize(**t)).map(|t| t.name()).collect();
                anyhow!("--type {t:?}: give keep, or a type organ writes: {}", types.join(", "))
            })?),
        };
        Ok(cmd::merge::Options {
            config,
            spec,
            out: &a.out,
            ty,
            seed: a.seed,
            json: a.json.as_deref(),
            force: a.force.force,
            judge: a.judge.settings(),
        })
    }
}

pub(super) fn run(a: &ModelMergeArgs, out: &mut Out) -> Result<Exit> {
    let o = cmd::merge::Options::try_from(a)?;
    let paths = o.inputs();
    let mut inputs: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
    inputs.extend(a.config.as_deref());
    guard(&super::with_judge(&inputs, &o.judge), &[Some(o.out), o.json], o.force)?;
    cmd::merge::run(&o, out.text(&[o.json])?)?;
    Ok(Exit::Done)
}

impl ToArgs for ModelMergeArgs {
    fn to_args(&self, a: &mut Argv) {
        a.arg("merge");
        if let Some(c) = &self.config {
            a.arg(c);
        }
        a.opt("--method", self.method.as_ref())
            .opt("--base", self.base.as_ref())
            .each("--model", &self.models)
            .number("--t", self.t)
            .each("--param", &self.params)
            .value("--out", &self.out)
            .opt("--type", self.ty.as_ref())
            .number("--seed", Some(self.seed))
            .opt("--json", self.json.as_ref())
            .flags(&self.force)
            .flags(&self.judge);
    }
}
