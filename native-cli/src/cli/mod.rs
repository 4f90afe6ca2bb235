//! The command line, once: flags (clap) turned into each command's validated options
//! before any work, as ripgrep turns low-level arguments into high-level ones.
//!
//! - [`Cli`] and [`Command`]: the flags of `organ` and of each subcommand.
//! - One file per command (`cli/measure.rs`, `cli/diff.rs`…): its clap struct, the one
//!   `TryFrom` that turns it into `cmd::<command>::Options`, and the `run` that does it.
//! - Groups several commands take, defined once and `#[command(flatten)]`ed:
//!   [`Work`] (threads, stream, stats), [`Force`], [`SelectArgs`], the report files
//!   ([`outputs`]), the global flags ([`global`]).
//! - [`argv`]: the inverse, flags back to an argv, which `organ serve` uses to start a
//!   job's child from the same structs a request fills ([`ToArgs`]).

mod argv;
mod assemble;
mod check;
mod diff;
mod dissect;
mod eval;
pub mod experts;
pub mod global;
mod graft;
mod inspect;
mod layers;
pub mod lora;
mod measure;
mod merge;
mod meta;
mod moe;
pub mod outputs;
mod purify;
mod quantize;
mod recipe;
mod select;
mod sensitivity;
mod serve;
mod work;

pub use argv::{argv, Argv, ToArgs};
pub use assemble::AssembleArgs;
pub use check::CheckArgs;
pub use diff::DiffArgs;
pub use dissect::DissectArgs;
pub use eval::EvalArgs;
pub use global::{Global, RemoteFlags};
pub use graft::GraftArgs;
pub use inspect::{memory_settings, InspectArgs};
pub use layers::LayersArgs;
pub use measure::{MeasureArgs, MergeArgs};
pub use merge::{model_flag, ModelMergeArgs};
pub use meta::MetaArgs;
pub use moe::MoeArgs;
pub use outputs::{
    Check, Compare, Quantization, ReportFiles, ReportKind, ReportOutputs, Sensitivity, Theta, REPORTS_GROUP,
};
pub use purify::PurifyArgs;
pub use quantize::QuantizeArgs;
pub use recipe::RecipeArgs;
pub use select::SelectArgs;
pub use sensitivity::SensitivityArgs;
pub use serve::ServeArgs;
pub use work::{Force, Stats, Work, Written};

use anyhow::Result;
use clap::{Parser, Subcommand};
use std::io::Write;
use std::path::Path;

#[derive(Parser, Debug)]
#[command(
    name = "organ",
    version,
    about = "Open GGUF models like a surgeon: inspect them and measure every tensor's θ (Z-measure v1)."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    #[command(flatten)]
    pub global: Global,
}

#[derive(Subcommand, Debug, Clone, PartialEq)]
pub enum Command {
    /// Show a model's metadata and one row per tensor (name, anatomy group, layer, type, shape, offset, bytes).
    Inspect(InspectArgs),
    /// Measure every tensor's θ (Z-measure v1) with its entropy H, kurtosis K and coherence C.
    Measure(MeasureArgs),
    /// Reports of fleets measured in shards (docs/fleet.md).
    Report {
        #[command(subcommand)]
        what: ReportCommand,
    },
    /// Compare two models tensor by tensor (Compare v1): which tensors changed, by how
    /// much (cos, rel_l2, max_abs, dθ), in which layers and groups.
    Diff(DiffArgs),
    /// Check a model's health without running it (Check k1): non-finite values and block
    /// scales, zero, constant and duplicated tensors (a full scan), shapes and required
    /// tensors against the architecture (llama, qwen2, gemma3, deepseek2), tokenizer,
    /// chat-template, expert and split metadata. Exits 1 when any finding is an error.
    Check(CheckArgs),
    /// Split a GGUF into an organ directory: one .bin per tensor under skeleton/, organs/,
    /// embed/, norm/, adapters/, other/, plus manifest.json (all metadata, order, BLAKE3s).
    Dissect(DissectArgs),
    /// Build a GGUF from an organ directory (byte-identical to the dissected original).
    Assemble(AssembleArgs),
    /// Transplant tensors from a donor into a recipient of the same architecture.
    /// Either may be a GGUF or an organ directory; --out ending in .gguf writes a GGUF,
    /// anything else an organ directory.
    Graft(GraftArgs),
    /// Experts as organs: extract one as a dense model, or prune an MoE to some of them.
    Experts {
        #[command(subcommand)]
        op: experts::Op,
    },
    /// Remove whole layers and renumber the rest: the kept tensors' bytes copied as they
    /// are, `block_count` and every per-layer metadata array cut to the kept layers
    /// (docs/surgery.md).
    Layers(LayersArgs),
    /// LoRA adapters (llama.cpp's format) as organs: merge them into their base, extract
    /// one from a finetune (docs/adapters.md).
    Lora {
        #[command(subcommand)]
        op: lora::Op,
    },
    /// Build a mixture of experts (llama's Mixtral layout) from a dense llama base and
    /// dense donors of its shapes, one expert each (docs/moe.md).
    Moe(MoeArgs),
    /// Merge finetunes of one base as mergekit does (linear, task_arithmetic, ties,
    /// dare_linear, dare_ties, slerp), from a mergekit-style YAML configuration or flags,
    /// models of any type organ reads (docs/merge.md).
    Merge(ModelMergeArgs),
    /// Edit a GGUF's metadata (set, remove, rename keys; a chat template from a file) and
    /// its tensors (rename by regex, remove, convert to another type), the other tensors'
    /// data copied as is (docs/surgery.md).
    Meta(MetaArgs),
    /// Denoise tensors (spectral FFT or fractal Haar, docs/purify.md), keeping each one's
    /// mean, std and type, and write the model with organ.purify.* metadata.
    Purify(PurifyArgs),
    /// Perplexity of a model on a text and, with --base, its KL divergence from the base
    /// and top-token agreement, measured by llama.cpp's llama-perplexity (docs/judge.md).
    Eval(EvalArgs),
    /// Per-tensor sensitivity, measured: for each tensor, the KL divergence (llama.cpp's
    /// llama-perplexity) of the model with that tensor alone requantized (--to) or ablated
    /// (--ablate) from the unchanged model (docs/sensitivity.md). Resumable.
    Sensitivity(SensitivityArgs),
    /// Choose a type per tensor to minimise the predicted KL divergence within a size
    /// budget, write llama-quantize's --tensor-type lines, and (--apply) run it (docs/recipe.md).
    Recipe(RecipeArgs),
    /// Quantize as llama-quantize does, byte for byte, with organ's own code: its command
    /// line (IN.gguf [OUT.gguf] TYPE [THREADS], --pure, --tensor-type, …; docs/quantize.md).
    Quantize(QuantizeArgs),
    /// Serve every operation over HTTP (docs/openapi.json), and the browser app when built.
    Serve(ServeArgs),
}

#[derive(Subcommand, Debug, Clone, PartialEq)]
pub enum ReportCommand {
    /// The report of shards' results: a fleet's tables and ranking from what `organ
    /// measure --fleet … --results RESULTS` wrote (what `organ measure DIR` prints and
    /// writes for the same models), or a sensitivity sweep's report from what `organ
    /// sensitivity … --shard I/N --results RESULTS` wrote (what one machine's run writes).
    Merge(MergeArgs),
}

/// How a command that did not fail ends.
pub enum Exit {
    /// Status 0.
    Done,
    /// `diff --fail-on-change` found a change, or `check` an error finding: status 1.
    Changed,
}

impl Command {
    /// The status an error exits with: `diff --fail-on-change` exits 1 for "changed", so
    /// its errors take 2, as diff(1)'s do; so do `check`'s, which exits 1 for "broken".
    /// Every other error exits 1.
    pub fn error_status(&self) -> i32 {
        match self {
            Command::Diff(DiffArgs { fail_on_change: true, .. }) | Command::Check(_) => 2,
            _ => 1,
        }
    }
}

/// Runs the command `cli` names, its global flags applied first; `organ serve` by `serve`
/// (`organ_cli::serve::run_args`, handed in by main: the server depends on this module
/// for its children's argv, so this one does not name it).
pub fn run(cli: Cli, serve: fn(&ServeArgs) -> Result<()>) -> Result<Exit> {
    cli.global.apply();
    if let Command::Serve(a) = &cli.command {
        serve(a)?;
        return Ok(Exit::Done);
    }
    let mut stdout = std::io::BufWriter::new(std::io::stdout().lock());
    let exit = run_command(&cli.command, &mut stdout)?;
    stdout.flush()?;
    Ok(exit)
}

/// Runs `command` as `organ` does, what it prints on stdout written to `text` instead:
/// the binary's path and the Python module's (which parses an argv with [`Cli`] and
/// runs the command here, so that its functions take the CLI's flags, defaults and
/// checks, and nothing else). `organ serve` is not run here.
///
/// # Errors
/// The command's; `serve`, which has no place here.
pub fn run_command(command: &Command, text: &mut dyn Write) -> Result<Exit> {
    let mut out = Out { stdout: text, sink: std::io::sink() };
    let out = &mut out;
    Ok(match command {
        Command::Inspect(a) => inspect::run(a, out)?,
        Command::Measure(a) => measure::run(a, out)?,
        Command::Report { what: ReportCommand::Merge(a) } => measure::merge(a, out)?,
        Command::Diff(a) => diff::run(a, out)?,
        Command::Check(a) => check::run(a, out)?,
        Command::Dissect(a) => dissect::run(a, out)?,
        Command::Assemble(a) => assemble::run(a, out)?,
        Command::Graft(a) => graft::run(a, out)?,
        Command::Experts { op } => experts::run(op, out)?,
        Command::Layers(a) => layers::run(a, out)?,
        Command::Lora { op } => lora::run(op, out)?,
        Command::Moe(a) => moe::run(a, out)?,
        Command::Merge(a) => merge::run(a, out)?,
        Command::Meta(a) => meta::run(a, out)?,
        Command::Purify(a) => purify::run(a, out)?,
        Command::Eval(a) => eval::run(a, out)?,
        Command::Sensitivity(a) => sensitivity::run(a, out)?,
        Command::Recipe(a) => recipe::run(a, out)?,
        Command::Quantize(a) => quantize::run(a, out)?,
        Command::Serve(_) => anyhow::bail!("organ serve runs from the command line only"),
    })
}

/// Standard output, and where the text report goes when a report file is standard
/// output (`-`) instead.
pub(crate) struct Out<'a> {
    stdout: &'a mut dyn Write,
    sink: std::io::Sink,
}

impl Out<'_> {
    /// Standard output for the text report, unless one of `reports` is `-`: then the text
    /// is not printed, so that stdout holds that output alone. One output at most may be `-`.
    pub(crate) fn text(&mut self, reports: &[Option<&Path>]) -> Result<&mut dyn Write> {
        let n = reports.iter().flatten().filter(|p| crate::atomic::is_stdout(p)).count();
        if n > 1 {
            anyhow::bail!("-: {n} outputs name standard output; one at most can go there");
        }
        Ok(if n == 1 { &mut self.sink } else { &mut *self.stdout })
    }

    /// Standard output, for a command with no report file.
    pub(crate) fn stdout(&mut self) -> &mut dyn Write {
        &mut *self.stdout
    }
}

/// The cache's root when no `--cache` is given: `ORGAN_CACHE`, else `~/.cache/organ`.
pub(crate) fn cache_root() -> Option<std::path::PathBuf> {
    crate::paths::cache_root()
}

/// Before any work: records the named inputs (every shard of a split model) and checks
/// that no output would replace one, or replace anything without `--force`. The writers
/// check again when they rename their output into place.
pub(crate) fn guard(inputs: &[&Path], outputs: &[Option<&Path>], force: bool) -> Result<()> {
    for i in inputs {
        crate::input::declare(i);
        for shard in crate::paths::split_shards(i).unwrap_or_default() {
            crate::input::declare(&shard);
        }
    }
    for o in outputs.iter().flatten() {
        crate::input::check_dest(o, force)?;
    }
    Ok(())
}

/// `inputs` and `--judge`'s text, if any: the text is an input too, so that an output
/// named as it is refused before any work, not after the model is written.
pub(crate) fn with_judge<'a>(inputs: &[&'a Path], judge: &'a Option<crate::cmd::eval::Settings>) -> Vec<&'a Path> {
    inputs.iter().copied().chain(judge.as_ref().map(|s| s.text.as_path())).collect()
}

/// What a model output is: a GGUF file when it ends in `.gguf`, else an organ directory
/// (as [`crate::write::write_model`] decides). A name is refused when it ends in any
/// other extension than `.organs` (the organ-directory names of this repository's
/// examples): `pur.ggfu` is a typo, not a wish for a directory.
///
/// # Errors
/// Another extension, with the name the user likely meant.
pub(crate) fn model_output(p: &Path) -> Result<crate::input::Output> {
    match p.extension().and_then(|e| e.to_str()) {
        Some(e) if e.eq_ignore_ascii_case("gguf") => Ok(crate::input::Output::File),
        None => Ok(crate::input::Output::OrganDir),
        Some(e) if e.eq_ignore_ascii_case("organs") => Ok(crate::input::Output::OrganDir),
        _ => anyhow::bail!(
            "{}: a model is written as a GGUF file (a name ending in .gguf) or as an organ directory (a name \
             with no extension, or .organs); did you mean {}?",
            p.display(),
            p.with_extension("gguf").display()
        ),
    }
}

/// `--split-max-size SIZE` as bytes.
pub(crate) fn split_max(size: Option<&str>) -> Result<Option<u64>> {
    size.map(crate::write::parse_size).transpose()
}

#[cfg(test)]
mod tests;
