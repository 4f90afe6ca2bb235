//! `organ dissect`: a GGUF into an organ directory, one file per tensor plus manifest.json.

use crate::model::Model;
use crate::write::{group_dir, write_dir};
use anyhow::{bail, Result};
use organ_core::anatomy::{classify, Group};
use organ_core::model::manifest;
use std::io::Write;
use std::path::Path;

pub struct Options<'a> {
    /// The GGUF (any shard of a split model).
    pub model: &'a Path,
    /// The organ directory to write.
    pub out: &'a Path,
    /// Record each tensor's θ in the manifest.
    pub measure: bool,
    /// Record the source's sha256 as well as its BLAKE3.
    pub sha256: bool,
    /// Replace an output that exists (never an input).
    pub force: bool,
}

/// Organ files dissect writes whatever the model's size: each takes a block of disk (4 KiB)
/// and an entry in the manifest, so these cost at most 64 MiB of disk beyond the data.
pub const FREE_ORGAN_FILES: u64 = 1 << 14;
/// Past [`FREE_ORGAN_FILES`], a model needs this many bytes of tensor data per tensor on
/// average: the files' overhead then stays under the data's size, and disk use grows
/// linearly with the input (a file of many tiny tensors would otherwise turn a few MB into
/// GBs of near-empty files).
pub const MIN_BYTES_PER_ORGAN_FILE: u64 = 4096;

/// Refuses a model whose organ files would take far more disk than its data.
fn check_file_count(m: &Model) -> Result<()> {
    let n = m.tensors.len() as u64;
    let data = m.tensors.iter().map(|t| t.n_bytes).fold(0u64, u64::saturating_add);
    let allowed = FREE_ORGAN_FILES.max(data / MIN_BYTES_PER_ORGAN_FILE);
    if n > allowed {
        bail!(
            "{}: {n} tensors holding {data} bytes of data; dissect writes one file per tensor and takes at most \
             {FREE_ORGAN_FILES} files, or one per {MIN_BYTES_PER_ORGAN_FILE} bytes of data ({allowed} here)",
            m.path.display()
        );
    }
    Ok(())
}

pub fn run(o: &Options<'_>, w: &mut dyn Write) -> Result<()> {
    let (model, out) = (o.model, o.out);
    if model.is_dir() {
        bail!("{}: already an organ directory (assemble it to get a GGUF)", model.display());
    }
    let m = Model::open_fetched(model)?;
    check_file_count(&m)?;
    // The source's identity: the BLAKE3 of its bytes (of every shard's, in order, for a
    // split model), and its sha256 only when asked for. It is computed while the organ
    // files are written.
    let source = || {
        let fp = m.fingerprint(o.sha256)?;
        Ok(manifest::Source { file: m.label.clone(), bytes: fp.bytes, blake3: Some(fp.blake3), sha256: fp.sha256 })
    };
    write_dir(&m, source, o.measure, out, o.force)?;
    let mut counts = std::collections::BTreeMap::new();
    for t in &m.tensors {
        *counts.entry(classify(&t.name).group).or_insert(0) += 1;
    }
    let parts: Vec<String> =
        Group::ALL.iter().filter_map(|g| counts.get(g).map(|n| format!("{} {n}", group_dir(*g)))).collect();
    writeln!(w, "dissected {} tensors of {} into {}: {}", m.tensors.len(), m.label, out.display(), parts.join(", "))?;
    Ok(())
}
