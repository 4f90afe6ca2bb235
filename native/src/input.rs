//! Opening inputs, and knowing them again when an output is about to be written.
//!
//! - Only regular files are read as models, manifests or organ files: a FIFO, a device or
//!   a socket is refused before any read could block (the open itself is non-blocking).
//! - Every input is recorded by device and inode, so that no output, `--force` or not,
//!   can replace it ([`check_dest`]), whatever name or link leads to it.
//! - Under `organ serve`, the child process gets `ORGAN_CONFINE=ROOT`: every input it
//!   opens is checked, on the opened descriptor, to lie under ROOT. The server checked
//!   the path when the request came; this check holds even if the path was swapped for
//!   a link after that (the file is opened once, and what was opened is what is checked).

use anyhow::{bail, Context, Result};
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex};

/// The environment variable `organ serve` sets for its children: the root every input
/// must lie under.
pub const CONFINE_ENV: &str = "ORGAN_CONFINE";
/// Set with [`CONFINE_ENV`] by `organ serve --allow-remote`: models may be read from
/// http(s) URLs all the same.
pub const ALLOW_REMOTE_ENV: &str = "ORGAN_ALLOW_REMOTE";
/// `--max-header-bytes` as an environment variable: `organ serve` passes its budget to its
/// children by it.
pub const MAX_HEADER_BYTES_ENV: &str = "ORGAN_MAX_HEADER_BYTES";

/// Every input this process has opened or been named: device and inode, and where it
/// was found (its real path).
static INPUTS: LazyLock<Mutex<HashMap<(u64, u64), PathBuf>>> = LazyLock::new(Default::default);

fn record(md: &std::fs::Metadata, path: &Path) {
    if let Ok(mut m) = INPUTS.lock() {
        m.entry((md.dev(), md.ino())).or_insert_with(|| path.canonicalize().unwrap_or_else(|_| path.to_owned()));
    }
}

/// What kind of file `md` is, for an error message.
fn kind(md: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = md.file_type();
    if t.is_dir() {
        "directory"
    } else if t.is_fifo() {
        "FIFO"
    } else if t.is_socket() {
        "socket"
    } else if t.is_block_device() || t.is_char_device() {
        "device"
    } else if t.is_symlink() {
        "symbolic link"
    } else {
        "special file"
    }
}

/// Opens `path` to read: it must be a regular file (under `organ serve`, one inside its
/// root). The file is recorded as an input.
///
/// # Errors
/// It cannot be opened, is not a regular file, or (under `organ serve`) lies outside the
/// root.
pub fn open(path: &Path) -> Result<File> {
    let file = open_regular(path)?;
    check_confined(&file, path)?;
    let md = file.metadata().with_context(|| format!("{}: cannot stat", path.display()))?;
    record(&md, path);
    Ok(file)
}

/// Opens `path` to read if it is a regular file, without waiting (a FIFO is refused, not
/// opened for good) and without recording it as an input: for files organ may replace
/// later in the same run (a fleet's results).
///
/// # Errors
/// It cannot be opened or is not a regular file.
pub fn open_regular(path: &Path) -> Result<File> {
    // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, forever.
    // On a regular file it changes nothing, and it is cleared below all the same.
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)
        .with_context(|| format!("{}: cannot open", path.display()))?;
    let md = file.metadata().with_context(|| format!("{}: cannot stat", path.display()))?;
    if !md.is_file() {
        bail!("{}: a {}, not a regular file: organ reads only regular files", path.display(), kind(&md));
    }
    rustix::fs::fcntl_setfl(&file, rustix::fs::OFlags::empty())
        .with_context(|| format!("{}: cannot clear O_NONBLOCK", path.display()))?;
    Ok(file)
}

/// Records an organ directory (or any directory read as a model) as an input, so that no
/// output replaces it or anything under it.
///
/// # Errors
/// `dir` is not a directory, or lies outside the root under `organ serve`.
pub fn open_dir(dir: &Path) -> Result<()> {
    let f = File::open(dir).with_context(|| format!("{}: cannot open", dir.display()))?;
    let md = f.metadata().with_context(|| format!("{}: cannot stat", dir.display()))?;
    if !md.is_dir() {
        bail!("{}: not a directory", dir.display());
    }
    check_confined(&f, dir)?;
    record(&md, dir);
    Ok(())
}

/// Records a path named as an input on the command line before it is opened, so that an
/// output named the same is refused before any work is done. Paths that do not exist
/// are skipped (opening them will say so).
pub fn declare(path: &Path) {
    if let Ok(md) = std::fs::metadata(path) {
        record(&md, path);
    }
}

/// Under `organ serve` (`ORGAN_CONFINE` set), checks that the opened `file` lies under
/// the root: the descriptor's own path, as the kernel has it, is what counts.
fn check_confined(file: &File, path: &Path) -> Result<()> {
    let Some(root) = std::env::var_os(CONFINE_ENV) else { return Ok(()) };
    let root = PathBuf::from(root);
    let real =
        opened_path(file).with_context(|| format!("{}: cannot tell where the opened file lies", path.display()))?;
    if !real.starts_with(&root) {
        bail!("{}: lies outside the served root", path.display());
    }
    Ok(())
}

/// Where an open file really is: the kernel's name for its descriptor.
///
/// # Errors
/// /proc is not there, or the descriptor has no name.
pub fn opened_path(file: &File) -> std::io::Result<PathBuf> {
    use std::os::fd::AsRawFd;
    std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
}

/// Checks that an output file may be written at `dest`: never over an input of this run
/// (by device and inode, or a directory holding one), and over an existing entry only
/// with `force`, and then only over what organ could have written there: a regular file
/// ([`check_dest_of`]). `-` is standard output: nothing there is replaced.
///
/// # Errors
/// `dest` is an input, holds one, exists without `force`, or is not a regular file.
pub fn check_dest(dest: &Path, force: bool) -> Result<()> {
    check_dest_of(dest, force, Output::File)
}

/// What an output is, which says what `--force` may replace with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// A file: a model, a shard, a report. Replaces a regular file.
    File,
    /// An organ directory (`dissect`). Replaces a regular file or an organ directory (a
    /// directory holding organ's `manifest.json`).
    OrganDir,
}

/// [`check_dest`] for an output of kind `out`. A symbolic link is never replaced nor
/// written through, whatever it leads to: the user removes it or names its target.
///
/// # Errors
/// As [`check_dest`]; with `force`, `dest` is a link, a directory that is not an organ
/// directory (or any directory, for a file), a FIFO, a socket or a device.
pub fn check_dest_of(dest: &Path, force: bool, out: Output) -> Result<()> {
    if dest.as_os_str() == "-" {
        return Ok(());
    }
    let Ok(link) = std::fs::symlink_metadata(dest) else { return writable_dir(dest) };
    let inputs = INPUTS.lock().map(|m| m.clone()).unwrap_or_default();
    // Whatever the name leads to (a link is followed here: replacing the link would not
    // touch its target, but a user who names an input through a link means the input).
    if let Ok(md) = std::fs::metadata(dest) {
        if let Some(real) = inputs.get(&(md.dev(), md.ino())) {
            bail!(
                "{}: is an input of this run ({}); organ never overwrites its inputs",
                dest.display(),
                real.display()
            );
        }
        if md.is_dir() {
            let real = dest.canonicalize().unwrap_or_else(|_| dest.to_owned());
            if let Some(inside) = inputs.values().find(|i| i.starts_with(&real)) {
                bail!(
                    "{}: holds an input of this run ({}); organ never overwrites its inputs",
                    dest.display(),
                    inside.display()
                );
            }
        }
    }
    // A name that leads to no file (`/dev/stdout`, a pipe, a terminal): organ writes a temp
    // file and renames it into place, which such a name cannot take, with --force or not.
    if let Ok(md) = std::fs::metadata(dest) {
        if !md.is_file() && !md.is_dir() {
            let via = if link.file_type().is_symlink() {
                std::fs::read_link(dest).map(|t| format!(" (a link to {})", t.display())).unwrap_or_default()
            } else {
                String::new()
            };
            bail!(
                "{}: a {}{via}, not a regular file: organ writes each output to a temp file and renames it \
                 into place, never through a link nor into a pipe or device; a report goes to standard output \
                 as `-` (for example `--json -`)",
                dest.display(),
                kind(&md)
            );
        }
    }
    if !force {
        let what = if link.is_dir() { "a directory" } else { "a file" };
        bail!("{}: already exists ({what}); organ does not replace it without --force", dest.display());
    }
    let what = match out {
        Output::File => "a regular file",
        Output::OrganDir => "a regular file or an organ directory (one holding organ's manifest.json)",
    };
    if link.file_type().is_symlink() {
        let to = std::fs::read_link(dest).map(|t| format!(" to {}", t.display())).unwrap_or_default();
        bail!(
            "{}: a symbolic link{to}; --force replaces only {what}, never a link nor what it leads to: remove \
             the link, or name the file itself",
            dest.display()
        );
    }
    let replaceable = link.is_file() || (out == Output::OrganDir && link.is_dir() && is_organ_dir(dest));
    if !replaceable {
        let kind = if link.is_dir() {
            if out == Output::OrganDir {
                "directory that is not an organ directory"
            } else {
                "directory"
            }
        } else {
            kind(&link)
        };
        bail!("{}: a {kind}; --force replaces only {what}, which organ could have written", dest.display());
    }
    Ok(())
}

/// Before any work, for an output that does not exist yet: the directory it goes in exists
/// and takes new entries, so that an hour's work does not end on a missing directory
/// (the writer's temp file is made there).
///
/// # Errors
/// The directory is missing, not a directory, or not writable, named as the user gave it.
fn writable_dir(dest: &Path) -> Result<()> {
    let dir = dest.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    match std::fs::metadata(dir) {
        Err(_) => bail!("{}: cannot be written: its directory {} does not exist", dest.display(), dir.display()),
        Ok(md) if !md.is_dir() => {
            bail!("{}: cannot be written: {} is not a directory", dest.display(), dir.display())
        }
        Ok(_) => {}
    }
    if rustix::fs::access(dir, rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK).is_err() {
        bail!("{}: cannot be written: no permission to create files in {}", dest.display(), dir.display());
    }
    Ok(())
}

/// Whether `dir` holds organ's `manifest.json`: a regular file (not a link) whose first
/// bytes give the organ-directory format. Read without blocking, 4 KiB at most.
fn is_organ_dir(dir: &Path) -> bool {
    use std::io::Read;
    let flags = rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::NOFOLLOW;
    let Ok(f) = OpenOptions::new().read(true).custom_flags(flags.bits() as i32).open(dir.join("manifest.json")) else {
        return false;
    };
    if !f.metadata().is_ok_and(|m| m.is_file()) {
        return false;
    }
    let mut head = Vec::with_capacity(4096);
    if f.take(4096).read_to_end(&mut head).is_err() {
        return false;
    }
    let format = format!("\"{}\"", organ_core::model::manifest::FORMAT);
    head.windows(format.len()).any(|w| w == format.as_bytes())
}
