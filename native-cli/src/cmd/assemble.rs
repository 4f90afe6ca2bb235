//! `organ assemble`: an organ directory back into one GGUF, checking every organ file
//! against the sha256 its manifest recorded.

use crate::source::Model;
use crate::write::{sha256_hex, write_gguf};
use anyhow::{bail, Context, Result};
use rayon::prelude::*;
use std::io::Write;
use std::path::Path;

pub fn run(dir: &Path, out: &Path, split_max: Option<u64>, w: &mut dyn Write) -> Result<()> {
    let m = Model::from_dir(dir)?;
    // Read again for the sha256s, through the same checks (Model::from_dir has just passed them).
    let mpath = dir.join("manifest.json");
    let text = std::fs::read(&mpath).with_context(|| format!("{}: cannot read", mpath.display()))?;
    let manifest =
        crate::manifest::parse(&text).with_context(|| format!("{}: not a valid manifest", mpath.display()))?;
    drop(text);
    // Every organ file must be what dissect wrote (or what a graft recorded).
    let bad: Vec<String> = m
        .tensors
        .par_iter()
        .zip(&manifest.tensors)
        .filter(|(t, e)| sha256_hex(&t.data.file.bytes) != e.sha256)
        .map(|(t, e)| format!("{} ({})", e.file, t.name))
        .collect();
    if !bad.is_empty() {
        bail!("{}: {} organ files differ from their manifest sha256: {}", dir.display(), bad.len(), bad.join(", "));
    }
    if let Some(max) = split_max {
        let shards = crate::write::write_gguf_split(m.version, &m.kvs, &m.tensors, out, max)
            .with_context(|| format!("assembling {}", dir.display()))?;
        writeln!(
            w,
            "assembled {} tensors from {} into {} shards: {}",
            m.tensors.len(),
            dir.display(),
            shards.len(),
            shards[0].display()
        )?;
        return Ok(());
    }
    let n = write_gguf(m.version, &m.kvs, &m.tensors, out).with_context(|| format!("assembling {}", dir.display()))?;
    writeln!(w, "assembled {} tensors from {} into {} ({n} bytes)", m.tensors.len(), dir.display(), out.display())?;
    Ok(())
}
