//! `organ assemble`: an organ directory back into one GGUF. Opening the directory checks
//! every organ file against the digest its manifest recorded ([`crate::organ_dir::open`]).

use crate::write::write_gguf;
use anyhow::{Context, Result};
use std::io::Write;
use std::path::Path;

pub fn run(dir: &Path, out: &Path, split_max: Option<u64>, force: bool, w: &mut dyn Write) -> Result<()> {
    let m = crate::organ_dir::open(dir)?;
    if let Some(max) = split_max {
        let shards = crate::write::write_gguf_split(m.version, &m.kvs, &m.tensors, out, max, force)
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
    let n = write_gguf(m.version, &m.kvs, &m.tensors, out, force)
        .with_context(|| format!("assembling {}", dir.display()))?;
    writeln!(w, "assembled {} tensors from {} into {} ({n} bytes)", m.tensors.len(), dir.display(), out.display())?;
    Ok(())
}
