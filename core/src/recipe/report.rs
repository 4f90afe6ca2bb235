//! A recipe's report (`organ recipe`), as [`super::choose::choose`] makes it: the type
//! chosen for each tensor and why, the totals against the budget, and what `--apply` made
//! and measured. The report registry renders it ([`crate::report::recipe`]).

use crate::ggml_type::GgmlType;
use crate::judge::Evaluation;
use alloc::string::String;
use alloc::vec::Vec;
use serde::Serialize;

/// One tensor's line of the table.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The tensor.
    pub name: String,
    /// Its type in the model.
    pub from: GgmlType,
    /// The type chosen.
    #[serde(rename = "type")]
    pub ty: GgmlType,
    /// Its data's bytes in that type.
    pub bytes: u64,
    /// The loss predicted or measured for it alone in that type.
    pub cost: f64,
    /// Why the solver chose it.
    pub why: String,
    /// Which predictor gave its losses (`residual`, `weighted_error`; `none` for a tensor
    /// outside the prediction), for a predicted recipe.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predictor: Option<String>,
}

/// The recipe: the table and its totals.
#[derive(Debug, Clone, Serialize)]
pub struct Recipe {
    /// The schema's version.
    pub recipe: u32,
    /// The model, as the face names it.
    pub model: String,
    /// Where the losses come from.
    pub source: String,
    /// The target, in the words it was asked in.
    pub target: String,
    /// The budget in the bytes it counts (`data` or `file`), and what it counted.
    pub budget: u64,
    /// What the budget counts: `data` or `file`.
    pub account: &'static str,
    /// The budget used.
    pub charged: u64,
    /// Header bytes of the output as llama-quantize writes it (padding included).
    pub header_bytes: u64,
    /// The output's size: header plus each tensor padded to 32.
    pub file_bytes: u64,
    /// Every tensor's data bytes.
    pub tensor_bytes: u64,
    /// Tensor bits per element of the model.
    pub bpw: f64,
    /// The sum of single-tensor losses.
    pub predicted_kld: f64,
    /// No recipe within the budget has a smaller sum.
    pub lower_bound: f64,
    /// The solver's last λ (loss saved per byte).
    pub lambda: f64,
    /// Every tensor, in the model's order.
    pub tensors: Vec<Row>,
    /// The --tensor-type lines, as written to --out.
    #[serde(skip)]
    pub lines: Vec<String>,
    /// What `--apply` made, when it ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub applied: Option<Applied>,
}

/// Whether single-tensor KL divergences add up: their sum (measured, or predicted) against
/// the whole recipe's, measured.
#[derive(Debug, Clone, Serialize)]
pub struct Additivity {
    /// The recipe's sum of single-tensor KL divergences.
    pub sum_single: f64,
    /// The whole recipe's KL divergence, measured.
    pub measured: f64,
    /// Its standard error.
    pub measured_error: f64,
    /// measured / sum_single.
    pub ratio: f64,
}

/// How far the measured KL divergence may be from the sum before the text warns: a factor
/// of 2 either way (and beyond twice the measurement's standard error). SmolLM2's recipes
/// measured within ×1.5 of their measured sums (docs/recipe.md); a data-free prediction
/// at 5 bpw was 4× under.
pub const FAR: f64 = 2.0;

impl Additivity {
    /// The sum against the evaluation's KL divergence, `None` without one.
    #[must_use]
    pub fn of(sum_single: f64, e: &Evaluation) -> Option<Additivity> {
        let k = e.kl_divergence.as_ref()?;
        Some(Additivity {
            sum_single,
            measured: k.mean.value,
            measured_error: k.mean.error,
            ratio: k.mean.value / sum_single,
        })
    }

    /// Whether the measurement is a factor [`FAR`] or more from the sum, beyond its noise.
    #[must_use]
    pub fn far(&self) -> bool {
        let off = !(self.ratio.is_finite() && self.ratio < FAR && self.ratio > 1.0 / FAR);
        off && (self.measured - self.sum_single).abs() > 2.0 * self.measured_error
    }
}

/// The grade of an applied recipe's evaluation against the model ([`crate::judge::grade`]).
#[derive(Debug, Clone, Serialize)]
pub struct Graded {
    /// The grade.
    pub verdict: crate::judge::Grade,
    /// Which thresholds decided it.
    pub reason: String,
    /// PPL(output) / PPL(model).
    pub ppl_ratio: f64,
}

/// What `--apply` made and measured.
#[derive(Debug, Clone, Serialize)]
pub struct Applied {
    /// The model written.
    pub out: String,
    /// Its size.
    pub file_bytes: u64,
    /// What wrote it: organ's quantizer and its version.
    pub quantizer: String,
    /// The llama-quantize that wrote the same bytes from the same recipe, when asked to
    /// (`--check-with-llama-quantize`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checked_with: Option<String>,
    /// Its evaluation against the model, when a text was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eval: Option<Evaluation>,
    /// With measured losses and an evaluation: whether they add up.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub additivity: Option<Additivity>,
    /// With predicted losses and an evaluation: the predicted sum against the measurement.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prediction: Option<Additivity>,
    /// With an evaluation: its grade, as `organ eval` and `--judge` give it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Graded>,
}

impl Applied {
    /// What `--apply` made, with the evaluation `eval` when a text was given: graded, and
    /// its KL divergence held against the recipe's sum `predicted_kld` of `measured` (or
    /// predicted) single-tensor losses.
    #[must_use]
    pub fn new(
        out: String,
        file_bytes: u64,
        quantizer: String,
        checked_with: Option<String>,
        eval: Option<Evaluation>,
        (predicted_kld, measured): (f64, bool),
    ) -> Applied {
        let sum = eval.as_ref().and_then(|e| Additivity::of(predicted_kld, e));
        let (additivity, prediction) = if measured { (sum, None) } else { (None, sum) };
        let verdict = eval.as_ref().and_then(crate::judge::grade).map(|(verdict, reason, ppl_ratio)| Graded {
            verdict,
            reason,
            ppl_ratio,
        });
        Applied { out, file_bytes, quantizer, checked_with, eval, additivity, prediction, verdict }
    }
}
