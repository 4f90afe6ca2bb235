//! `organ eval`: flags to [`cmd::eval::Options`]; and `--judge`'s flags (which every
//! command that writes a model takes) as arguments.

use super::{guard, Argv, Exit, Force, Out, ToArgs};
use crate::cmd::{self, eval::JudgeArgs};
use crate::llama_cpp::logits_cache;
use crate::llama_cpp::perplexity::{Adapters, LogitsCache, Offload, Scaled};
use anyhow::Result;
use std::path::PathBuf;

#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct EvalArgs {
    /// The GGUF model (a split model: its first shard).
    pub model: PathBuf,
    /// The text to score (plain UTF-8, at least two contexts of tokens).
    #[arg(long, value_name = "FILE")]
    pub text: PathBuf,
    /// The model to compare with (its parent): same vocabulary, same context.
    #[arg(long, value_name = "PARENT")]
    pub base: Option<PathBuf>,
    /// A LoRA adapter llama-perplexity applies to the model, at scale S (default 1); repeat
    /// for several.
    #[arg(long = "lora", value_name = "FILE[:S]")]
    pub lora: Vec<String>,
    /// A LoRA adapter applied to the base, at scale S (default 1); repeat for several.
    #[arg(long = "base-lora", value_name = "FILE[:S]", requires = "base")]
    pub base_lora: Vec<String>,
    /// Tokens per context (llama-perplexity's -c; the second half of each is scored).
    #[arg(long, value_name = "N", default_value_t = cmd::eval::DEFAULT_CTX)]
    pub ctx: u32,
    /// llama-perplexity's threads (default: its own).
    #[arg(long, short = 'j', value_name = "N")]
    pub threads: Option<u32>,
    /// Score at most this many contexts (default: all the text holds).
    #[arg(long, value_name = "N")]
    pub chunks: Option<u32>,
    /// Also write the figures as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// llama.cpp's bin directory, holding llama-perplexity (default: ORGAN_LLAMA_CPP, then PATH).
    #[arg(long, value_name = "DIR")]
    pub llama_cpp: Option<PathBuf>,
    #[command(flatten)]
    pub offload: Offload,
    /// Keep the base's logits for the next eval against it on the same text and settings,
    /// in ORGAN_CACHE (else ~/.cache/organ) under logits/, all of them at most SIZE (500M,
    /// 2G, bytes; the least recently used removed first); 0: keep and read none.
    #[arg(long, value_name = "SIZE", default_value = "1G", value_parser = logits_cache::parse_max)]
    pub logits_cache_max: u64,
    #[command(flatten)]
    pub force: Force,
}

impl EvalArgs {
    /// `eval MODEL --text TEXT` with every other flag at its default.
    pub fn new(model: PathBuf, text: PathBuf) -> EvalArgs {
        EvalArgs {
            model,
            text,
            base: None,
            lora: Vec::new(),
            base_lora: Vec::new(),
            ctx: cmd::eval::DEFAULT_CTX,
            threads: None,
            chunks: None,
            json: None,
            llama_cpp: None,
            offload: Offload::default(),
            logits_cache_max: logits_cache::DEFAULT_MAX_BYTES,
            force: Force::default(),
        }
    }
}

impl<'a> TryFrom<&'a EvalArgs> for cmd::eval::Options<'a> {
    type Error = anyhow::Error;

    fn try_from(a: &'a EvalArgs) -> Result<Self> {
        let settings = cmd::eval::Settings {
            text: a.text.clone(),
            ctx: a.ctx,
            threads: a.threads,
            chunks: a.chunks,
            llama_cpp: a.llama_cpp.clone(),
            adapters: Adapters { model: scaled(&a.lora)?, base: scaled(&a.base_lora)? },
            offload: a.offload.clone(),
            logits_cache: LogitsCache::default_root(a.logits_cache_max),
        };
        Ok(cmd::eval::Options {
            model: &a.model,
            base: a.base.as_deref(),
            settings,
            json: a.json.as_deref(),
            force: a.force.force,
        })
    }
}

/// `FILE[:S]` arguments as adapters with their scales.
pub(super) fn scaled(args: &[String]) -> Result<Vec<Scaled>> {
    args.iter().map(|s| Scaled::parse(s)).collect()
}

pub(super) fn run(a: &EvalArgs, out: &mut Out) -> Result<Exit> {
    let o = cmd::eval::Options::try_from(a)?;
    let adapters = o.settings.adapters.model.iter().chain(&o.settings.adapters.base).map(|s| s.path.as_path());
    let inputs: Vec<_> =
        [Some(o.model), o.base, Some(a.text.as_path())].into_iter().flatten().chain(adapters).collect();
    guard(&inputs, &[o.json], o.force)?;
    cmd::eval::run(&o, out.text(&[o.json])?)?;
    Ok(Exit::Done)
}

impl ToArgs for EvalArgs {
    fn to_args(&self, a: &mut Argv) {
        a.arg("eval")
            .arg(&self.model)
            .value("--text", &self.text)
            .opt("--base", self.base.as_ref())
            .each("--lora", &self.lora)
            .each("--base-lora", &self.base_lora)
            .number("--ctx", Some(self.ctx))
            .number("--threads", self.threads)
            .number("--chunks", self.chunks)
            .opt("--json", self.json.as_ref())
            .opt("--llama-cpp", self.llama_cpp.as_ref())
            .flags(&self.offload)
            .number("--logits-cache-max", Some(self.logits_cache_max))
            .flags(&self.force);
    }
}

impl ToArgs for Offload {
    fn to_args(&self, a: &mut Argv) {
        a.opt("--gpu-layers", self.gpu_layers.as_ref()).opt("--device", self.device.as_ref());
    }
}

impl ToArgs for JudgeArgs {
    fn to_args(&self, a: &mut Argv) {
        // --judge-ctx, --judge-chunks, --llama-cpp, the threads and the device flags require --judge.
        if self.judge.is_some() {
            a.opt("--judge", self.judge.as_ref())
                .number("--judge-ctx", Some(self.judge_ctx))
                .number("--judge-chunks", self.judge_chunks)
                .opt("--llama-cpp", self.llama_cpp.as_ref())
                .number("--judge-threads", self.judge_threads)
                .opt("--judge-gpu-layers", self.judge_gpu_layers.as_ref())
                .opt("--judge-device", self.judge_device.as_ref())
                .number("--logits-cache-max", Some(self.logits_cache_max));
        }
    }
}
