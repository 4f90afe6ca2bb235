//! Writing a split GGUF (shards like `llama-gguf-split` makes), and the `--split-max-size`
//! argument that sets the shards' size.

use super::gguf::stage_gguf;
use crate::atomic::Temp;
use crate::model::Tensor;
use anyhow::{bail, Result};
use organ_core::gguf::split::SET_ID_KEY;
use organ_core::gguf::MetaValue;
use organ_core::model::OwnedValue;
use std::path::{Path, PathBuf};

/// Writes a GGUF split like `llama-gguf-split` does: shards `PREFIX-0000i-of-0000N.gguf`
/// beside `dest` (PREFIX is `dest` without `.gguf`), each holding whole tensors of at most
/// `max_bytes` of data (a larger tensor gets a shard of its own). The first shard holds all
/// metadata; every shard carries `split.no`, `split.count`, `split.tensors.count`, and
/// one random split set id ([`SET_ID_KEY`]), so a shard of another set is refused. All
/// shards are written to temp paths first and renamed only when every one is complete.
pub fn write_gguf_split(
    version: u32,
    kvs: &[(String, OwnedValue)],
    tensors: &[Tensor],
    dest: &Path,
    max_bytes: u64,
    force: bool,
) -> Result<Vec<PathBuf>> {
    let (staged, paths) = stage_gguf_split(version, kvs, tensors, dest, max_bytes, force)?;
    for t in staged {
        t.commit()?;
    }
    Ok(paths)
}

/// The paths of `n` shards written for `dest`: `PREFIX-0000i-of-0000N.gguf` beside it,
/// PREFIX being `dest` without `.gguf`.
pub fn shard_paths(dest: &Path, n: usize) -> Vec<PathBuf> {
    let name = dest.to_string_lossy();
    let prefix = name.strip_suffix(".gguf").unwrap_or(&name);
    let prefix_name = Path::new(prefix).file_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let dir = dest.parent().map(Path::to_owned).unwrap_or_default();
    (1..=n).map(|i| dir.join(crate::paths::split_name(&prefix_name, i, n))).collect()
}

/// [`write_gguf_split`]'s shards in their temp paths, uncommitted, with the paths they are
/// for: the caller commits each (or drops them, which removes them).
pub fn stage_gguf_split(
    version: u32,
    kvs: &[(String, OwnedValue)],
    tensors: &[Tensor],
    dest: &Path,
    max_bytes: u64,
    force: bool,
) -> Result<(Vec<Temp>, Vec<PathBuf>)> {
    let mut groups: Vec<Vec<Tensor>> = vec![Vec::new()];
    let mut size = 0u64;
    for t in tensors {
        let cur = groups.last_mut().expect("one group at least");
        if !cur.is_empty() && size + t.n_bytes > max_bytes {
            groups.push(Vec::new());
            size = 0;
        }
        size += t.n_bytes;
        groups.last_mut().expect("one group at least").push(t.clone());
    }
    let (staged, paths, _) = stage_shards(version, kvs, &groups, dest, force)?;
    Ok((staged, paths))
}

/// One shard per group of `groups` (in order; the first also holds `kvs`), staged in temp
/// paths beside `dest` as [`stage_gguf_split`] stages them, uncommitted; with the paths
/// they are for and the keys they share, with which [`stage_shard`] writes another
/// version of one of them later (a shard the others accept as of their set).
///
/// # Errors
/// More shards or tensors than the `split.*` keys hold, or a shard cannot be written.
pub fn stage_shards(
    version: u32,
    kvs: &[(String, OwnedValue)],
    groups: &[Vec<Tensor>],
    dest: &Path,
    force: bool,
) -> Result<(Vec<Temp>, Vec<PathBuf>, SplitKeys)> {
    let keys = SplitKeys::new(groups.len(), groups.iter().map(Vec::len).sum())?;
    let paths = shard_paths(dest, groups.len());
    // Every shard is staged in its own temp path (refused if the shard exists); they are
    // renamed into place together once all are written. On any error the staged temps
    // are dropped, which removes them.
    let mut staged = Vec::with_capacity(groups.len());
    for (i, (g, path)) in groups.iter().zip(&paths).enumerate() {
        staged.push(stage_shard(version, &keys, i, kvs, g, path, force)?.0);
    }
    Ok((staged, paths, keys))
}

/// What every shard of one split set carries: `split.count`, `split.tensors.count` and
/// the set's random id ([`SET_ID_KEY`]).
#[derive(Debug, Clone)]
pub struct SplitKeys {
    count: u16,
    tensors: i32,
    set_id: String,
}

impl SplitKeys {
    /// The keys of a new set of `count` shards holding `tensors` tensors, with a new id.
    ///
    /// # Errors
    /// More shards than a `split.count` (u16) holds, or more tensors than a
    /// `split.tensors.count` (i32); /dev/urandom cannot be read.
    pub fn new(count: usize, tensors: usize) -> Result<SplitKeys> {
        // split.no and split.count are u16 in llama.cpp's format, split.tensors.count i32.
        let Ok(count) = u16::try_from(count) else {
            bail!("{count} shards: more than the {} a split.count (u16) can hold", u16::MAX)
        };
        let Ok(tensors) = i32::try_from(tensors) else {
            bail!("{tensors} tensors: more than a split.tensors.count (i32) can hold")
        };
        let set_id = format!("{:016x}{:016x}", crate::atomic::random_u64()?, crate::atomic::random_u64()?);
        Ok(SplitKeys { count, tensors, set_id })
    }

    /// How many shards the set has.
    pub fn count(&self) -> usize {
        usize::from(self.count)
    }
}

/// Shard `no` (from 0) of the set `keys` describes, holding `tensors`, staged in a temp
/// path for `dest` and returned uncommitted with its length. Shard 0 also holds `kvs`
/// (less any `split.*` keys and set id they carry); the others hold the split keys only.
///
/// # Errors
/// `no` is not a shard of the set, or the shard cannot be written.
pub fn stage_shard(
    version: u32,
    keys: &SplitKeys,
    no: usize,
    kvs: &[(String, OwnedValue)],
    tensors: &[Tensor],
    dest: &Path,
    force: bool,
) -> Result<(Temp, u64)> {
    let Some(split_no) = u16::try_from(no).ok().filter(|&n| n < keys.count) else {
        bail!("{}: shard {no} of a split of {} shards", dest.display(), keys.count)
    };
    let mut shard_kvs: Vec<(String, OwnedValue)> = if no == 0 {
        kvs.iter().filter(|(k, _)| !k.starts_with("split.") && k != SET_ID_KEY).cloned().collect()
    } else {
        Vec::new()
    };
    shard_kvs.push(("split.no".into(), OwnedValue::Scalar(MetaValue::U16(split_no))));
    shard_kvs.push(("split.count".into(), OwnedValue::Scalar(MetaValue::U16(keys.count))));
    shard_kvs.push(("split.tensors.count".into(), OwnedValue::Scalar(MetaValue::I32(keys.tensors))));
    shard_kvs.push((SET_ID_KEY.into(), OwnedValue::string(&keys.set_id)));
    stage_gguf(version, &shard_kvs, tensors, dest, force)
}

/// Parses a size like `500M`, `2G`, `1048576` (K, M, G, T are powers of 1024): the core's
/// [`organ_core::gguf::split::parse_size`].
pub fn parse_size(s: &str) -> Result<u64> {
    Ok(organ_core::gguf::split::parse_size(s)?)
}
