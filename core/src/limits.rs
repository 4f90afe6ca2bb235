//! Named caps on what a GGUF file may ask of us.
//!
//! A GGUF header is attacker-controlled: every length and count in it is checked against
//! these caps *and* against the bytes that remain in the file before anything is allocated
//! or looped over. The caps are generous for real models (a 1T-parameter MoE has a few
//! thousand tensors and a vocabulary of a few hundred thousand tokens).
//!
//! Parsing borrows from the file's bytes, so what it allocates is one record per metadata
//! key and per tensor (under 128 bytes each, for records of at least 13 and 24 bytes of
//! file). Readers that build something per array element (JSON, a manifest) stream it
//! instead of building trees, so their memory follows the file's bytes too; the caps below
//! bound what is left: record counts, and arrays nested in arrays (12 bytes of file each).

/// Longest string (metadata key, string value or tensor name) we accept, in bytes.
/// Chat templates are the longest real strings, tens of KiB.
pub const MAX_STRING_LEN: u64 = 16 << 20;
/// Most elements one metadata array may hold (vocabularies reach ~260k, merges ~500k).
pub const MAX_ARRAY_LEN: u64 = 1 << 26;
/// Deepest nesting of arrays inside arrays (ggml itself writes depth 1).
pub const MAX_DEPTH: u32 = 8;
/// Most arrays nested inside other arrays across all the metadata of a file. ggml's own
/// reader refuses nested arrays and no real model has one; an empty nested array is 12
/// bytes of file, which a careless reader turns into hundreds of bytes of tree.
pub const MAX_NESTED_ARRAYS: u64 = 1 << 16;
/// Most dimensions a tensor may have (`GGML_MAX_DIMS`).
pub const MAX_DIMS: u32 = 4;
/// Most metadata key/value pairs (real models have under a hundred).
pub const MAX_KV_COUNT: u64 = 1 << 16;
/// Most tensors in one file, or in one organ directory's manifest (a 1T-parameter MoE has
/// a few thousand; one with every expert a tensor of its own, under a hundred thousand).
/// At this cap the parsed records take about 128 MiB.
pub const MAX_TENSOR_COUNT: u64 = 1 << 20;
/// Largest element count of one tensor (2^50, far beyond any real tensor, small enough
/// that element counts times 8 bytes never overflow `u64`).
pub const MAX_TENSOR_ELEMENTS: u64 = 1 << 50;
/// Largest `general.alignment`.
pub const MAX_ALIGNMENT: u64 = 1 << 20;
