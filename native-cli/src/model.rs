//! Opening model files: a read-only memory map (plain read as the fallback), and the
//! parsed header, with errors that name the file.

use anyhow::{Context, Result};
use memmap2::Mmap;
use organ_core::Gguf;
use std::fs::File;
use std::ops::Deref;
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
    /// The open file, for positioned reads that bypass the map.
    pub file: File,
}

impl ModelFile {
    /// Opens `path` read-only. Nothing is read yet: pages come in as they are touched.
    pub fn open(path: &Path) -> Result<ModelFile> {
        let file = File::open(path).with_context(|| format!("{}: cannot open", path.display()))?;
        crate::confine::check_opened(&file, path)?;
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
        Ok(ModelFile { path: path.to_owned(), bytes, file })
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
