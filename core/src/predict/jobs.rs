//! What the prediction's steps ([`super::steps`]) hand each other and the front ends: the
//! jobs of each step, their results, and the prediction of one weight.

use super::residual::{Energies, Layer};
use super::{Kind, Method};
use crate::error::{Error, Result};
use crate::model::{Model, TensorEntry};
use crate::GgmlType;
use alloc::borrow::ToOwned;
use alloc::string::String;
use alloc::vec::Vec;
use core::borrow::Borrow;
use serde::Serialize;

/// One candidate type for one weight.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct PredictedPoint {
    /// The candidate type.
    pub ty: GgmlType,
    /// The weight's exact size in that type.
    pub bytes: u64,
    /// The predicted mean KL divergence with only this weight in `ty`.
    pub predicted_kld: f64,
    /// `Σ_j w_j ‖ΔW[:, j]‖²`: the round-trip error weighted by the input columns' mean
    /// squares (what [`super::Calibration`] scales); behind a post-norm, as it reaches the
    /// stream ([`super::residual::post_norm`]).
    pub weighted_error: f64,
    /// `R/Ĥ`: that error carried into the residual stream, over the stream's energy there
    /// (kept for study: on SmolLM2 F16 it ranked worse than the weighted error,
    /// docs/predict.md); `None` for a weight outside the residual model.
    pub relative: Option<f64>,
}

/// A candidate type the weight cannot take, and why.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Unavailable {
    /// The type.
    pub ty: GgmlType,
    /// Why (rows that are not whole blocks of it).
    pub reason: String,
}

/// The prediction for one weight.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Prediction {
    /// The weight's name.
    pub name: String,
    /// Its kind as its name spells it (`attn_q`, `attn_kv_b`, `ffn_up_exps`).
    pub kind: String,
    /// Which model predicted it.
    pub method: Method,
    /// Its block.
    pub layer: u32,
    /// Its type in the model.
    pub ty: GgmlType,
    /// Its shape (ggml order).
    pub dims: Vec<u64>,
    /// Its bytes in the model.
    pub bytes: u64,
    /// One point per candidate type it can take, in the order asked.
    pub options: Vec<PredictedPoint>,
    /// The candidate types it cannot take.
    pub unavailable: Vec<Unavailable>,
    /// How many of its rows were round-tripped, when not all: a weight of more than
    /// [`super::ROUND_TRIP_VALUES`] values is predicted from an even sample of its rows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rows_sampled: Option<u64>,
}

/// What a step-1 job reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnergyJob {
    /// Block weight `weight` (of kind `kind` in block `layer`), and, data-free, the norm
    /// whose gains are its input columns' mean squares.
    Weight {
        /// Its block.
        layer: u32,
        /// Its kind.
        kind: Kind,
        /// Its name.
        weight: String,
        /// The norm that feeds it, data-free (none for `attn_output` and `ffn_down`).
        norm: Option<String>,
    },
    /// The token embedding, whose energy starts the residual stream.
    Embedding {
        /// Its name.
        name: String,
    },
    /// A norm's gains: a post-norm of the residual model, or the norm that feeds a weight
    /// the weighted error predicts (data-free).
    Norm {
        /// Its name.
        name: String,
    },
}

impl EnergyJob {
    /// The tensors the job reads, in the order [`super::Predictor::energy`] takes their values.
    pub fn reads(&self) -> Vec<&str> {
        match self {
            EnergyJob::Weight { weight, norm, .. } => {
                core::iter::once(weight.as_str()).chain(norm.as_deref()).collect()
            }
            EnergyJob::Embedding { name } | EnergyJob::Norm { name } => alloc::vec![name.as_str()],
        }
    }
}

/// A step-1 result.
#[derive(Debug, Clone, PartialEq)]
pub enum Energy {
    /// A block weight's energies, and its input columns' mean squares when they came with
    /// it (from the norm or the importance matrix; `attn_output` and `ffn_down` get theirs
    /// in step 2).
    Weight {
        /// Its energies.
        energies: Energies,
        /// Its input columns' mean squares, when they came with it.
        cols: Option<Vec<f32>>,
    },
    /// The embedding's energy (times `n_embd` where the family scales it by `√n_embd`).
    Embedding(f64),
    /// A norm's gains.
    Norm(Vec<f32>),
}

/// One block, after step 2: its residual model and each kind's input column mean squares.
#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    /// The block's residual model.
    pub layer: Layer,
    /// Per kind ([`Kind::index`]), the input columns' mean squares.
    pub cols: [Vec<f32>; 7],
    /// Per kind, the scale of its row errors as they reach the stream: empty for 1 (no
    /// post-norm), one value for every row, or one per row (a post-normed projection).
    pub scales: [Vec<f64>; 7],
    /// `Ĥ` where the block's attention and its FFN read the stream.
    pub stream: (f64, f64),
}

/// Step 2's result: the residual model's blocks (none when it does not cover the model),
/// and the data-free input columns of each weight the weighted error predicts (in
/// [`super::Predictor::others`]' order; `None`: uniform, or the importance matrix's).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Stream {
    /// Per block.
    pub blocks: Vec<Block>,
    /// Per other weight.
    pub others: Vec<Option<Vec<f32>>>,
}

/// A weight outside the residual model, which the weighted error predicts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Other {
    /// Its index among the model's tensors.
    pub tensor: usize,
    /// Its block.
    pub layer: u32,
    /// The norm that feeds it, read data-free ([`super::family::feeding_norm`]).
    pub norm: Option<String>,
}

/// Which model predicts a step-3 job's weight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum By {
    /// The residual model, as a weight of this kind.
    Residual(Kind),
    /// The weighted error: [`super::Predictor::others`]' entry.
    WeightedError(usize),
}

/// A step-3 job: a selected weight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoundTripJob {
    /// The weight's index among the model's tensors.
    pub tensor: usize,
    /// Its block.
    pub layer: u32,
    /// Which model predicts it.
    pub by: By,
}

/// The tensor `name` of `model`.
///
/// # Errors
/// It is missing: the residual model needs every block weight.
pub fn tensor<'m, T: Borrow<TensorEntry>>(model: &'m Model<T>, name: &str) -> Result<&'m T> {
    model.tensors.iter().find(|t| entry(*t).name == name).ok_or_else(|| Error::BadLayout {
        tensor: name.to_owned(),
        reason: "is missing: the sensitivity model needs every block weight and norm, and the token embedding".into(),
    })
}

pub(super) fn entry<T: Borrow<TensorEntry>>(t: &T) -> &TensorEntry {
    t.borrow()
}

pub(super) fn results_mismatch(at: &str) -> Error {
    Error::BadLayout {
        tensor: at.to_owned(),
        reason: "step 1's result is not of this job (results out of order)".into(),
    }
}
