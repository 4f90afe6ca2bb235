//! [`ByteSource`]: where a model file's bytes come from, behind one trait: a memory-mapped
//! file ([`Mapped`]), bytes read into memory ([`Plain`]: a file that cannot be mapped, a
//! body a server sent whole), and an object at a URL read by range requests, from an HTTP
//! server or an object store ([`crate::remote::Remote`], whose transports differ). A
//! [`crate::model_file::ModelFile`] holds one and never asks which it is.
//!
//! Also the one policy that decides whether a command reads a model through its maps or by
//! positioned reads of what it needs ([`stream`]).

use anyhow::{Context, Result};
use memmap2::Mmap;
use std::fs::File;

/// What pins an object for a run: its ETag and Last-Modified as the first answer gave
/// them. A strong ETag goes back as If-Match; otherwise Last-Modified goes back as
/// If-Unmodified-Since. Every answer must carry the same values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pin {
    pub etag: Option<String>,
    pub last_modified: Option<String>,
}

impl std::fmt::Display for Pin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.etag, &self.last_modified) {
            (Some(e), _) => write!(f, "ETag {e}"),
            (None, Some(d)) => write!(f, "Last-Modified {d}"),
            (None, None) => write!(f, "no validator"),
        }
    }
}

/// A model file's bytes, wherever they are. Reads are positioned and checked against the
/// length; errors name the file or URL and the offset.
pub trait ByteSource: Send + Sync {
    /// Its length in bytes.
    fn size(&self) -> u64;

    /// What names it in errors: the path, or the URL read.
    fn what(&self) -> &str;

    /// Reads `buf.len()` bytes at `offset`.
    ///
    /// # Errors
    /// The range is not in the source, or the read fails.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()>;

    /// Reads each `(offset, buffer)` of `parts` (ascending, disjoint): one read each,
    /// unless the source can join them (many ranges a request).
    ///
    /// # Errors
    /// As [`Self::read_exact_at`].
    fn read_ranges(&self, parts: &mut [(u64, &mut [u8])]) -> Result<()> {
        parts.iter_mut().try_for_each(|(offset, buf)| self.read_exact_at(buf, *offset))
    }

    /// For bytes that came from a URL, what a cache keys on instead of a hash of them
    /// ([`crate::remote::identity`]): what names the object when not the URL as given (an
    /// `hf://` file at its commit, a store object's version), and the validator that
    /// pinned it. None for a local file, whose key is a hash of its bytes.
    fn origin(&self) -> Option<(Option<&str>, &Pin)> {
        None
    }

    /// All its bytes as one slice, where they are in memory (a map, or read whole).
    fn whole(&self) -> Option<&[u8]> {
        None
    }

    /// The open file behind it, where one is held (read-ahead advice, in-kernel copies).
    fn file(&self) -> Option<&File> {
        None
    }

    /// Gives back the memory `[offset, offset + len)` holds, once read and no longer
    /// needed: a map's pages leave the process's resident set (read from the file again if
    /// touched again). Nothing for bytes held in memory.
    fn release(&self, _offset: u64, _len: u64) {}
}

/// Bytes that can give their memory back ([`ByteSource::release`]).
pub trait Release {
    /// Releases what `[offset, offset + len)` holds, if it can.
    fn release(&self, _offset: u64, _len: u64) {}
}

impl Release for Vec<u8> {}

impl Release for Mmap {
    fn release(&self, offset: u64, len: u64) {
        // Whole pages inside the range only: a page shared with a neighbour stays.
        let page = rustix::param::page_size() as u64;
        let start = offset.div_ceil(page) * page;
        let end = offset.saturating_add(len).min(self.len() as u64) / page * page;
        if end > start {
            // SAFETY: the map is a read-only map of a file: dropping its pages loses
            // nothing (they are read from the file again if touched), and the bytes any
            // slice into the range reads stay the file's.
            let _ = unsafe {
                self.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start as usize, (end - start) as usize)
            };
        }
    }
}

/// Above this many bytes, a command reads a model by positioned reads of what it needs
/// rather than through memory maps, so memory stays bounded whatever the size (a map
/// keeps every page it touched).
pub const STREAM_ABOVE_BYTES: u64 = 2 << 30;

/// Whether a command reads a model of `bytes` bytes by positioned reads: when asked
/// (`--stream`), when its bytes are not in memory (a model at a URL: `in_memory` false),
/// or when it is larger than [`STREAM_ABOVE_BYTES`]. measure, diff and check decide here.
pub fn stream(asked: bool, in_memory: bool, bytes: u64) -> bool {
    asked || !in_memory || bytes > STREAM_ABOVE_BYTES
}

/// What names a URL's object and pinned it, for a local copy of it (a model fetched whole).
pub type Origin = (Option<String>, Pin);

/// Bytes of a local file or body: a read-only map of a file ([`Mapped`]), or bytes in
/// memory ([`Plain`]: a file that cannot be mapped, then also held for positioned reads,
/// or a body a server sent whole).
pub struct Local<B> {
    /// What names it in errors.
    name: String,
    bytes: B,
    /// The file, held for positioned reads and copies; none once closed (organ files:
    /// a directory of any number of tensors holds no descriptor open) or for a body.
    file: Option<File>,
    origin: Option<Origin>,
}

/// A read-only memory map of a file.
pub type Mapped = Local<Mmap>;
/// Bytes read into memory whole.
pub type Plain = Local<Vec<u8>>;

impl Plain {
    /// A body received whole from the URL `name`, pinned as `origin` says.
    pub fn received(name: String, bytes: Vec<u8>, origin: Origin) -> Plain {
        Local { name, bytes, file: None, origin: Some(origin) }
    }
}

/// The bytes of `file` (named `name` in errors): mapped, or read whole where mapping is
/// not possible; `origin` when it is a local copy of a URL's object. With `close`, a
/// mapped file is closed (the map stays).
///
/// # Errors
/// The file can be neither mapped nor read.
pub fn local(name: String, file: File, origin: Option<Origin>, close: bool) -> Result<Box<dyn ByteSource>> {
    // SAFETY: the map is read-only and private to this process. If another process
    // truncates the file while we hold the map, touching a page past the new end raises
    // SIGBUS; organ never writes its inputs, and this is the documented trade-off of
    // mapping (README, "Memory maps").
    if let Ok(map) = unsafe { Mmap::map(&file) } {
        let file = (!close).then_some(file);
        return Ok(Box::new(Local { name, bytes: map, file, origin }));
    }
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut &file, &mut bytes).with_context(|| format!("{name}: cannot read"))?;
    Ok(Box::new(Local { name, bytes, file: Some(file), origin }))
}

/// A positioned read where the file is held open, else a copy out of `bytes`.
fn read_local(name: &str, file: Option<&File>, bytes: &[u8], buf: &mut [u8], offset: u64) -> Result<()> {
    if let Some(file) = file {
        use std::os::unix::fs::FileExt;
        return file.read_exact_at(buf, offset).with_context(|| format!("{name}: read at offset {offset}"));
    }
    let src = usize::try_from(offset)
        .ok()
        .and_then(|o| bytes.get(o..o.checked_add(buf.len())?))
        .with_context(|| format!("{name}: {} bytes at offset {offset} lie past its end", buf.len()))?;
    buf.copy_from_slice(src);
    Ok(())
}

impl<B: std::ops::Deref<Target = [u8]> + Release + Send + Sync> ByteSource for Local<B> {
    fn what(&self) -> &str {
        &self.name
    }
    fn size(&self) -> u64 {
        self.bytes.len() as u64
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        read_local(&self.name, self.file.as_ref(), &self.bytes, buf, offset)
    }
    fn origin(&self) -> Option<(Option<&str>, &Pin)> {
        self.origin.as_ref().map(|(n, p)| (n.as_deref(), p))
    }
    fn whole(&self) -> Option<&[u8]> {
        Some(&self.bytes)
    }
    fn file(&self) -> Option<&File> {
        self.file.as_ref()
    }
    fn release(&self, offset: u64, len: u64) {
        self.bytes.release(offset, len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streamed_when_asked_not_in_memory_or_large() {
        assert!(!stream(false, true, STREAM_ABOVE_BYTES));
        assert!(stream(false, true, STREAM_ABOVE_BYTES + 1));
        assert!(stream(true, true, 0));
        assert!(stream(false, false, 0));
    }

    /// A mapped file and a body held whole read the same, and refuse a range past their
    /// end naming themselves; a closed mapped file holds no descriptor.
    #[test]
    fn local_and_received_bytes_read_alike() {
        let bytes: Vec<u8> = (0..5000u32).map(|i| (i * 7) as u8).collect();
        let path = std::env::temp_dir().join(format!("organ-byte-source-{}", std::process::id()));
        std::fs::write(&path, &bytes).unwrap();
        let open = || File::open(&path).unwrap();
        let pin = Pin { etag: Some("\"e\"".into()), last_modified: None };
        let sources: Vec<Box<dyn ByteSource>> = vec![
            local("m.gguf".into(), open(), None, false).unwrap(),
            local("m.gguf".into(), open(), None, true).unwrap(),
            Box::new(Plain::received("m.gguf".into(), bytes.clone(), (None, pin))),
        ];
        std::fs::remove_file(&path).unwrap();
        for (i, s) in sources.iter().enumerate() {
            assert_eq!((s.size(), s.whole()), (5000, Some(&bytes[..])), "{i}");
            let mut a = [0u8; 10];
            let mut b = [0u8; 3];
            s.read_ranges(&mut [(100, &mut a[..]), (4997, &mut b[..])]).unwrap();
            assert_eq!((&a[..], &b[..]), (&bytes[100..110], &bytes[4997..]), "{i}");
            let e = format!("{:#}", s.read_exact_at(&mut a, 4995).unwrap_err());
            assert!(e.starts_with("m.gguf: ") && e.contains("4995"), "{i}: {e}");
            assert_eq!(s.origin().is_some(), i == 2, "{i}");
        }
        assert!(sources[0].file().is_some() && sources[1].file().is_none() && sources[2].file().is_none());
    }
}
