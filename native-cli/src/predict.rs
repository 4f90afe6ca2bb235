//! The cheap prediction of each weight's sensitivity (`organ_core::predict`,
//! docs/predict.md) over a model's files: the weights read and dequantized here, the
//! tensors in parallel, the maths in the core. Two passes over the block weights: the
//! first gathers each weight's energies for the residual-stream model (small vectors), the
//! second round-trips each selected weight through every candidate type; a thread holds
//! one weight's values, its round trip and its bytes at a time.

use crate::model::{Model, Tensor};
use anyhow::{anyhow, bail, Context, Result};
use organ_core::imatrix::Imatrix;
use organ_core::predict::residual::{self, Energies, Layer};
use organ_core::predict::{round_trip, row_errors, Calibration, Kind, Shape};
use organ_core::quant::dequantize;
use organ_core::quant::quantize::can_quantize;
use organ_core::GgmlType;
use rayon::prelude::*;
use serde::Serialize;
use std::io::Read;
use std::path::Path;

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
    /// squares (what [`Calibration`] scales).
    pub weighted_error: f64,
    /// `R/Ĥ`: that error carried into the residual stream, over the stream's energy there
    /// (kept for study: on SmolLM2 F16 it ranked worse than the weighted error, docs/predict.md).
    pub relative: f64,
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
    /// Its kind.
    pub kind: Kind,
    /// Its block.
    pub layer: u32,
    /// Its type in the model.
    pub ty: GgmlType,
    /// Its shape (ggml order).
    pub dims: Vec<u64>,
    /// One point per candidate type it can take, in the order asked.
    pub options: Vec<PredictedPoint>,
    /// The candidate types it cannot take.
    pub unavailable: Vec<Unavailable>,
}

/// Predicts, for every selected block weight (the seven linear kinds of a llama-family
/// block) and every type of `types`, the KLD of the model with only that weight in that
/// type, from `imatrix`'s column mean squares or, without one, from the weights alone;
/// scaled by the calibration fitted for that source ([`Calibration::for_source`]).
///
/// # Errors
/// A type organ cannot quantize to, a model that is not llama-family, a block weight
/// missing or of another shape, an imatrix that lacks a weight or disagrees with its shape.
pub fn predict(
    model: &Model,
    imatrix: Option<&Imatrix>,
    types: &[GgmlType],
    select: impl Fn(&str) -> bool + Sync,
) -> Result<Vec<Prediction>> {
    predict_calibrated(model, imatrix, types, select, &Calibration::for_source(imatrix.is_some()))
}

/// [`predict`] with a calibration of the caller's (one fitted against measured truth).
///
/// # Errors
/// As [`predict`].
pub fn predict_calibrated(
    model: &Model,
    imatrix: Option<&Imatrix>,
    types: &[GgmlType],
    select: impl Fn(&str) -> bool + Sync,
    calibration: &Calibration,
) -> Result<Vec<Prediction>> {
    if let Some(ty) = types.iter().find(|t| !can_quantize(**t)) {
        bail!("organ has no quantizer for {ty}, so cannot predict it (it can quantize to {})", quantizable());
    }
    let shape = Shape::of(&model.model).with_context(|| format!("predicting the sensitivity of {}", model.label))?;
    let m = Weights { model, imatrix };
    // Pass 1: every block weight's energies.
    let slots: Vec<(u32, Kind)> = (0..shape.n_layer).flat_map(|l| Kind::ALL.into_iter().map(move |k| (l, k))).collect();
    let energies: Vec<Energies> = slots
        .par_iter()
        .map(|&(l, k)| {
            let (t, values) = m.values(&k.weight(l))?;
            let cols = if matches!(k, Kind::AttnOutput | Kind::FfnDown) { None } else { Some(m.columns(t, l, k)?) };
            Ok(residual::energies(&values, t.dims[0] as usize, cols.as_deref())?)
        })
        .collect::<Result<_>>()?;
    let layers: Vec<(Layer, Vec<f32>, Vec<f32>)> = energies
        .par_chunks_exact(7)
        .enumerate()
        .map(|(l, e)| {
            let l32 = l as u32;
            let (o_cols, d_cols) = match imatrix {
                Some(_) => {
                    let col = |k: Kind| m.tensor(&k.weight(l32)).and_then(|t| m.columns(t, l32, k));
                    (col(Kind::AttnOutput)?, col(Kind::FfnDown)?)
                }
                None => (residual::attn_output_columns(&shape, &e[2])?, residual::ffn_down_columns(&e[4], &e[5])?),
            };
            let e: [&Energies; 7] = std::array::from_fn(|i| &e[i]);
            let layer = residual::layer(&shape, e, &o_cols, &d_cols).with_context(|| format!("block {l}"))?;
            Ok((layer, o_cols, d_cols))
        })
        .collect::<Result<_>>()?;
    let (embd, embd_values) = m.values("token_embd.weight")?;
    let h0 = residual::embedding_energy(&embd_values, embd.dims[0] as usize);
    drop(embd_values);
    let only: Vec<Layer> = layers.iter().map(|l| l.0.clone()).collect();
    let stream = residual::stream_energies(h0, &only);
    // Pass 2: the selected weights' round trips.
    let chosen: Vec<(&Tensor, Kind, u32)> = model
        .tensors
        .iter()
        .filter(|t| select(&t.name))
        .filter_map(|t| Kind::of(&t.name).filter(|(_, l)| *l < shape.n_layer).map(|(k, l)| (t, k, l)))
        .collect();
    chosen
        .par_iter()
        .map(|&(t, kind, l)| {
            let (layer, o_cols, d_cols) = &layers[l as usize];
            let cols = match kind {
                Kind::AttnOutput => o_cols.clone(),
                Kind::FfnDown => d_cols.clone(),
                _ => m.columns(t, l, kind)?,
            };
            let h = residual::stream_at(kind, stream[l as usize]);
            one(t, kind, l, &cols, &layer.row_weights[kind.index()], h, types, calibration)
                .with_context(|| format!("predicting {}", t.name))
        })
        .collect()
}

/// Every candidate type for one weight.
#[allow(clippy::too_many_arguments)]
fn one(
    t: &Tensor,
    kind: Kind,
    layer: u32,
    cols: &[f32],
    row_weights: &[f64],
    h: f64,
    types: &[GgmlType],
    calibration: &Calibration,
) -> Result<Prediction> {
    let values = dequantize(t.ty, t.bytes())?;
    let n_in = t.dims[0] as usize;
    let mut p = Prediction {
        name: t.name.clone(),
        kind,
        layer,
        ty: t.ty,
        dims: t.dims.clone(),
        options: Vec::new(),
        unavailable: Vec::new(),
    };
    for &ty in types {
        if n_in % ty.block_size() != 0 {
            let reason = format!("rows of {n_in} values are not whole {ty} blocks of {}", ty.block_size());
            p.unavailable.push(Unavailable { ty, reason });
            continue;
        }
        let q = round_trip(ty, &values, n_in)?;
        let errors = row_errors(&values, &q, n_in, cols)?;
        let relative = residual::carried(&errors, row_weights)? / h;
        let weighted_error: f64 = errors.iter().sum();
        p.options.push(PredictedPoint {
            ty,
            bytes: t.n_elements / ty.block_size() as u64 * ty.type_size() as u64,
            predicted_kld: calibration.predict(kind, weighted_error),
            weighted_error,
            relative,
        });
    }
    Ok(p)
}

/// The model's weights and the column weights' source.
struct Weights<'a> {
    model: &'a Model,
    imatrix: Option<&'a Imatrix>,
}

impl Weights<'_> {
    fn tensor(&self, name: &str) -> Result<&Tensor> {
        self.model.tensors.iter().find(|t| t.name == name).ok_or_else(|| {
            anyhow!("{} has no tensor {name}: the sensitivity model needs every block weight", self.model.label)
        })
    }

    /// A 2-D weight (or a norm) and its values.
    fn values(&self, name: &str) -> Result<(&Tensor, Vec<f32>)> {
        let t = self.tensor(name)?;
        if t.dims.len() > 2 {
            bail!(
                "{name} has {} dimensions {:?}: the sensitivity model covers dense weights only",
                t.dims.len(),
                t.dims
            );
        }
        Ok((t, dequantize(t.ty, t.bytes()).with_context(|| format!("reading {name}"))?))
    }

    /// The mean squares of weight `t`'s input columns: from the importance matrix, or the
    /// squared gains of the norm that feeds it (attn_output and ffn_down have no norm; the
    /// data-free path derives theirs in `residual`).
    fn columns(&self, t: &Tensor, layer: u32, kind: Kind) -> Result<Vec<f32>> {
        if let Some(im) = self.imatrix {
            return im.column_weights(&t.name, &t.dims).context("the importance matrix");
        }
        let norm = if kind.is_ffn() { "ffn_norm" } else { "attn_norm" };
        let (n, g) = self.values(&format!("blk.{layer}.{norm}.weight"))?;
        if n.n_elements != t.dims[0] {
            bail!("{} has {} values, but {} has {} input columns", n.name, n.n_elements, t.name, t.dims[0]);
        }
        Ok(residual::gain_squares(&g))
    }
}

fn quantizable() -> String {
    let all: Vec<&str> = GgmlType::ALL.iter().filter(|t| can_quantize(**t)).map(|t| t.name()).collect();
    all.join(", ")
}

/// The largest importance matrix read (SmolLM2's is 1.3 MB; a 70B model's ~50 MB).
const MAX_IMATRIX_BYTES: u64 = 1 << 30;

/// Reads a `llama-imatrix` output, bounded.
///
/// # Errors
/// Unreadable, too large, or not an importance matrix organ reads.
pub fn read_imatrix(p: &Path) -> Result<Imatrix> {
    let mut bytes = Vec::new();
    crate::input::open(p)?
        .take(MAX_IMATRIX_BYTES + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("{}: cannot read (--imatrix)", p.display()))?;
    if bytes.len() as u64 > MAX_IMATRIX_BYTES {
        bail!("{}: more than {MAX_IMATRIX_BYTES} bytes, not an importance matrix organ reads", p.display());
    }
    Imatrix::parse(&bytes).with_context(|| format!("{}: not a llama-imatrix GGUF (--imatrix)", p.display()))
}
