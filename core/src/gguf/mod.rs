//! GGUF: parse a header from a prefix of the file, locate tensor data, write a header.
//!
//! Format: <https://github.com/ggml-org/ggml/blob/master/docs/gguf.md>. Little-endian,
//! versions 2 and 3 (same layout): magic `GGUF`, u32 version, u64 tensor count, u64 kv
//! count, the key/value pairs, the tensor infos, padding to `general.alignment` (default
//! 32), then the data section where each tensor's offset is relative to its start.

pub mod cut;
pub mod display;
mod header;
mod header_read;
pub mod metadata;
pub mod split;
mod tensor;
pub mod writer;

pub use header::{Gguf, MetaKv, DEFAULT_ALIGNMENT};
pub use header_read::{HeaderRead, Step};
pub use metadata::{MetaArray, MetaValue, ValueType};
pub use tensor::TensorInfo;
