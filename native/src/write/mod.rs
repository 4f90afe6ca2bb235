//! Writing models: a GGUF file ([`gguf`]), a split GGUF ([`gguf_split`]) or an organ
//! directory ([`organ_dir`]), always through a temp entry in the destination's directory
//! that is renamed into place only when complete ([`crate::atomic`]). Inputs are only ever
//! read, and never replaced.

pub mod copy;
pub mod gguf;
pub mod gguf_split;
pub mod made;
pub mod organ_dir;
pub mod pieces;

pub use copy::copy_range;
pub use gguf::{plan_gguf, stage_gguf, write_gguf};
pub use gguf_split::{parse_size, stage_gguf_split, write_gguf_split};
pub use made::{write_made, Made};
pub use organ_dir::{file_name, group_dir, write_dir};

use crate::model::Model;
use anyhow::Result;
use organ_core::model::manifest;
use std::io::Write;
use std::path::Path;

/// Writes `model` to `out`: a GGUF if `out` ends in `.gguf` (split into shards of at most
/// `split_max` bytes of data when given), else an organ directory whose manifest names
/// `source` as where it came from (by its BLAKE3, [`Model::fingerprint`]).
pub fn write_model(
    model: &Model,
    source: &Model,
    out: &Path,
    split_max: Option<u64>,
    force: bool,
    w: &mut dyn Write,
) -> Result<()> {
    let is_gguf = out.extension().is_some_and(|e| e.eq_ignore_ascii_case("gguf"));
    if let (true, Some(max)) = (is_gguf, split_max) {
        let shards = write_gguf_split(model.version, &model.kvs, &model.tensors, out, max, force)?;
        writeln!(w, "wrote {} shards: {}", shards.len(), shards[0].display())?;
    } else if is_gguf {
        let n = write_gguf(model.version, &model.kvs, &model.tensors, out, force)?;
        writeln!(w, "wrote {} ({n} bytes)", out.display())?;
    } else {
        let fp = source.fingerprint(false)?;
        let src = manifest::Source { file: source.label.clone(), bytes: 0, blake3: Some(fp.blake3), sha256: None };
        write_dir(model, move || Ok(src), false, out, force)?;
        writeln!(w, "wrote organ directory {}", out.display())?;
    }
    Ok(())
}
