//! llama-quantize's command line, built in one place for every caller (`recipe --apply`,
//! sensitivity's donors), with organ's files handed open ([`Handed`]).

use super::Handed;
use std::path::Path;
use std::process::Command;

/// Where llama-quantize writes.
pub enum Output<'a> {
    /// A file organ created and hands open.
    Handed(&'a Handed),
    /// A temp name organ renames once the tool succeeded.
    Path(&'a Path),
}

/// One llama-quantize run: `[--allow-requantize] [--pure] [--tensor-type-file F]
/// [--imatrix I] MODEL OUT FTYPE`.
pub struct Quantize<'a> {
    /// Requantize tensors that are quantized already.
    pub allow_requantize: bool,
    /// Every tensor in the type (`--pure`), none of the preset's mix.
    pub pure: bool,
    /// Per-tensor types: `NAME=TYPE` lines.
    pub tensor_type_file: Option<&'a Handed>,
    /// An importance matrix.
    pub imatrix: Option<&'a Handed>,
    /// The model.
    pub model: &'a Handed,
    pub out: Output<'a>,
    /// The preset or type, as llama-quantize names it.
    pub ftype: &'a str,
}

impl Quantize<'_> {
    /// The command for `tool`, inheriting every file handed.
    pub fn command(&self, tool: &Path) -> Command {
        let mut c = Command::new(tool);
        if self.allow_requantize {
            c.arg("--allow-requantize");
        }
        if self.pure {
            c.arg("--pure");
        }
        if let Some(f) = self.tensor_type_file {
            c.arg("--tensor-type-file").arg(&f.arg);
        }
        if let Some(i) = self.imatrix {
            c.arg("--imatrix").arg(&i.arg);
        }
        c.arg(&self.model.arg);
        let mut handed = vec![self.model];
        match self.out {
            Output::Handed(h) => {
                c.arg(&h.arg);
                handed.push(h);
            }
            Output::Path(p) => {
                c.arg(p);
            }
        }
        c.arg(self.ftype);
        handed.extend(self.tensor_type_file.into_iter().chain(self.imatrix));
        super::inherit(&mut c, &handed);
        c
    }
}
