//! `organ dissect`: a GGUF into an organ directory, one file per tensor plus manifest.json.

use crate::model::Model;
use crate::write::{group_dir, write_dir};
use anyhow::{bail, Result};
use organ_core::anatomy::{classify, Group};
use organ_core::model::manifest;
use sha2::Digest;
use std::io::Write;
use std::path::Path;

pub fn run(model: &Path, out: &Path, measure: bool, force: bool, w: &mut dyn Write) -> Result<()> {
    if model.is_dir() {
        bail!("{}: already an organ directory (assemble it to get a GGUF)", model.display());
    }
    let m = Model::open(model)?;
    // The source's fingerprint: the file's sha256; for a split model, that of its shards
    // read one after the other. It is computed while the organ files are written.
    let files: Vec<std::path::PathBuf> = if m.shards.is_empty() { vec![model.to_owned()] } else { m.shards.clone() };
    let fingerprint = || -> Result<(String, u64)> {
        let mut h = sha2::Sha256::new();
        let mut bytes = 0u64;
        for f in &files {
            let f = crate::model_file::ModelFile::open(f)?;
            h.update(&f.bytes[..]);
            bytes += f.bytes.len() as u64;
        }
        Ok((crate::write::hex(&h.finalize()), bytes))
    };
    let source = |(sha256, bytes): (String, u64)| manifest::Source { file: m.label.clone(), sha256, bytes };
    write_dir(&m, move || fingerprint().map(source), measure, out, force)?;
    let mut counts = std::collections::BTreeMap::new();
    for t in &m.tensors {
        *counts.entry(classify(&t.name).group).or_insert(0) += 1;
    }
    let parts: Vec<String> =
        Group::ALL.iter().filter_map(|g| counts.get(g).map(|n| format!("{} {n}", group_dir(*g)))).collect();
    writeln!(w, "dissected {} tensors of {} into {}: {}", m.tensors.len(), m.label, out.display(), parts.join(", "))?;
    Ok(())
}
