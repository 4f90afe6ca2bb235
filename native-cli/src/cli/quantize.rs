//! `organ quantize`: llama-quantize's command line (build 11434) to
//! [`cmd::quantize::Options`].

use super::{guard, Exit, Force, Out};
use crate::cmd;
use crate::cmd::quantize::Flags;
use anyhow::{anyhow, bail, Result};
use organ_core::quantize::Ftype;
use std::path::{Path, PathBuf};

/// `organ quantize [OPTIONS] IN.gguf [OUT.gguf] TYPE [THREADS]`.
#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct QuantizeArgs {
    /// IN.gguf [OUT.gguf] TYPE [THREADS], as llama-quantize takes them: without OUT the
    /// result is ggml-model-TYPE.gguf beside IN. TYPE is a name llama-quantize lists
    /// (Q4_K_M, IQ4_NL, Q8_0, F16, …) or its number.
    #[arg(num_args = 2..=4, required = true, value_name = "ARGS")]
    pub args: Vec<String>,
    /// An importance matrix (the GGUF llama-imatrix writes): the quantizers weigh each
    /// value's error by it, as llama-quantize's do, and the mixes change where they read it.
    #[arg(long, value_name = "FILE")]
    pub imatrix: Option<PathBuf>,
    /// Use the importance matrix only for tensors whose name contains NAME. May be repeated.
    #[arg(long, value_name = "NAME", requires = "imatrix")]
    pub include_weights: Vec<String>,
    /// Do not use the importance matrix for tensors whose name contains NAME. May be repeated.
    #[arg(long, value_name = "NAME", requires = "imatrix", conflicts_with = "include_weights")]
    pub exclude_weights: Vec<String>,
    /// Allow requantizing tensors that are already quantized.
    #[arg(long)]
    pub allow_requantize: bool,
    /// Leave output.weight as it is.
    #[arg(long)]
    pub leave_output_tensor: bool,
    /// No mix: every quantized tensor in TYPE's default type.
    #[arg(long)]
    pub pure: bool,
    /// The type of output.weight.
    #[arg(long, value_name = "TYPE")]
    pub output_tensor_type: Option<String>,
    /// The type of the token embeddings.
    #[arg(long, value_name = "TYPE")]
    pub token_embedding_type: Option<String>,
    /// PATTERN=TYPE: tensors whose name the regular expression PATTERN is found in take
    /// TYPE (the first pattern found wins). May be repeated.
    #[arg(long, value_name = "PATTERN=TYPE")]
    pub tensor_type: Vec<String>,
    /// A file of PATTERN=TYPE words, separated by spaces or newlines (organ recipe --out
    /// writes one).
    #[arg(long, value_name = "FILE")]
    pub tensor_type_file: Option<PathBuf>,
    /// Print each tensor's type and the sizes; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub force: Force,
}

/// The positional arguments: input, output, file type, threads.
fn positional(args: &[String], dry_run: bool) -> Result<(PathBuf, PathBuf, Ftype, Option<usize>)> {
    let input = PathBuf::from(&args[0]);
    let (output, rest) = match Ftype::parse(&args[1]) {
        Some(f) => {
            let dir = input.parent().unwrap_or(Path::new(""));
            (dir.join(format!("ggml-model-{}.gguf", f.name())), &args[1..])
        }
        None if rest_ftype(&args[2..]).is_some() => (PathBuf::from(&args[1]), &args[2..]),
        None if args.len() == 2 && !dry_run => bail!("missing TYPE (IN.gguf [OUT.gguf] TYPE [THREADS])"),
        None => {
            bail!("invalid TYPE {:?}: give one llama-quantize lists (Q4_K_M, Q8_0, …)", args.get(2).unwrap_or(&args[1]))
        }
    };
    let ftype = Ftype::parse(&rest[0]).ok_or_else(|| anyhow!("invalid TYPE {:?}", rest[0]))?;
    let threads = match rest.get(1) {
        Some(t) => Some(t.parse::<usize>().ok().filter(|&n| n > 0).ok_or_else(|| anyhow!("invalid THREADS {t:?}"))?),
        None => None,
    };
    if rest.len() > 2 {
        bail!("unexpected argument {:?} after THREADS", rest[2]);
    }
    Ok((input, output, ftype, threads))
}

fn rest_ftype(rest: &[String]) -> Option<Ftype> {
    rest.first().and_then(|s| Ftype::parse(s))
}

impl QuantizeArgs {
    /// The flags as organ-native's [`Flags`].
    fn flags(&self) -> Flags<'_> {
        Flags {
            imatrix: self.imatrix.as_deref(),
            include_weights: &self.include_weights,
            exclude_weights: &self.exclude_weights,
            pure: self.pure,
            leave_output_tensor: self.leave_output_tensor,
            allow_requantize: self.allow_requantize,
            dry_run: self.dry_run,
            output_tensor_type: self.output_tensor_type.as_deref(),
            token_embedding_type: self.token_embedding_type.as_deref(),
            tensor_types: &self.tensor_type,
            tensor_type_file: self.tensor_type_file.as_deref(),
        }
    }
}

pub(super) fn run(a: &QuantizeArgs, out: &mut Out) -> Result<Exit> {
    let (input, output, ftype, threads) = positional(&a.args, a.dry_run)?;
    let params = cmd::quantize::params(ftype, &a.flags())?;
    let outputs = if a.dry_run { [None] } else { [Some(output.as_path())] };
    guard(&[&input], &outputs, a.force.force)?;
    let o = cmd::quantize::Options { input: &input, output: &output, params, force: a.force.force, threads };
    cmd::quantize::run(&o, out.stdout())?;
    Ok(Exit::Done)
}
