//! [`ModelFile`]: one opened file of a model (GGUF, shard, organ file, manifest), where its
//! bytes live: a read-only memory map (plain read as the fallback) and positioned reads,
//! with errors that name the file. Files are opened through [`crate::input::open`]:
//! regular files only, each recorded as an input. A file at a URL holds its header only,
//! and reads the rest by range requests ([`crate::remote`]). Where the bytes come from is
//! its [`ByteSource`]'s business.

use crate::byte_source::{self, ByteSource};
use anyhow::{Context, Result};
use organ_core::gguf::{HeaderRead, Step};
use organ_core::Gguf;
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// An opened model file.
pub struct ModelFile {
    /// Where it is: a path, or the URL as given.
    pub path: PathBuf,
    /// Its bytes ([`byte_source`]).
    source: Box<dyn ByteSource>,
    /// For a source not in memory (a file at a URL): its header, read once.
    header: Vec<u8>,
    /// Device and inode, to know a local file again when it is reopened.
    id: (u64, u64),
}

/// The chunk a remote file is fetched whole in ([`ModelFile::fetch_url`]).
const FETCH_CHUNK: usize = 8 << 20;

/// Metadata values of a model ([`organ_core::model::ValueBytes`]) are ranges of its
/// files' bytes.
impl AsRef<[u8]> for ModelFile {
    fn as_ref(&self) -> &[u8] {
        self.bytes()
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
        Self::local(path, file, false)
    }

    /// Opens and maps `path`, then closes it: the map stays, the descriptor goes.
    pub fn open_mapped(path: &Path) -> Result<ModelFile> {
        Self::local(path, crate::input::open(path)?, true)
    }

    /// The local file `file` opened from `path`, closed once mapped with `close`.
    fn local(path: &Path, file: File, close: bool) -> Result<ModelFile> {
        let md = file.metadata().with_context(|| format!("{}: cannot stat", path.display()))?;
        let id = (md.dev(), md.ino());
        let source = byte_source::local(path.display().to_string(), file, None, close)?;
        Ok(ModelFile { path: path.to_owned(), source, header: Vec::new(), id })
    }

    /// Opens the GGUF at a URL: its header is read in growing ranges, as the core's
    /// [`HeaderRead`] asks (as the browser does), and kept; tensor data is read later by
    /// [`Self::read_exact_at`].
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
        let (remote, prefix) = match Remote::open(url, organ_core::limits::HEADER_FIRST_READ)? {
            Opened::Whole(body, pin) => {
                let name = url.display().to_string();
                let source = Box::new(byte_source::Plain::received(name, body, (None, pin)));
                return Ok(ModelFile { path: url.to_owned(), source, header: Vec::new(), id: (0, 0) });
            }
            Opened::Ranged(r, prefix) => (r, prefix),
        };
        // The header budget is reserved up front, as address space: only the bytes read
        // are touched, and the buffer never moves (growing one by copying would hold the old
        // and the new at once, 1.5 times the header). A budget too large to reserve is
        // grown into instead.
        let budget = organ_core::limits::max_header_bytes();
        let cap = usize::try_from(remote.size.min(budget)).unwrap_or(usize::MAX).max(prefix.len());
        let mut header = Vec::new();
        let _ = header.try_reserve_exact(cap);
        header.extend_from_slice(&prefix);
        drop(prefix);
        let read = HeaderRead::new(remote.size);
        loop {
            let step = read.step(&header);
            let want = match step.with_context(|| format!("{}: not a valid GGUF", remote.url))? {
                Step::Done(_) => break,
                Step::Need(want) => want,
            };
            let have = header.len();
            // Within the budget, so within what was reserved: growing copies nothing.
            header.resize(want as usize, 0);
            remote.read_exact_at(&mut header[have..], have as u64)?;
        }
        Ok(ModelFile { path: url.to_owned(), source: Box::new(remote), header, id: (0, 0) })
    }

    /// Opens the GGUF at a URL as [`Self::open_url`] does, then fetches the rest of it, by
    /// the same pinned range reads, into an unlinked temporary file under `$TMPDIR` and
    /// maps it: for the commands that need every tensor byte (diff, dissect, graft's
    /// donor). Memory holds one chunk at a time; the disk, the file.
    ///
    /// # Errors
    /// As [`Self::open_url`]; the temporary file cannot be made or written.
    pub fn fetch_url(url: &Path) -> Result<ModelFile> {
        let m = Self::open_url(url)?;
        if m.source.whole().is_some() {
            return Ok(m);
        }
        let what = m.source.what().to_owned();
        let dir = std::env::temp_dir();
        let fd = rustix::fs::open(
            &dir,
            rustix::fs::OFlags::TMPFILE | rustix::fs::OFlags::RDWR | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
        )
        .with_context(|| format!("{what}: cannot make a temporary file under {} to fetch it into", dir.display()))?;
        let file = File::from(fd);
        let size = m.source.size();
        room_for(&file, size, &what, &dir)?;
        let mut buf = vec![0u8; FETCH_CHUNK.min(usize::try_from(size).unwrap_or(FETCH_CHUNK))];
        let mut at = 0u64;
        while at < size {
            let n = (size - at).min(buf.len() as u64) as usize;
            m.source.read_exact_at(&mut buf[..n], at)?;
            std::os::unix::fs::FileExt::write_all_at(&file, &buf[..n], at)
                .with_context(|| format!("{what}: cannot write its bytes under {}", dir.display()))?;
            at += n as u64;
        }
        let md = file.metadata().with_context(|| format!("{what}: cannot stat its temporary file"))?;
        let origin = m.source.origin().map(|(name, pin)| (name.map(str::to_owned), pin.clone()));
        let source = byte_source::local(m.path.display().to_string(), file, origin, false)?;
        Ok(ModelFile { path: m.path.clone(), source, header: Vec::new(), id: (md.dev(), md.ino()) })
    }

    /// The file's bytes where they are in memory (a map, or read whole); for a file at a
    /// URL, its header only.
    pub fn bytes(&self) -> &[u8] {
        self.source.whole().unwrap_or(&self.header)
    }

    /// Gives back the memory its bytes `[offset, offset + len)` hold, once read: a map's
    /// pages leave the resident set ([`ByteSource::release`]).
    pub fn release(&self, offset: u64, len: u64) {
        self.source.release(offset, len);
    }

    /// The file's length (for a file at a URL, the object's, whose header only is in
    /// [`Self::bytes`]).
    pub fn file_len(&self) -> u64 {
        self.source.size()
    }

    /// Whether all its bytes are in memory (a map, or read whole), as its [`ByteSource`]
    /// says; if not (a file at a URL, read by range requests), its tensor data must be
    /// read by [`Self::read_exact_at`].
    pub fn in_memory(&self) -> bool {
        self.source.whole().is_some()
    }

    /// A file read from a URL: its URL, validator and size ([`crate::remote::identity`]).
    pub fn remote_identity(&self) -> Option<(String, &crate::remote::Pin, u64)> {
        let (name, pin) = self.source.origin()?;
        let url = name.map_or_else(|| self.path.display().to_string(), str::to_owned);
        Some((url, pin, self.source.size()))
    }

    /// Calls `f` with the open file: the one held, or the same file opened again (by its
    /// path, checked to be the same device and inode) for the length of the call.
    ///
    /// # Errors
    /// The file cannot be opened again, or its path now leads to another file.
    pub fn with_file<R>(&self, f: impl FnOnce(&File) -> Result<R>) -> Result<R> {
        if let Some(file) = self.source.file() {
            return f(file);
        }
        let file = crate::input::open(&self.path)?;
        let md = file.metadata().with_context(|| format!("{}: cannot stat", self.path.display()))?;
        if (md.dev(), md.ino()) != self.id {
            anyhow::bail!("{}: replaced by another file while organ was reading it", self.path.display());
        }
        f(&file)
    }

    /// Reads `buf.len()` bytes at `offset` ([`ByteSource::read_exact_at`]).
    ///
    /// # Errors
    /// The range is not in the file, or the read fails.
    pub fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.source.read_exact_at(buf, offset)
    }

    /// Reads each `(offset, buffer)` of `parts` (ascending, disjoint): for a remote file,
    /// many ranges a request where the server allows it; else one read each.
    ///
    /// # Errors
    /// As [`Self::read_exact_at`].
    pub fn read_ranges(&self, parts: &mut [(u64, &mut [u8])]) -> Result<()> {
        self.source.read_ranges(parts)
    }

    /// The open file, where it is held (for read-ahead advice).
    pub fn file(&self) -> Option<&File> {
        self.source.file()
    }

    /// Parses the header.
    pub fn parse(&self) -> Result<Gguf<'_>> {
        Gguf::parse(self.bytes(), self.file_len()).map_err(|e| {
            // A file cut short (a partial download) is said to be one, as inspect says it,
            // rather than "not a valid GGUF".
            let cut = Gguf::parse_cut_short(self.bytes(), self.file_len()).ok();
            match cut.as_ref().and_then(organ_core::gguf::cut::Cut::of) {
                Some(c) => anyhow::anyhow!(
                    "{}: {}; organ needs every byte of it here: download the rest first (organ inspect shows what \
                     is there)",
                    self.path.display(),
                    c.describe()
                ),
                None => anyhow::Error::new(e).context(format!("{}: not a valid GGUF", self.path.display())),
            }
        })
    }

    /// Parses the header of a file that may be cut short ([`Gguf::parse_cut_short`]).
    pub fn parse_cut_short(&self) -> Result<Gguf<'_>> {
        Gguf::parse_cut_short(self.bytes(), self.file_len())
            .with_context(|| format!("{}: not a valid GGUF", self.path.display()))
    }

    /// The file name, for reports.
    pub fn file_name(&self) -> String {
        if self.source.origin().is_some() {
            return crate::remote::file_name(&self.path.to_string_lossy());
        }
        self.path.file_name().map_or_else(|| self.path.display().to_string(), |n| n.to_string_lossy().into_owned())
    }
}
