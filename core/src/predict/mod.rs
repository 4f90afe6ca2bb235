//! The cheap prediction of a weight's sensitivity: how much the model's output moves (mean
//! KL divergence) when that one weight is stored in another type (docs/predict.md).
//!
//! For a 2-D weight `W` (ggml dims `[n_in, n_out]`: `n_out` rows of `n_in` values) and a
//! type `T` organ can quantize to, the round trip `Q = dequantize(quantize_T(W))`
//! ([`round_trip`]; quantized as the file would be written: under the importance matrix's
//! weights when there is one, as `llama-quantize --imatrix` does) gives per row `r` the
//! weighted error
//! `ε_r = Σ_j w_j (Q − W)_rj²` ([`row_errors`]), where `w_j = E[x_j²]` is the mean square
//! of input column `j`: from an importance matrix ([`crate::imatrix`]), or, with no text
//! at all, estimated from the weights ([`residual`]: the norm gains squared for the
//! weights a norm feeds, propagated energies for `attn_output` and `ffn_down`). The two
//! sources differ only in these column weights; everything after is the same code.
//!
//! `e = Σ_r ε_r` is the weighted error; a [`Calibration`] fitted against measured
//! KL divergences turns it into a predicted KLD per kind. Each row's error carried to the
//! residual stream ([`residual::Layer`]'s row weights `ρ_r`, the residual-stream model of
//! features.py ported), `R = Σ_r ρ_r ε_r`, over the stream's energy at that depth `Ĥ`, is
//! also given (`R/Ĥ`): it was the scaled figure first, and ranked worse on SmolLM2 F16.
//!
//! The residual model covers the architectures of [`family::FAMILIES`]; every other block
//! weight a recipe may quantize is predicted from its weighted error alone
//! ([`Method::WeightedError`]), and every output says which predictor each weight got.

mod blocks;
pub mod calibrate;
pub mod family;
mod jobs;
pub mod residual;
mod round_trip;
pub mod steps;

pub use calibrate::{agreement, spearman, Agreement, Calibration, Point};
pub use family::{Family, Method};
pub use round_trip::{round_trip, row_errors, sampled_row_errors, sampled_rows, ROUND_TRIP_VALUES};
pub use steps::{PredictedPoint, Prediction, Predictor, Unavailable};

use crate::error::{Error, Result};
use alloc::format;
use alloc::string::String;
use serde::{Deserialize, Serialize};

/// The seven linear weights of a llama-family block that the residual model covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// `attn_q`: queries, fed by the attention norm.
    AttnQ,
    /// `attn_k`: keys, fed by the attention norm.
    AttnK,
    /// `attn_v`: values, fed by the attention norm.
    AttnV,
    /// `attn_output`: heads back to the residual stream.
    AttnOutput,
    /// `ffn_gate`: the gate, fed by the FFN norm.
    FfnGate,
    /// `ffn_up`: the up projection, fed by the FFN norm.
    FfnUp,
    /// `ffn_down`: back to the residual stream.
    FfnDown,
}

impl Kind {
    /// Every kind, in block order (the index of [`Kind::index`]).
    pub const ALL: [Kind; 7] =
        [Kind::AttnQ, Kind::AttnK, Kind::AttnV, Kind::AttnOutput, Kind::FfnGate, Kind::FfnUp, Kind::FfnDown];

    /// The kind as tensor names spell it (`attn_q`).
    pub fn name(self) -> &'static str {
        match self {
            Kind::AttnQ => "attn_q",
            Kind::AttnK => "attn_k",
            Kind::AttnV => "attn_v",
            Kind::AttnOutput => "attn_output",
            Kind::FfnGate => "ffn_gate",
            Kind::FfnUp => "ffn_up",
            Kind::FfnDown => "ffn_down",
        }
    }

    /// The kind named `name` (`attn_q`), if it is one of the seven.
    pub fn from_name(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Position in [`Kind::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// Whether the weight belongs to the FFN half of the block.
    pub fn is_ffn(self) -> bool {
        matches!(self, Kind::FfnGate | Kind::FfnUp | Kind::FfnDown)
    }

    /// The kind and layer of `blk.N.KIND.weight`, or `None` for any other name.
    pub fn of(name: &str) -> Option<(Kind, u32)> {
        let layer = crate::anatomy::layer_of(name)?;
        let rest = name.strip_prefix("blk.")?.split_once('.')?.1.strip_suffix(".weight")?;
        Kind::from_name(rest).map(|k| (k, layer))
    }

    /// The weight's name in layer `layer`.
    pub fn weight(self, layer: u32) -> String {
        format!("blk.{layer}.{}.weight", self.name())
    }
}

/// The facts of a model the residual model needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// `{arch}.block_count`.
    pub n_layer: u32,
    /// `{arch}.attention.head_count`.
    pub n_head: u32,
    /// `{arch}.attention.head_count_kv` (`n_head` when absent).
    pub n_head_kv: u32,
    /// How its blocks depart from llama's.
    pub family: Family,
}

impl Shape {
    /// The shape of a model whose architecture the residual model covers
    /// ([`Family::of`]), from its metadata (the keys under the architecture's name).
    ///
    /// # Errors
    /// Any other architecture, by name; missing or zero counts; heads not in whole groups.
    pub fn of<T>(m: &crate::model::Model<T>) -> Result<Shape> {
        let arch = m.architecture();
        let Some(family) = arch.as_deref().and_then(Family::of) else {
            let known: alloc::vec::Vec<&str> = family::FAMILIES.iter().map(|f| f.arch).collect();
            return Err(Error::BadMetadata {
                key: "general.architecture".into(),
                reason: format!(
                    "is {arch:?}: the residual-stream model covers {} only (other weights take the weighted error)",
                    known.join(", ")
                ),
            });
        };
        let get = |key: &str| -> Result<Option<u32>> {
            match m.get(key) {
                None => Ok(None),
                Some(v) => match v.as_u64().and_then(|n| u32::try_from(n).ok()).filter(|&n| n > 0) {
                    Some(n) => Ok(Some(n)),
                    None => Err(Error::BadMetadata { key: key.into(), reason: "expected a count above 0".into() }),
                },
            }
        };
        let need = |key: &str| -> Result<u32> {
            get(key)?.ok_or_else(|| Error::BadMetadata { key: key.into(), reason: "is missing".into() })
        };
        let a = family.arch;
        let n_layer = need(&format!("{a}.block_count"))?;
        let n_head = need(&format!("{a}.attention.head_count"))?;
        let kv_key = format!("{a}.attention.head_count_kv");
        let n_head_kv = get(&kv_key)?.unwrap_or(n_head);
        if n_head % n_head_kv != 0 {
            return Err(Error::BadMetadata {
                key: kv_key,
                reason: format!("{n_head_kv} does not divide the {n_head} heads"),
            });
        }
        Ok(Shape { n_layer, n_head, n_head_kv, family })
    }
}

#[cfg(test)]
mod family_tests;
#[cfg(test)]
mod tests;
