//! Finding models: the GGUF files, split sets and organ directories a path names.

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// The models a path names: itself (a GGUF, a shard, an organ directory), or for any other
/// directory every model found below it (split sets once, by their first shard; organ
/// directories whole; symlinks not followed), sorted by path.
pub fn discover(path: &Path) -> Result<Vec<PathBuf>> {
    if !path.is_dir() || path.join("manifest.json").exists() {
        return Ok(vec![path.to_owned()]);
    }
    let mut found = Vec::new();
    let mut stack = vec![path.to_owned()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).with_context(|| format!("{}: cannot list", dir.display()))? {
            let e = e?;
            let p = e.path();
            let ty = e.file_type()?;
            if ty.is_dir() {
                if p.join("manifest.json").exists() {
                    found.push(p);
                } else {
                    stack.push(p);
                }
            } else if ty.is_file() && p.extension().is_some_and(|x| x == "gguf") {
                match crate::paths::split_shards(&p) {
                    Some(shards) if shards[0] != p => {} // counted through its first shard
                    _ => found.push(p),
                }
            }
        }
    }
    found.sort();
    if found.is_empty() {
        anyhow::bail!("{}: no GGUF models or organ directories found", path.display());
    }
    Ok(found)
}
