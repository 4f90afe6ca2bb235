//! A model's recipe, whole: the budget its target leaves after the header `llama-quantize`
//! writes, a curve per tensor from a [`CurveSource`], the [`solve`]r's choice, each
//! tensor's `--tensor-type` line, and the report ([`super::report::Recipe`]). The
//! CLI and any other face read the model and the losses; the choosing is here.

use super::accept::{quantizable, tensor_type_arg};
use super::report::{Recipe, Row};
use super::size::{header_len, Account};
use super::solve::{solve, Solution, Why};
use super::{Curve, Error, Target, Tensor};
use crate::ggml_type::GgmlType;
use crate::model::{Model, TensorEntry};
use alloc::borrow::ToOwned;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::borrow::Borrow;

/// Where each tensor's loss per type comes from: measured sensitivity reports, or a
/// prediction.
pub trait CurveSource {
    /// What it is, for the table.
    fn describe(&self) -> String;
    /// The types it gives a loss for.
    fn types(&self) -> Vec<GgmlType>;
    /// The loss (mean KL divergence, nats) of `tensor` alone stored in `ty`, if known.
    fn cost(&self, tensor: &TensorEntry, ty: GgmlType) -> Option<f64>;
    /// Whether the losses are measured single-tensor KL divergences (the additivity check
    /// compares their sum with the measured KL divergence of the whole recipe).
    fn measured(&self) -> bool;
    /// Which predictor gave `tensor`'s losses (`residual`, `weighted_error`, `none`), for a
    /// predicted source; `None` for measured ones.
    fn predictor(&self, _tensor: &TensorEntry) -> Option<&'static str> {
        None
    }
}

/// Why [`choose`] made no recipe.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Refusal {
    /// A metadata value is malformed (an array whose bytes do not hold its elements).
    Metadata(crate::error::Error),
    /// The header `llama-quantize` would write cannot be accounted (the model's metadata).
    Header(crate::error::Error),
    /// The target is a size the header alone exceeds.
    HeaderAlone {
        /// The header's bytes, padding included.
        header: u64,
    },
    /// A tensor's own type does not fit its shape.
    OwnType {
        /// The tensor.
        tensor: String,
        /// Its type.
        ty: GgmlType,
        /// Its shape.
        dims: Vec<u64>,
    },
    /// Even every tensor at its smallest allowed type exceeds the target.
    TooSmall {
        /// The target, as asked.
        target: Target,
        /// The budget it leaves, in bytes of tensor data (padded for a size).
        budget: u64,
        /// What the smallest recipe takes, in the same bytes.
        need: u64,
        /// The output's header (a size target's budget is the size less it).
        header: u64,
        /// The model's elements (a bpw target's bits are spread over them).
        n_elements: u64,
    },
    /// The solver's: a bad curve.
    Solve(Error),
    /// A tensor's name cannot be a `--tensor-type` pattern.
    Unnameable(Error),
}

impl core::fmt::Display for Refusal {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Refusal::Metadata(e) => write!(f, "{e}"),
            Refusal::Header(e) => write!(f, "the output's header: {e}"),
            Refusal::HeaderAlone { header } => write!(f, "the output's header alone takes {header} bytes"),
            Refusal::OwnType { tensor, ty, dims } => {
                write!(f, "tensor {tensor}: its own type {ty} does not fit its shape {dims:?}")
            }
            Refusal::TooSmall { target: Target::Bpw(b), budget, need, n_elements, .. } => {
                // The smallest bpw that holds `need`, rounded up to the 4 decimals shown.
                let bits = *need as f64 * 8.0 / (*n_elements).max(1) as f64;
                write!(
                    f,
                    "a target of {b} bpw leaves {budget} bytes of tensor data, but every tensor at its smallest \
                     allowed type already takes {need} ({bits:.4} bpw): the smallest target is {:.4} bpw",
                    libm::ceil(bits * 1e4) / 1e4
                )
            }
            Refusal::TooSmall { target: Target::Size(s), budget, need, header, .. } => write!(
                f,
                "a target of {s} bytes leaves {budget} for the tensors beside the header's {header}, but every \
                 tensor at its smallest allowed type already takes {need} (each padded to 32): the smallest \
                 target is {} bytes",
                need.saturating_add(*header)
            ),
            Refusal::Solve(e) | Refusal::Unnameable(e) => write!(f, "{e}"),
        }
    }
}

/// The recipe for `model` (named `label` in the report) from `source` within `target`
/// (given as `asked`, the words the report repeats), for a `llama-quantize` run with an
/// importance matrix when `imatrix`.
///
/// # Errors
/// A header that cannot be accounted or that the target leaves no room beside, a tensor
/// whose own type does not fit its shape, a budget below the smallest recipe, a tensor
/// `llama-quantize` cannot be told about.
pub fn choose<T: Borrow<TensorEntry>>(
    model: &Model<T>,
    label: &str,
    source: &dyn CurveSource,
    (target, asked): (Target, &str),
    imatrix: bool,
) -> Result<Recipe, Refusal> {
    let arch = model.architecture().unwrap_or_default().into_owned();
    let tensors: Vec<&TensorEntry> = model.tensors.iter().map(Borrow::borrow).collect();
    let b = Budget::of(model, &tensors, target, imatrix)?;
    let (header, n_elements, budget, account) = (b.header, b.n_elements, b.budget, b.account);
    let types = source.types();
    let mut curves = Vec::with_capacity(tensors.len());
    for t in &tensors {
        let candidates: Vec<(GgmlType, f64)> = types.iter().filter_map(|&ty| Some((ty, source.cost(t, ty)?))).collect();
        let tensor = Tensor { name: &t.name, dims: &t.dims, ty: t.ty };
        let (curve, _refused) = Curve::of(&arch, tensor, &candidates, imatrix);
        if curve.options.is_empty() {
            return Err(Refusal::OwnType { tensor: t.name.clone(), ty: t.ty, dims: t.dims.clone() });
        }
        curves.push(curve);
    }
    let s = solve(&curves, budget, account).map_err(|e| match e {
        Error::BudgetTooSmall { need, .. } => b.too_small(need),
        e => Refusal::Solve(e),
    })?;
    // Every tensor llama-quantize quantizes gets its line, those that keep their type too:
    // a tensor no pattern names would get the default type and its mixture's rules.
    let mut lines = Vec::new();
    for ((t, c), &(o, _)) in tensors.iter().zip(&curves).zip(&s.choices) {
        if quantizable(&arch, &t.name, &t.dims) {
            let line = tensor_type_arg(&t.name, c.options[o].ty)
                .map_err(|reason| Refusal::Unnameable(Error::Unnameable { tensor: t.name.clone(), reason }))?;
            lines.push(line);
        }
    }
    let mut rows = rows(&tensors, &curves, &s);
    for (r, t) in rows.iter_mut().zip(&tensors) {
        r.predictor = source.predictor(t).map(str::to_owned);
        // Offered its own type and Q8_0 at no cost, Q8_0 wins as the smaller: not a choice
        // against λ, so not the "smallest" of a tensor whose loss was weighed.
        if r.predictor.as_deref() == Some("none") && r.ty != r.from {
            r.why = format!("outside the prediction: held at {}, near-lossless, rather than guessed", r.ty);
        }
    }
    let tensor_bytes: u64 = rows.iter().map(|r| r.bytes).sum();
    let file_bytes = header + rows.iter().map(|r| Account::File.charge(r.bytes)).sum::<u64>();
    Ok(Recipe {
        recipe: 1,
        model: label.to_owned(),
        source: source.describe(),
        target: asked.to_owned(),
        budget,
        account: match account {
            Account::Data => "data",
            Account::File => "file",
        },
        charged: s.charged,
        header_bytes: header,
        file_bytes,
        tensor_bytes,
        bpw: tensor_bytes as f64 * 8.0 / n_elements.max(1) as f64,
        predicted_kld: s.cost,
        lower_bound: s.lower_bound,
        lambda: s.lambda,
        tensors: rows,
        lines,
        applied: None,
    })
}

/// What a target leaves for the tensors of a model.
struct Budget {
    target: Target,
    header: u64,
    n_elements: u64,
    budget: u64,
    account: Account,
}

impl Budget {
    /// The budget `target` leaves beside the header `llama-quantize` writes for `model`.
    fn of<T: Borrow<TensorEntry>>(
        model: &Model<T>,
        tensors: &[&TensorEntry],
        target: Target,
        imatrix: bool,
    ) -> Result<Budget, Refusal> {
        let views = model.kvs.iter().map(|(k, v)| Ok((k.as_str(), v.view()?))).collect::<Result<Vec<_>, _>>();
        let views = views.map_err(Refusal::Metadata)?;
        let infos: Vec<(&str, &[u64], GgmlType)> =
            tensors.iter().map(|t| (t.name.as_str(), t.dims.as_slice(), t.ty)).collect();
        let header = header_len(&views, &infos, imatrix).map_err(Refusal::Header)?;
        let n_elements: u64 = tensors.iter().map(|t| t.n_elements).sum();
        let (budget, account) = target.budget(n_elements, header).ok_or(Refusal::HeaderAlone { header })?;
        Ok(Budget { target, header, n_elements, budget, account })
    }

    fn too_small(&self, need: u64) -> Refusal {
        let Budget { target, header, n_elements, budget, .. } = *self;
        Refusal::TooSmall { target, budget, need, header, n_elements }
    }
}

/// Whether `target` can be met at all, from the types alone: every tensor at the smallest
/// of its own type and the types `types_of` offers it that `llama-quantize` writes as
/// asked, as [`choose`] would charge them. No loss is needed, so a face checks this before
/// it predicts or measures (a minute on a small model) and a target no recipe meets is
/// refused at once.
///
/// # Errors
/// As [`choose`]: a header that cannot be accounted or that the target leaves no room
/// beside, a tensor whose own type does not fit its shape, [`Refusal::TooSmall`].
pub fn check_target<T: Borrow<TensorEntry>>(
    model: &Model<T>,
    types_of: &dyn Fn(&TensorEntry) -> Vec<GgmlType>,
    target: Target,
    imatrix: bool,
) -> Result<(), Refusal> {
    let arch = model.architecture().unwrap_or_default().into_owned();
    let tensors: Vec<&TensorEntry> = model.tensors.iter().map(Borrow::borrow).collect();
    let b = Budget::of(model, &tensors, target, imatrix)?;
    let mut need = 0u64;
    for t in &tensors {
        let candidates: Vec<(GgmlType, f64)> = types_of(t).into_iter().map(|ty| (ty, 0.0)).collect();
        let tensor = Tensor { name: &t.name, dims: &t.dims, ty: t.ty };
        let (curve, _refused) = Curve::of(&arch, tensor, &candidates, imatrix);
        let Some(least) = curve.options.iter().map(|p| b.account.charge(p.bytes)).min() else {
            return Err(Refusal::OwnType { tensor: t.name.clone(), ty: t.ty, dims: t.dims.clone() });
        };
        need = need.saturating_add(least);
    }
    if need > b.budget {
        return Err(b.too_small(need));
    }
    Ok(())
}

/// Each tensor's row: the option chosen and why.
fn rows(tensors: &[&TensorEntry], curves: &[Curve], s: &Solution) -> Vec<Row> {
    (tensors.iter().zip(curves).zip(&s.choices))
        .map(|((t, c), &(o, why))| {
            let p = c.options[o];
            let why = match why {
                Why::Only => "its only type".to_owned(),
                Why::Smallest => format!("smallest: no type's KLD saved {:.3e}/byte (λ)", s.lambda),
                Why::Hull => format!("least KLD + λ·bytes at λ = {:.3e}/byte", s.lambda),
                Why::Fill => "bytes left after λ".to_owned(),
            };
            Row { name: t.name.clone(), from: t.ty, ty: p.ty, bytes: p.bytes, cost: p.cost, why, predictor: None }
        })
        .collect()
}
