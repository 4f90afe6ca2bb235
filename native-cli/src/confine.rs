//! `ORGAN_CONFINE`: when `organ serve` runs a command for a request, it sets this variable
//! to its canonical root. The server checks a request's path when the request arrives; the
//! command opens it later (a queued job, seconds or hours later), and by then the file may
//! have been swapped for a symlink that leads elsewhere. So every model input the command
//! opens is checked again here, on the opened file descriptor itself: where
//! `/proc/self/fd/N` points must lie under the root, or the command fails.
//!
//! Without the variable (any ordinary run of the CLI), nothing is checked.

use anyhow::{bail, Context, Result};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// The environment variable the server sets for its children.
pub const VAR: &str = "ORGAN_CONFINE";

/// Where an open file really is (the kernel's name for its descriptor).
pub fn opened_path(file: &File) -> std::io::Result<PathBuf> {
    std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
}

/// Fails unless `file` (opened from `path`) lies under `$ORGAN_CONFINE`; a no-op when the
/// variable is unset.
pub fn check_opened(file: &File, path: &Path) -> Result<()> {
    let Some(root) = std::env::var_os(VAR) else { return Ok(()) };
    let root = PathBuf::from(root);
    let real = opened_path(file)
        .with_context(|| format!("{}: cannot tell where the opened file lies ({VAR} is set)", path.display()))?;
    if !real.starts_with(&root) {
        bail!("{}: the opened file lies outside the served root", path.display());
    }
    Ok(())
}

/// Reads a whole (small) file, checked like `check_opened` first.
pub fn read(path: &Path) -> Result<Vec<u8>> {
    let file = File::open(path).with_context(|| format!("{}: cannot open", path.display()))?;
    check_opened(&file, path)?;
    let mut v = Vec::new();
    std::io::Read::read_to_end(&mut &file, &mut v).with_context(|| format!("{}: cannot read", path.display()))?;
    Ok(v)
}
