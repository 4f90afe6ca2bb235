//! `organ recipe`: flags to [`cmd::recipe::Options`].

use super::{guard, Argv, Exit, Force, Out, ToArgs};
use crate::cmd;
use crate::cmd::recipe::{Apply, SourceSpec};
use crate::llama_cpp::perplexity::Offload;
use anyhow::{bail, Result};
use organ_core::recipe::Target;
use std::path::PathBuf;

#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct RecipeArgs {
    /// The GGUF model to requantize (an F16 or BF16 one, usually).
    pub model: PathBuf,
    /// Bits per weight: total tensor bits / total elements of the model (tensor data only,
    /// as llama-quantize prints its BPW).
    #[arg(long, value_name = "B", required_unless_present = "target_size", conflicts_with = "target_size")]
    pub target_bpw: Option<f64>,
    /// The output file's size in bytes, header included (K, M, G suffixes: powers of 1024).
    #[arg(long, value_name = "SIZE")]
    pub target_size: Option<String>,
    /// A sensitivity report (organ sensitivity --to TYPE --json): each tensor's KL
    /// divergence when it alone is requantized to TYPE. One per candidate type; with
    /// --imatrix or --data-free, the other types are predicted and scaled per tensor by it.
    #[arg(long = "from", value_name = "SENS.json", required_unless_present_any = ["imatrix", "data_free"])]
    pub from: Vec<PathBuf>,
    /// Predict the curves from this importance matrix (llama-imatrix's GGUF output) instead
    /// of measuring them; --apply quantizes with it too.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["data_free", "imatrix_file"])]
    pub imatrix: Option<PathBuf>,
    /// Predict the curves from the weights alone (no text at all; docs/predict.md).
    #[arg(long)]
    pub data_free: bool,
    /// With --imatrix or --data-free: the candidate types (comma-separated; default Q2_K,
    /// Q3_K, Q4_K, Q5_K, Q6_K, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q8_0). Q8_0 is always one.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub types: Vec<String>,
    /// Write the --tensor-type lines (for llama-quantize --tensor-type-file).
    #[arg(long, value_name = "RECIPE")]
    pub out: Option<PathBuf>,
    /// Write the table as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Quantize MODEL with the recipe (organ's quantizer, llama-quantize's bytes), writing
    /// this GGUF.
    #[arg(long, value_name = "OUT.gguf")]
    pub apply: Option<PathBuf>,
    /// The importance matrix --apply quantizes with (also allows the i-quants that need one).
    #[arg(long, value_name = "FILE", requires = "apply")]
    pub imatrix_file: Option<PathBuf>,
    /// With --apply: have llama-quantize write the recipe too, and fail unless its bytes
    /// are organ's (but for the importance matrix's path in the header).
    #[arg(long, requires = "apply")]
    pub check_with_llama_quantize: bool,
    /// After --apply, evaluate the output against MODEL on this held-out text.
    #[arg(long, value_name = "HELDOUT", requires = "apply")]
    pub text: Option<PathBuf>,
    /// --text's context, in tokens.
    #[arg(long, value_name = "N", default_value_t = cmd::eval::DEFAULT_CTX, requires = "text")]
    pub ctx: u32,
    /// --text: score at most this many contexts.
    #[arg(long, value_name = "N", requires = "text")]
    pub chunks: Option<u32>,
    /// --text: llama-perplexity's threads (default: its own).
    #[arg(long, value_name = "N", requires = "text")]
    pub threads: Option<u32>,
    /// --text: where llama-perplexity runs (--gpu-layers, --device).
    #[command(flatten)]
    pub offload: Offload,
    /// llama.cpp's bin directory (default: ORGAN_LLAMA_CPP, then PATH).
    #[arg(long, value_name = "DIR")]
    pub llama_cpp: Option<PathBuf>,
    #[command(flatten)]
    pub force: Force,
}

impl RecipeArgs {
    /// `recipe MODEL` with every other flag at its default (give it a target and a curve
    /// source before it parses).
    pub fn new(model: PathBuf) -> RecipeArgs {
        RecipeArgs {
            model,
            target_bpw: None,
            target_size: None,
            from: Vec::new(),
            imatrix: None,
            data_free: false,
            types: Vec::new(),
            out: None,
            json: None,
            apply: None,
            imatrix_file: None,
            check_with_llama_quantize: false,
            text: None,
            ctx: cmd::eval::DEFAULT_CTX,
            chunks: None,
            threads: None,
            offload: Offload::default(),
            llama_cpp: None,
            force: Force::default(),
        }
    }
}

impl<'a> TryFrom<&'a RecipeArgs> for cmd::recipe::Options<'a> {
    type Error = anyhow::Error;

    fn try_from(a: &'a RecipeArgs) -> Result<Self> {
        if a.text.is_none() && a.offload != Offload::default() {
            bail!("--gpu-layers and --device say where --text's evaluation runs: give --text");
        }
        let target = match (a.target_bpw, &a.target_size) {
            (Some(b), None) if b.is_finite() && b > 0.0 && b <= 64.0 => Target::Bpw(b),
            (Some(b), None) => bail!("--target-bpw {b}: give bits per weight above 0, at most 64"),
            (None, Some(s)) => Target::Size(crate::write::parse_size(s).map_err(|e| e.context("--target-size"))?),
            _ => bail!("give one of --target-bpw and --target-size"),
        };
        let apply = a.apply.as_deref().map(|out| Apply {
            out,
            imatrix: a.imatrix.as_deref().or(a.imatrix_file.as_deref()),
            check_with_llama_quantize: a.check_with_llama_quantize,
            eval: a.text.as_ref().map(|text| crate::llama_cpp::perplexity::Settings {
                text: text.clone(),
                ctx: a.ctx,
                threads: a.threads,
                chunks: a.chunks,
                llama_cpp: a.llama_cpp.clone(),
                adapters: Default::default(),
                offload: a.offload.clone(),
                // The recipe's output is evaluated once, against a model it was just made
                // from: nothing to reuse.
                logits_cache: Default::default(),
            }),
            llama_cpp: a.llama_cpp.as_deref(),
        });
        if let Some(s) = apply.as_ref().and_then(|a| a.eval.as_ref()) {
            crate::llama_cpp::perplexity::check_inputs(&a.model, s)?;
        }
        Ok(cmd::recipe::Options {
            model: &a.model,
            target,
            source: match (a.from.is_empty(), a.imatrix.is_some() || a.data_free) {
                (true, _) => SourceSpec::Predicted { imatrix: a.imatrix.clone(), types: candidate_types(&a.types)? },
                (false, true) => SourceSpec::Anchored {
                    from: a.from.clone(),
                    imatrix: a.imatrix.clone(),
                    types: candidate_types(&a.types)?,
                },
                (false, false) if !a.types.is_empty() => {
                    bail!("--types names the predicted types: give --imatrix or --data-free with --from, or drop it")
                }
                (false, false) => SourceSpec::Measured(a.from.clone()),
            },
            out: a.out.as_deref(),
            json: a.json.as_deref(),
            apply,
            force: a.force.force,
        })
    }
}

/// `--types`: the names given, as types organ predicts (none given: the default list).
fn candidate_types(names: &[String]) -> Result<Vec<organ_core::GgmlType>> {
    organ_core::recipe::predicted::candidate_types(names).map_err(|e| anyhow::anyhow!("--types {e}"))
}

pub(super) fn run(a: &RecipeArgs, out: &mut Out) -> Result<Exit> {
    let o = cmd::recipe::Options::try_from(a)?;
    let mut inputs = vec![o.model];
    inputs.extend(a.from.iter().map(PathBuf::as_path));
    inputs.extend([a.imatrix.as_deref(), a.imatrix_file.as_deref(), a.text.as_deref()].into_iter().flatten());
    let outputs = [o.out, o.json, a.apply.as_deref()];
    guard(&inputs, &outputs, o.force)?;
    cmd::recipe::run(&o, out.text(&[o.out, o.json])?)?;
    Ok(Exit::Done)
}

impl ToArgs for RecipeArgs {
    fn to_args(&self, a: &mut Argv) {
        a.arg("recipe")
            .arg(&self.model)
            .number("--target-bpw", self.target_bpw)
            .opt("--target-size", self.target_size.as_ref())
            .each("--from", &self.from)
            .opt("--imatrix", self.imatrix.as_ref())
            .switch("--data-free", self.data_free)
            .each("--types", &self.types)
            .opt("--out", self.out.as_ref())
            .opt("--json", self.json.as_ref())
            .opt("--apply", self.apply.as_ref())
            .opt("--imatrix-file", self.imatrix_file.as_ref())
            .switch("--check-with-llama-quantize", self.check_with_llama_quantize);
        // --ctx and --chunks require --text.
        if self.text.is_some() {
            a.opt("--text", self.text.as_ref()).number("--ctx", Some(self.ctx)).number("--chunks", self.chunks);
            a.number("--threads", self.threads).flags(&self.offload);
        }
        a.opt("--llama-cpp", self.llama_cpp.as_ref()).flags(&self.force);
    }
}
