//! `--imatrix FILE` / `--data-free`: the recipe's curves predicted over the mapped files
//! (`crate::predict`), handed to the core's [`Predicted`] (`organ_core::recipe::predicted`).

use crate::model::Model;
use anyhow::Result;
use organ_core::ggml_type::GgmlType;
use organ_core::imatrix::Imatrix;
pub use organ_core::recipe::predicted::Predicted;
use organ_core::recipe::predicted::{covered, prediction_types, source};
use std::path::Path;

/// Predicts every block weight of `model` a predictor covers in each of `types` (and Q8_0), from `imatrix`
/// (read from the file named) or from the weights alone.
///
/// # Errors
/// As [`crate::predict::predict`]: an imatrix that lacks a weight or disagrees with its
/// shape.
pub fn predicted(model: &Model, imatrix: Option<(&Path, &Imatrix)>, types: &[GgmlType]) -> Result<Predicted> {
    let types = prediction_types(types);
    let preds = crate::predict::predict(model, imatrix.map(|i| i.1), &types, covered)?;
    let source = source(imatrix.map(|(p, _)| p.display().to_string()).as_deref());
    Ok(Predicted::new(source, imatrix.is_some(), types, preds))
}
