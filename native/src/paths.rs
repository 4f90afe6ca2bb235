//! Where a model's files are: the shards of a split model (by llama.cpp's naming, on disk
//! or at a URL), and organ files confined to their directory.

use anyhow::{bail, Context, Result};
use std::path::{Component, Path, PathBuf};

/// If `path` is named like a llama.cpp split shard (`NAME-00002-of-00005.gguf`), the
/// paths of all its shards, in order.
pub fn split_shards(path: &Path) -> Option<Vec<PathBuf>> {
    let names = organ_core::gguf::split::shard_names(path.file_name()?.to_str()?)?;
    let dir = path.parent().unwrap_or(Path::new(""));
    Some(names.iter().map(|n| dir.join(n)).collect())
}

/// The cache's root when no `--cache` is given: `ORGAN_CACHE`, else `~/.cache/organ`
/// (sensitivity's results, measure's, the base's logits).
pub fn cache_root() -> Option<PathBuf> {
    std::env::var_os("ORGAN_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/organ")))
}

/// llama.cpp's shard name: `PREFIX-00001-of-00003.gguf` (the core's, as the browser's).
pub fn split_name(prefix: &str, i: usize, n: usize) -> String {
    organ_core::gguf::split::shard_name(prefix, i, n)
}

/// `rel` under `root`, refusing absolute paths, `..`, and symlinks that lead outside.
pub fn confined(root: &Path, rel: &str) -> Result<PathBuf> {
    let p = Path::new(rel);
    if p.components().any(|c| !matches!(c, Component::Normal(_))) || rel.is_empty() {
        bail!("path {rel:?} must be relative, without '..'");
    }
    let full = root.join(p);
    let real = full.canonicalize().with_context(|| format!("{}: missing", full.display()))?;
    if !real.starts_with(root) {
        bail!("path {rel:?} leads outside {}", root.display());
    }
    Ok(real)
}
