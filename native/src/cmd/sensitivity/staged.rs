//! The disk each evaluation takes: the model is staged once as a split GGUF (shards
//! `model-0000I-of-0000N.gguf`, as `llama-gguf-split` names them), so that a changed model
//! is a directory of links to those shards and one shard written new, the changed
//! tensor's, not a copy of the model.
//!
//! llama.cpp loads a split from its first shard and finds the others by name beside it
//! (`llama_split_path`); it checks each shard's `split.no`, that the shards together hold
//! `split.tensors.count` tensors, and no name twice. It does not care which shard holds
//! which tensor, nor of what type each is, and caps the shards at `split.count`'s u16;
//! organ hands it at most [`MAX_HANDED_SHARDS`]. The staged shards:
//!
//! - shard 1: the metadata and no tensor, so that a changed model's first shard, the one
//!   named to llama.cpp, is never a symbolic link (organ finds the other shards beside the
//!   first's real path, which for a link would be the staged directory, with the tensor
//!   unchanged);
//! - shard 2: every tensor not measured in this batch (left out when there is none);
//! - then one shard per tensor of the batch, alone.
//!
//! A batch is at most [`MAX_BATCH`] tensors, fewer where the open files a process may
//! hold would not cover every evaluation at once handing each shard ([`batch_size`]); a
//! selection of more is staged again for each batch. A changed model links every staged
//! shard but its tensor's (a hard link; where the filesystem has none, a symbolic link,
//! and shard 1 copied; where it has neither, a copy) and writes that shard anew, in the
//! staged shards' set ([`SplitKeys`]): its header and the changed tensor, so an
//! evaluation writes the changed tensor's bytes and a few hundred more. Staging and changed models are temp directories
//! ([`crate::atomic::Temp`]): removed when done, and by the next run when one is killed.

use crate::atomic::Temp;
use crate::llama_cpp::handed::MAX_HANDED_SHARDS;
use crate::model::{Model, Tensor};
use crate::write::gguf_split::{stage_shard, stage_shards, SplitKeys};
use anyhow::{Context, Result};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

/// The most tensors staged at once: each has a shard, besides the metadata's and the
/// rest's, and organ hands llama.cpp at most [`MAX_HANDED_SHARDS`].
const MAX_BATCH: usize = MAX_HANDED_SHARDS - 2;

/// The staged shards' names: `model-0000I-of-0000N.gguf`.
const PREFIX: &str = "model";

/// How a changed model's shards (but the first) were made from the staged ones, in the
/// order of [`link`]'s fallbacks.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Linked {
    Hard = 1,
    Symbolic = 2,
    Copied = 3,
}

impl Linked {
    fn name(self) -> &'static str {
        match self {
            Linked::Hard => "hard links",
            Linked::Symbolic => "symbolic links (the metadata's shard copied)",
            Linked::Copied => "copies",
        }
    }
}

/// What the run wrote to disk, for `--stats`: counted as the writes end, on any thread.
#[derive(Default)]
pub struct DiskStats {
    staged_bytes: AtomicU64,
    evaluations: AtomicU64,
    written_max: AtomicU64,
    written_total: AtomicU64,
    /// The worst [`Linked`] used, 0 before any.
    linked: AtomicU8,
}

impl DiskStats {
    /// One evaluation's changed model took `written` bytes.
    pub fn evaluated(&self, written: u64) {
        self.evaluations.fetch_add(1, Ordering::Relaxed);
        self.written_total.fetch_add(written, Ordering::Relaxed);
        self.written_max.fetch_max(written, Ordering::Relaxed);
    }

    /// The run's figures (`--stats`): the staging's bytes, the evaluations' and how linked.
    pub fn emit(&self) {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        crate::progress::emit(&organ_core::events::Event::SensitivityStats {
            staged_bytes: load(&self.staged_bytes),
            evaluations: load(&self.evaluations),
            bytes_written_max: load(&self.written_max),
            bytes_written_total: load(&self.written_total),
            linked: self.linked().to_owned(),
        });
    }

    /// How the changed models' shards were linked ("" when no model was staged).
    fn linked(&self) -> &'static str {
        match self.linked.load(Ordering::Relaxed) {
            1 => Linked::Hard.name(),
            2 => Linked::Symbolic.name(),
            3 => Linked::Copied.name(),
            _ => "",
        }
    }

    /// Notes `how`; warns once when it is worse than every way seen before.
    fn link_used(&self, how: Linked, dir: &Path) {
        let before = self.linked.fetch_max(how as u8, Ordering::Relaxed);
        if how as u8 > before.max(Linked::Hard as u8) {
            crate::progress::warn(format!(
                "{}: no hard links here; each changed model is made with {}, which takes more disk",
                dir.display(),
                how.name()
            ));
        }
    }
}

/// The one staging a run keeps at a time: the batch measured now.
pub struct Staging {
    root: PathBuf,
    current: Option<Staged>,
    batch: usize,
}

impl Staging {
    /// Stages in `root` (the model's cache directory), when first asked, batches of a size
    /// that `jobs` evaluations at once can hand llama.cpp ([`batch_size`]).
    pub fn new(root: &Path, jobs: usize) -> Staging {
        Staging { root: root.to_owned(), current: None, batch: batch_size(jobs) }
    }

    /// The most tensors staged at once.
    pub fn batch(&self) -> usize {
        self.batch
    }

    /// `model` staged for measuring the tensors `batch` (indices), reused when the last
    /// batch staged was the same, else staged anew (the last one removed first).
    ///
    /// # Errors
    /// The shards cannot be written.
    pub fn stage(&mut self, model: &Model, batch: &[usize], stats: &DiskStats) -> Result<&Staged> {
        if self.current.as_ref().is_some_and(|s| s.batch == batch) {
            return self.current.as_ref().context("staged");
        }
        self.current = None;
        let staged = Staged::write(model, batch, &self.root)?;
        stats.staged_bytes.fetch_add(staged.bytes, Ordering::Relaxed);
        Ok(self.current.insert(staged))
    }
}

/// Descriptors kept for what is not a shard (the text, the logits, pipes, rayon, stdio).
const SPARE_FILES: u64 = 256;

/// The tensors a batch may have: [`MAX_BATCH`], or fewer where `jobs` evaluations at once,
/// each holding two descriptors per shard while it hands them ([`hand_model`]: the file
/// organ reads and the one llama.cpp inherits), would pass the open files a process may
/// hold. That limit is first raised to its ceiling (the hard limit), as far as it can be.
///
/// [`hand_model`]: crate::llama_cpp::handed::hand_model
fn batch_size(jobs: usize) -> usize {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut l = getrlimit(Resource::Nofile);
    // None: unlimited. The kernel takes at most fs.nr_open (2^20 by default).
    let ceiling = l.maximum.unwrap_or(u64::MAX).min(1 << 20);
    let mut files = l.current.unwrap_or(u64::MAX);
    if files < ceiling {
        l.current = Some(ceiling);
        if setrlimit(Resource::Nofile, l).is_ok() {
            files = ceiling;
        }
    }
    let per_job = files.saturating_sub(SPARE_FILES) / (2 * jobs.max(1) as u64);
    usize::try_from(per_job.saturating_sub(2)).unwrap_or(MAX_BATCH).clamp(1, MAX_BATCH)
}

/// The model written as a split for one batch of tensors ([`Staging::stage`]).
pub struct Staged {
    batch: Vec<usize>,
    /// The staged directory (removed on drop); `real` is its path made absolute, which
    /// symbolic links lead to.
    dir: Temp,
    real: PathBuf,
    keys: SplitKeys,
    version: u32,
    /// The shard of each tensor of the batch.
    shard_of: HashMap<usize, usize>,
    bytes: u64,
}

/// A changed model: its directory of shards (removed on drop), the first shard's path (the
/// one to name), and the bytes written to make it.
pub struct Changed {
    _dir: Temp,
    pub first: PathBuf,
    pub written: u64,
}

impl Staged {
    fn write(model: &Model, batch: &[usize], root: &Path) -> Result<Staged> {
        let dir = Temp::dir(&root.join("staged"), false)?;
        let real =
            std::fs::canonicalize(&dir.path).with_context(|| format!("{}: cannot resolve", dir.path.display()))?;
        let rest: Vec<Tensor> =
            model.tensors.iter().enumerate().filter(|(i, _)| !batch.contains(i)).map(|(_, t)| t.clone()).collect();
        let mut groups = vec![Vec::new()];
        if !rest.is_empty() {
            groups.push(rest);
        }
        let first_alone = groups.len();
        let mut shard_of = HashMap::with_capacity(batch.len());
        for (k, &i) in batch.iter().enumerate() {
            shard_of.insert(i, first_alone + k);
            groups.push(vec![model.tensors[i].clone()]);
        }
        crate::progress::note(format!(
            "staging the model as {} shards for {} tensors: each changed model links them and writes its \
             tensor's alone",
            groups.len(),
            batch.len()
        ));
        let (temps, paths, keys) =
            stage_shards(model.version, &model.kvs, &groups, &dir.path.join("model.gguf"), true)?;
        let mut bytes = 0;
        for (t, p) in temps.into_iter().zip(&paths) {
            t.commit()?;
            bytes += std::fs::metadata(p).with_context(|| format!("{}: cannot stat", p.display()))?.len();
        }
        Ok(Staged { batch: batch.to_vec(), dir, real, keys, version: model.version, shard_of, bytes })
    }

    fn name(&self, no: usize) -> String {
        crate::paths::split_name(PREFIX, no + 1, self.keys.count())
    }

    /// The model with tensor `i` (of the batch) replaced by `replaced`, in a new temp
    /// directory for `work/tensor-I`: its shard written, every other linked.
    ///
    /// # Errors
    /// `i` is not of the batch, or a shard can be neither linked nor copied nor written.
    pub fn changed(&self, i: usize, replaced: &Tensor, work: &Path, stats: &DiskStats) -> Result<Changed> {
        let &own = self.shard_of.get(&i).with_context(|| format!("{}: not staged", replaced.name))?;
        let dir = Temp::dir(&work.join(format!("tensor-{i}")), true)?;
        let mut written = 0;
        for no in (0..self.keys.count()).filter(|&no| no != own) {
            let name = self.name(no);
            // Shard 1 (the metadata's) is never a symbolic link (the module's note): copied.
            let (how, n) = link(&self.real.join(&name), &dir.path.join(&name), no != 0)?;
            if no != 0 {
                stats.link_used(how, &self.dir.path);
            }
            written += n;
        }
        let dest = dir.path.join(self.name(own));
        let (tmp, n) = stage_shard(self.version, &self.keys, own, &[], std::slice::from_ref(replaced), &dest, true)?;
        tmp.commit()?;
        written += n;
        Ok(Changed { first: dir.path.join(self.name(0)), _dir: dir, written })
    }
}

/// `to` made a hard link to `from`; where that fails, a symbolic link (if `symbolic` may
/// be), else a copy. Returns how, and the bytes written (a copy's length).
fn link(from: &Path, to: &Path, symbolic: bool) -> Result<(Linked, u64)> {
    if std::fs::hard_link(from, to).is_ok() {
        return Ok((Linked::Hard, 0));
    }
    if symbolic && std::os::unix::fs::symlink(from, to).is_ok() {
        return Ok((Linked::Symbolic, 0));
    }
    let n =
        std::fs::copy(from, to).with_context(|| format!("{}: cannot link or copy {}", to.display(), from.display()))?;
    Ok((Linked::Copied, n))
}
