//! `organ-core`: the one core behind every face of organ (CLI, browser, HTTP API).
//!
//! It reads and writes GGUF files held as byte slices, dequantizes every ggml tensor type
//! that gguf-py 0.19.0 can dequantize (bit for bit), sorts tensors into anatomy groups, and
//! computes the Z-measure v1 angle θ. It does no I/O and starts no threads: callers hand it
//! bytes (a memory map, a chunk read from a browser `File`) and parallelise over tensors.
//!
//! Every number read from a file is untrusted: lengths, counts, offsets and shapes are
//! checked before use (see [`limits`]) and errors carry the offset or tensor name.
#![no_std]
#![deny(unsafe_code)] // one exception: quant::table::prefetch, a hint that cannot fault
#![warn(missing_docs)]

extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

pub mod anatomy;
pub mod check;
pub mod compare;
pub mod error;
pub mod events;
pub mod fleet;
pub mod ggml_type;
pub mod gguf;
pub mod imatrix;
pub mod judge;
pub mod limits;
pub mod lora;
pub mod memory;
pub mod merge;
pub mod model;
pub mod predict;
pub mod quant;
pub mod quantize;
pub mod random;
mod reader;
pub mod recipe;
pub mod report;
pub mod sensitivity;
pub mod surgery;
pub mod tokenizer;
pub mod zmeasure;

pub use error::{Error, Result};
pub use ggml_type::GgmlType;
pub use gguf::{Gguf, MetaValue, TensorInfo};
