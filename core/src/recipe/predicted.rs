//! A recipe's curves predicted instead of measured (docs/predict.md): each block weight's
//! KL divergence in each candidate type, from the core's prediction steps
//! (`crate::predict::steps`), weighted by an importance matrix's column mean squares or by
//! the weights' own estimate: by the residual model where it covers the architecture, by
//! the weighted error alone elsewhere, each row saying which. Tensors the prediction does
//! not cover (the embedding, the output head, block weights llama-quantize leaves alone)
//! are offered Q8_0 only, at no cost: the recipe keeps them near-lossless rather than
//! guess. Every face predicts with the same steps and hands the predictions here.

use super::choose::CurveSource;
use crate::error::{Error, Result};
use crate::ggml_type::GgmlType;
use crate::model::TensorEntry;
use crate::predict::steps::Prediction;
use crate::predict::{Calibration, Method};
use crate::quant::quantize::can_quantize;
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

/// The types a predicted recipe chooses among by default (those organ can quantize to;
/// the rules of llama-quantize still decide, per tensor, which it accepts).
pub const CANDIDATES: [GgmlType; 11] = [
    GgmlType::Q2_K,
    GgmlType::Q3_K,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::IQ4_NL,
    GgmlType::Q8_0,
];

/// Where a data-free recipe's losses come from, as its table says.
pub const DATA_FREE: &str = "predicted from the weights alone (data-free)";

/// Where a recipe's losses come from, as its table says: [`DATA_FREE`], or the importance
/// matrix `imatrix` names (its path on the command line, its file name in the page).
pub fn source(imatrix: Option<&str>) -> String {
    match imatrix {
        Some(name) => format!("predicted from the importance matrix {name}"),
        None => DATA_FREE.into(),
    }
}

/// The type tensors outside the prediction keep.
pub const UNCOVERED: GgmlType = GgmlType::Q8_0;

/// The candidate types named (`--types`: any case, repeats dropped, in order); the
/// default list when none is.
///
/// # Errors
/// [`Error::BadSetting`]: a name that is not one of [`CANDIDATES`] (the sentence names
/// them).
pub fn candidate_types<S: AsRef<str>>(names: &[S]) -> Result<Vec<GgmlType>> {
    if names.is_empty() {
        return Ok(CANDIDATES.to_vec());
    }
    let mut types = Vec::new();
    for n in names {
        let n = n.as_ref();
        match GgmlType::from_name(&n.trim().to_ascii_uppercase()).filter(|t| CANDIDATES.contains(t)) {
            Some(t) if !types.contains(&t) => types.push(t),
            Some(_) => {}
            None => {
                let all: Vec<&str> = CANDIDATES.iter().map(|t| t.name()).collect();
                let reason = format!("not a type organ predicts (give some of {})", all.join(", "));
                return Err(Error::BadSetting { what: format!("{n:?}"), reason });
            }
        }
    }
    Ok(types)
}

/// The types to predict for `types`: those organ can quantize to, and [`UNCOVERED`].
pub fn prediction_types(types: &[GgmlType]) -> Vec<GgmlType> {
    let mut types: Vec<GgmlType> = types.iter().copied().filter(|t| can_quantize(*t)).collect();
    if !types.contains(&UNCOVERED) {
        types.push(UNCOVERED);
    }
    types
}

/// Which weights a recipe asks the prediction for: the block weights (the predictor
/// takes those it covers).
pub fn covered(name: &str) -> bool {
    crate::anatomy::layer_of(name).is_some()
}

/// The types a predicted recipe offers the tensor `name` (before llama-quantize's rules):
/// [`prediction_types`] of `types` for a weight the prediction covers, [`UNCOVERED`] for
/// any other. For [`super::choose::check_target`], before anything is predicted.
pub fn offered(name: &str, types: &[GgmlType]) -> Vec<GgmlType> {
    if covered(name) {
        prediction_types(types)
    } else {
        alloc::vec![UNCOVERED]
    }
}

/// Predicted single-tensor KL divergences, per (tensor, type).
pub struct Predicted {
    source: String,
    imatrix: bool,
    types: Vec<GgmlType>,
    cost: BTreeMap<(String, GgmlType), f64>,
    method: BTreeMap<String, Method>,
    sampled: usize,
}

impl Predicted {
    /// The curves of `predictions`, made for `types` (from [`prediction_types`]);
    /// `source` says where they come from, for the table (from an importance matrix when
    /// `imatrix`).
    pub fn new(source: String, imatrix: bool, types: Vec<GgmlType>, predictions: Vec<Prediction>) -> Predicted {
        let mut cost = BTreeMap::new();
        let mut method = BTreeMap::new();
        let sampled = predictions.iter().filter(|p| p.rows_sampled.is_some()).count();
        for p in predictions {
            method.insert(p.name.clone(), p.method);
            for o in p.options {
                cost.insert((p.name.clone(), o.ty), o.predicted_kld);
            }
        }
        Predicted { source, imatrix, types, cost, method, sampled }
    }

    /// How many weights each model predicted.
    fn count(&self, m: Method) -> usize {
        self.method.values().filter(|&&x| x == m).count()
    }
}

impl CurveSource for Predicted {
    fn describe(&self) -> String {
        let mut by = Vec::new();
        let (residual, weighted) = (self.count(Method::Residual), self.count(Method::WeightedError));
        if residual > 0 {
            by.push(format!(
                "{residual} weights by the residual model, which {}",
                Calibration::measured_rho(self.imatrix)
            ));
        }
        if weighted > 0 {
            let rho = Calibration::weighted_error_rho(self.imatrix);
            by.push(format!("{weighted} by the weighted error alone, which {rho}"));
        }
        if self.sampled > 0 {
            by.push(format!(
                "{} weights of more than {} values each from an even sample of their rows",
                self.sampled,
                crate::predict::ROUND_TRIP_VALUES
            ));
        }
        format!("{}; {}; tensors outside the prediction at {UNCOVERED}", self.source, by.join("; "))
    }

    fn predictor(&self, tensor: &TensorEntry) -> Option<&'static str> {
        Some(self.method.get(&tensor.name).map_or("none", |m| m.name()))
    }

    fn types(&self) -> Vec<GgmlType> {
        self.types.clone()
    }

    fn cost(&self, tensor: &TensorEntry, ty: GgmlType) -> Option<f64> {
        if !self.method.contains_key(&tensor.name) {
            return (ty == UNCOVERED).then_some(0.0);
        }
        self.cost.get(&(tensor.name.clone(), ty)).copied()
    }

    fn measured(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    #[test]
    fn candidate_types_read_in_any_case_once_each_and_name_the_bad_one() {
        assert_eq!(candidate_types::<&str>(&[]).unwrap(), CANDIDATES.to_vec());
        assert_eq!(candidate_types(&["q4_0", " Q8_0", "Q4_0"]).unwrap(), [GgmlType::Q4_0, GgmlType::Q8_0]);
        let e = candidate_types(&["Q4_0", "IQ2_XXS"]).unwrap_err().to_string();
        assert!(e.starts_with("\"IQ2_XXS\": not a type organ predicts") && e.contains("Q2_K"), "{e}");
        assert_eq!(prediction_types(&[GgmlType::Q4_0]), [GgmlType::Q4_0, UNCOVERED]);
        assert!(covered("blk.3.ffn_down_exps.weight") && !covered("token_embd.weight"));
    }
}
