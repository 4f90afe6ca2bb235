//! `--imatrix FILE` / `--data-free`: the recipe's curves predicted (`crate::predict`,
//! docs/predict.md) instead of measured: each block weight's KL divergence in each
//! candidate type, from its round trip through organ's quantizer of that type, weighted
//! by the importance matrix's column mean squares or by the weights' own estimate.
//! Tensors the prediction does not cover (the embedding, the output head, anything but
//! the seven linear weights of a llama-family block) are offered Q8_0 only, at no cost:
//! the recipe keeps them near-lossless rather than guess.

use super::CurveSource;
use crate::model::Model;
use anyhow::Result;
use organ_core::ggml_type::GgmlType;
use organ_core::imatrix::Imatrix;
use organ_core::model::TensorEntry;
use organ_core::predict::Kind;
use organ_core::quant::quantize::can_quantize;
use std::collections::HashMap;
use std::path::Path;

/// The types a predicted recipe chooses among (those organ can quantize to; llama-quantize
/// still decides, per tensor, which it accepts).
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

/// The type tensors outside the prediction keep.
const UNCOVERED: GgmlType = GgmlType::Q8_0;

/// Predicted single-tensor KL divergences, per (tensor, type).
pub struct Predicted {
    source: String,
    types: Vec<GgmlType>,
    cost: HashMap<(String, GgmlType), f64>,
}

impl Predicted {
    /// Predicts every block weight of `model` in each of `types` (and Q8_0), from
    /// `imatrix` (read from the file named) or from the weights alone.
    ///
    /// # Errors
    /// As [`crate::predict::predict`]: a model that is not llama-family, an imatrix that
    /// lacks a weight or disagrees with its shape.
    pub fn new(model: &Model, imatrix: Option<(&Path, &Imatrix)>, types: &[GgmlType]) -> Result<Predicted> {
        let mut types: Vec<GgmlType> = types.iter().copied().filter(|t| can_quantize(*t)).collect();
        if !types.contains(&UNCOVERED) {
            types.push(UNCOVERED);
        }
        let preds = crate::predict::predict(model, imatrix.map(|i| i.1), &types, |n| Kind::of(n).is_some())?;
        let mut cost = HashMap::new();
        for p in preds {
            for o in p.options {
                cost.insert((p.name.clone(), o.ty), o.predicted_kld);
            }
        }
        let source = match imatrix {
            Some((p, _)) => format!("predicted from the importance matrix {}", p.display()),
            None => "predicted from the weights alone (data-free)".to_owned(),
        };
        Ok(Predicted { source, types, cost })
    }
}

impl CurveSource for Predicted {
    fn describe(&self) -> String {
        format!("{}; tensors outside the prediction at {UNCOVERED}", self.source)
    }

    fn types(&self) -> Vec<GgmlType> {
        self.types.clone()
    }

    fn cost(&self, tensor: &TensorEntry, ty: GgmlType) -> Option<f64> {
        if Kind::of(&tensor.name).is_none() {
            return (ty == UNCOVERED).then_some(0.0);
        }
        self.cost.get(&(tensor.name.clone(), ty)).copied()
    }

    fn measured(&self) -> bool {
        false
    }
}
