//! Every output (a model, an organ directory, a report) is written to a temp entry in its
//! destination's directory and renamed into place only when complete. Until then the
//! destination is untouched: a killed run leaves at most a temp entry, never a partial
//! output, and a later run removes the temp entries of dead organ processes.
//!
//! Temp entries are named `.NAME.organ-tmp.PID.START.RANDOM`: the writing process's id,
//! its start time (clock ticks since boot, from /proc), and 64 random bits. They are
//! created exclusively (`O_CREAT | O_EXCL | O_NOFOLLOW`, or `mkdir`), so a link planted
//! under a predicted name is never followed: the creation fails instead. PID and START
//! together tell whether the writer still runs, so [`sweep`] removes only what a dead
//! process left.
//!
//! An existing destination is replaced only with `--force`, never when it is an input of
//! the run ([`crate::input::check_dest`]); the rename itself refuses to replace anything
//! without `--force` (`RENAME_NOREPLACE`), and swaps atomically with it
//! (`RENAME_EXCHANGE`), so a directory is replaced whole, too.
//!
//! Durability: an output that replaces an existing destination (`--force`) is flushed to
//! disk (every file, then its directory) before the rename and the rename itself after,
//! so a power cut can lose neither the old output nor leave the new one half-written
//! under its name. A new name is renamed into place without that flush, as `cp`,
//! `llama-quantize` and `gguf-split` write: a crash of organ still leaves no partial
//! output, but a power cut soon after may leave the new output short, which every
//! reader of organ's refuses (sizes are checked, organ files are digested).
//! `--fsync` (or `ORGAN_FSYNC=1`) flushes every output ([`set_fsync`]).

use crate::input;
use anyhow::{bail, Context, Result};
use rustix::fs::{renameat_with, RenameFlags, CWD};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether every output is flushed to disk before its rename (`--fsync`), not only those
/// that replace something.
static FSYNC: AtomicBool = AtomicBool::new(false);

/// Flushes every output to disk before its rename (`--fsync`), or only replacing ones.
pub fn set_fsync(on: bool) {
    FSYNC.store(on, Ordering::Relaxed);
}

/// What marks a temp entry of organ's in its name.
const MARK: &str = ".organ-tmp.";

/// A temp entry beside `dest`, removed on drop unless [`Temp::commit`] renamed it.
pub struct Temp {
    pub path: PathBuf,
    dest: PathBuf,
    force: bool,
    /// What the entry becomes: what `force` may replace ([`input::check_dest_of`]).
    kind: input::Output,
    /// It replaces an input of the run on purpose ([`Temp::over_input`]).
    over_input: bool,
    done: bool,
}

/// Whether `path` names standard output (`-`): reports only ([`write_file`]).
pub fn is_stdout(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// This process's start time in clock ticks since boot (field 22 of /proc/PID/stat).
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces or ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// 64 bits from the kernel's random source.
///
/// # Errors
/// /dev/urandom cannot be read.
pub fn random_u64() -> Result<u64> {
    let mut b = [0u8; 8];
    std::io::Read::read_exact(&mut File::open("/dev/urandom").context("/dev/urandom: cannot open")?, &mut b)
        .context("/dev/urandom: cannot read")?;
    Ok(u64::from_le_bytes(b))
}

/// `(dir, name)` of `dest`.
fn split(dest: &Path) -> Result<(PathBuf, String)> {
    let dir = match dest.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => PathBuf::from("."),
    };
    let name = dest.file_name().with_context(|| format!("{}: not a path to a file or directory", dest.display()))?;
    Ok((dir, name.to_string_lossy().into_owned()))
}

/// Flushes `path` to disk: a file's data, or every file of a directory tree of ours (in
/// parallel) and then each of its directories. Links are not followed.
fn sync_tree(path: &Path) -> Result<()> {
    use rayon::prelude::*;
    let mut files = Vec::new();
    let mut dirs = Vec::new();
    let mut todo = vec![path.to_owned()];
    while let Some(p) = todo.pop() {
        let md = std::fs::symlink_metadata(&p).with_context(|| format!("{}: cannot flush", p.display()))?;
        if md.is_dir() {
            for e in std::fs::read_dir(&p).with_context(|| format!("{}: cannot flush", p.display()))? {
                todo.push(e?.path());
            }
            dirs.push(p);
        } else if md.is_file() {
            files.push(p);
        }
    }
    files.par_iter().try_for_each(|f| sync_path(f))?;
    dirs.iter().rev().try_for_each(|d| sync_path(d))
}

/// `fsync` of one file or directory, opened read-only.
fn sync_path(p: &Path) -> Result<()> {
    File::open(p).and_then(|f| f.sync_all()).with_context(|| format!("{}: cannot flush to disk", p.display()))
}

/// Whether a temp entry's name says it was made by a process that has ended: its PID is
/// gone, or is now another process (another start time).
fn is_dead_temp(name: &str) -> bool {
    let Some(tail) = name.rfind(MARK).map(|i| &name[i + MARK.len()..]) else { return false };
    let mut it = tail.split('.');
    let (Some(pid), Some(start), Some(rand), None) = (it.next(), it.next(), it.next(), it.next()) else {
        return false;
    };
    let (Ok(pid), Ok(start)) = (pid.parse::<u32>(), start.parse::<u64>()) else { return false };
    if rand.len() != 16 || !rand.bytes().all(|b| b.is_ascii_hexdigit()) || !Path::new("/proc/self/stat").exists() {
        return false;
    }
    start_time(pid) != Some(start)
}

/// Removes from `dir` the temp entries that organ processes which have ended left behind
/// (a run killed before it could clean up). Returns how many were removed.
pub fn sweep(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    let mut n = 0;
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.starts_with('.') || !is_dead_temp(name) {
            continue;
        }
        let p = e.path();
        // Only what organ makes: a regular file or a directory. A link is removed as a
        // link (remove_dir_all does not follow links either).
        let removed = match std::fs::symlink_metadata(&p) {
            Ok(md) if md.is_dir() => std::fs::remove_dir_all(&p).is_ok(),
            Ok(md) if md.is_file() => std::fs::remove_file(&p).is_ok(),
            _ => false,
        };
        n += usize::from(removed);
    }
    n
}

impl Temp {
    /// A temp name beside `dest` (nothing is created yet), after checking that `dest`
    /// may be written and sweeping dead temp entries from its directory.
    fn name(dest: &Path, force: bool, kind: input::Output) -> Result<Temp> {
        if is_stdout(dest) {
            bail!("-: standard output takes reports (--json, --csv, --html), not models: name a file (./- for one called -)");
        }
        input::check_dest_of(dest, force, kind)?;
        Ok(Temp { path: Self::path_beside(dest)?, dest: dest.to_owned(), force, kind, over_input: false, done: false })
    }

    /// A new temp entry's name beside `dest`, after sweeping dead temp entries from its
    /// directory.
    fn path_beside(dest: &Path) -> Result<PathBuf> {
        let (dir, name) = split(dest)?;
        sweep(&dir);
        let pid = std::process::id();
        let start = start_time(pid).unwrap_or(0);
        Ok(dir.join(format!(".{name}{MARK}{pid}.{start}.{:016x}", random_u64()?)))
    }

    /// Creates the temp file of `self` exclusively, never through a link, with `mode`
    /// (less the umask).
    fn create(&self, mode: u32) -> Result<File> {
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .mode(mode)
            .open(&self.path)
            .with_context(|| format!("{}: cannot create its temp file {}", self.dest.display(), self.path.display()))
    }

    /// A new temp file that will replace `input`, a regular file this run reads, whole
    /// (`organ meta --in-place`, when its edit cannot be made by one write that a kill
    /// leaves whole), with `input`'s permissions: a kill leaves the old file or the new.
    ///
    /// # Errors
    /// `input` is not a regular file, or the temp file cannot be created.
    pub fn over_input(input: &Path) -> Result<(Temp, File)> {
        let md = std::fs::symlink_metadata(input).with_context(|| format!("{}: cannot stat", input.display()))?;
        if !md.is_file() {
            bail!("{}: not a regular file (a link is not replaced); edit it with --out", input.display());
        }
        let t = Temp {
            path: Self::path_beside(input)?,
            dest: input.to_owned(),
            force: true,
            kind: input::Output::File,
            over_input: true,
            done: false,
        };
        // Private until it has the input's mode whole (given to open, the umask would take
        // 0664 to 0644).
        let f = t.create(0o600)?;
        f.set_permissions(md.permissions())
            .with_context(|| format!("{}: cannot give its temp file its permissions", input.display()))?;
        Ok((t, f))
    }

    /// A new temp file for `dest`, created exclusively, never through a link.
    ///
    /// # Errors
    /// `dest` may not be written ([`input::check_dest`]), or the file cannot be created.
    pub fn file(dest: &Path, force: bool) -> Result<(Temp, File)> {
        let t = Self::name(dest, force, input::Output::File)?;
        let f = t.create(0o644)?;
        Ok((t, f))
    }

    /// A new temp directory for `dest` (`mkdir` fails on any existing entry, a link too).
    ///
    /// # Errors
    /// As [`Temp::file`].
    pub fn dir(dest: &Path, force: bool) -> Result<Temp> {
        let t = Self::name(dest, force, input::Output::OrganDir)?;
        std::fs::create_dir(&t.path)
            .with_context(|| format!("{}: cannot create its temp directory {}", dest.display(), t.path.display()))?;
        Ok(t)
    }

    /// Renames the finished temp entry to the destination: only if nothing is there
    /// (without `force`), or swapped with what is there (with `force`), which is then
    /// removed. The destination is checked once more against the run's inputs. When it
    /// replaces something, or with `--fsync`, the entry is flushed to disk first and the
    /// rename after (see the module's note on durability).
    ///
    /// Nothing is renamed on a thread whose watched bar was abandoned
    /// ([`crate::progress::interrupted`]).
    ///
    /// # Errors
    /// The destination appeared meanwhile (without `force`), became an input, a flush
    /// failed, the rename failed, or the call was interrupted.
    pub fn commit(mut self) -> Result<()> {
        // The Python caller was interrupted: the temp entry is removed (on drop) instead.
        if crate::progress::interrupted() {
            bail!("{}: not written: the call was interrupted", self.dest.display());
        }
        if !self.over_input {
            input::check_dest_of(&self.dest, self.force, self.kind)?;
        }
        let exists = std::fs::symlink_metadata(&self.dest).is_ok();
        let durable = exists || FSYNC.load(Ordering::Relaxed);
        if durable {
            sync_tree(&self.path)?;
        }
        self.rename(exists)?;
        if durable {
            let (dir, _) = split(&self.dest)?;
            sync_path(&dir)?;
        }
        Ok(())
    }

    /// The rename of [`Temp::commit`]: `exists` says whether the destination was there.
    fn rename(&mut self, exists: bool) -> Result<()> {
        let flags = if exists { RenameFlags::EXCHANGE } else { RenameFlags::NOREPLACE };
        match renameat_with(CWD, &self.path, CWD, &self.dest, flags) {
            Ok(()) => {}
            Err(rustix::io::Errno::EXIST) => {
                bail!("{}: appeared while organ was writing; not replaced (use --force)", self.dest.display())
            }
            // A filesystem without renameat2 flags: check, then a plain rename.
            Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS) => {
                if !exists && std::fs::symlink_metadata(&self.dest).is_ok() {
                    bail!("{}: appeared while organ was writing; not replaced (use --force)", self.dest.display());
                }
                if exists && std::fs::symlink_metadata(&self.dest).is_ok_and(|m| m.is_dir()) {
                    std::fs::remove_dir_all(&self.dest)
                        .with_context(|| format!("{}: cannot remove the old output", self.dest.display()))?;
                }
                std::fs::rename(&self.path, &self.dest)
                    .with_context(|| format!("{}: cannot rename into place", self.dest.display()))?;
                self.done = true;
                return Ok(());
            }
            Err(e) => bail!("{}: cannot rename into place: {e}", self.dest.display()),
        }
        // With EXCHANGE, the old output now sits at the temp path: drop removes it.
        self.done = !exists;
        Ok(())
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        if !self.done {
            match std::fs::symlink_metadata(&self.path) {
                Ok(md) if md.is_dir() => drop(std::fs::remove_dir_all(&self.path)),
                Ok(_) => drop(std::fs::remove_file(&self.path)),
                Err(_) => {}
            }
        }
    }
}

/// Writes a report (or any small output) to `path` through `fill`, atomically; an
/// existing file is replaced only with `force`, an input never. `-` is standard output,
/// written as `fill` goes (nothing is replaced, so `force` is not needed).
///
/// # Errors
/// As [`Temp::file`], and any error of `fill` or of writing.
pub fn write_file(path: &Path, force: bool, fill: impl FnOnce(&mut dyn Write) -> Result<()>) -> Result<()> {
    if is_stdout(path) {
        let mut w = std::io::BufWriter::new(std::io::stdout().lock());
        let done = fill(&mut w).and_then(|()| Ok(w.flush()?));
        // A closed pipe (`--json - | head`) is not an error: say it as an io::Error, which
        // the binary's edge takes for one, whichever encoder met it.
        return done
            .map_err(|e| if broken_pipe(&e) { std::io::Error::from(std::io::ErrorKind::BrokenPipe).into() } else { e })
            .context("standard output: write failed");
    }
    let (tmp, f) = Temp::file(path, force)?;
    let mut w = std::io::BufWriter::new(f);
    fill(&mut w)?;
    let f =
        w.into_inner().map_err(|e| e.into_error()).with_context(|| format!("{}: write failed", tmp.path.display()))?;
    drop(f);
    tmp.commit()
}

/// Whether `e` is a write to a closed pipe, as std, serde_json or csv report it.
pub fn broken_pipe(e: &anyhow::Error) -> bool {
    use std::io::ErrorKind::BrokenPipe;
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == BrokenPipe)
            || c.downcast_ref::<serde_json::Error>().is_some_and(|j| j.io_error_kind() == Some(BrokenPipe))
            || c.downcast_ref::<csv::Error>()
                .is_some_and(|c| matches!(c.kind(), csv::ErrorKind::Io(io) if io.kind() == BrokenPipe))
    })
}

/// [`write_file`] of `value` as pretty JSON with a final newline (the reports' `--json`).
pub fn write_json<T: serde::Serialize>(path: &Path, force: bool, value: &T) -> Result<()> {
    write_file(path, force, |w| {
        serde_json::to_writer_pretty(&mut *w, value)?;
        writeln!(w)?;
        Ok(())
    })
}

/// [`write_file`] of `text` (the reports' `--html`).
pub fn write_text(path: &Path, force: bool, text: &str) -> Result<()> {
    write_file(path, force, |w| Ok(w.write_all(text.as_bytes())?))
}
