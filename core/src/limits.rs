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
//! The header budget ([`max_header_bytes`]) bounds the whole header, so what a header's
//! values cost once copied out of the file is bounded too, whatever the file's size.
//!
//! `docs/limits.md` lists every cap, its flag, and what happens past it.

use core::sync::atomic::{AtomicU64, Ordering};

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
/// Most tensors in one file, or in one organ directory's manifest. llama.cpp stores a
/// layer's experts as one tensor, so the largest real models stay near a thousand
/// (DeepSeek-V3 and Llama-3.1-405B: 1,025 and 1,138 tensors); the older layout with a
/// tensor per expert (Mixtral: 768) grows with experts × layers, still a few thousand.
/// Each tensor costs a command up to a few KiB of records (its name, shape, a report row,
/// an output's tensor info), so at this cap those stay under ~150 MiB.
pub const MAX_TENSOR_COUNT: u64 = 1 << 16;
/// Longest tensor name, in bytes. ggml refuses names of `GGML_MAX_NAME` (64) bytes or more,
/// so no model llama.cpp loads comes near; a name is copied into every record of a tensor,
/// and this keeps those copies small.
pub const MAX_TENSOR_NAME_LEN: u64 = 128;
/// The header budget's default: most bytes a GGUF header (metadata and tensor infos, up to
/// the data section) may take, per file. A real model's is under ~15 MB: a 260k-token
/// vocabulary with its scores and types, or 150k tokens and 150k merges, is under 10 MB,
/// and 65,536 tensor infos (the tensor cap) ~5 MB. This leaves twice that, and is the
/// cap on an organ directory's metadata too ([`MAX_MANIFEST_METADATA_BYTES`]). A command
/// holds the header's values a few times over at most (the file's pages, which the model
/// shares, an output's header as it is written), so at this budget they stay under
/// ~128 MiB. Set with
/// `--max-header-bytes` ([`set_max_header_bytes`]).
pub const DEFAULT_MAX_HEADER_BYTES: u64 = 32 << 20;

/// The first read of a header whose length is not known yet (a file at a URL, a file in
/// the browser): it grows from here to what the parser says it needs
/// ([`crate::gguf::HeaderRead`]). Most headers fit in it; one request, whatever the model.
pub const HEADER_FIRST_READ: u64 = 1 << 20;

/// The header budget in force (see [`DEFAULT_MAX_HEADER_BYTES`]).
static MAX_HEADER_BYTES: AtomicU64 = AtomicU64::new(DEFAULT_MAX_HEADER_BYTES);

/// The header budget: [`crate::Gguf::parse`] refuses a header longer than this with
/// [`crate::Error::HeaderBudget`], and readers that fetch a header read no more of it.
pub fn max_header_bytes() -> u64 {
    MAX_HEADER_BYTES.load(Ordering::Relaxed)
}

/// Sets the header budget for this process (`organ --max-header-bytes`).
pub fn set_max_header_bytes(bytes: u64) {
    MAX_HEADER_BYTES.store(bytes, Ordering::Relaxed);
}

/// Largest element count of one tensor (2^50, far beyond any real tensor, small enough
/// that element counts times 8 bytes never overflow `u64`).
pub const MAX_TENSOR_ELEMENTS: u64 = 1 << 50;
/// Largest `general.alignment`.
pub const MAX_ALIGNMENT: u64 = 1 << 20;
/// Largest organ-directory `manifest.json` accepted. A 1T-parameter model's manifest is a
/// few MB (a tensor is about 300 bytes of it, its vocabulary ten or so MB); this leaves
/// room for tens of times that, and keeps what a hostile one can make us hold small.
pub const MAX_MANIFEST_BYTES: u64 = 256 << 20;
/// Most bytes of GGUF-encoded metadata a manifest may decode to, over all its entries
/// (real models hold under 10 MB, nearly all of it the tokenizer: 260k tokens with their
/// scores and types, or 150k tokens and 150k merges). JSON numbers are as short as 2 bytes
/// and decode to up to 8, so this, not [`MAX_MANIFEST_BYTES`], bounds what the metadata
/// costs.
pub const MAX_MANIFEST_METADATA_BYTES: u64 = 32 << 20;
/// Longest tensor `file` path in a manifest (organ writes at most ~220 bytes).
pub const MAX_MANIFEST_PATH_LEN: usize = 4096;
/// Most experts one expert tensor may hold to be compared or measured expert by expert
/// (real MoE models have up to a few hundred; every expert is a row of a report).
pub const MAX_EXPERTS: u64 = 1 << 16;
/// Most layers `organ layers` takes (llama.cpp 11434's `LLAMA_MAX_LAYERS` is 512; this
/// bounds a `--drop` list and the per-layer work on a crafted `block_count`).
pub const MAX_LAYERS: u64 = 1 << 16;
