//! Dequantization of every ggml type gguf-py 0.19.0 can dequantize, bit-identical to
//! `gguf.quants.dequantize`, and quantization to the types organ writes.
//!
//! The scalar functions here *are* the specification: each ports gguf-py's numpy code
//! (itself a port of ggml's `dequantize_row_*`) keeping the order of every f32 operation,
//! so results match to the bit. Besides whole tensors, single blocks and single elements
//! can be dequantized, so a sampler reads only the blocks it needs.
//!
//! What organ can do with each type is one row of the table in `table.rs`; the families'
//! kernels live in one file each: `plain` (F32, F16, BF16, F64, integers), `legacy` (Q4_0 …
//! Q8_0), `codebook4` (IQ4_NL, MXFP4, NVFP4), `k_quants` (Q2_K … Q6_K), `ternary` (TQ1_0,
//! TQ2_0), `low_bit` (Q1_0, Q2_0) and `iq` (the i-quants), with [`float`]'s scalar conversions under all
//! and `search`'s ports of ggml's scale searches under the quantizers; `iq3_quant` quantizes
//! IQ3_XXS and IQ3_S on `iq3_grid`'s tables.
//!
//! F64 and the integer types have no `dequantize` in gguf-py 0.19.0 (it raises
//! `NotImplementedError`); its `GGUFReader` exposes them as typed numpy arrays, and we
//! match `array.astype(np.float32)` (round to nearest, ties to even).

mod codebook4;
mod element;
pub mod float;
mod iq;
mod iq1_quant;
mod iq2_quant;
mod iq2_tables;
mod iq3_grid;
mod iq3_quant;
mod iq_grids;
mod k_quants;
mod legacy;
mod low_bit;
mod plain;
pub mod quantize;
mod scales;
mod search;
pub(crate) mod table;
mod ternary;
mod weighted;

pub use element::ElementReader;
pub use scales::scale_fields;

use crate::error::{Error, Result};
use crate::ggml_type::GgmlType;
use alloc::vec;
use alloc::vec::Vec;

/// The largest block, in elements (`QK_K`).
pub const MAX_BLOCK_SIZE: usize = crate::ggml_type::QK_K;

/// Dequantizes whole blocks: `bytes` holds `k` blocks of `ty`, `out` receives
/// `k * ty.block_size()` values.
///
/// # Errors
/// [`Error::NotDequantizable`] for types without a row in the table (Q8_1, Q8_K);
/// [`Error::SizeMismatch`] when `bytes` is not whole blocks or `out` has the wrong length.
pub fn dequantize_into(ty: GgmlType, bytes: &[u8], out: &mut [f32]) -> Result<()> {
    let Some(k) = table::kernels(ty) else {
        return Err(Error::NotDequantizable { ty: ty.name() });
    };
    let (ts, bs) = (k.type_size, k.block_size);
    if bytes.len() % ts != 0 {
        return Err(Error::SizeMismatch {
            what: "quantized data (whole blocks)",
            expected: (bytes.len() / ts * ts) as u64,
            got: bytes.len() as u64,
        });
    }
    let want = bytes.len() / ts * bs;
    if out.len() != want {
        return Err(Error::SizeMismatch { what: "dequantized output", expected: want as u64, got: out.len() as u64 });
    }
    (k.dequantize)(bytes, out);
    Ok(())
}

/// Dequantizes whole blocks into a new vector.
///
/// # Errors
/// As [`dequantize_into`].
pub fn dequantize(ty: GgmlType, bytes: &[u8]) -> Result<Vec<f32>> {
    let n = bytes.len() / ty.type_size() * ty.block_size();
    let mut out = vec![0f32; n];
    dequantize_into(ty, bytes, &mut out)?;
    Ok(out)
}

/// Dequantizes one block (`ty.type_size()` bytes) into the first `ty.block_size()`
/// entries of `out` (which must be at least that long; [`MAX_BLOCK_SIZE`] always is).
///
/// # Errors
/// As [`dequantize_into`].
pub fn dequantize_block(ty: GgmlType, block: &[u8], out: &mut [f32]) -> Result<()> {
    let bs = ty.block_size();
    let Some(out) = out.get_mut(..bs) else {
        return Err(Error::SizeMismatch { what: "block output", expected: bs as u64, got: out.len() as u64 });
    };
    if block.len() != ty.type_size() {
        return Err(Error::SizeMismatch {
            what: "one block",
            expected: ty.type_size() as u64,
            got: block.len() as u64,
        });
    }
    dequantize_into(ty, block, out)
}
