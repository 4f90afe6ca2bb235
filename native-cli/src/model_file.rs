//! [`ModelFile`]: one opened file of a model (GGUF, shard, organ file, manifest), where its
//! bytes live: a read-only memory map (plain read as the fallback) and positioned reads,
//! with errors that name the file. Files are opened through [`crate::input::open`]:
//! regular files only, each recorded as an input.

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
}

impl ModelFile {
    /// Opens `path` read-only. Nothing is read yet: pages come in as they are touched.
    pub fn open(path: &Path) -> Result<ModelFile> {
        let file = crate::input::open(path)?;
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
        Ok(ModelFile { path: path.to_owned(), bytes, file: Some(file), id })
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

    /// The open file, where it is held (for read-ahead advice).
    pub fn file(&self) -> Option<&File> {
        self.file.as_ref()
    }

    /// Parses the header.
    pub fn parse(&self) -> Result<Gguf<'_>> {
        Gguf::parse(&self.bytes, self.bytes.len() as u64)
            .with_context(|| format!("{}: not a valid GGUF", self.path.display()))
    }

    /// The file name, for reports.
    pub fn file_name(&self) -> String {
        self.path.file_name().map_or_else(|| self.path.display().to_string(), |n| n.to_string_lossy().into_owned())
    }
}
