//! The one error type of the core. Every variant names where it happened: the byte offset
//! in the file, the metadata key, or the tensor.

use alloc::string::String;

/// A `Result` whose error is [`Error`].
pub type Result<T, E = Error> = core::result::Result<T, E>;

/// What went wrong while reading, checking, dequantizing or writing GGUF data.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The bytes given end before the structure does, but the file is longer: read at least
    /// `needed` bytes from the start of the file and parse again (see [`Error::needed_len`]).
    #[error("offset {offset}: {what} needs bytes up to {needed}, only {have} given so far")]
    Incomplete {
        /// Where the unfinished read starts.
        offset: u64,
        /// What was being read.
        what: &'static str,
        /// The prefix length that would hold this read.
        needed: u64,
        /// The prefix length given.
        have: u64,
    },
    /// The file itself ends before the structure does.
    #[error("offset {offset}: file ends while reading {what}: needs {needed} bytes, file has {file_len}")]
    Truncated {
        /// Where the read starts.
        offset: u64,
        /// What was being read.
        what: &'static str,
        /// The file length that would hold this read.
        needed: u64,
        /// The file's length.
        file_len: u64,
    },
    /// The first four bytes are not `GGUF`.
    #[error("offset 0: not a GGUF file (it starts with \"{}\", expected \"GGUF\"){}", .found.escape_ascii(), .hint)]
    BadMagic {
        /// The bytes found.
        found: [u8; 4],
        /// What the file looks like instead, when organ recognizes it (`: a safetensors
        /// file…`), else empty.
        hint: &'static str,
    },
    /// A version we do not read (1, or anything past 3).
    #[error("offset 4: unsupported GGUF version {version} (organ reads versions 2 and 3)")]
    UnsupportedVersion {
        /// The version field.
        version: u32,
    },
    /// A big-endian GGUF (the version field reads byte-swapped).
    #[error("offset 4: big-endian GGUF files are unsupported (version field byte-swapped: {version:#010x})")]
    BigEndian {
        /// The raw version field.
        version: u32,
    },
    /// A length, count or depth beyond a cap in [`crate::limits`], or beyond the bytes left.
    #[error("offset {offset}: {what} is {value}, more than the limit {limit}")]
    TooLarge {
        /// Where the number was read.
        offset: u64,
        /// Which number.
        what: &'static str,
        /// Its value.
        value: u64,
        /// The largest value accepted here.
        limit: u64,
    },
    /// A count the bytes left in the file cannot hold: a file cut short inside its
    /// header, or not a GGUF.
    #[error(
        "offset {offset}: {what} is {value}, but the {remaining} bytes left in the file hold at most {limit}: \
         the file is cut short inside its header (a partial download?)"
    )]
    CountPastEnd {
        /// Where the number was read.
        offset: u64,
        /// Which number.
        what: &'static str,
        /// Its value.
        value: u64,
        /// Bytes of the file after the number.
        remaining: u64,
        /// How many the remaining bytes could hold.
        limit: u64,
    },
    /// A metadata value type code that GGUF does not define.
    #[error("offset {offset}: unknown metadata value type {code}")]
    BadValueType {
        /// Where the type code was read.
        offset: u64,
        /// The code.
        code: u32,
    },
    /// A key or tensor name that is not UTF-8.
    #[error("offset {offset}: {what} is not valid UTF-8")]
    BadUtf8 {
        /// Where the string starts.
        offset: u64,
        /// Which string.
        what: &'static str,
    },
    /// The same metadata key twice.
    #[error("offset {offset}: duplicate metadata key {key:?}")]
    DuplicateKey {
        /// Where the second one starts.
        offset: u64,
        /// The key.
        key: String,
    },
    /// A metadata value whose type or value makes no sense for its key.
    #[error("metadata key {key:?}: {reason}")]
    BadMetadata {
        /// The key.
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// An organ directory's manifest that is not valid JSON of its schema, or breaks a cap.
    #[error("{reason}")]
    BadManifest {
        /// What is wrong (with the line and column, for JSON errors).
        reason: String,
    },
    /// A tensor whose description cannot be honoured.
    #[error("tensor {tensor:?} (info at offset {offset}): {reason}")]
    BadTensor {
        /// The tensor's name.
        tensor: String,
        /// Where its info record starts in the file.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// The same tensor name twice.
    #[error("offset {offset}: duplicate tensor name {tensor:?}")]
    DuplicateTensor {
        /// Where the second info record starts.
        offset: u64,
        /// The name.
        tensor: String,
    },
    /// A ggml type that the format defines but gguf-py (and so organ) cannot dequantize.
    #[error("tensor type {ty} cannot be dequantized (no reference dequantizer in gguf-py 0.19.0)")]
    NotDequantizable {
        /// The type's name.
        ty: &'static str,
    },
    /// A buffer of the wrong size was passed to a dequantizer or writer.
    #[error("{what}: expected {expected} bytes, got {got}")]
    SizeMismatch {
        /// Which buffer.
        what: &'static str,
        /// The size it must have.
        expected: u64,
        /// The size it has.
        got: u64,
    },
    /// A tensor whose shape and size do not divide as its kind needs (an expert tensor
    /// that is not E equal slices of whole blocks).
    #[error("tensor {tensor:?}: {reason}")]
    BadLayout {
        /// The tensor's name.
        tensor: String,
        /// What does not hold.
        reason: String,
    },
    /// Two things that must have the same count do not.
    #[error("{what}: expected {expected}, got {got}")]
    CountMismatch {
        /// What was counted.
        what: &'static str,
        /// The count it must have.
        expected: u64,
        /// The count it has.
        got: u64,
    },
    /// A header longer than the header budget ([`crate::limits::max_header_bytes`]).
    #[error(
        "offset {offset}: the header reaches past byte {needed}, more than the header budget of {limit} bytes \
         (--max-header-bytes)"
    )]
    HeaderBudget {
        /// Where the read that would cross the budget starts.
        offset: u64,
        /// The header length that read needs, at least.
        needed: u64,
        /// The budget.
        limit: u64,
    },
    /// A setting given as text that does not read (a size, a list of types).
    #[error("{what}: {reason}")]
    BadSetting {
        /// The text given.
        what: String,
        /// What was expected.
        reason: String,
    },
    /// Something organ was asked to do that it has no means for (a type it cannot
    /// quantize to).
    #[error("{reason}")]
    Unsupported {
        /// What, and what it can do instead.
        reason: String,
    },
    /// A metadata edit organ refuses (a key it does not change, one absent, a malformed
    /// key or value).
    #[error("metadata key {key:?}: {reason}")]
    BadEdit {
        /// The key (its first 80 characters).
        key: String,
        /// What is wrong, and what to do instead.
        reason: String,
    },
    /// A merge configuration organ refuses (an unknown or unsupported key, a value of the
    /// wrong kind, a parameter missing).
    #[error("merge config {key}: {reason}")]
    BadConfig {
        /// Where in the configuration (`models[1].parameters.weight`).
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// Something a writer was asked to write cannot be represented.
    #[error("cannot write GGUF: {reason}")]
    Unwritable {
        /// Why.
        reason: String,
    },
    /// A quantization llama-quantize would refuse, or organ cannot yet make
    /// (`organ quantize`'s plan).
    #[error("cannot quantize: {reason}")]
    Quantize {
        /// Why, naming the tensor, key or setting.
        reason: String,
    },
}

impl Error {
    /// For [`Error::Incomplete`]: the prefix length to read before parsing again.
    /// `None` for every other error (they are final).
    pub fn needed_len(&self) -> Option<u64> {
        match self {
            Error::Incomplete { needed, .. } => Some(*needed),
            _ => None,
        }
    }
}
