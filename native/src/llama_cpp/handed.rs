//! Files handed to a llama.cpp tool open ([`Handed`]), never by a name it would resolve:
//! a model (and a split model's shards) read by organ first under its caps, the `--text`
//! opened as any input, and the private scratch directory and files beside them. Every
//! tool's runner (perplexity, quantize) hands its files through here.

use crate::model::Model;
use anyhow::{bail, Context, Result};
use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A file (or a set of them) handed to a tool open: organ keeps the descriptors open, the
/// tool inherits them under the same numbers and is told [`Handed::arg`], a name under
/// `/proc/self/fd/` that leads to what organ opened.
pub struct Handed {
    /// What the tool is given on its command line.
    pub arg: PathBuf,
    fds: Vec<OwnedFd>,
}

/// Standard input, output and error: a tool's are set up anew, so no handed file keeps
/// one of these numbers.
const FIRST_FREE_FD: RawFd = 3;

impl Handed {
    /// `file`, given to the tool as `/proc/self/fd/N`.
    ///
    /// # Errors
    /// The descriptor cannot be moved above standard error (where it was one of them).
    pub fn file(file: File) -> Result<Handed> {
        let fd = Self::above_stdio(file.into())?;
        Ok(Handed { arg: PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd())), fds: vec![fd] })
    }

    /// The directory `dir` (opened), whose entries the tool reads as
    /// `/proc/self/fd/D/NAME`: for tools that find files by their names' pattern (a split
    /// model's shards). `arg` is `name` in it.
    ///
    /// # Errors
    /// As [`Handed::file`].
    pub fn dir(dir: File, name: &str) -> Result<Handed> {
        let mut h = Handed::file(dir)?;
        h.arg = h.arg.join(name);
        Ok(h)
    }

    /// Adds `file` to what the tool inherits; returns its name for the tool,
    /// `/proc/self/fd/N` (a link in a handed directory leads there).
    ///
    /// # Errors
    /// As [`Handed::file`].
    pub fn add(&mut self, file: File) -> Result<PathBuf> {
        let fd = Self::above_stdio(file.into())?;
        let name = PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
        self.fds.push(fd);
        Ok(name)
    }

    fn above_stdio(fd: OwnedFd) -> Result<OwnedFd> {
        if fd.as_raw_fd() >= FIRST_FREE_FD {
            return Ok(fd);
        }
        rustix::io::fcntl_dupfd_cloexec(&fd, FIRST_FREE_FD).context("cannot duplicate a descriptor")
    }
}

/// Lets the tool `c` runs inherit the descriptors of `handed`: their close-on-exec flag is
/// cleared in the child, between fork and exec, never in organ (where another thread's
/// child would inherit them too).
pub fn inherit(c: &mut Command, handed: &[&Handed]) {
    let fds: Vec<RawFd> = handed.iter().flat_map(|h| h.fds.iter().map(AsRawFd::as_raw_fd)).collect();
    // SAFETY: between fork and exec this runs only fcntl(F_SETFD) through rustix, on
    // descriptors organ keeps open until the child is reaped; it allocates nothing (the
    // list was made before the fork) and takes no lock.
    unsafe {
        c.pre_exec(move || {
            for &fd in &fds {
                rustix::io::fcntl_setfd(std::os::fd::BorrowedFd::borrow_raw(fd), rustix::io::FdFlags::empty())?;
            }
            Ok(())
        });
    }
}

/// A private temp directory in `near` (else the system's temp directory), removed on drop;
/// if organ is killed outright, the next organ run that writes there removes it. Only
/// organ's user may enter it (mode 0700).
pub(crate) fn scratch_dir(near: Option<&Path>) -> Result<crate::atomic::Temp> {
    use std::os::unix::fs::PermissionsExt;
    let dir = near.map_or_else(std::env::temp_dir, Path::to_owned);
    // Temp::dir names the directory `.organ-eval-logits.organ-tmp.PID.START.RANDOM`; nothing
    // is ever renamed to `organ-eval-logits`.
    let dest = dir.join("organ-eval-logits");
    let t = crate::atomic::Temp::dir(&dest, false)?;
    std::fs::set_permissions(&t.path, std::fs::Permissions::from_mode(0o700))
        .with_context(|| format!("{}: cannot make it private", t.path.display()))?;
    Ok(t)
}

/// A new file at `p` (never through a link), open to read and write, for organ's user only.
pub(crate) fn create_private(p: &Path) -> Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .mode(0o600)
        .open(p)
        .with_context(|| format!("{}: cannot create", p.display()))
}

/// The most shards of a split model handed to llama.cpp (one descriptor each).
pub const MAX_HANDED_SHARDS: usize = 256;

/// The most tensors of a model handed to llama.cpp, which looks each tensor up by a scan of
/// them all (65,536 took it more than 30 s); the largest real models have ~1,100.
pub const MAX_HANDED_TENSORS: usize = 8192;

/// The model at `path` opened (a regular file; under `organ serve`, inside the root) and
/// handed to llama.cpp. A split model's shards (`NAME-0000I-of-0000N.gguf`), which
/// llama.cpp finds by name beside the first, are each opened too, and handed as links
/// named as they are, in the new private directory `links`, to `/proc/self/fd/N`; the
/// tool is given `/proc/self/fd/D/NAME` (D: that directory, open) for the shard named.
/// Shards are found beside the file opened (a link's target), as llama.cpp found them.
/// Every file handed is first read by organ as any command reads a model
/// ([`Model::from_open_files`]: the header budget, the tensor cap, every offset checked),
/// so a file organ refuses never reaches llama.cpp, and its error names the file. The
/// model read is returned; the tool is given duplicates of the very descriptors read.
///
/// # Errors
/// A file cannot be opened or lies outside the root, is not a GGUF organ accepts, more
/// than [`MAX_HANDED_SHARDS`] shards or [`MAX_HANDED_TENSORS`] tensors, or the links cannot
/// be made.
pub(crate) fn hand_model(path: &Path, links: &Path) -> Result<(Handed, Model)> {
    let file = crate::input::open(path)?;
    // Shards lie beside the file itself, as llama.cpp would find them from a link to it.
    let real = crate::input::opened_path(&file).unwrap_or_else(|_| path.to_owned());
    let dup = |f: &std::fs::File, p: &Path| f.try_clone().with_context(|| format!("{}: cannot duplicate", p.display()));
    let Some(shards) = crate::paths::split_shards(&real) else {
        // organ reads the file (under its caps) before llama.cpp is given the same one.
        let handed = dup(&file, path)?;
        let model = within_tensors(path, Model::from_open_files(path, vec![(path.to_owned(), file)])?)?;
        return Ok((Handed::file(handed)?, model));
    };
    let path = real.as_path();
    if shards.len() > MAX_HANDED_SHARDS {
        bail!(
            "{}: a split of {} shards; organ hands llama.cpp at most {MAX_HANDED_SHARDS}",
            path.display(),
            shards.len()
        );
    }
    let name = |p: &Path| p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(links)
        .with_context(|| format!("{}: cannot create", links.display()))?;
    let dir = std::fs::File::open(links).with_context(|| format!("{}: cannot open", links.display()))?;
    let mut handed = Handed::dir(dir, &name(path))?;
    let mut file = Some(file);
    let mut opened = Vec::with_capacity(shards.len());
    for shard in shards {
        let f = match (shard == path, file.take()) {
            (true, Some(f)) => f,
            (_, f) => {
                file = f;
                crate::input::open(&shard).map_err(|e| e.context(format!("a shard of {}", path.display())))?
            }
        };
        let target = handed.add(dup(&f, &shard)?)?;
        let link = links.join(name(&shard));
        std::os::unix::fs::symlink(&target, &link).with_context(|| format!("{}: cannot create", link.display()))?;
        opened.push((shard, f));
    }
    Ok((handed, within_tensors(path, Model::from_open_files(path, opened)?)?))
}

/// `model`, unless it has more than [`MAX_HANDED_TENSORS`] tensors.
fn within_tensors(path: &Path, model: Model) -> Result<Model> {
    let n = model.tensors.len();
    if n > MAX_HANDED_TENSORS {
        bail!(
            "{}: {n} tensors; organ hands llama.cpp at most {MAX_HANDED_TENSORS} (real models have about 1,100)",
            path.display()
        );
    }
    Ok(model)
}

/// The most text organ hands llama-perplexity (wikitext-2's test set is 1.3 MB).
pub const MAX_TEXT_BYTES: u64 = 256 << 20;

/// The `--text` file, opened as any input (a regular file, under `organ serve` inside the
/// root), refused past [`MAX_TEXT_BYTES`] from its size and read no further than that.
///
/// # Errors
/// It cannot be opened as an input, or it is too large.
pub fn open_text(text: &Path) -> Result<std::io::Take<std::fs::File>> {
    let f = crate::input::open(text).context("--text")?;
    let n = f.metadata().with_context(|| format!("{}: cannot stat", text.display()))?.len();
    if n > MAX_TEXT_BYTES {
        bail!("{}: {n} bytes, more than the {MAX_TEXT_BYTES} organ evaluates", text.display());
    }
    Ok(std::io::Read::take(f, MAX_TEXT_BYTES))
}
