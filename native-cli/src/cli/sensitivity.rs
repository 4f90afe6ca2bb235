//! `organ sensitivity`: flags to [`cmd::sensitivity::Options`].

use super::{guard, Argv, Exit, Force, Out, ReportFiles, SelectArgs, Sensitivity, ToArgs, REPORTS_GROUP};
use crate::cmd::{self, eval::Settings, measure::shard::Shard};
use crate::llama_cpp::perplexity::Offload;
use anyhow::{bail, Result};
use organ_core::sensitivity::{Change, DEFAULT_SEED};
use organ_core::surgery::select::Selection;
use organ_core::GgmlType;
use std::path::PathBuf;

/// The context sensitivity measures with by default: short, so that many evaluations fit
/// in minutes (the study in docs/validity.md used it). It differs from eval's 512
/// ([`crate::cmd::eval::DEFAULT_CTX`]) on purpose: a sweep evaluates one changed model per
/// tensor, hundreds of them, and ranks them against one another, which a short context
/// ranks as a long one does (docs/validity.md); eval and `--judge` score one model once,
/// and report figures comparable with llama-perplexity's own defaults.
pub const DEFAULT_CTX: u32 = 128;

/// The contexts of the text each evaluation scores by default: an evaluation's time is its
/// chunks' (a pass is 86% of it), and 6 is the most with which a sweep of SmolLM2's 211
/// weights to Q2_0 takes under 10 minutes of a 2-core machine's CPU, its ranking on two
/// disjoint texts still agreeing to a repeat ρ above 0.95 (docs/sensitivity.md, How long
/// it takes; bench/sensitivity-chunks.sh measures both).
pub const DEFAULT_CHUNKS: u32 = 6;

#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct SensitivityArgs {
    /// The GGUF model.
    pub model: PathBuf,
    /// The text each changed model is scored on (UTF-8, at least two contexts of tokens).
    #[arg(long, value_name = "FILE", required_unless_present = "predict")]
    pub text: Option<PathBuf>,
    /// Predict instead of measuring: each weight's KL divergence at --to estimated from
    /// its round-trip error (seconds, no llama.cpp; docs/predict.md), from --imatrix or,
    /// without one, from the weights alone.
    #[arg(long, requires = "to", conflicts_with_all = ["text", "repeat_text", "keep_models", "html", "jobs"])]
    pub predict: bool,
    /// With --predict: the input columns' mean squares from this llama-imatrix output.
    #[arg(long, value_name = "FILE", requires = "predict")]
    pub imatrix: Option<PathBuf>,
    /// With --predict: a measured report of the same --to (organ sensitivity --json), shown
    /// beside each prediction with Spearman's ρ.
    #[arg(long, value_name = "FILE", requires = "predict")]
    pub truth: Option<PathBuf>,
    /// Requantize each tensor, alone, to this type (llama-quantize's: q2_0, q3_k, q4_0…).
    #[arg(long, value_name = "TYPE", conflicts_with = "ablate", required_unless_present = "ablate")]
    pub to: Option<String>,
    /// Replace each tensor, alone, by Gaussian noise of its own mean and std (seeded) or by zeros.
    #[arg(long, value_name = "noise|zero")]
    pub ablate: Option<String>,
    /// The noise's seed (--ablate noise).
    #[arg(long, value_name = "N", requires = "ablate")]
    pub seed: Option<u64>,
    #[command(flatten)]
    pub select: SelectArgs,
    /// Evaluations run at once, each llama-perplexity on one thread (default: one per core).
    #[arg(long, value_name = "N")]
    pub jobs: Option<usize>,
    /// Tokens per context (llama-perplexity's -c).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_CTX)]
    pub ctx: u32,
    /// Score at most this many contexts of the text (default: 6; more than the text holds
    /// scores all of it).
    #[arg(long, value_name = "N")]
    pub chunks: Option<u32>,
    /// Measure the same changes on this second text, disjoint from the first, and report
    /// Spearman's ρ between the two: the ceiling any predictor can reach.
    #[arg(long, value_name = "FILE")]
    pub repeat_text: Option<PathBuf>,
    /// `--json`, `--csv`, `--html` (measured only): the registry's files.
    #[command(flatten)]
    pub reports: ReportFiles<Sensitivity>,
    /// Where results are kept, so an interrupted run resumes (default: ~/.cache/organ).
    #[arg(long, value_name = "DIR")]
    pub cache: Option<PathBuf>,
    /// Keep nothing: every evaluation runs again next time.
    #[arg(long, conflicts_with = "cache")]
    pub no_cache: bool,
    /// Also keep each changed model this run scores in DIR, as TENSOR_NAME.gguf (each is
    /// as large as the model): to inspect or diff a change.
    #[arg(long, value_name = "DIR")]
    pub keep_models: Option<PathBuf>,
    /// llama.cpp's bin directory (default: ORGAN_LLAMA_CPP, then PATH).
    #[arg(long, value_name = "DIR")]
    pub llama_cpp: Option<PathBuf>,
    #[command(flatten)]
    pub offload: Offload,
    /// Spread the sweep over workers (docs/sensitivity.md): this process measures its
    /// shard's tensors (tensor j to shard j mod N) into --results; `organ report merge`
    /// gives the report. I/N from 0, or from JOB_COMPLETION_INDEX with --shards N (a
    /// Kubernetes Indexed Job) or SLURM_ARRAY_TASK_ID (a Slurm array), as measure --fleet.
    #[arg(long, value_name = "I/N", requires = "results")]
    pub shard: Option<String>,
    /// With --results: how many shards, this one's index coming from the environment.
    #[arg(long, value_name = "N", requires = "results")]
    pub shards: Option<u64>,
    /// The directory, or object-store prefix (s3://BUCKET/PREFIX, gs://, az://), the
    /// sweep's workers share: one result per tensor as it is measured, one index per
    /// shard; a worker takes what is there.
    #[arg(long, value_name = "DIR|URL", conflicts_with_all = ["predict", "keep_models", REPORTS_GROUP])]
    pub results: Option<PathBuf>,
    /// Print to stderr the bytes written for each evaluation's changed model, and for
    /// staging the model once.
    #[arg(long, conflicts_with = "predict")]
    pub stats: bool,
    #[command(flatten)]
    pub force: Force,
}

impl SensitivityArgs {
    /// `sensitivity MODEL` with every other flag at its default (give it `to` or `ablate`,
    /// and `text` or `predict`, before it parses).
    pub fn new(model: PathBuf) -> SensitivityArgs {
        SensitivityArgs {
            model,
            text: None,
            predict: false,
            imatrix: None,
            truth: None,
            to: None,
            ablate: None,
            seed: None,
            select: SelectArgs::default(),
            jobs: None,
            ctx: DEFAULT_CTX,
            chunks: None,
            repeat_text: None,
            reports: ReportFiles::default(),
            cache: None,
            no_cache: false,
            keep_models: None,
            llama_cpp: None,
            offload: Offload::default(),
            shard: None,
            shards: None,
            results: None,
            stats: false,
            force: Force::default(),
        }
    }

    fn change(&self) -> Result<Change> {
        match (&self.to, self.ablate.as_deref()) {
            (Some(t), None) => match GgmlType::from_name(&t.to_ascii_uppercase()) {
                Some(ty) => Ok(Change::To(ty)),
                None => bail!("--to {t}: not a ggml type (q2_0, q3_k, q4_0, q8_0, f16…)"),
            },
            (None, Some("noise")) => Ok(Change::Noise { seed: self.seed.unwrap_or(DEFAULT_SEED) }),
            (None, Some("zero")) => Ok(Change::Zero),
            (None, Some(a)) => bail!("--ablate {a}: give noise or zero"),
            _ => bail!("give --to TYPE or --ablate noise|zero"),
        }
    }
}

impl SensitivityArgs {
    /// `--select`'s selection; `None` when no filter is given.
    fn selection(&self) -> Result<Option<Selection>> {
        let s = &self.select;
        Ok(if s.layers.is_none() && s.types.is_empty() && s.names.is_empty() {
            None
        } else {
            Some(Selection::try_from(s)?)
        })
    }
}

impl<'a> TryFrom<&'a SensitivityArgs> for cmd::sensitivity::predicted::Options<'a> {
    type Error = anyhow::Error;

    fn try_from(a: &'a SensitivityArgs) -> Result<Self> {
        let Change::To(to) = a.change()? else { bail!("--predict covers --to TYPE (a requantization) only") };
        Ok(cmd::sensitivity::predicted::Options {
            model: &a.model,
            to,
            imatrix: a.imatrix.as_deref(),
            truth: a.truth.as_deref(),
            selection: a.selection()?,
            files: a.reports.files.clone(),
            force: a.force.force,
        })
    }
}

impl<'a> TryFrom<&'a SensitivityArgs> for cmd::sensitivity::Options<'a> {
    type Error = anyhow::Error;

    fn try_from(a: &'a SensitivityArgs) -> Result<Self> {
        let change = a.change()?;
        let Some(text) = &a.text else { bail!("give --text FILE (the text each changed model is scored on)") };
        if !(cmd::eval::MIN_CTX..=cmd::eval::MAX_CTX).contains(&a.ctx) {
            bail!("--ctx {}: give {} to {} tokens", a.ctx, cmd::eval::MIN_CTX, cmd::eval::MAX_CTX);
        }
        let selection = a.selection()?;
        let cache = match (a.no_cache, &a.cache) {
            (true, _) => None,
            (false, Some(d)) => Some(d.clone()),
            (false, None) => super::cache_root(),
        };
        let jobs = a.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        if jobs == 0 {
            bail!("--jobs 0: give at least 1");
        }
        Ok(cmd::sensitivity::Options {
            model: &a.model,
            change,
            selection,
            settings: Settings {
                text: text.clone(),
                ctx: a.ctx,
                threads: Some(1),
                chunks: Some(a.chunks.unwrap_or(DEFAULT_CHUNKS)),
                llama_cpp: a.llama_cpp.clone(),
                adapters: Default::default(),
                offload: a.offload.clone(),
                // Sensitivity keeps its base's logits in its own run directories.
                logits_cache: Default::default(),
            },
            repeat_text: a.repeat_text.clone(),
            jobs,
            cache,
            keep_models: a.keep_models.as_deref(),
            files: a.reports.files.clone(),
            stats: a.stats,
            force: a.force.force,
        })
    }
}

pub(super) fn run(a: &SensitivityArgs, out: &mut Out) -> Result<Exit> {
    if a.predict {
        let o = cmd::sensitivity::predicted::Options::try_from(a)?;
        let mut inputs = vec![o.model];
        inputs.extend(o.imatrix);
        inputs.extend(o.truth);
        guard(&inputs, &o.files.paths(), o.force)?;
        cmd::sensitivity::predicted::run(&o, out.text(&o.files.paths())?)?;
        return Ok(Exit::Done);
    }
    let o = cmd::sensitivity::Options::try_from(a)?;
    let mut inputs = vec![o.model, o.settings.text.as_path()];
    inputs.extend(a.repeat_text.as_deref());
    guard(&inputs, &o.files.paths(), o.force)?;
    let printed = out.text(&o.files.paths())?;
    match &a.results {
        Some(results) => {
            let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
            let shard = Shard::resolve(a.shard.as_deref(), a.shards, &env)?;
            cmd::sensitivity::sweep::run(&o, shard, results, printed)?;
        }
        None => {
            cmd::sensitivity::run(&o, printed)?;
        }
    }
    Ok(Exit::Done)
}

impl ToArgs for SensitivityArgs {
    fn to_args(&self, a: &mut Argv) {
        a.arg("sensitivity")
            .arg(&self.model)
            .opt("--text", self.text.as_ref())
            .switch("--predict", self.predict)
            .opt("--imatrix", self.imatrix.as_ref())
            .opt("--truth", self.truth.as_ref())
            .opt("--to", self.to.as_ref())
            .opt("--ablate", self.ablate.as_ref())
            .number("--seed", self.seed);
        self.select.to_args(a);
        a.number("--jobs", self.jobs)
            .number("--ctx", Some(self.ctx))
            .number("--chunks", self.chunks)
            .opt("--repeat-text", self.repeat_text.as_ref())
            .flags(&self.reports)
            .opt("--cache", self.cache.as_ref())
            .switch("--no-cache", self.no_cache)
            .opt("--keep-models", self.keep_models.as_ref())
            .opt("--llama-cpp", self.llama_cpp.as_ref())
            .flags(&self.offload)
            .opt("--shard", self.shard.as_ref())
            .number("--shards", self.shards)
            .opt("--results", self.results.as_ref())
            .switch("--stats", self.stats)
            .flags(&self.force);
    }
}
