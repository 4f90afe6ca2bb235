//! `organ dissect`: a GGUF into an organ directory, one file per tensor plus manifest.json.

use crate::manifest;
use crate::source::Model;
use crate::write::{group_dir, sha256_hex, write_dir};
use anyhow::{bail, Result};
use organ_core::anatomy::{classify, Group};
use std::io::Write;
use std::path::Path;

pub fn run(model: &Path, out: &Path, measure: bool, w: &mut dyn Write) -> Result<()> {
    if model.is_dir() {
        bail!(
            "{}: already an organ directory (assemble it to get a GGUF)",
            model.display()
        );
    }
    let m = Model::from_gguf(model)?;
    let file = crate::model::ModelFile::open(model)?;
    let source = manifest::Source {
        file: m.label.clone(),
        sha256: sha256_hex(&file.bytes),
        bytes: file.bytes.len() as u64,
    };
    write_dir(&m, source, measure, out)?;
    let mut counts = std::collections::BTreeMap::new();
    for t in &m.tensors {
        *counts.entry(classify(&t.name).group).or_insert(0) += 1;
    }
    let parts: Vec<String> = Group::ALL
        .iter()
        .filter_map(|g| counts.get(g).map(|n| format!("{} {n}", group_dir(*g))))
        .collect();
    writeln!(
        w,
        "dissected {} tensors of {} into {}: {}",
        m.tensors.len(),
        m.label,
        out.display(),
        parts.join(", ")
    )?;
    Ok(())
}
