//! Which types `llama-quantize` (llama.cpp build 11434) writes for a tensor exactly as a
//! `--tensor-type` asks, so a recipe never names a type llama.cpp would silently replace.
//!
//! Ported from `src/llama-quant.cpp`:
//! - `tensor_allows_quantization`: a tensor it does not quantize (fewer than two
//!   dimensions, a name not ending in `weight`, a norm, an expert router, …) is copied
//!   as it is, whatever the arguments say: its only type is its own.
//! - `llama_tensor_get_type`: a `--tensor-type` pattern applies only when the default
//!   type is a quantized one; the first pattern that `std::regex_search` finds in the
//!   name wins. Patterns are lower-cased by `tools/quantize/quantize.cpp`
//!   (`parse_tensor_type`) and read from a file word by word.
//! - `tensor_type_fallback`: a type whose block does not divide the row length `n_in`
//!   (`ne[0]`) is replaced (Q4_K by Q5_0, …): such a type is not offered.
//! - `ggml_quantize_chunk` (ggml.c): the types it can write.
//! - `tensor_requires_imatrix`: the i-quants below 3 bits refuse to run without an
//!   importance matrix (except on `token_embd` and `output`).

pub use crate::anatomy::{n_dims, quantizable};
use crate::ggml_type::GgmlType;
use alloc::string::String;

/// The types `llama-quantize` can write (`ggml_quantize_chunk`'s, and the float types).
pub const WRITABLE: &[GgmlType] = &[
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::BF16,
    GgmlType::Q1_0,
    GgmlType::Q2_0,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::MXFP4,
    GgmlType::NVFP4,
    GgmlType::Q2_K,
    GgmlType::Q3_K,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
    GgmlType::TQ1_0,
    GgmlType::TQ2_0,
    GgmlType::IQ2_XXS,
    GgmlType::IQ2_XS,
    GgmlType::IQ3_XXS,
    GgmlType::IQ3_S,
    GgmlType::IQ2_S,
    GgmlType::IQ1_S,
    GgmlType::IQ1_M,
    GgmlType::IQ4_NL,
    GgmlType::IQ4_XS,
];

/// The default type organ gives `llama-quantize` (its `type` argument): quantized, so that
/// `--tensor-type` applies; every quantizable tensor is named by the recipe, so it decides
/// only `general.file_type`. Q8_0 needs no importance matrix and fits any row of 32.
pub const DEFAULT_FTYPE: (&str, u32) = ("Q8_0", 7);

/// Why a type is not offered for a tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// `llama-quantize` copies the tensor as it is.
    Copied,
    /// `llama-quantize` cannot write the type.
    NotWritable,
    /// The type's block does not divide the row length: `llama-quantize` would replace it.
    Row {
        /// The row length.
        n_in: u64,
        /// The type's block.
        block: u64,
    },
    /// The type needs an importance matrix and none is given.
    NeedsImatrix,
}

impl core::fmt::Display for Refusal {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Refusal::Copied => f.write_str("llama-quantize copies this tensor as it is"),
            Refusal::NotWritable => f.write_str("llama-quantize cannot write this type"),
            Refusal::Row { n_in, block } => {
                write!(f, "row length {n_in} is not a multiple of the type's block of {block}")
            }
            Refusal::NeedsImatrix => f.write_str("the type needs an importance matrix (--imatrix-file)"),
        }
    }
}

/// Whether `llama-quantize` writes tensor `name` (shape `dims`, type `own`) in type `ty`
/// exactly as asked. Its own type is always accepted (the tensor is then copied).
///
/// # Errors
/// Why not.
pub fn accepts(
    arch: &str,
    name: &str,
    dims: &[u64],
    own: GgmlType,
    ty: GgmlType,
    imatrix: bool,
) -> Result<(), Refusal> {
    if ty == own {
        return Ok(());
    }
    if !quantizable(arch, name, dims) {
        return Err(Refusal::Copied);
    }
    if !WRITABLE.contains(&ty) {
        return Err(Refusal::NotWritable);
    }
    let n_in = dims.first().copied().unwrap_or(1);
    let block = ty.block_size() as u64;
    if n_in % block != 0 {
        return Err(Refusal::Row { n_in, block });
    }
    if needs_imatrix(name, ty) && !imatrix {
        return Err(Refusal::NeedsImatrix);
    }
    Ok(())
}

/// Whether `llama-quantize` refuses type `ty` for tensor `name` without an importance
/// matrix (`tensor_requires_imatrix`, but for Q2_K, which only a Q2_K_S file refuses).
pub fn needs_imatrix(name: &str, ty: GgmlType) -> bool {
    let needs = matches!(
        ty,
        GgmlType::IQ3_XXS | GgmlType::IQ2_XXS | GgmlType::IQ2_XS | GgmlType::IQ2_S | GgmlType::IQ1_M | GgmlType::IQ1_S
    );
    needs && !imatrix_exempt(name)
}

/// The tensors `tensor_requires_imatrix` never asks an importance matrix for.
pub fn imatrix_exempt(name: &str) -> bool {
    matches!(name, "token_embd.weight" | "per_layer_token_embd.weight" | "output.weight")
}

/// The `--tensor-type` argument that gives tensor `name`, and only it, type `ty`: the name
/// escaped and anchored as a regular expression (ECMAScript, `std::regex`'s default).
///
/// # Errors
/// A name `llama-quantize` would change or split (upper case, which it lower-cases;
/// white space, which splits a file's words; `=`, which ends the pattern) or an empty one.
pub fn tensor_type_arg(name: &str, ty: GgmlType) -> Result<String, &'static str> {
    if name.is_empty() {
        return Err("an empty name");
    }
    if name.bytes().any(|b| b.is_ascii_uppercase()) {
        return Err("it has upper-case letters, which llama-quantize lower-cases in patterns");
    }
    if name.chars().any(char::is_whitespace) || name.contains('=') {
        return Err("it has white space or '=', which end a --tensor-type pattern");
    }
    let mut s = String::with_capacity(name.len() + 16);
    s.push('^');
    for c in name.chars() {
        if "\\^$.|?*+()[]{}".contains(c) {
            s.push('\\');
        }
        s.push(c);
    }
    s.push('$');
    s.push('=');
    s.extend(ty.name().chars().map(|c| c.to_ascii_lowercase()));
    Ok(s)
}
