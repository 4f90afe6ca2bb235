//! The prediction report (`organ sensitivity --predict --json`, schema
//! `organ_sensitivity_prediction: 1`): each weight's predicted KL divergence with only it
//! changed (`crate::predict`), and, when a measured report of the same change is given,
//! the measured figure beside it and how the two rank together (Spearman's ρ).

use crate::predict::{agreement, Calibration, Kind, Method, Point, Prediction};
use alloc::borrow::ToOwned;
use alloc::string::String;
use alloc::vec::Vec;
use serde::{Deserialize, Serialize};

/// The prediction report's schema version.
pub const SCHEMA: u32 = 1;

/// One weight's prediction.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PredictedRow {
    /// The tensor's name.
    pub name: String,
    /// `attn_q`, `ffn_down`, `attn_kv_b`…: the weight's name without `blk.N.` and `.weight`.
    pub kind: String,
    /// Which model predicted it: `residual` or `weighted_error` (docs/predict.md).
    #[serde(default = "residual")]
    pub predictor: String,
    /// Its block.
    pub layer: u32,
    /// Its type in the model.
    #[serde(rename = "type")]
    pub ty: String,
    /// Its shape, ggml's order.
    pub dims: Vec<u64>,
    /// Its bytes in the model.
    pub bytes: u64,
    /// The type it is predicted in.
    pub changed_type: String,
    /// Its bytes in that type.
    pub changed_bytes: u64,
    /// The predicted mean KL divergence (nats per token) with only this weight changed.
    pub predicted_kld: f64,
    /// `R/Ĥ`, the error carried into the residual stream over its energy (for study); none
    /// for a weight the residual model does not predict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relative: Option<f64>,
    /// `Σ_j w_j ‖ΔW[:, j]‖²`, the round-trip error weighted by the input columns' mean
    /// squares: what the calibration scales.
    pub weighted_error: f64,
    /// How many of its rows the round trip took, when not all (a weight of more than
    /// [`crate::predict::ROUND_TRIP_VALUES`] values: an even sample of its rows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows_sampled: Option<u64>,
    /// The measured mean KL divergence of the same change (`--truth`), when it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_kld: Option<f64>,
}

/// Spearman's ρ of one kind's predictions against the measured truth.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KindRho {
    /// The kind.
    pub kind: String,
    /// ρ; `None` when undefined (a constant side).
    pub rho: Option<f64>,
    /// Weights of that kind with both figures.
    pub n: usize,
}

/// How the predictions rank against the measured truth.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ranking {
    /// Weights with both figures.
    pub n: usize,
    /// ρ over them all.
    pub overall: Option<f64>,
    /// The mean of the kinds' ρ (kinds with 3 weights or more).
    pub within_kind_mean: Option<f64>,
    /// ρ within each kind with 3 weights or more.
    pub within_kind: Vec<KindRho>,
    /// The calibration refitted on these weights (`ln KLD = a_kind + b·ln(weighted error)`):
    /// in sample, what a fit to this truth would give.
    pub refit: Option<Calibration>,
}

/// A prediction report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PredictionReport {
    /// [`SCHEMA`].
    pub organ_sensitivity_prediction: u32,
    /// The model (as given).
    pub model: String,
    /// The type every weight is predicted in (as a measured report's `change`).
    pub change: String,
    /// What the input columns' mean squares came from: `imatrix` or `data-free`.
    pub source: String,
    /// The importance matrix (as given), for the `imatrix` source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imatrix: Option<String>,
    /// The calibration that turned `R/Ĥ` into KL divergences.
    pub calibration: Calibration,
    /// The measured report the predictions are ranked against (as given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truth: Option<String>,
    /// How they rank against it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ranking: Option<Ranking>,
    /// Selected tensors the prediction does not cover, and why.
    pub not_predicted: Vec<(String, String)>,
    /// One row per predicted weight, in the model's order.
    pub tensors: Vec<PredictedRow>,
}

/// The rows of a prediction of one change (each of `predictions` asked for that one type),
/// and the `picked` tensors left without a prediction, with why.
pub fn rows(predictions: Vec<Prediction>, picked: &[&str]) -> (Vec<PredictedRow>, Vec<(String, String)>) {
    let mut not_predicted: Vec<(String, String)> = Vec::new();
    let mut tensors = Vec::with_capacity(predictions.len());
    for p in predictions {
        match p.options.first() {
            Some(x) => tensors.push(PredictedRow {
                name: p.name,
                kind: p.kind,
                predictor: p.method.name().to_owned(),
                layer: p.layer,
                ty: p.ty.name().to_owned(),
                dims: p.dims,
                bytes: p.bytes,
                changed_type: x.ty.name().to_owned(),
                changed_bytes: x.bytes,
                predicted_kld: x.predicted_kld,
                relative: x.relative,
                weighted_error: x.weighted_error,
                rows_sampled: p.rows_sampled,
                measured_kld: None,
            }),
            None => {
                let why = p.unavailable.first().map_or_else(|| "no candidate type".to_owned(), |u| u.reason.clone());
                not_predicted.push((p.name, why));
            }
        }
    }
    for name in picked {
        if !tensors.iter().any(|t| t.name == *name) && !not_predicted.iter().any(|n| n.0 == *name) {
            let why = "not a block weight llama-quantize quantizes (the prediction covers those)";
            not_predicted.push(((*name).to_owned(), why.to_owned()));
        }
    }
    (tensors, not_predicted)
}

/// Fills each row's `measured_kld` from `truth` (by tensor name) and ranks the rows that
/// have both figures.
pub fn rank_against(rows: &mut [PredictedRow], truth: impl Fn(&str) -> Option<f64>) -> Ranking {
    for r in rows.iter_mut() {
        r.measured_kld = truth(&r.name);
    }
    let points: Vec<Point> =
        rows.iter().filter_map(|r| Some((kind_of(&r.kind)?, r.predicted_kld, r.measured_kld?))).collect();
    let errors: Vec<Point> =
        rows.iter().filter_map(|r| Some((kind_of(&r.kind)?, r.weighted_error, r.measured_kld?))).collect();
    let a = agreement(&points);
    let finite = |x: f64| x.is_finite().then_some(x);
    Ranking {
        n: points.len(),
        overall: finite(a.overall),
        within_kind_mean: finite(a.within_mean),
        within_kind: a
            .within
            .iter()
            .map(|&(k, rho)| KindRho {
                kind: k.name().into(),
                rho: finite(rho),
                n: points.iter().filter(|p| p.0 == k).count(),
            })
            .collect(),
        refit: Calibration::fit(&errors, None),
    }
}

fn kind_of(name: &str) -> Option<Kind> {
    Kind::from_name(name)
}

fn residual() -> String {
    Method::Residual.name().to_owned()
}
