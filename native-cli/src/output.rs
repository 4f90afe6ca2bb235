//! Writing report files (JSON, CSV) atomically, through the same temp-then-rename
//! mechanism as model outputs ([`crate::write::Temp`]); a report may replace an older one.

use crate::write::Temp;
use anyhow::{Context, Result};
use std::io::Write;
use std::path::Path;

/// Writes `path` through `fill`, atomically.
pub fn write_atomic(path: &Path, fill: impl FnOnce(&mut dyn Write) -> Result<()>) -> Result<()> {
    let tmp = Temp::replacing(path)?;
    let f = std::fs::File::create(&tmp.path).with_context(|| format!("{}: cannot create", tmp.path.display()))?;
    let mut w = std::io::BufWriter::new(f);
    fill(&mut w)?;
    let f =
        w.into_inner().map_err(|e| e.into_error()).with_context(|| format!("{}: write failed", tmp.path.display()))?;
    f.sync_all().with_context(|| format!("{}: sync failed", tmp.path.display()))?;
    drop(f);
    tmp.commit()
}
