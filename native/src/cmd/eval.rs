//! `organ eval`: a model's perplexity on a text and, against a base, its KL divergence and
//! top-token agreement, measured by llama.cpp's `llama-perplexity` (docs/judge.md): the
//! evaluation is [`crate::llama_cpp::perplexity`]'s, the verdict against a base
//! [`crate::judge`]'s. Also `--judge`'s flags, which every command that writes a model
//! flattens.

use super::outputs::Files;
use crate::llama_cpp::logits_cache::{self, parse_max};
use crate::llama_cpp::perplexity::{devices, gpu_layers, LogitsCache, Offload};
pub use crate::llama_cpp::perplexity::{evaluate, print, Settings, MAX_CTX, MIN_CTX};
use anyhow::Result;
use organ_core::judge::EvalReport;
use organ_core::report::{formats, AnyReport, Shown};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The default context: llama-perplexity's own, so that eval's and `--judge`'s figures are
/// comparable with its defaults (sensitivity's is shorter, for a sweep's hundreds of
/// evaluations: organ-cli's `cli::sensitivity::DEFAULT_CTX`).
pub const DEFAULT_CTX: u32 = 512;

/// `--judge`: after writing, evaluate the output against its parent with llama.cpp
/// (docs/judge.md). Every command that writes a model flattens these flags.
#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct JudgeArgs {
    /// Evaluate the written model against its parent on this text (llama.cpp's
    /// llama-perplexity: perplexity, KL divergence, same top token) and print a verdict.
    #[arg(long, value_name = "TEXT")]
    pub judge: Option<PathBuf>,
    /// --judge's context, in tokens (the text needs two of them at least).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_CTX, requires = "judge")]
    pub judge_ctx: u32,
    /// --judge scores at most this many chunks of the text (default: all it holds).
    #[arg(long, value_name = "N", requires = "judge", value_parser = clap::value_parser!(u32).range(1..))]
    pub judge_chunks: Option<u32>,
    /// llama.cpp's bin directory, holding llama-perplexity (default: ORGAN_LLAMA_CPP, then PATH).
    #[arg(long, value_name = "DIR", requires = "judge")]
    pub llama_cpp: Option<PathBuf>,
    /// --judge's threads (llama-perplexity's -t; default: its own).
    #[arg(long, value_name = "N", requires = "judge")]
    pub judge_threads: Option<u32>,
    /// --judge's --gpu-layers (llama-perplexity's -ngl: N, auto or all).
    #[arg(long, value_name = "N|auto|all", requires = "judge", value_parser = gpu_layers)]
    pub judge_gpu_layers: Option<String>,
    /// --judge's --device (llama-perplexity's --device: names, comma-separated; none: the CPU).
    #[arg(long, value_name = "DEV[,DEV…]", requires = "judge", value_parser = devices)]
    pub judge_device: Option<String>,
    /// Keep the parent's logits for the next --judge against it on the same text and
    /// settings, in ORGAN_CACHE (else ~/.cache/organ) under logits/, all of them at most
    /// SIZE (500M, 2G, bytes; the least recently used removed first); 0: keep and read none.
    #[arg(long, value_name = "SIZE", default_value = "1G", requires = "judge", value_parser = parse_max)]
    pub logits_cache_max: u64,
}

impl Default for JudgeArgs {
    fn default() -> Self {
        JudgeArgs {
            judge: None,
            judge_ctx: DEFAULT_CTX,
            judge_chunks: None,
            llama_cpp: None,
            judge_threads: None,
            judge_gpu_layers: None,
            judge_device: None,
            logits_cache_max: logits_cache::DEFAULT_MAX_BYTES,
        }
    }
}

impl JudgeArgs {
    /// The evaluation asked for, if any.
    pub fn settings(&self) -> Option<Settings> {
        self.judge.as_ref().map(|text| Settings {
            text: text.clone(),
            ctx: self.judge_ctx,
            threads: self.judge_threads,
            chunks: self.judge_chunks,
            llama_cpp: self.llama_cpp.clone(),
            adapters: Default::default(),
            offload: Offload { gpu_layers: self.judge_gpu_layers.clone(), device: self.judge_device.clone() },
            logits_cache: LogitsCache::default_root(self.logits_cache_max),
        })
    }
}

/// `organ eval`'s options.
pub struct Options<'a> {
    pub model: &'a Path,
    pub base: Option<&'a Path>,
    pub settings: Settings,
    pub json: Option<&'a Path>,
    pub force: bool,
}

/// `organ eval`: evaluates, prints, and writes the JSON report (the core's [`EvalReport`],
/// graded when it has a base).
pub fn run(o: &Options<'_>, w: &mut dyn Write) -> Result<()> {
    let scratch = o.json.and_then(Path::parent).filter(|p| !p.as_os_str().is_empty());
    let report = EvalReport::new(evaluate(o.model, o.base, &o.settings, scratch)?);
    // The grade coloured on a terminal (crate::paint); the file plain.
    let on_screen = Shown { marks: crate::paint::marks(crate::paint::Stream::Stdout), ..Shown::WHOLE };
    super::outputs::print(AnyReport::Eval(&report), &on_screen, w)?;
    let files = Files::default().with(&formats::JSON, o.json.map(Path::to_path_buf));
    super::outputs::write_all(AnyReport::Eval(&report), &files, &Shown::WHOLE, o.force)
}
