//! Writing result files atomically: a temp file in the destination directory, renamed
//! into place only when complete, so no reader ever sees half a file.

use anyhow::{Context, Result};
use std::io::Write;
use std::path::Path;

/// Writes `path` through `fill`, atomically.
pub fn write_atomic(path: &Path, fill: impl FnOnce(&mut dyn Write) -> Result<()>) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path.file_name().with_context(|| format!("{}: not a file path", path.display()))?;
    let tmp = dir.join(format!(".{}.{}.tmp", name.to_string_lossy(), std::process::id()));
    let result = (|| -> Result<()> {
        let f = std::fs::File::create(&tmp).with_context(|| format!("{}: cannot create", tmp.display()))?;
        let mut w = std::io::BufWriter::new(f);
        fill(&mut w)?;
        let f =
            w.into_inner().map_err(|e| e.into_error()).with_context(|| format!("{}: write failed", tmp.display()))?;
        f.sync_all().with_context(|| format!("{}: sync failed", tmp.display()))?;
        std::fs::rename(&tmp, path).with_context(|| format!("{}: cannot rename into place", path.display()))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
