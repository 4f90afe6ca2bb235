//! Named caps on what a GGUF file may ask of us.
//!
//! A GGUF header is attacker-controlled: every length and count in it is checked against
//! these caps *and* against the bytes that remain in the file before anything is allocated
//! or looped over. The caps are generous for real models (a 1T-parameter MoE has a few
//! thousand tensors and a vocabulary of a few hundred thousand tokens).

/// Longest string (metadata key, string value or tensor name) we accept, in bytes.
/// Chat templates are the longest real strings, tens of KiB.
pub const MAX_STRING_LEN: u64 = 16 << 20;
/// Most elements one metadata array may hold (vocabularies reach ~260k, merges ~500k).
pub const MAX_ARRAY_LEN: u64 = 1 << 26;
/// Deepest nesting of arrays inside arrays (ggml itself writes depth 1).
pub const MAX_DEPTH: u32 = 8;
/// Most dimensions a tensor may have (`GGML_MAX_DIMS`).
pub const MAX_DIMS: u32 = 4;
/// Most metadata key/value pairs.
pub const MAX_KV_COUNT: u64 = 1 << 20;
/// Most tensors in one file.
pub const MAX_TENSOR_COUNT: u64 = 1 << 24;
/// Largest element count of one tensor (2^50, far beyond any real tensor, small enough
/// that element counts times 8 bytes never overflow `u64`).
pub const MAX_TENSOR_ELEMENTS: u64 = 1 << 50;
/// Largest `general.alignment`.
pub const MAX_ALIGNMENT: u64 = 1 << 20;
