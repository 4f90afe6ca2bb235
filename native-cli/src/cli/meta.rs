//! `organ meta`: flags to [`cmd::meta::Options`].

use super::{guard, Argv, Exit, Force, Out, ToArgs};
use crate::cmd;
use anyhow::{bail, Result};
use std::path::PathBuf;

#[derive(clap::Args, Debug, Clone, Default, PartialEq)]
pub struct MetaArgs {
    /// A GGUF file; any shard of a split model (edited as one model: the first shard's
    /// header, the others copied; --out NEW.gguf gives NEW-0000i-of-0000N.gguf); or an
    /// organ directory (written as the GGUF it assembles into, with the new metadata).
    pub model: PathBuf,
    /// Give KEY this value: in its place when it exists (typed as it is, unless TYPE is
    /// given), else added last. TYPE: u8, i8, u16, i16, u32, i32, u64, i64, f32, f64,
    /// bool, str, arr[TYPE]; an array's VALUE is JSON (docs/surgery.md).
    /// TYPE is read only when it is a type's name (`general.url=http://h:8080` is a string).
    #[arg(long = "set", value_name = "KEY=VALUE[:TYPE]")]
    pub set: Vec<String>,
    /// As --set, but TYPE is required, and a name that is no type is an error.
    #[arg(long = "set-typed", value_name = "KEY=VALUE:TYPE")]
    pub set_typed: Vec<String>,
    /// Give KEY the text of FILE (tokenizer.chat_template=template.jinja), typed as the key
    /// is (a new key: a string).
    #[arg(long = "set-file", value_name = "KEY=FILE")]
    pub set_file: Vec<String>,
    /// Remove KEY.
    #[arg(long = "rm", value_name = "KEY")]
    pub rm: Vec<String>,
    /// Rename OLD to NEW, in its place.
    #[arg(long, value_name = "OLD=NEW")]
    pub rename: Vec<String>,
    /// Rename every tensor whose whole name REGEX matches (the regex crate's syntax) to
    /// REPLACEMENT ($1, ${name} for groups), in order, each on the names the last left.
    /// The tensor data is copied as it is.
    #[arg(long = "rename-tensor", value_name = "REGEX=REPLACEMENT")]
    pub rename_tensor: Vec<String>,
    /// Remove the tensor of this name, or every tensor whose whole name the regex
    /// matches: its bytes leave the data section, the others are copied as they are.
    #[arg(long = "remove-tensor", value_name = "NAME_OR_REGEX")]
    pub remove_tensor: Vec<String>,
    /// Convert the tensor(s) NAME names (a name or a regex, as --remove-tensor) to TYPE
    /// (F32, F16, BF16, Q8_0, Q4_0, Q4_K, … as organ quantize writes them): dequantized
    /// and quantized as llama-quantize --tensor-type would.
    #[arg(long = "retype-tensor", value_name = "NAME=TYPE")]
    pub retype_tensor: Vec<String>,
    /// The edited model (.gguf; must not exist, nor be the input).
    #[arg(long, required_unless_present = "in_place", conflicts_with = "in_place")]
    pub out: Option<PathBuf>,
    /// Write the new header over MODEL's own, when it keeps its exact length (as
    /// gguf_set_metadata.py does); any other edit is refused. A kill leaves the old model
    /// or the new: bytes changed within one 4 KiB page are one write, others rewrite the
    /// file through a temp file renamed over it.
    #[arg(long)]
    pub in_place: bool,
    /// Also write what was changed as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    #[command(flatten)]
    pub force: Force,
}

impl<'a> TryFrom<&'a MetaArgs> for cmd::meta::Options<'a> {
    type Error = anyhow::Error;

    fn try_from(a: &'a MetaArgs) -> Result<Self> {
        let pair = |flag: &str, spec: &'a str, what: &str| -> Result<(&'a str, &'a str)> {
            match spec.split_once('=') {
                Some((k, v)) if !k.is_empty() && !v.is_empty() => Ok((k, v)),
                _ => bail!("{flag} {spec:?}: expected {what}"),
            }
        };
        let set_file = a
            .set_file
            .iter()
            .map(|s| pair("--set-file", s, "KEY=FILE").map(|(k, f)| (k, std::path::Path::new(f))))
            .collect::<Result<_>>()?;
        let rename = a.rename.iter().map(|s| pair("--rename", s, "OLD=NEW")).collect::<Result<_>>()?;
        use organ_core::surgery::meta::TensorEdit;
        let tensors = (a.remove_tensor.iter().map(|s| TensorEdit::remove(s)))
            .chain(a.retype_tensor.iter().map(|s| TensorEdit::retype(s)))
            .chain(a.rename_tensor.iter().map(|s| TensorEdit::rename(s)))
            .collect::<organ_core::Result<Vec<_>>>()?;
        let target = match (&a.out, a.in_place) {
            (Some(out), false) => {
                if !out.extension().is_some_and(|e| e.eq_ignore_ascii_case("gguf")) {
                    bail!("{}: organ meta writes a GGUF file, a name ending in .gguf", out.display());
                }
                cmd::meta::Target::Out(out)
            }
            (None, true) => cmd::meta::Target::InPlace,
            _ => bail!("give --out NEW.gguf, or --in-place"),
        };
        Ok(cmd::meta::Options {
            model: &a.model,
            set: a.set.iter().map(String::as_str).collect(),
            set_typed: a.set_typed.iter().map(String::as_str).collect(),
            set_file,
            rm: a.rm.iter().map(String::as_str).collect(),
            rename,
            tensors,
            target,
            json: a.json.as_deref(),
            force: a.force.force,
        })
    }
}

pub(super) fn run(a: &MetaArgs, out: &mut Out) -> Result<Exit> {
    let o = cmd::meta::Options::try_from(a)?;
    let model_out = match o.target {
        cmd::meta::Target::Out(p) => Some(p),
        cmd::meta::Target::InPlace => None,
    };
    let files: Vec<&std::path::Path> = o.set_file.iter().map(|(_, f)| *f).collect();
    let inputs: Vec<&std::path::Path> = std::iter::once(o.model).chain(files).collect();
    guard(&inputs, &[model_out, o.json], o.force)?;
    cmd::meta::run(&o, out.text(&[o.json])?)?;
    Ok(Exit::Done)
}

impl ToArgs for MetaArgs {
    fn to_args(&self, a: &mut Argv) {
        a.arg("meta")
            .arg(&self.model)
            .each("--set", &self.set)
            .each("--set-typed", &self.set_typed)
            .each("--set-file", &self.set_file)
            .each("--rm", &self.rm)
            .each("--rename", &self.rename)
            .each("--rename-tensor", &self.rename_tensor)
            .each("--remove-tensor", &self.remove_tensor)
            .each("--retype-tensor", &self.retype_tensor)
            .opt("--out", self.out.as_ref())
            .switch("--in-place", self.in_place)
            .opt("--json", self.json.as_ref())
            .flags(&self.force);
    }
}
