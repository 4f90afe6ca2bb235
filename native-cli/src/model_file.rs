//! [`ModelFile`]: one opened file of a model (GGUF, shard, organ file, manifest), where its
//! bytes live: a read-only memory map (plain read as the fallback) and positioned reads,
//! with errors that name the file. Files are opened through [`crate::input::open`]:
//! regular files only, each recorded as an input. A file at an http(s) URL holds its
//! header only, and reads the rest by range requests ([`crate::remote`]).

use anyhow::{Context, Result};
use memmap2::Mmap;
use organ_core::Gguf;
use std::fs::File;
use std::ops::Deref;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// A model file's bytes.
pub enum Bytes {
    /// Memory-mapped.
    Map(Mmap),
    /// Read into memory (when mapping is not possible).
    Owned(Vec<u8>),
}

impl Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Map(m) => m,
            Bytes::Owned(v) => v,
        }
    }
}

/// An opened model file.
pub struct ModelFile {
    /// Where it is.
    pub path: PathBuf,
    /// Its bytes.
    pub bytes: Bytes,
    /// The open file, for positioned reads and in-kernel copies that bypass the map; none
    /// for organ files, which are closed once mapped (an organ directory of any number of
    /// tensors holds no descriptor open) and opened again for a copy.
    file: Option<File>,
    /// Device and inode, to know the file again when it is reopened.
    id: (u64, u64),
    /// For a file at a URL: the object, where `bytes` holds its header only (none when
    /// the server sent the whole body, which `bytes` then holds).
    remote: Option<crate::remote::Remote>,
    /// For a file at a URL: what names it and pinned it, and its size (its identity:
    /// [`crate::remote::Remote::identity`]).
    pin: Option<(crate::remote::Pin, u64)>,
    ident: Option<String>,
}

/// The first range asked of a remote file; the header's read grows from it geometrically
/// to what the core's parser says it needs.
const FIRST_READ: u64 = 1 << 20;
/// The chunk a remote file is fetched whole in ([`ModelFile::fetch_url`]).
const FETCH_CHUNK: usize = 8 << 20;

/// Metadata values of a model ([`organ_core::model::ValueBytes`]) are ranges of its
/// files' bytes.
impl AsRef<[u8]> for ModelFile {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

/// Checks, before the first byte of a whole download is written, that the `size` bytes the
/// server declared are no more than `--remote-max-whole` and fit in the free space of the
/// file system of `file` (under `dir`). The download then stops at `size`: every range
/// read is checked against it.
///
/// # Errors
/// Over the cap, or more than the free space.
fn room_for(file: &File, size: u64, url: &str, dir: &Path) -> Result<()> {
    let max = crate::remote::config().max_whole;
    if size > max {
        anyhow::bail!(
            "{url}: {size} bytes, more than the {max} organ fetches whole (--remote-max-whole): nothing was \
             downloaded"
        );
    }
    let fs = rustix::fs::fstatvfs(file).with_context(|| format!("{}: cannot tell its free space", dir.display()))?;
    let free = fs.f_bavail.saturating_mul(fs.f_frsize);
    if size > free {
        anyhow::bail!(
            "{url}: {size} bytes, more than the {free} bytes free under {} (TMPDIR): nothing was downloaded",
            dir.display()
        );
    }
    Ok(())
}

impl ModelFile {
    /// Opens `path` read-only. Nothing is read yet: pages come in as they are touched.
    pub fn open(path: &Path) -> Result<ModelFile> {
        Self::from_open(path, crate::input::open(path)?)
    }

    /// [`Self::open`] of a file already opened (through [`crate::input::open`]) from `path`.
    pub fn from_open(path: &Path, file: File) -> Result<ModelFile> {
        let md = file.metadata().with_context(|| format!("{}: cannot stat", path.display()))?;
        let id = (md.dev(), md.ino());
        // SAFETY: the map is read-only and private to this process. If another process
        // truncates the file while we hold the map, touching a page past the new end
        // raises SIGBUS; organ never writes its inputs, and this is the documented
        // trade-off of mapping (README, "Memory maps").
        let bytes = match unsafe { Mmap::map(&file) } {
            Ok(m) => Bytes::Map(m),
            Err(_) => {
                let mut v = Vec::new();
                std::io::Read::read_to_end(&mut &file, &mut v)
                    .with_context(|| format!("{}: cannot read", path.display()))?;
                Bytes::Owned(v)
            }
        };
        Ok(ModelFile { path: path.to_owned(), bytes, file: Some(file), id, remote: None, pin: None, ident: None })
    }

    /// Opens the GGUF at an http(s) URL: its header is read in growing ranges, parsed by
    /// the core as the browser does ([`Gguf::parse`] says how many bytes it still needs),
    /// and kept; tensor data is read later by [`Self::read_exact_at`].
    ///
    /// # Errors
    /// The URL cannot be read, or the header is not a valid GGUF or is too large.
    pub fn open_url(url: &Path) -> Result<ModelFile> {
        use crate::remote::{Opened, Remote};
        if std::env::var_os(crate::input::CONFINE_ENV).is_some()
            && std::env::var_os(crate::input::ALLOW_REMOTE_ENV).is_none()
        {
            // Under `organ serve`, inputs are files under its root; a URL would have the
            // server fetch what a request names, unless it was started to.
            anyhow::bail!("{}: this organ serve reads no remote models (--allow-remote)", url.display());
        }
        let (remote, prefix) = match Remote::open(url, FIRST_READ)? {
            Opened::Whole(body, pin) => {
                let len = body.len() as u64;
                let bytes = Bytes::Owned(body);
                return Ok(ModelFile {
                    path: url.to_owned(),
                    bytes,
                    file: None,
                    id: (0, 0),
                    remote: None,
                    pin: Some((pin, len)),
                    ident: None,
                });
            }
            Opened::Ranged(r, prefix) => (r, prefix),
        };
        // The header budget is reserved up front, as address space: only the bytes read
        // are touched, and the buffer never moves (growing one by copying would hold the old
        // and the new at once, 1.5 times the header). A budget too large to reserve is
        // grown into instead.
        let budget = organ_core::limits::max_header_bytes();
        let cap = usize::try_from(remote.size.min(budget)).unwrap_or(usize::MAX).max(prefix.len());
        let mut buf = Vec::new();
        let _ = buf.try_reserve_exact(cap);
        buf.extend_from_slice(&prefix);
        drop(prefix);
        let mut prefix = buf;
        loop {
            // The core refuses a header past the budget (Error::HeaderBudget), so `needed`
            // is within it.
            let needed = match Gguf::parse(&prefix, remote.size) {
                Ok(_) => break,
                Err(e) => match e.needed_len() {
                    Some(n) if n <= remote.size => n,
                    _ => return Err(anyhow::Error::new(e).context(format!("{}: not a valid GGUF", remote.url))),
                },
            };
            let have = prefix.len();
            // Double at least (a handful of requests for the largest header); the buffer
            // was reserved above, so growing it copies nothing, and the budget bounds it.
            let want = needed.max(have as u64 * 2).min(remote.size).min(budget).max(needed);
            prefix.resize(want as usize, 0);
            remote.read_exact_at(&mut prefix[have..], have as u64)?;
        }
        let (ident, pin) = remote.identity();
        let pin = Some((pin, remote.size));
        Ok(ModelFile {
            path: url.to_owned(),
            bytes: Bytes::Owned(prefix),
            file: None,
            id: (0, 0),
            remote: Some(remote),
            pin,
            ident,
        })
    }

    /// Opens the GGUF at an http(s) URL as [`Self::open_url`] does, then fetches the rest
    /// of it, by the same pinned range reads, into an unlinked temporary file under
    /// `$TMPDIR` and maps it: for the commands that need every tensor byte (diff, dissect,
    /// graft's donor). Memory holds one chunk at a time; the disk, the file.
    ///
    /// # Errors
    /// As [`Self::open_url`]; the temporary file cannot be made or written.
    pub fn fetch_url(url: &Path) -> Result<ModelFile> {
        let m = Self::open_url(url)?;
        let Some(remote) = &m.remote else { return Ok(m) };
        let dir = std::env::temp_dir();
        let fd = rustix::fs::open(
            &dir,
            rustix::fs::OFlags::TMPFILE | rustix::fs::OFlags::RDWR | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
        )
        .with_context(|| {
            format!("{}: cannot make a temporary file under {} to fetch it into", remote.url, dir.display())
        })?;
        let file = File::from(fd);
        let size = remote.size;
        room_for(&file, size, &remote.url, &dir)?;
        let mut buf = vec![0u8; FETCH_CHUNK.min(usize::try_from(size).unwrap_or(FETCH_CHUNK))];
        let mut at = 0u64;
        while at < size {
            let n = (size - at).min(buf.len() as u64) as usize;
            remote.read_exact_at(&mut buf[..n], at)?;
            std::os::unix::fs::FileExt::write_all_at(&file, &buf[..n], at)
                .with_context(|| format!("{}: cannot write its bytes under {}", remote.url, dir.display()))?;
            at += n as u64;
        }
        let md = file.metadata().with_context(|| format!("{}: cannot stat its temporary file", remote.url))?;
        // SAFETY: as in `open`; the file is unlinked and this process's own.
        let bytes = match unsafe { Mmap::map(&file) } {
            Ok(map) => Bytes::Map(map),
            Err(_) => {
                let mut v = Vec::new();
                std::io::Read::read_to_end(&mut &file, &mut v)
                    .with_context(|| format!("{}: cannot read its temporary file", remote.url))?;
                Bytes::Owned(v)
            }
        };
        let id = (md.dev(), md.ino());
        Ok(ModelFile {
            path: m.path.clone(),
            bytes,
            file: Some(file),
            id,
            remote: None,
            pin: m.pin.clone(),
            ident: m.ident.clone(),
        })
    }

    /// The file's length: the object's size for a remote file, whose `bytes` hold only its
    /// header.
    pub fn file_len(&self) -> u64 {
        self.remote.as_ref().map_or(self.bytes.len() as u64, |r| r.size)
    }

    /// Whether tensor data is read by range requests (`bytes` holds the header only).
    pub fn is_remote(&self) -> bool {
        self.remote.is_some()
    }

    /// A file read from a URL: its URL, validator and size ([`crate::remote::identity`]).
    pub fn remote_identity(&self) -> Option<(String, &crate::remote::Pin, u64)> {
        let url = self.ident.clone().unwrap_or_else(|| self.path.display().to_string());
        self.pin.as_ref().map(|(p, n)| (url, p, *n))
    }

    /// Opens and maps `path`, then closes it: the map stays, the descriptor goes.
    pub fn open_mapped(path: &Path) -> Result<ModelFile> {
        let mut m = Self::open(path)?;
        if matches!(m.bytes, Bytes::Map(_)) {
            m.file = None;
        }
        Ok(m)
    }

    /// Calls `f` with the open file: the one held, or the same file opened again (by its
    /// path, checked to be the same device and inode) for the length of the call.
    ///
    /// # Errors
    /// The file cannot be opened again, or its path now leads to another file.
    pub fn with_file<R>(&self, f: impl FnOnce(&File) -> Result<R>) -> Result<R> {
        if let Some(file) = &self.file {
            return f(file);
        }
        let file = crate::input::open(&self.path)?;
        let md = file.metadata().with_context(|| format!("{}: cannot stat", self.path.display()))?;
        if (md.dev(), md.ino()) != self.id {
            anyhow::bail!("{}: replaced by another file while organ was reading it", self.path.display());
        }
        f(&file)
    }

    /// Reads `buf.len()` bytes at `offset`: a positioned read where the file is held open,
    /// else a copy out of the map.
    ///
    /// # Errors
    /// The range is not in the file, or the read fails.
    pub fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        if let Some(r) = &self.remote {
            return r.read_exact_at(buf, offset);
        }
        if let Some(file) = &self.file {
            use std::os::unix::fs::FileExt;
            return file
                .read_exact_at(buf, offset)
                .with_context(|| format!("{}: read at offset {offset}", self.path.display()));
        }
        let src =
            usize::try_from(offset).ok().and_then(|o| self.bytes.get(o..o.checked_add(buf.len())?)).with_context(
                || format!("{}: {} bytes at offset {offset} lie past its end", self.path.display(), buf.len()),
            )?;
        buf.copy_from_slice(src);
        Ok(())
    }

    /// Reads each `(offset, buffer)` of `parts` (ascending, disjoint): for a remote file,
    /// many ranges a request where the server allows it; else one read each.
    ///
    /// # Errors
    /// As [`Self::read_exact_at`].
    pub fn read_ranges(&self, parts: &mut [(u64, &mut [u8])]) -> Result<()> {
        if let Some(r) = &self.remote {
            return r.read_ranges(parts);
        }
        parts.iter_mut().try_for_each(|(offset, buf)| self.read_exact_at(buf, *offset))
    }

    /// The open file, where it is held (for read-ahead advice).
    pub fn file(&self) -> Option<&File> {
        self.file.as_ref()
    }

    /// Parses the header.
    pub fn parse(&self) -> Result<Gguf<'_>> {
        Gguf::parse(&self.bytes, self.file_len()).with_context(|| format!("{}: not a valid GGUF", self.path.display()))
    }

    /// The file name, for reports.
    pub fn file_name(&self) -> String {
        if self.pin.is_some() {
            return crate::remote::file_name(&self.path.to_string_lossy());
        }
        self.path.file_name().map_or_else(|| self.path.display().to_string(), |n| n.to_string_lossy().into_owned())
    }
}
