//! `organ quantize`: llama-quantize's command line (build 11434) to
//! [`cmd::quantize::Options`].

use super::{guard, Argv, Exit, Force, Out, Quantization, ReportFiles, ToArgs};
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
    /// KEY=TYPE:VALUE (TYPE int, float, bool or str): set KEY in the result's header (the
    /// mix's rules read it too, as llama.cpp's loader does). May be repeated.
    #[arg(long, value_name = "KEY=TYPE:VALUE")]
    pub override_kv: Vec<String>,
    /// L0,L1,...: remove these layers; the layers after them are renumbered and the block
    /// count set to what is left.
    #[arg(long, value_name = "LIST")]
    pub prune_layers: Option<String>,
    /// Write a shard for each of IN's (a model not split: one), named
    /// OUT-0000i-of-0000N.gguf, the tensors in IN's order.
    #[arg(long)]
    pub keep_split: bool,
    /// Print each tensor's type and the sizes; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub reports: ReportFiles<Quantization>,
    #[command(flatten)]
    pub force: Force,
}

/// The positional arguments: input, output, file type, threads. Without OUT, the output is
/// `ggml-model-TYPE.gguf` beside IN (the shards' prefix `ggml-model-TYPE` with
/// `keep_split`).
fn positional(args: &[String], dry_run: bool, keep_split: bool) -> Result<(PathBuf, PathBuf, Ftype, Option<usize>)> {
    let input = PathBuf::from(&args[0]);
    let (output, rest) = match Ftype::parse(&args[1]) {
        Some(f) => {
            let dir = input.parent().unwrap_or(Path::new(""));
            let suffix = if keep_split { "" } else { ".gguf" };
            (dir.join(format!("ggml-model-{}{suffix}", f.name())), &args[1..])
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
            override_kv: &self.override_kv,
            prune_layers: self.prune_layers.as_deref(),
            keep_split: self.keep_split,
        }
    }
}

pub(super) fn run(a: &QuantizeArgs, out: &mut Out) -> Result<Exit> {
    let (input, output, ftype, threads) = positional(&a.args, a.dry_run, a.keep_split)?;
    let params = cmd::quantize::params(ftype, &a.flags())?;
    let mut outputs = a.reports.paths();
    // With --keep-split OUT names the shards, each checked as it is written.
    if !a.dry_run && !a.keep_split {
        outputs.push(Some(output.as_path()));
    }
    guard(&[&input], &outputs, a.force.force)?;
    let o = cmd::quantize::Options {
        input: &input,
        output: &output,
        params,
        force: a.force.force,
        threads,
        reports: a.reports.files.clone(),
    };
    cmd::quantize::run(&o, out.stdout())?;
    Ok(Exit::Done)
}

impl ToArgs for QuantizeArgs {
    fn to_args(&self, a: &mut Argv) {
        // The positional arguments first, as every command's argv has them (the server
        // appends its own flags after the command's): paths the server gives are absolute,
        // so none starts with `-`.
        a.arg("quantize");
        for x in &self.args {
            a.arg(x);
        }
        a.opt("--imatrix", self.imatrix.as_ref())
            .each("--include-weights", &self.include_weights)
            .each("--exclude-weights", &self.exclude_weights)
            .switch("--allow-requantize", self.allow_requantize)
            .switch("--leave-output-tensor", self.leave_output_tensor)
            .switch("--pure", self.pure)
            .opt("--output-tensor-type", self.output_tensor_type.as_ref())
            .opt("--token-embedding-type", self.token_embedding_type.as_ref())
            .each("--tensor-type", &self.tensor_type)
            .opt("--tensor-type-file", self.tensor_type_file.as_ref())
            .each("--override-kv", &self.override_kv)
            .opt("--prune-layers", self.prune_layers.as_ref())
            .switch("--keep-split", self.keep_split)
            .switch("--dry-run", self.dry_run)
            .flags(&self.reports)
            .flags(&self.force);
    }
}

impl QuantizeArgs {
    /// `quantize IN OUT TYPE` with every flag at its default.
    pub fn new(input: String, output: String, ftype: String) -> QuantizeArgs {
        QuantizeArgs {
            args: vec![input, output, ftype],
            imatrix: None,
            include_weights: Vec::new(),
            exclude_weights: Vec::new(),
            allow_requantize: false,
            leave_output_tensor: false,
            pure: false,
            output_tensor_type: None,
            token_embedding_type: None,
            tensor_type: Vec::new(),
            tensor_type_file: None,
            override_kv: Vec::new(),
            prune_layers: None,
            keep_split: false,
            dry_run: false,
            reports: ReportFiles::default(),
            force: Force::default(),
        }
    }

    /// The flags checked as the command checks them, without reading any file (the
    /// importance matrix, a tensor-type file): a bad type, pattern, override or layer list.
    ///
    /// # Errors
    /// What the command would refuse first.
    pub fn check_flags(&self) -> Result<()> {
        let (_, _, ftype, _) = positional(&self.args, self.dry_run, self.keep_split)?;
        let flags =
            Flags { imatrix: None, include_weights: &[], exclude_weights: &[], tensor_type_file: None, ..self.flags() };
        cmd::quantize::params(ftype, &flags)?;
        if !self.include_weights.is_empty() && !self.exclude_weights.is_empty() {
            bail!("--include-weights and --exclude-weights cannot be used together");
        }
        Ok(())
    }
}
