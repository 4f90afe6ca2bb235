//! `organ measure` and `organ report merge`: flags to [`cmd::measure::Options`].

use super::{guard, Argv, Exit, Force, Out, ReportOutputs, Stats, ToArgs, Work, REPORTS_GROUP};
use crate::cmd::{self, measure::shard::Shard};
use anyhow::Result;
use organ_core::zmeasure::Mode;
use std::path::{Path, PathBuf};

#[derive(clap::Args, Debug, Clone, Default, PartialEq)]
#[command(mut_arg("stream", |a| a.help(
    "Read only the sampled blocks with positioned reads, never mapping tensor data (automatic for models \
     over 2 GiB): memory stays bounded whatever the size"
)))]
pub struct MeasureArgs {
    /// GGUF files, split shards (the whole split is measured), organ directories, or
    /// directories of models (fleets); with several models, a ranking follows.
    #[arg(required_unless_present = "fleet")]
    pub models: Vec<PathBuf>,
    #[command(flatten)]
    pub report: ReportOutputs,
    #[command(flatten)]
    pub work: Work,
    /// Keep finished reports here, keyed by the model's BLAKE3 and the measure's
    /// definition, and reuse them (a fleet
    /// run resumes where it stopped). Default when a directory is measured:
    /// ~/.cache/organ/measure.
    #[arg(long, value_name = "DIR")]
    pub cache: Option<PathBuf>,
    /// Never read or write the report cache.
    #[arg(long, conflicts_with = "cache")]
    pub no_cache: bool,
    #[command(flatten)]
    pub force: Force,
    /// Also measure how noisy each θ is: σ_θ over 8 alternate samples, and σ of θ_mean
    /// (docs/uncertainty.md). About 9× the work of a plain run.
    #[arg(long, conflicts_with = "exact")]
    pub sigma: bool,
    /// θ over every value instead of a 100 000-value sample (reports say
    /// "z1-exact"). Memory grows with the largest tensor.
    #[arg(long)]
    pub exact: bool,
    /// Also measure each expert of every expert tensor (`_exps`) as a tensor of its own
    /// (Z-measure §6), flagging outliers and byte-identical experts. One sample per
    /// expert: about E times the work of an expert tensor.
    #[arg(long)]
    pub experts: bool,
    /// With LoRA adapters: their base model. Each pair is checked against its weight,
    /// and each update's ‖ΔW‖_F set against the weight's ‖W‖_F.
    #[arg(long, value_name = "MODEL", conflicts_with = "fleet")]
    pub base: Option<PathBuf>,
    /// Measure a fleet in shards (docs/fleet.md): every model below DIR, or those LIST
    /// names (a path or URL a line), sorted by name, model j going to shard j mod N.
    /// This process measures its shard's models into --results; `organ report merge`
    /// ranks them.
    #[arg(long, value_name = "LIST|DIR", requires = "results",
          conflicts_with_all = ["models", REPORTS_GROUP, "cache"])]
    pub fleet: Option<PathBuf>,
    /// With --fleet: this process's shard, I/N (I from 0). Also from JOB_COMPLETION_INDEX
    /// with --shards N (a Kubernetes Indexed Job), or SLURM_ARRAY_TASK_ID −
    /// SLURM_ARRAY_TASK_MIN of SLURM_ARRAY_TASK_COUNT (a Slurm array); all given must agree.
    #[arg(long, value_name = "I/N", requires = "fleet")]
    pub shard: Option<String>,
    /// With --fleet: how many shards, this one's index coming from the environment.
    #[arg(long, value_name = "N", requires = "fleet")]
    pub shards: Option<u64>,
    /// With --fleet: the directory, or object-store prefix (s3://BUCKET/PREFIX, gs://,
    /// az://), that receives one report per model, named by the model's identity and
    /// the measure's definition; a run skips what is there.
    #[arg(long, value_name = "DIR|URL", requires = "fleet")]
    pub results: Option<PathBuf>,
}

impl TryFrom<&MeasureArgs> for cmd::measure::Options {
    type Error = anyhow::Error;

    fn try_from(a: &MeasureArgs) -> Result<Self> {
        // A fleet (a directory of models) resumes from the default cache.
        let fleet = a.models.iter().any(|m| m.is_dir() && !m.join("manifest.json").exists());
        let cache = match (a.no_cache, &a.cache) {
            (true, _) => None,
            (false, Some(c)) => Some(c.clone()),
            (false, None) if fleet => super::cache_root().map(|c| c.join("measure")),
            (false, None) => None,
        };
        let mode = match (a.sigma, a.exact) {
            (true, _) => Mode::Sigma,
            (_, true) => Mode::Exact,
            _ => Mode::Sampled,
        };
        let mut o = options(a.models.clone(), &a.report, a.work.stream, cache, a.force, mode, a.experts)?;
        o.base = a.base.clone();
        Ok(o)
    }
}

/// The options of a measure, or of a merge (which measures nothing).
fn options(
    models: Vec<PathBuf>,
    r: &ReportOutputs,
    stream: bool,
    cache: Option<PathBuf>,
    force: Force,
    mode: Mode,
    experts: bool,
) -> Result<cmd::measure::Options> {
    Ok(cmd::measure::Options {
        models,
        files: r.files.files.clone(),
        summary_only: r.summary_only,
        wells: r.wells,
        all_wells: r.all_wells,
        verdicts: cmd::measure::verdicts::read_all(&r.verdicts)?,
        stream,
        cache,
        force: force.force,
        mode,
        experts,
        base: None,
    })
}

pub(super) fn run(a: &MeasureArgs, out: &mut Out) -> Result<Exit> {
    let mut models: Vec<&Path> = a.models.iter().map(PathBuf::as_path).collect();
    models.extend(a.base.as_deref());
    guard(&models, &a.report.files.paths(), a.force.force)?;
    let printed = out.text(&a.report.files.paths())?;
    a.work.start()?;
    let opts = cmd::measure::Options::try_from(a)?;
    match (&a.fleet, &a.results) {
        (Some(fleet), Some(results)) => {
            let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
            let shard = Shard::resolve(a.shard.as_deref(), a.shards, &env)?;
            cmd::measure::fleet::run(&opts, fleet, shard, results, printed)?;
        }
        _ => cmd::measure::run(&opts, printed)?,
    }
    a.work.finish(Stats::Measure);
    Ok(Exit::Done)
}

impl ToArgs for MeasureArgs {
    fn to_args(&self, a: &mut Argv) {
        a.arg("measure");
        for m in &self.models {
            a.arg(m);
        }
        a.flags(&self.report)
            .flags(&self.work)
            .opt("--cache", self.cache.as_ref())
            .switch("--no-cache", self.no_cache)
            .flags(&self.force)
            .switch("--sigma", self.sigma)
            .switch("--exact", self.exact)
            .switch("--experts", self.experts)
            .opt("--base", self.base.as_ref())
            .opt("--fleet", self.fleet.as_ref())
            .opt("--shard", self.shard.as_ref())
            .number("--shards", self.shards)
            .opt("--results", self.results.as_ref());
    }
}

#[derive(clap::Args, Debug, Clone, Default, PartialEq)]
#[command(mut_arg("force", |a| a.help("Replace outputs that already exist")))]
pub struct MergeArgs {
    /// The results of the fleet's shards: a directory or s3://BUCKET/PREFIX (gs://, az://).
    pub results: PathBuf,
    #[command(flatten)]
    pub report: ReportOutputs,
    #[command(flatten)]
    pub force: Force,
}

impl TryFrom<&MergeArgs> for cmd::measure::Options {
    type Error = anyhow::Error;

    fn try_from(a: &MergeArgs) -> Result<Self> {
        options(Vec::new(), &a.report, false, None, a.force, Mode::Sampled, false)
    }
}

pub(super) fn merge(a: &MergeArgs, out: &mut Out) -> Result<Exit> {
    guard(&[], &a.report.files.paths(), a.force.force)?;
    let printed = out.text(&a.report.files.paths())?;
    // A sensitivity sweep's results, or a measured fleet's.
    if cmd::sensitivity::sweep::is_sweep(&a.results) {
        cmd::sensitivity::sweep::merge(&a.results, &a.report.files.files, a.force.force, printed)?;
    } else {
        cmd::measure::fleet::merge(&a.results, &cmd::measure::Options::try_from(a)?, printed)?;
    }
    Ok(Exit::Done)
}

impl ToArgs for MergeArgs {
    fn to_args(&self, a: &mut Argv) {
        a.arg("report").arg("merge").arg(&self.results).flags(&self.report).flags(&self.force);
    }
}
