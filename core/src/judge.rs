//! What llama.cpp's `llama-perplexity` measured of a model ([`Evaluation`]: `organ eval`),
//! and the verdict on a model that surgery made, against its parent (`--judge TEXT`),
//! graded by one rule (docs/judge.md):
//!
//! - `broken`: the output's perplexity is not finite, or more than twice the parent's;
//! - `degraded`: its perplexity is more than 10% above the parent's;
//! - `close`: otherwise, with a mean KL divergence of at most 0.05 nats and the same top
//!   token as the parent on at least 90% of the scored tokens: it behaves like its parent;
//! - `changed`: otherwise: no worse on the text, but it predicts differently (what a graft
//!   from another fine-tune is for).
//!
//! The perplexities compared are those of the KL run (the same tokens for both models).
//! The figures are read from llama.cpp's output by the native host; the grade, the report
//! and its text are here, for every face.

use alloc::format;
use alloc::string::String;
use core::fmt::{self, Write};
use serde::{Deserialize, Serialize};

/// A figure with one standard error, as llama.cpp prints it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// The figure.
    pub value: f64,
    /// One standard error.
    pub error: f64,
}

/// KL divergence of the model's next-token distribution from the base's, per scored token.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Divergence {
    /// In nats: mean (with its error), median, 99th percentile, maximum.
    pub mean: Estimate,
    /// Median, nats.
    pub median: f64,
    /// 99th percentile, nats.
    pub p99: f64,
    /// Maximum, nats.
    pub max: f64,
    /// Fraction of scored tokens where both models' most likely token is the same.
    pub same_top: Estimate,
    /// ln(PPL(model) / PPL(base)) over the same tokens.
    pub ln_ppl_ratio: Estimate,
}

/// What `organ eval` measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Evaluation {
    /// The model's path, then ` + lora FILE:S` for each adapter applied to it.
    pub model: String,
    /// The BLAKE3 of the model's bytes (all shards of a split model, in order): what
    /// `organ measure --verdict` ties the verdict to, whatever the file is named.
    pub model_blake3: String,
    /// The base's, likewise.
    pub base: Option<String>,
    /// The BLAKE3 of the base's bytes, with a base.
    pub base_blake3: Option<String>,
    /// The text scored.
    pub text: String,
    /// Tokens per context.
    pub ctx: u32,
    /// Chunks of `ctx` tokens scored (the second half of each chunk is scored).
    pub chunks: u32,
    /// The model's perplexity on the text.
    pub perplexity: Estimate,
    /// The base's (with a base).
    pub base_perplexity: Option<Estimate>,
    /// With a base.
    pub kl_divergence: Option<Divergence>,
    /// The llama-perplexity that measured it.
    pub llama_perplexity: String,
    /// With a base: whether its logits were computed by this run or reused from the logits
    /// cache (docs/judge.md, The base's logits are kept). The figures are the same either way.
    pub base_logits: Option<BaseLogits>,
}

/// Where the base's log-probabilities that the model is compared with came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BaseLogits {
    /// llama-perplexity scored the base in this run.
    Computed,
    /// Read back from the logits cache: the base was not run.
    Cached,
}

/// Perplexity ratio (output / parent) above which the output is `broken`.
pub const BROKEN_RATIO: f64 = 2.0;
/// … above which it is `degraded`.
pub const DEGRADED_RATIO: f64 = 1.10;
/// Mean KL divergence (nats) at or under which, with [`CLOSE_SAME_TOP`], it is `close`.
pub const CLOSE_KLD: f64 = 0.05;
/// Top-token agreement at or above which, with [`CLOSE_KLD`], it is `close`.
pub const CLOSE_SAME_TOP: f64 = 0.90;

/// The grade.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Grade {
    /// It behaves like its parent.
    Close,
    /// No worse on the text, but it predicts differently.
    Changed,
    /// Its perplexity is more than [`DEGRADED_RATIO`] of the parent's.
    Degraded,
    /// Its perplexity is not finite, or more than [`BROKEN_RATIO`] of the parent's.
    Broken,
}

impl Grade {
    /// Its word: `close`, `changed`, `degraded`, `broken`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Grade::Close => "close",
            Grade::Changed => "changed",
            Grade::Degraded => "degraded",
            Grade::Broken => "broken",
        }
    }
}

/// A verdict: the grade, why, and the figures.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Verdict {
    /// The grade.
    pub verdict: Grade,
    /// One sentence: which thresholds decided it.
    pub reason: String,
    /// PPL(output) / PPL(parent) over the same tokens.
    pub ppl_ratio: f64,
    /// The figures it was graded on.
    pub evaluation: Evaluation,
}

/// Grades an evaluation made with a base (the parent): the grade, the sentence saying
/// why, and the perplexity ratio. `None` without KL figures.
#[must_use]
pub fn grade(e: &Evaluation) -> Option<(Grade, String, f64)> {
    let k = e.kl_divergence.as_ref()?;
    let ratio = libm::exp(k.ln_ppl_ratio.value);
    let (kld, top) = (k.mean.value, k.same_top.value);
    let g = if !e.perplexity.value.is_finite() || !ratio.is_finite() || ratio > BROKEN_RATIO {
        (Grade::Broken, format!("perplexity ×{ratio:.3} of the parent's (broken above ×{BROKEN_RATIO})"))
    } else if ratio > DEGRADED_RATIO {
        (Grade::Degraded, format!("perplexity ×{ratio:.3} of the parent's (degraded above ×{DEGRADED_RATIO})"))
    } else if kld <= CLOSE_KLD && top >= CLOSE_SAME_TOP {
        (
            Grade::Close,
            format!(
                "perplexity ×{ratio:.3}, KL divergence {kld:.4} ≤ {CLOSE_KLD}, same top token {:.1}% ≥ {:.0}%",
                100.0 * top,
                100.0 * CLOSE_SAME_TOP
            ),
        )
    } else {
        (
            Grade::Changed,
            format!(
                "perplexity ×{ratio:.3} (not worse), but KL divergence {kld:.4} or same top token {:.1}% \
                 beyond close ({CLOSE_KLD}, {:.0}%)",
                100.0 * top,
                100.0 * CLOSE_SAME_TOP
            ),
        )
    };
    Some((g.0, g.1, ratio))
}

/// `organ eval`'s report: the evaluation, and its grade when it was made against a base.
#[derive(Clone, Debug, PartialEq)]
pub struct EvalReport {
    /// What llama-perplexity measured.
    pub evaluation: Evaluation,
    /// [`grade`]'s grade, reason and perplexity ratio, with a base.
    pub verdict: Option<(Grade, String, f64)>,
}

impl EvalReport {
    /// The report of `evaluation`, graded when it has a base's figures.
    #[must_use]
    pub fn new(evaluation: Evaluation) -> EvalReport {
        let verdict = grade(&evaluation);
        EvalReport { evaluation, verdict }
    }

    /// The JSON document: the evaluation's fields with `"eval": "e1"` and, graded,
    /// `"verdict"`, every object's keys in sorted order (as serde_json's maps keep them).
    ///
    /// # Errors
    /// A figure serde_json cannot hold.
    pub fn document(&self) -> Result<serde_json::Value, serde_json::Error> {
        let mut doc = serde_json::to_value(&self.evaluation)?;
        doc["eval"] = "e1".into();
        if let Some((g, reason, ratio)) = &self.verdict {
            doc["verdict"] = serde_json::json!({ "verdict": g, "reason": reason, "ppl_ratio": ratio });
        }
        Ok(doc)
    }
}

/// The evaluation's figures as `organ eval` prints them (before any verdict line).
///
/// # Errors
/// `w` refused a write.
pub fn evaluation_text(e: &Evaluation, w: &mut dyn Write) -> fmt::Result {
    writeln!(w, "eval {} on {} ({} chunks of {} tokens)", e.model, e.text, e.chunks, e.ctx)?;
    writeln!(w, "  perplexity        {:>10.4} ± {:.4}", e.perplexity.value, e.perplexity.error)?;
    if let (Some(base), Some(bp)) = (&e.base, &e.base_perplexity) {
        // A reused base says so: its figures are the run's that kept its logits.
        let cached = if e.base_logits == Some(BaseLogits::Cached) { ", its logits cached" } else { "" };
        writeln!(w, "  base perplexity   {:>10.4} ± {:.4}  ({base}{cached})", bp.value, bp.error)?;
    }
    if let Some(k) = &e.kl_divergence {
        writeln!(
            w,
            "  KL divergence     mean {:.6} ± {:.6}, median {:.6}, 99% {:.6}, max {:.6} (nats)",
            k.mean.value, k.mean.error, k.median, k.p99, k.max
        )?;
        writeln!(w, "  same top token    {:>9.3}% ± {:.3}%", 100.0 * k.same_top.value, 100.0 * k.same_top.error)?;
        writeln!(w, "  ln(PPL/PPL base)  {:>10.6} ± {:.6}", k.ln_ppl_ratio.value, k.ln_ppl_ratio.error)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn evaluation(ln_ratio: f64, kld: f64, top: f64) -> Evaluation {
        let est = |v| Estimate { value: v, error: 0.0 };
        Evaluation {
            model: "m".into(),
            model_blake3: "ab".repeat(32),
            base: Some("b".into()),
            base_blake3: Some("cd".repeat(32)),
            text: "t".into(),
            ctx: 128,
            chunks: 9,
            perplexity: est(20.0 * ln_ratio.exp()),
            base_perplexity: Some(est(20.0)),
            kl_divergence: Some(Divergence {
                mean: est(kld),
                median: kld,
                p99: kld,
                max: kld,
                same_top: est(top),
                ln_ppl_ratio: est(ln_ratio),
            }),
            llama_perplexity: "llama-perplexity".into(),
            base_logits: Some(BaseLogits::Computed),
        }
    }

    #[test]
    fn the_rule_grades_by_perplexity_first_then_kl_and_top() {
        let g = |r: f64, k, t| grade(&evaluation(r.ln(), k, t)).unwrap().0;
        assert_eq!(g(1.0079, 0.0049, 0.952), Grade::Close); // SmolLM2 Q8_0 against its Q4_1
        assert_eq!(g(0.95, 0.2, 0.7), Grade::Changed);
        assert_eq!(g(1.0, 0.01, 0.85), Grade::Changed);
        assert_eq!(g(1.32, 0.1, 0.8), Grade::Degraded);
        assert_eq!(g(2.01, 0.5, 0.5), Grade::Broken);
        assert_eq!(g(f64::INFINITY, 0.5, 0.5), Grade::Broken);
        let mut e = evaluation(0.0, 0.0, 1.0);
        e.kl_divergence = None;
        assert!(grade(&e).is_none());
    }
}
