//! A whole model's prediction, in steps that a front end schedules: `organ sensitivity
//! --predict` and `organ recipe` run them with rayon over mapped files, the browser app
//! with its read scheduler and worker pool. The front end only reads tensors and decides
//! what runs where; every figure comes from here.
//!
//! 1. [`Predictor::energy_jobs`]: every block weight of the residual model (with the norm
//!    that feeds it, data-free), its post-norms, the token embedding, and the norms that
//!    feed the weights the weighted error predicts; [`Predictor::energy`] gives each one's
//!    [`Energies`] (a few vectors of the weight's width) or gains.
//! 2. [`Predictor::stream`]: each block's residual model and the stream's energy at each
//!    depth, from all of them.
//! 3. [`Predictor::round_trip_jobs`]: the selected weights; [`Predictor::predict`]
//!    round-trips one through every candidate type.
//!
//! A step holds one weight's values at a time.

use super::family::feeding_norm;
use super::jobs::{entry, results_mismatch};
pub use super::jobs::{
    tensor, Block, By, Energy, EnergyJob, Other, PredictedPoint, Prediction, RoundTripJob, Stream, Unavailable,
};
use super::residual;
use super::{sampled_row_errors, sampled_rows, Calibration, Kind, Method, Shape};
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

/// A model's prediction: the residual model's shape (when it covers the model), the weights
/// the weighted error predicts, the candidate types, the calibration, and where the input
/// columns' mean squares come from.
#[derive(Debug, Clone)]
pub struct Predictor<'i> {
    /// The residual model's shape; `None` when it does not cover the model (an
    /// architecture not in [`super::family::FAMILIES`], or blocks without its seven weights).
    pub residual: Option<Shape>,
    /// The block weights outside the residual model that llama-quantize quantizes, in the
    /// model's order: the weighted error predicts them.
    pub others: Vec<Other>,
    /// The candidate types.
    pub types: Vec<GgmlType>,
    /// Scales the residual model's weighted error to a KLD (the others take
    /// [`Calibration::weighted_error`]).
    pub calibration: Calibration,
    /// The importance matrix (borrowed, or owned where the jobs must outlive the caller,
    /// as the browser's worker pool needs); `None`: data-free.
    pub imatrix: Option<Cow<'i, Imatrix>>,
}

impl<'i> Predictor<'i> {
    /// The prediction of `model` to each type of `types`, scaled by `calibration`, with the
    /// input columns from `imatrix` or, without one, from the weights alone: the residual
    /// model where it covers the model, the weighted error elsewhere.
    ///
    /// # Errors
    /// A type organ cannot quantize to; a family's counts missing or malformed.
    pub fn new<T: Borrow<TensorEntry>>(
        model: &Model<T>,
        types: &[GgmlType],
        calibration: Calibration,
        imatrix: Option<Cow<'i, Imatrix>>,
    ) -> Result<Self> {
        Predictor::with_residual(model, types, calibration, imatrix, true)
    }

    /// [`Predictor::new`], or, when not `residual`, every block weight by the weighted error
    /// (how its ρ is measured on a model the residual model covers: docs/predict.md).
    ///
    /// # Errors
    /// As [`Predictor::new`].
    pub fn with_residual<T: Borrow<TensorEntry>>(
        model: &Model<T>,
        types: &[GgmlType],
        calibration: Calibration,
        imatrix: Option<Cow<'i, Imatrix>>,
        residual: bool,
    ) -> Result<Self> {
        if let Some(ty) = types.iter().find(|t| !can_quantize(**t)) {
            return Err(Error::Unsupported {
                reason: format!(
                    "organ has no quantizer for {ty}, so cannot predict it (it can quantize to {})",
                    quantizable()
                ),
            });
        }
        let arch = model.architecture().unwrap_or_default().into_owned();
        let shape = match arch.as_str() {
            a if residual && super::Family::of(a).is_some() => Some(Shape::of(model)?),
            _ => None,
        };
        let data_free = imatrix.is_none();
        let shape = shape.filter(|s| complete(model, s, data_free));
        let others = others(model, &arch, shape.as_ref(), data_free);
        Ok(Predictor { residual: shape, others, types: types.to_vec(), calibration, imatrix })
    }

    /// Which model predicts the tensor `name`, if any.
    pub fn method_of<T: Borrow<TensorEntry>>(&self, model: &Model<T>, name: &str) -> Option<Method> {
        let i = model.tensors.iter().position(|t| entry(t).name == name)?;
        match self.by(i, name) {
            Some(By::Residual(_)) => Some(Method::Residual),
            Some(By::WeightedError(_)) => Some(Method::WeightedError),
            None => None,
        }
    }

    /// Step 1's jobs: every block weight of the residual model (block by block, in
    /// [`Kind::ALL`]'s order, then the block's post-norms), the token embedding, then the
    /// norms that feed the others (data-free).
    pub fn energy_jobs(&self) -> Vec<EnergyJob> {
        let mut jobs: Vec<EnergyJob> = Vec::new();
        if let Some(shape) = &self.residual {
            for layer in 0..shape.n_layer {
                jobs.extend(Kind::ALL.into_iter().map(|kind| {
                    let fed = !matches!(kind, Kind::AttnOutput | Kind::FfnDown);
                    let norm = if kind.is_ffn() { "ffn_norm" } else { "attn_norm" };
                    let norm = (fed && self.imatrix.is_none()).then(|| format!("blk.{layer}.{norm}.weight"));
                    EnergyJob::Weight { layer, kind, weight: kind.weight(layer), norm }
                }));
                if shape.family.post_norms {
                    jobs.extend(shape.family.post_norm_names(layer).map(|name| EnergyJob::Norm { name }));
                }
            }
            jobs.push(EnergyJob::Embedding { name: "token_embd.weight".into() });
        }
        jobs.extend(self.others.iter().filter_map(|o| o.norm.clone()).map(|name| EnergyJob::Norm { name }));
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
                let d_model = two_d(t)?.0;
                let scaled = self.residual.is_some_and(|s| s.family.embedding_scaled);
                let h = residual::embedding_energy(v, d_model);
                Ok(Energy::Embedding(if scaled { h * d_model as f64 } else { h }))
            }
            (EnergyJob::Norm { .. }, [_], [v]) => Ok(Energy::Norm(v.to_vec())),
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
    /// order, and the others' data-free columns. `model` gives the shapes of `attn_output`
    /// and `ffn_down` (whose columns the importance matrix gives).
    ///
    /// # Errors
    /// Results not of those jobs; shapes that disagree within a block; a weight missing
    /// from the importance matrix.
    pub fn stream<T: Borrow<TensorEntry>>(&self, model: &Model<T>, results: Vec<Energy>) -> Result<Stream> {
        let n_norms = self.others.iter().filter(|o| o.norm.is_some()).count();
        let per_block = |s: &Shape| 7 + if s.family.post_norms { 2 } else { 0 };
        let n_residual = self.residual.as_ref().map_or(0, |s| per_block(s) * s.n_layer as usize + 1);
        if results.len() != n_residual + n_norms {
            let (what, expected, got) = ("step-1 results (one per job)", (n_residual + n_norms) as u64, results.len());
            return Err(Error::CountMismatch { what, expected, got: got as u64 });
        }
        let mut results = results.into_iter();
        let blocks = match &self.residual {
            Some(shape) => super::blocks::blocks(shape, self.imatrix.as_deref(), model, &mut results)?,
            None => Vec::new(),
        };
        let mut others = Vec::with_capacity(self.others.len());
        for o in &self.others {
            others.push(match (&o.norm, o.norm.as_ref().map(|_| results.next())) {
                (Some(_), Some(Some(Energy::Norm(g)))) => Some(residual::gain_squares(&g)),
                (Some(name), _) => return Err(results_mismatch(name)),
                (None, _) => None,
            });
        }
        Ok(Stream { blocks, others })
    }

    /// Step 3's jobs: the weights of `model` that `select` picks and a model predicts, in
    /// the model's order.
    pub fn round_trip_jobs<T: Borrow<TensorEntry>>(
        &self,
        model: &Model<T>,
        select: impl Fn(&str) -> bool,
    ) -> Vec<RoundTripJob> {
        (model.tensors.iter().enumerate())
            .filter(|(_, t)| select(&entry(*t).name))
            .filter_map(|(tensor, t)| {
                let name = &entry(t).name;
                let by = self.by(tensor, name)?;
                Some(RoundTripJob { tensor, layer: crate::anatomy::layer_of(name)?, by })
            })
            .collect()
    }

    /// Which model predicts tensor `tensor` (named `name`).
    fn by(&self, tensor: usize, name: &str) -> Option<By> {
        if let Some(shape) = &self.residual {
            if let Some((kind, _)) = Kind::of(name).filter(|&(k, l)| l < shape.n_layer && residual_kind(shape, k)) {
                return Some(By::Residual(kind));
            }
        }
        self.others.binary_search_by_key(&tensor, |o| o.tensor).ok().map(By::WeightedError)
    }

    /// Step 3 for one weight `t` (of `job`) with its dequantized `values`: every candidate
    /// type, each round trip quantized as `organ quantize` (and llama-quantize) would
    /// write the weight: under the importance matrix when there is one.
    ///
    /// # Errors
    /// Values not of the weight's shape, or not of its block's; an importance-matrix
    /// entry llama-quantize would refuse for the weight, or none for a weight the
    /// weighted error predicts.
    pub fn predict(&self, stream: &Stream, job: &RoundTripJob, t: &TensorEntry, values: &[f32]) -> Result<Prediction> {
        let n_in = match (job.by, t.dims.first()) {
            (By::Residual(_), _) => two_d(t)?.0,
            (By::WeightedError(_), Some(&n)) if n > 0 => n as usize,
            _ => return Err(Error::BadLayout { tensor: t.name.clone(), reason: "has no rows".into() }),
        };
        // Per kind: the columns, the carried row weights and stream energy, the rows' scales.
        let (cols, carried, scales, method) = match job.by {
            By::Residual(kind) => {
                let block = stream.blocks.get(job.layer as usize).ok_or_else(|| Error::BadLayout {
                    tensor: t.name.clone(),
                    reason: format!("is of block {}, but step 2 gave {} blocks", job.layer, stream.blocks.len()),
                })?;
                let h = residual::stream_at(kind, block.stream);
                let carried = Some((&block.layer.row_weights[kind.index()][..], h));
                let cols = Cow::Borrowed(&block.cols[kind.index()][..]);
                (cols, carried, &block.scales[kind.index()][..], Method::Residual)
            }
            By::WeightedError(o) => {
                let cols = match (self.imatrix.as_deref(), stream.others.get(o)) {
                    (Some(im), _) => Cow::Owned(im.column_weights(&t.name, &t.dims)?),
                    (None, Some(Some(g))) => Cow::Borrowed(&g[..]),
                    (None, _) => Cow::Owned(alloc::vec![1.0; n_in]),
                };
                (cols, None, &[][..], Method::WeightedError)
            }
        };
        // Quantized as the file will be: under the importance matrix's weights as
        // llama-quantize takes them (none for a weight it has no entry for); data-free,
        // by the plain quantizer, as llama-quantize writes without --imatrix.
        let qw = match self.imatrix.as_deref() {
            Some(im) => im.quant_weights_of(&t.name, &t.dims).map_err(|e| in_tensor(&t.name, e))?,
            None => None,
        };
        let kind = match job.by {
            By::Residual(k) => k.name().to_owned(),
            By::WeightedError(_) => crate::anatomy::kind(&t.name),
        };
        // A large weight's round trips are taken on an even sample of its rows.
        let rows = values.len().checked_div(n_in).unwrap_or(0);
        let picked = sampled_rows(rows, n_in);
        let mut p = Prediction {
            name: t.name.clone(),
            kind,
            method,
            layer: job.layer,
            ty: t.ty,
            dims: t.dims.clone(),
            bytes: t.n_bytes,
            options: Vec::new(),
            unavailable: Vec::new(),
            rows_sampled: (picked.len() < rows).then_some(picked.len() as u64),
        };
        for &ty in &self.types {
            if n_in % ty.block_size() != 0 {
                let reason = format!("rows of {n_in} values are not whole {ty} blocks of {}", ty.block_size());
                p.unavailable.push(Unavailable { ty, reason });
                continue;
            }
            let errors = sampled_row_errors(ty, values, n_in, qw.as_deref(), &cols, &picked)
                .map_err(|e| in_tensor(&t.name, e))?;
            let relative = match carried {
                Some((rw, h)) => Some(residual::carried(&errors, rw).map_err(|e| in_tensor(&t.name, e))? / h),
                None => None,
            };
            let weighted_error = scaled_sum(&errors, scales).map_err(|e| in_tensor(&t.name, e))?;
            p.options.push(PredictedPoint {
                ty,
                bytes: t.n_elements / ty.block_size() as u64 * ty.type_size() as u64,
                predicted_kld: match job.by {
                    By::Residual(kind) => self.calibration.predict(kind, weighted_error),
                    By::WeightedError(_) => {
                        Calibration::weighted_error(self.imatrix.is_some()).predict_mean(weighted_error)
                    }
                },
                weighted_error,
                relative,
            });
        }
        Ok(p)
    }
}

/// Whether the residual model predicts kind `kind` of a model of `shape`: every kind but
/// the queries and keys behind a per-head norm.
fn residual_kind(shape: &Shape, kind: Kind) -> bool {
    !(shape.family.qk_norms && matches!(kind, Kind::AttnQ | Kind::AttnK))
}

/// Whether `model` has everything the residual model reads: every block's seven weights
/// (2-D), its norms (data-free) and post-norms, and the token embedding.
fn complete<T: Borrow<TensorEntry>>(model: &Model<T>, shape: &Shape, data_free: bool) -> bool {
    let has =
        |name: &str, dims: usize| model.tensors.iter().any(|t| entry(t).name == name && entry(t).dims.len() == dims);
    (0..shape.n_layer).all(|l| {
        let norms = ["attn_norm", "ffn_norm"].map(|n| format!("blk.{l}.{n}.weight"));
        Kind::ALL.iter().all(|k| has(&k.weight(l), 2))
            && (!data_free || norms.iter().all(|n| has(n, 1)))
            && (!shape.family.post_norms || shape.family.post_norm_names(l).iter().all(|n| has(n, 1)))
    }) && has("token_embd.weight", 2)
}

/// The block weights of `model` that llama-quantize quantizes and the residual model
/// (`shape`, when it covers the model) does not, each with the norm that feeds it when it
/// is read (data-free) and has one gain per input column.
fn others<T: Borrow<TensorEntry>>(model: &Model<T>, arch: &str, shape: Option<&Shape>, data_free: bool) -> Vec<Other> {
    let tensors: Vec<&TensorEntry> = model.tensors.iter().map(Borrow::borrow).collect();
    (tensors.iter().enumerate())
        .filter_map(|(i, t)| {
            let layer = crate::anatomy::layer_of(&t.name)?;
            if !crate::anatomy::quantizable(arch, &t.name, &t.dims) {
                return None;
            }
            let covered =
                shape.is_some_and(|s| Kind::of(&t.name).is_some_and(|(k, l)| l < s.n_layer && residual_kind(s, k)));
            if covered {
                return None;
            }
            let norm = feeding_norm(&crate::anatomy::kind(&t.name))
                .map(|n| format!("blk.{layer}.{n}.weight"))
                .filter(|n| data_free && tensors.iter().any(|x| x.name == *n && Some(&x.n_elements) == t.dims.first()));
            Some(Other { tensor: i, layer, norm })
        })
        .collect()
}

/// `Σ_r s_r ε_r` for `scales` as [`Block::scales`] holds them (none: the plain sum).
fn scaled_sum(errors: &[f64], scales: &[f64]) -> Result<f64> {
    match scales {
        [] => Ok(errors.iter().sum()),
        [s] => Ok(errors.iter().sum::<f64>() * s),
        _ => residual::carried(errors, scales),
    }
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
