//! From a weight's weighted round-trip error to a predicted KL divergence, and how well a
//! prediction ranks against the measured truth (Spearman's ρ).
//!
//! `KLD ≈ exp(a_kind) · e^b`, `e = Σ_j w_j ‖ΔW[:, j]‖²` (the weighted error): one
//! factor per kind (what the error does past the weight: attention's softmax, the depth's
//! share of the logits), one exponent for all. Both are fitted by least squares on
//! `ln KLD` ([`Calibration::fit`]): the exponent from the deviations within each kind,
//! each factor from its kind's means. (`R/Ĥ`, the error carried into the residual stream
//! over its energy, was scaled before; on SmolLM2 F16 it ranked worse than `e` within every
//! kind, docs/predict.md.)

use super::Kind;
use alloc::vec::Vec;
use serde::{Deserialize, Serialize};

/// The scale from the weighted error to a predicted KLD.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// `b`.
    pub exponent: f64,
    /// `a_kind`, by [`Kind::index`].
    pub log_factor: [f64; 7],
}

/// One measured point: the weight's kind, its weighted error (or a prediction), its
/// measured KLD.
pub type Point = (Kind, f64, f64);

impl Calibration {
    /// For the weights-only column weights: fitted by `bench/predict-vs-truth.sh` (the test
    /// `predict::predictions_rank_against_the_measured_truth`) to the measured KLD of
    /// SmolLM2 F16's 210 block weights at Q2_0 and at Q4_0 together
    /// (`tests/data/sensitivity/smollm2-f16-*.json`), in sample.
    pub const DATA_FREE: Calibration =
        Calibration { exponent: 0.760, log_factor: [-9.384, -8.857, -7.307, -11.251, -8.946, -8.672, -10.304] };
    /// As [`Calibration::DATA_FREE`], with the columns' mean squares from an importance
    /// matrix of `tests/data/texts/calibration.txt` (16 chunks of 128 tokens), and the
    /// round trips quantized under it as the file is (Q4_0 steered, Q2_0 plain).
    pub const IMATRIX: Calibration =
        Calibration { exponent: 0.768, log_factor: [-8.926, -8.425, -6.723, -8.675, -8.114, -7.795, -8.835] };

    /// The weaker predictor's ([`super::Method::WeightedError`]), data-free: one factor for
    /// every kind (the weights it predicts have no truth of their own), fitted by
    /// `bench/predict-vs-truth.sh` (the test
    /// `predict::weighted_error_ranks_against_the_measured_truth`) to the same truth as
    /// [`Calibration::DATA_FREE`], every weight's columns as the weaker predictor takes them
    /// (the feeding norm's gains squared; uniform for `attn_output` and `ffn_down`).
    pub const WEIGHTED_ERROR_DATA_FREE: Calibration = Calibration::one(0.625, -8.596);
    /// As [`Calibration::WEIGHTED_ERROR_DATA_FREE`], the columns from the importance matrix
    /// of [`Calibration::IMATRIX`].
    pub const WEIGHTED_ERROR_IMATRIX: Calibration = Calibration::one(0.710, -8.013);

    /// One exponent and one factor for every kind.
    pub const fn one(exponent: f64, log_factor: f64) -> Calibration {
        Calibration { exponent, log_factor: [log_factor; 7] }
    }

    /// The weaker predictor's calibration for columns from an importance matrix or not.
    pub fn weighted_error(imatrix: bool) -> Calibration {
        if imatrix {
            Calibration::WEIGHTED_ERROR_IMATRIX
        } else {
            Calibration::WEIGHTED_ERROR_DATA_FREE
        }
    }

    /// What the weaker predictor was measured to be worth, as [`Calibration::measured_rho`]:
    /// on SmolLM2 F16's block weights, every one predicted by it (a proxy: the weights it
    /// predicts in other architectures have no measured truth).
    pub fn weighted_error_rho(imatrix: bool) -> &'static str {
        if imatrix {
            "ranks as measured with ρ +0.465 overall, +0.378 within kind at Q2_0 and +0.302, +0.465 at Q4_0 \
             on SmolLM2 F16 (every weight by it)"
        } else {
            "ranks as measured with ρ +0.460 overall, +0.321 within kind at Q2_0 and +0.112, +0.344 at Q4_0 \
             on SmolLM2 F16 (every weight by it)"
        }
    }

    /// The calibration for column weights from an importance matrix or from the weights.
    pub fn for_source(imatrix: bool) -> Calibration {
        if imatrix {
            Calibration::IMATRIX
        } else {
            Calibration::DATA_FREE
        }
    }

    /// What a prediction from this source was measured to be worth, for every place one is
    /// shown: Spearman's ρ against the measured KLD of SmolLM2 F16's block weights, overall
    /// and within kind (`bench/predict-vs-truth.sh`, docs/predict.md).
    pub fn measured_rho(imatrix: bool) -> &'static str {
        if imatrix {
            "ranks as measured with ρ +0.49 overall, +0.38 within kind at Q2_0 and +0.72, +0.46 at Q4_0 on SmolLM2 F16"
        } else {
            "ranks as measured with ρ +0.42 overall, +0.33 within kind at Q2_0 and +0.62, +0.34 at Q4_0 on SmolLM2 F16"
        }
    }

    /// The predicted KLD of a weight of kind `kind` whose weighted error is `e`.
    pub fn predict(&self, kind: Kind, e: f64) -> f64 {
        libm::exp(self.log_factor[kind.index()]) * libm::pow(e.max(0.0), self.exponent)
    }

    /// The predicted KLD of a weighted error `e` with the kinds' mean factor (all of
    /// [`Calibration::one`]'s are one).
    pub fn predict_mean(&self, e: f64) -> f64 {
        let a = self.log_factor.iter().sum::<f64>() / self.log_factor.len() as f64;
        libm::exp(a) * libm::pow(e.max(0.0), self.exponent)
    }

    /// [`Calibration::fit`] with one factor for every kind.
    pub fn fit_one(points: &[Point], exponent: Option<f64>) -> Option<Calibration> {
        let one: Vec<Point> = points.iter().map(|&(_, e, y)| (Kind::AttnQ, e, y)).collect();
        Calibration::fit(&one, exponent)
    }

    /// The least-squares fit of `ln KLD = a_kind + b·ln e` to `points` (those with
    /// both values above 0), `b` given or fitted; a kind without points takes the mean
    /// factor of the others. `None` when no point is usable.
    pub fn fit(points: &[Point], exponent: Option<f64>) -> Option<Calibration> {
        let logs: Vec<(usize, f64, f64)> = points
            .iter()
            .filter(|p| p.1 > 0.0 && p.2 > 0.0 && p.1.is_finite() && p.2.is_finite())
            .map(|&(k, r, y)| (k.index(), libm::log(r), libm::log(y)))
            .collect();
        let mut n = [0f64; 7];
        let (mut mx, mut my) = ([0f64; 7], [0f64; 7]);
        for &(k, x, y) in &logs {
            n[k] += 1.0;
            mx[k] += x;
            my[k] += y;
        }
        for k in 0..7 {
            if n[k] > 0.0 {
                mx[k] /= n[k];
                my[k] /= n[k];
            }
        }
        let b = exponent.unwrap_or_else(|| {
            let (mut sxy, mut sxx) = (0f64, 0f64);
            for &(k, x, y) in &logs {
                sxy += (x - mx[k]) * (y - my[k]);
                sxx += (x - mx[k]) * (x - mx[k]);
            }
            if sxx > 0.0 {
                sxy / sxx
            } else {
                1.0
            }
        });
        let known: Vec<f64> = (0..7).filter(|&k| n[k] > 0.0).map(|k| my[k] - b * mx[k]).collect();
        if known.is_empty() {
            return None;
        }
        let mean = known.iter().sum::<f64>() / known.len() as f64;
        let log_factor = core::array::from_fn(|k| if n[k] > 0.0 { my[k] - b * mx[k] } else { mean });
        Some(Calibration { exponent: b, log_factor })
    }
}

/// Spearman's rank correlation (ties take their mean rank); NaN for fewer than 2 values
/// or a constant side.
pub fn spearman(a: &[f64], b: &[f64]) -> f64 {
    if a.len() != b.len() || a.len() < 2 {
        return f64::NAN;
    }
    let (ra, rb) = (ranks(a), ranks(b));
    let n = a.len() as f64;
    let (ma, mb) = (ra.iter().sum::<f64>() / n, rb.iter().sum::<f64>() / n);
    let (mut sab, mut saa, mut sbb) = (0f64, 0f64, 0f64);
    for (x, y) in ra.iter().zip(&rb) {
        sab += (x - ma) * (y - mb);
        saa += (x - ma) * (x - ma);
        sbb += (y - mb) * (y - mb);
    }
    sab / libm::sqrt(saa * sbb)
}

fn ranks(v: &[f64]) -> Vec<f64> {
    let mut idx: Vec<usize> = (0..v.len()).collect();
    idx.sort_by(|&i, &j| v[i].total_cmp(&v[j]));
    let mut r = alloc::vec![0f64; v.len()];
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && v[idx[j + 1]] == v[idx[i]] {
            j += 1;
        }
        for &k in &idx[i..=j] {
            r[k] = (i + j) as f64 / 2.0;
        }
        i = j + 1;
    }
    r
}

/// How a prediction ranks against the truth: ρ over all weights, per kind, and the mean
/// of the kinds' ρ (kinds with fewer than 3 points left out).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Agreement {
    /// ρ over every point.
    pub overall: f64,
    /// ρ within each kind that has 3 points or more.
    pub within: Vec<(Kind, f64)>,
    /// The mean of `within`.
    pub within_mean: f64,
}

/// The [`Agreement`] of `(kind, predicted, measured)` triples.
pub fn agreement(points: &[Point]) -> Agreement {
    let col = |ps: &[&Point], i: usize| -> Vec<f64> { ps.iter().map(|p| if i == 1 { p.1 } else { p.2 }).collect() };
    let all: Vec<&Point> = points.iter().collect();
    let within: Vec<(Kind, f64)> = Kind::ALL
        .into_iter()
        .filter_map(|k| {
            let ps: Vec<&Point> = points.iter().filter(|p| p.0 == k).collect();
            (ps.len() >= 3).then(|| (k, spearman(&col(&ps, 1), &col(&ps, 2))))
        })
        .collect();
    let within_mean =
        if within.is_empty() { f64::NAN } else { within.iter().map(|w| w.1).sum::<f64>() / within.len() as f64 };
    Agreement { overall: spearman(&col(&all, 1), &col(&all, 2)), within, within_mean }
}
