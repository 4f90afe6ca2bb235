//! `organ assemble`: an organ directory back into one GGUF (or a split set). Every organ
//! file is checked against the digest its manifest recorded
//! ([`crate::model::organ_dir::Digests::check`]) while the output is written to its temp path;
//! the output is renamed into place only if every file matched, and removed otherwise.

use crate::write::{stage_gguf, stage_gguf_split};
use anyhow::{Context, Result};
use std::io::Write;
use std::path::Path;

pub fn run(dir: &Path, out: &Path, split_max: Option<u64>, force: bool, w: &mut dyn Write) -> Result<()> {
    let (m, digests) = crate::model::organ_dir::open_unchecked(dir)?;
    // The output's length, or 0 for a split set.
    let write = || match split_max {
        Some(max) => stage_gguf_split(m.version, &m.kvs, &m.tensors, out, max, force).map(|(t, p)| (t, p, 0)),
        None => stage_gguf(m.version, &m.kvs, &m.tensors, out, force).map(|(t, len)| (vec![t], Vec::new(), len)),
    };
    let (checked, staged) = rayon::join(|| digests.check(), write);
    checked?;
    let (temps, paths, len) = staged.with_context(|| format!("assembling {}", dir.display()))?;
    for t in temps {
        t.commit()?;
    }
    if let Some(first) = paths.first() {
        writeln!(
            w,
            "assembled {} tensors from {} into {} shards: {}",
            m.tensors.len(),
            dir.display(),
            paths.len(),
            first.display()
        )?;
    } else {
        writeln!(
            w,
            "assembled {} tensors from {} into {} ({len} bytes)",
            m.tensors.len(),
            dir.display(),
            out.display()
        )?;
    }
    Ok(())
}
