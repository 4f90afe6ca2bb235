//! A whole model's prediction, in steps that a front end schedules: `organ sensitivity
//! --predict` and `organ recipe` run them with rayon over mapped files, the browser app
//! with its read scheduler and worker pool. The front end only reads tensors and decides
//! what runs where; every figure comes from here.
//!
//! 1. [`Predictor::energy_jobs`]: every block weight (with the norm that feeds it, data-free)
//!    and the token embedding; [`Predictor::energy`] gives each one's [`Energies`] (a few
//!    vectors of the weight's width).
//! 2. [`Predictor::stream`]: each block's residual model and the stream's energy at each
//!    depth, from all of them.
//! 3. [`Predictor::round_trip_jobs`]: the selected weights; [`Predictor::predict`]
//!    round-trips one through every candidate type.
//!
//! A step holds one weight's values at a time.

use super::residual::{self, Energies, Layer};
use super::{round_trip, row_errors, Calibration, Kind, Shape};
use crate::error::{Error, Result};
use crate::imatrix::Imatrix;
use crate::model::{Model, TensorEntry};
use crate::quant::quantize::can_quantize;
use crate::GgmlType;
use alloc::borrow::{Cow, ToOwned};
use alloc::format;
use alloc::string::{String, ToString};
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
    /// Its bytes in the model.
    pub bytes: u64,
    /// One point per candidate type it can take, in the order asked.
    pub options: Vec<PredictedPoint>,
    /// The candidate types it cannot take.
    pub unavailable: Vec<Unavailable>,
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
}

impl EnergyJob {
    /// The tensors the job reads, in the order [`Predictor::energy`] takes their values.
    pub fn reads(&self) -> Vec<&str> {
        match self {
            EnergyJob::Weight { weight, norm, .. } => {
                core::iter::once(weight.as_str()).chain(norm.as_deref()).collect()
            }
            EnergyJob::Embedding { name } => alloc::vec![name.as_str()],
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
    /// The embedding's energy.
    Embedding(f64),
}

/// One block, after step 2: its residual model and each kind's input column mean squares.
#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    /// The block's residual model.
    pub layer: Layer,
    /// Per kind ([`Kind::index`]), the input columns' mean squares.
    pub cols: [Vec<f32>; 7],
    /// `Ĥ` where the block's attention and its FFN read the stream.
    pub stream: (f64, f64),
}

/// A step-3 job: a selected weight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoundTripJob {
    /// The weight's index among the model's tensors.
    pub tensor: usize,
    /// Its kind.
    pub kind: Kind,
    /// Its block.
    pub layer: u32,
}

/// A model's prediction: its shape, the candidate types, the calibration, and where the
/// input columns' mean squares come from.
#[derive(Debug, Clone)]
pub struct Predictor<'i> {
    /// The model's shape.
    pub shape: Shape,
    /// The candidate types.
    pub types: Vec<GgmlType>,
    /// Scales a weighted error to a KLD.
    pub calibration: Calibration,
    /// The importance matrix (borrowed, or owned where the jobs must outlive the caller,
    /// as the browser's worker pool needs); `None`: data-free.
    pub imatrix: Option<Cow<'i, Imatrix>>,
}

impl<'i> Predictor<'i> {
    /// The prediction of `model` (llama-family) to each type of `types`, scaled by
    /// `calibration`, with the input columns from `imatrix` or, without one, from the
    /// weights alone.
    ///
    /// # Errors
    /// A type organ cannot quantize to; a model that is not llama-family.
    pub fn new<T>(
        model: &Model<T>,
        types: &[GgmlType],
        calibration: Calibration,
        imatrix: Option<Cow<'i, Imatrix>>,
    ) -> Result<Self> {
        if let Some(ty) = types.iter().find(|t| !can_quantize(**t)) {
            return Err(Error::Unsupported {
                reason: format!(
                    "organ has no quantizer for {ty}, so cannot predict it (it can quantize to {})",
                    quantizable()
                ),
            });
        }
        Ok(Predictor { shape: Shape::of(model)?, types: types.to_vec(), calibration, imatrix })
    }

    /// Step 1's jobs: every block weight (block by block, in [`Kind::ALL`]'s order), then
    /// the token embedding.
    pub fn energy_jobs(&self) -> Vec<EnergyJob> {
        let mut jobs: Vec<EnergyJob> = (0..self.shape.n_layer)
            .flat_map(|layer| {
                Kind::ALL.into_iter().map(move |kind| {
                    let fed = !matches!(kind, Kind::AttnOutput | Kind::FfnDown);
                    let norm = if kind.is_ffn() { "ffn_norm" } else { "attn_norm" };
                    let norm = (fed && self.imatrix.is_none()).then(|| format!("blk.{layer}.{norm}.weight"));
                    EnergyJob::Weight { layer, kind, weight: kind.weight(layer), norm }
                })
            })
            .collect();
        jobs.push(EnergyJob::Embedding { name: "token_embd.weight".into() });
        jobs
    }

    /// Step 1 for one job: `tensors` are the entries of [`EnergyJob::reads`] and `values`
    /// their dequantized values, in that order.
    ///
    /// # Errors
    /// A weight with more than 2 dimensions; values, norms or importance-matrix entries of
    /// another shape; a weight missing from the importance matrix.
    pub fn energy(&self, job: &EnergyJob, tensors: &[&TensorEntry], values: &[&[f32]]) -> Result<Energy> {
        match (job, tensors, values) {
            (EnergyJob::Embedding { .. }, [t], [v]) => {
                Ok(Energy::Embedding(residual::embedding_energy(v, two_d(t)?.0)))
            }
            (EnergyJob::Weight { kind, .. }, [t, rest @ ..], [v, gains @ ..]) => {
                let (n_in, _) = two_d(t)?;
                let cols = match (self.imatrix.as_deref(), rest, gains) {
                    _ if matches!(kind, Kind::AttnOutput | Kind::FfnDown) => None,
                    (Some(im), [], []) => Some(im.column_weights(&t.name, &t.dims)?),
                    (None, [norm], [g]) => {
                        if norm.n_elements != n_in as u64 || g.len() != n_in {
                            return Err(Error::BadLayout {
                                tensor: norm.name.clone(),
                                reason: format!(
                                    "has {} values, but {} has {n_in} input columns",
                                    norm.n_elements, t.name
                                ),
                            });
                        }
                        Some(residual::gain_squares(g))
                    }
                    _ => return Err(job_mismatch(job, tensors.len(), values.len())),
                };
                let energies = residual::energies(v, n_in, cols.as_deref()).map_err(|e| in_tensor(&t.name, e))?;
                Ok(Energy::Weight { energies, cols })
            }
            _ => Err(job_mismatch(job, tensors.len(), values.len())),
        }
    }

    /// Step 2: each block's model from step 1's results, in [`Predictor::energy_jobs`]'
    /// order. `model` gives the shapes of `attn_output` and `ffn_down` (whose columns the
    /// importance matrix gives).
    ///
    /// # Errors
    /// Results not of those jobs; shapes that disagree within a block; a weight missing
    /// from the importance matrix.
    pub fn stream<T: Borrow<TensorEntry>>(&self, model: &Model<T>, results: Vec<Energy>) -> Result<Vec<Block>> {
        let n = self.shape.n_layer as usize;
        if results.len() != 7 * n + 1 {
            let (what, expected, got) = ("step-1 results (one per job)", 7 * n as u64 + 1, results.len() as u64);
            return Err(Error::CountMismatch { what, expected, got });
        }
        let mut results = results.into_iter();
        // Per block, each kind's energies and input columns (when step 1 gave them).
        type Gathered = ([Energies; 7], [Option<Vec<f32>>; 7]);
        let mut blocks: Vec<Gathered> = Vec::with_capacity(n);
        for _ in 0..n {
            let mut e: [Option<Energies>; 7] = Default::default();
            let mut c: [Option<Vec<f32>>; 7] = Default::default();
            for k in Kind::ALL {
                match results.next() {
                    Some(Energy::Weight { energies, cols }) => (e[k.index()], c[k.index()]) = (Some(energies), cols),
                    _ => return Err(results_mismatch(&k.weight(blocks.len() as u32))),
                }
            }
            blocks.push((e.map(|x| x.unwrap_or_else(empty)), c));
        }
        let h0 = match (results.next(), results.next()) {
            (Some(Energy::Embedding(h)), None) => h,
            _ => return Err(results_mismatch("token_embd.weight")),
        };
        let mut layers = Vec::with_capacity(n);
        for (l, (e, cols)) in blocks.into_iter().enumerate() {
            let l32 = l as u32;
            let (o_cols, d_cols) = match self.imatrix.as_deref() {
                Some(im) => {
                    let col = |k: Kind| {
                        let t: &TensorEntry = tensor(model, &k.weight(l32))?.borrow();
                        im.column_weights(&t.name, &t.dims)
                    };
                    (col(Kind::AttnOutput)?, col(Kind::FfnDown)?)
                }
                None => (residual::attn_output_columns(&self.shape, &e[2])?, residual::ffn_down_columns(&e[4], &e[5])?),
            };
            let refs: [&Energies; 7] = core::array::from_fn(|i| &e[i]);
            let layer = residual::layer(&self.shape, refs, &o_cols, &d_cols)
                .map_err(|err| Error::BadLayout { tensor: format!("blk.{l}"), reason: err.to_string() })?;
            let mut cols = cols;
            cols[Kind::AttnOutput.index()] = Some(o_cols);
            cols[Kind::FfnDown.index()] = Some(d_cols);
            layers.push((layer, cols.map(Option::unwrap_or_default)));
        }
        let only: Vec<Layer> = layers.iter().map(|l| l.0.clone()).collect();
        let stream = residual::stream_energies(h0, &only);
        Ok(layers.into_iter().zip(stream).map(|((layer, cols), stream)| Block { layer, cols, stream }).collect())
    }

    /// Step 3's jobs: the block weights of `model` that `select` picks, in the model's order.
    pub fn round_trip_jobs<T: Borrow<TensorEntry>>(
        &self,
        model: &Model<T>,
        select: impl Fn(&str) -> bool,
    ) -> Vec<RoundTripJob> {
        (model.tensors.iter().enumerate())
            .filter(|(_, t)| select(&entry(*t).name))
            .filter_map(|(tensor, t)| {
                let (kind, layer) = Kind::of(&entry(t).name).filter(|(_, l)| *l < self.shape.n_layer)?;
                Some(RoundTripJob { tensor, kind, layer })
            })
            .collect()
    }

    /// Step 3 for one weight `t` (of `job`) with its dequantized `values`: every candidate
    /// type, each round trip quantized as `organ quantize` (and llama-quantize) would
    /// write the weight: under the importance matrix when there is one.
    ///
    /// # Errors
    /// Values not of the weight's shape, or not of its block's; an importance-matrix
    /// entry llama-quantize would refuse for the weight.
    pub fn predict(&self, blocks: &[Block], job: &RoundTripJob, t: &TensorEntry, values: &[f32]) -> Result<Prediction> {
        let block = blocks.get(job.layer as usize).ok_or_else(|| Error::BadLayout {
            tensor: t.name.clone(),
            reason: format!("is of block {}, but step 2 gave {} blocks", job.layer, blocks.len()),
        })?;
        let (n_in, _) = two_d(t)?;
        let cols = &block.cols[job.kind.index()];
        let row_weights = &block.layer.row_weights[job.kind.index()];
        let h = residual::stream_at(job.kind, block.stream);
        // Quantized as the file will be: under the importance matrix's weights as
        // llama-quantize takes them (none for a weight it has no entry for); data-free,
        // by the plain quantizer, as llama-quantize writes without --imatrix.
        let qw = match self.imatrix.as_deref() {
            Some(im) => im.quant_weights_of(&t.name, &t.dims).map_err(|e| in_tensor(&t.name, e))?,
            None => None,
        };
        let mut p = Prediction {
            name: t.name.clone(),
            kind: job.kind,
            layer: job.layer,
            ty: t.ty,
            dims: t.dims.clone(),
            bytes: t.n_bytes,
            options: Vec::new(),
            unavailable: Vec::new(),
        };
        for &ty in &self.types {
            if n_in % ty.block_size() != 0 {
                let reason = format!("rows of {n_in} values are not whole {ty} blocks of {}", ty.block_size());
                p.unavailable.push(Unavailable { ty, reason });
                continue;
            }
            let errors = (round_trip(ty, values, n_in, qw.as_deref()).and_then(|q| row_errors(values, &q, n_in, cols)))
                .map_err(|e| in_tensor(&t.name, e))?;
            let relative = residual::carried(&errors, row_weights).map_err(|e| in_tensor(&t.name, e))? / h;
            let weighted_error: f64 = errors.iter().sum();
            p.options.push(PredictedPoint {
                ty,
                bytes: t.n_elements / ty.block_size() as u64 * ty.type_size() as u64,
                predicted_kld: self.calibration.predict(job.kind, weighted_error),
                weighted_error,
                relative,
            });
        }
        Ok(p)
    }
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

fn entry<T: Borrow<TensorEntry>>(t: &T) -> &TensorEntry {
    t.borrow()
}

/// The types organ can quantize to, for errors.
pub fn quantizable() -> String {
    let all: Vec<&str> = GgmlType::ALL.iter().filter(|t| can_quantize(**t)).map(|t| t.name()).collect();
    all.join(", ")
}

/// `(n_in, n_out)` of a weight of at most 2 dimensions.
fn two_d(t: &TensorEntry) -> Result<(usize, usize)> {
    match t.dims[..] {
        [n_in] => Ok((n_in as usize, 1)),
        [n_in, n_out] => Ok((n_in as usize, n_out as usize)),
        _ => Err(Error::BadLayout {
            tensor: t.name.clone(),
            reason: format!(
                "has {} dimensions {:?}: the sensitivity model covers dense weights only",
                t.dims.len(),
                t.dims
            ),
        }),
    }
}

fn in_tensor(name: &str, e: Error) -> Error {
    match e {
        e @ (Error::BadLayout { .. } | Error::BadTensor { .. }) => e,
        e => Error::BadLayout { tensor: name.to_owned(), reason: e.to_string() },
    }
}

fn job_mismatch(job: &EnergyJob, tensors: usize, values: usize) -> Error {
    let reads = job.reads();
    let name = reads.first().copied().unwrap_or_default();
    let reason = format!("step 1 reads {reads:?}, but was given {tensors} tensors and {values} value vectors");
    Error::BadLayout { tensor: name.to_owned(), reason }
}

fn results_mismatch(at: &str) -> Error {
    Error::BadLayout {
        tensor: at.to_owned(),
        reason: "step 1's result is not of this job (results out of order)".into(),
    }
}

fn empty() -> Energies {
    Energies { rows: Vec::new(), cols: Vec::new() }
}
