//! Quantization recipes: one ggml type per tensor, chosen to minimise a predicted loss
//! (the sum of per-tensor KL divergences) under a size budget, written as the
//! `--tensor-type` arguments of llama.cpp's `llama-quantize` (docs/recipe.md).
//!
//! - [`accept`]: which types `llama-quantize` writes for a tensor exactly as asked (a
//!   port of `tensor_allows_quantization` and `tensor_type_fallback` in llama.cpp's
//!   `src/llama-quant.cpp`, build 11434), and the `--tensor-type` line that asks for one.
//! - [`size`]: the exact bytes of a tensor of a type, and of the header `llama-quantize`
//!   writes, so a file-size budget is kept to the byte.
//! - [`anchored`]: measured curves anchoring predicted ones (one sweep scales every type).
//! - [`solve`]: the search (Lagrangian over each curve's lower convex hull, then a fill of
//!   the budget left), with a certified lower bound on the best possible loss.
//!
//! Pure: no I/O; the CLI reads the model and the sensitivity reports and runs the tool.

pub mod accept;
pub mod anchored;
pub mod choose;
pub mod predicted;
pub mod report;
pub mod size;
pub mod solve;
#[cfg(test)]
mod tests;

use crate::ggml_type::GgmlType;
use alloc::string::String;
use alloc::vec::Vec;

/// One choice for a tensor: a type, the bytes of its data in that type, and the loss
/// predicted (or measured) when the tensor alone is stored in it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    /// The type.
    pub ty: GgmlType,
    /// Bytes of tensor data (unpadded; [`size::Account`] says what the budget charges).
    pub bytes: u64,
    /// The loss: mean KL divergence from the unchanged model, in nats.
    pub cost: f64,
}

/// A tensor's curve: every type it may take, with its size and loss.
#[derive(Debug, Clone, PartialEq)]
pub struct Curve {
    /// The tensor's name.
    pub name: String,
    /// Every type it may take.
    pub options: Vec<Point>,
}

/// Why a recipe cannot be made.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Error {
    /// Even every tensor at its smallest type exceeds the budget.
    BudgetTooSmall {
        /// Bytes the smallest recipe charges.
        need: u64,
        /// The budget, in the same bytes.
        budget: u64,
    },
    /// A curve has no option, or an option's loss is not a finite number.
    BadCurve {
        /// The tensor.
        tensor: String,
        /// What is wrong.
        reason: String,
    },
    /// A tensor's name cannot be given to `llama-quantize` as a `--tensor-type` pattern.
    Unnameable {
        /// The tensor.
        tensor: String,
        /// Why its name cannot be a pattern.
        reason: &'static str,
    },
    /// The header `llama-quantize` would write cannot be accounted.
    Header(crate::error::Error),
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Error::BudgetTooSmall { need, budget } => write!(
                f,
                "the budget is {budget} bytes, but every tensor at its smallest allowed type already takes {need}"
            ),
            Error::BadCurve { tensor, reason } => write!(f, "tensor {tensor}: {reason}"),
            Error::Unnameable { tensor, reason } => {
                write!(f, "tensor {tensor:?}: llama-quantize's --tensor-type cannot name it ({reason})")
            }
            Error::Header(e) => write!(f, "the output's header: {e}"),
        }
    }
}

/// A tensor as a recipe sees it.
#[derive(Debug, Clone, Copy)]
pub struct Tensor<'a> {
    /// Its name.
    pub name: &'a str,
    /// Its shape, ggml order.
    pub dims: &'a [u64],
    /// Its type now (always an option, at no cost).
    pub ty: GgmlType,
}

impl Curve {
    /// The curve of tensor `t` in a model of architecture `arch`: its own type at cost 0,
    /// and each of `candidates` (type, loss) that `llama-quantize` writes as asked
    /// ([`accept::accepts`]); the others are returned with the reason.
    pub fn of(
        arch: &str,
        t: Tensor<'_>,
        candidates: &[(GgmlType, f64)],
        imatrix: bool,
    ) -> (Curve, Vec<(GgmlType, accept::Refusal)>) {
        let mut options = Vec::new();
        let mut refused = Vec::new();
        if let Some(bytes) = size::tensor_bytes(t.ty, t.dims) {
            options.push(Point { ty: t.ty, bytes, cost: 0.0 });
        }
        for &(ty, cost) in candidates {
            if ty == t.ty {
                continue;
            }
            match (accept::accepts(arch, t.name, t.dims, t.ty, ty, imatrix), size::tensor_bytes(ty, t.dims)) {
                (Ok(()), Some(bytes)) => options.push(Point { ty, bytes, cost }),
                (Err(r), _) => refused.push((ty, r)),
                (Ok(()), None) => refused.push((ty, accept::Refusal::NotWritable)),
            }
        }
        (Curve { name: t.name.into(), options }, refused)
    }
}

/// A size target.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Target {
    /// Bits per weight: total tensor bits / total elements of the model.
    Bpw(f64),
    /// The output file's size in bytes, header included.
    Size(u64),
}

impl Target {
    /// The budget in bytes and what it charges, for a model of `n_elements` elements
    /// whose output header (padded) is `header` bytes; `None` when the header alone
    /// exceeds the size.
    pub fn budget(self, n_elements: u64, header: u64) -> Option<(u64, size::Account)> {
        match self {
            // Exact in integers for the bpw's binary fraction; floor, so the target holds.
            Target::Bpw(b) => Some((libm::floor(b * n_elements as f64 / 8.0) as u64, size::Account::Data)),
            Target::Size(s) => s.checked_sub(header).map(|b| (b, size::Account::File)),
        }
    }
}
