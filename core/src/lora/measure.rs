//! An adapter measured as a model of its updates: one row per pair, ΔW named
//! `TARGET.lora` and measured by Z-measure v1 as a tensor of that name and shape (§1–3;
//! its draws, §7, under [`Mode::Sigma`]), with the figures only an update has
//! ([`Update`]). ΔW's sampled elements are computed from its factors ([`Factors::sample`]);
//! only [`Mode::Exact`], θ over every value, makes it whole.

use super::{Adapter, Factors, Pair};
use crate::error::Result;
use crate::ggml_type::GgmlType;
use crate::model::Model;
use crate::report::{ModelReport, TensorReport};
use crate::zmeasure::{draw_name, measure_values, Draws, Measurement, Mode, DRAWS, SAMPLE_SIZE};
use alloc::vec::Vec;
use serde::{Deserialize, Serialize};

/// What a row of an adapter's report says of its update besides θ.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Update {
    /// The rank r.
    pub rank: u64,
    /// The factor of B·A: s · α / r ([`Adapter::scale`]).
    pub scale: f64,
    /// ‖ΔW‖_F.
    pub frobenius: f64,
    /// ‖W‖_F of the weight in the base, when a base was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_frobenius: Option<f64>,
}

impl Update {
    /// ‖ΔW‖_F / ‖W‖_F, when the base was given and its weight is not all zero.
    pub fn relative(&self) -> Option<f64> {
        self.base_frobenius.filter(|&b| b > 0.0).map(|b| self.frobenius / b)
    }
}

/// ΔW of `f` measured in `mode` as a tensor called `name`: θ of its sample, and the θ of
/// its alternate draws in [`Mode::Sigma`] when it is sampled (N > [`SAMPLE_SIZE`]).
pub fn measure(name: &str, f: &Factors, mode: Mode) -> (Measurement, Option<Draws>) {
    if mode == Mode::Exact {
        let all = (0..f.rows).flat_map(|i| (0..f.cols).map(move |j| (i, j))).map(|(i, j)| f.element(i, j));
        return (measure_values(all.collect()), None);
    }
    let m = measure_values(f.sample(name));
    if mode != Mode::Sigma || f.n_elements() <= SAMPLE_SIZE as u64 {
        return (m, None);
    }
    let mut draws = [0.0; DRAWS];
    for (k, d) in (1..).zip(draws.iter_mut()) {
        *d = measure_values(f.sample(&draw_name(name, k))).theta;
    }
    (m, Some(draws))
}

/// The report's row for `pair` of `adapter`: ΔW's name, the shape of the weight it
/// updates, the bytes of its two halves, its measurement in `mode`, and `update`.
pub fn row(
    pair: &Pair,
    halves_bytes: u64,
    measured: &(Measurement, Option<Draws>),
    mode: Mode,
    update: Update,
) -> TensorReport {
    let mut r =
        TensorReport::from_parts(&pair.delta_name(), GgmlType::F32, &pair.shape(), halves_bytes, Some(&measured.0))
            .in_mode(mode, measured.1.as_ref());
    r.update = Some(update);
    r
}

/// The [`Update`] of `pair` from its factors, and ‖W‖_F of its weight in the base.
pub fn update(pair: &Pair, f: &Factors, base_frobenius: Option<f64>) -> Update {
    Update { rank: pair.rank, scale: f.scale, frobenius: f.frobenius(), base_frobenius }
}

/// The report's row for pair `i` of `adapter` (at user scale 1, as `--lora` applies it),
/// from the bytes of its two halves, each read whole (`a`: the bytes of `lora_a`, of type
/// `a_ty`; `b`: `lora_b`'s), measured in `mode`; `base_frobenius` is ‖W‖_F of the
/// weight it updates, when a base was given ([`weight_frobenius`]). The one path from a
/// pair's bytes to its row, for every front end.
///
/// # Errors
/// A half whose type has no dequantizer or whose bytes are not the size of its shape
/// ([`Factors::of`]).
pub fn pair_row(
    adapter: &Adapter,
    i: usize,
    (a_ty, a): (GgmlType, &[u8]),
    (b_ty, b): (GgmlType, &[u8]),
    mode: Mode,
    base_frobenius: Option<f64>,
) -> Result<TensorReport> {
    let p = &adapter.pairs[i];
    let f = Factors::of(p, a_ty, a, b_ty, b, adapter.scale(p.rank, 1.0))?;
    let measured = measure(&p.delta_name(), &f, mode);
    let halves = (a.len() as u64).saturating_add(b.len() as u64);
    Ok(row(p, halves, &measured, mode, update(p, &f, base_frobenius)))
}

/// ‖W‖_F of a base's weight of type `ty` from its bytes, read whole.
///
/// # Errors
/// A type without a dequantizer, or bytes that are not whole blocks.
pub fn weight_frobenius(ty: GgmlType, bytes: &[u8]) -> Result<f64> {
    Ok(frobenius_of(&crate::quant::dequantize(ty, bytes)?))
}

/// The adapter's report as one model's: `rows` (from [`pair_row`], in pair order) under
/// the adapter's facts, measured against the base labelled `base` if one was given.
pub fn report<T>(
    adapter: &Adapter,
    label: &str,
    m: &Model<T>,
    file_bytes: u64,
    rows: Vec<TensorReport>,
    base: Option<&str>,
) -> ModelReport {
    let mut r = ModelReport::new(label, m, file_bytes, rows);
    r.adapter = Some(adapter.facts(base));
    r
}

/// What a report says of an adapter as a whole.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Facts {
    /// `adapter.lora.alpha`.
    pub alpha: Option<f32>,
    /// The ranks of its pairs, each once, ascending.
    pub ranks: Vec<u64>,
    /// How many weights it adapts.
    pub pairs: u64,
    /// The length of an aLoRA's invocation sequence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invocation_tokens: Option<u64>,
    /// The base its updates were compared with (`--base`), by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<alloc::string::String>,
}

impl Adapter {
    /// The facts of the adapter for a report, measured against `base` (its label) if given.
    pub fn facts(&self, base: Option<&str>) -> Facts {
        Facts {
            alpha: self.alpha,
            ranks: self.ranks(),
            pairs: self.pairs.len() as u64,
            invocation_tokens: self.invocation_tokens,
            base: base.map(alloc::borrow::ToOwned::to_owned),
        }
    }
}

/// ‖W‖_F of a weight's values, in f64.
pub fn frobenius_of(values: &[f32]) -> f64 {
    libm::sqrt(values.iter().map(|&v| f64::from(v) * f64::from(v)).sum())
}
