//! The verdict on a model that surgery made, against its parent (`--judge TEXT` of graft and
//! purify; moe's `--base` later): [`evaluate`](crate::llama_cpp::perplexity::evaluate) the output with
//! the parent as base, then grade it by one rule (docs/judge.md):
//!
//! - `broken`: the output's perplexity is not finite, or more than twice the parent's;
//! - `degraded`: its perplexity is more than 10% above the parent's;
//! - `close`: otherwise, with a mean KL divergence of at most 0.05 nats and the same top
//!   token as the parent on at least 90% of the scored tokens: it behaves like its parent;
//! - `changed`: otherwise: no worse on the text, but it predicts differently (what a graft
//!   from another fine-tune is for).
//!
//! The perplexities compared are those of the KL run (the same tokens for both models).

use crate::llama_cpp::perplexity::{self as eval, Evaluation, Settings};
use anyhow::{Context, Result};
use serde::Serialize;
use std::io::Write;
use std::path::Path;

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
    Close,
    Changed,
    Degraded,
    Broken,
}

impl Grade {
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
#[derive(Clone, Debug, Serialize)]
pub struct Verdict {
    pub verdict: Grade,
    /// One sentence: which thresholds decided it.
    pub reason: String,
    /// PPL(output) / PPL(parent) over the same tokens.
    pub ppl_ratio: f64,
    pub evaluation: Evaluation,
}

/// Grades an evaluation made with a base (the parent). `None` without KL figures.
pub fn grade(e: &Evaluation) -> Option<(Grade, String, f64)> {
    let k = e.kl_divergence.as_ref()?;
    let ratio = k.ln_ppl_ratio.value.exp();
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

/// Evaluates `output` against `parent` on `s.text` and grades it. Temp files go beside
/// `output`.
///
/// # Errors
/// As [`eval::evaluate`].
pub fn judge(output: &Path, parent: &Path, s: &Settings) -> Result<Verdict> {
    judge_in(output, parent, s, output).with_context(|| {
        format!("{} was written, but --judge could not evaluate it against {}", output.display(), parent.display())
    })
}

/// [`judge`] with the temp files beside `near` (an output organ wrote) rather than beside
/// the model judged: for a model that is an input, judged with an adapter organ wrote
/// (`lora extract --judge`).
pub fn judge_near(output: &Path, parent: &Path, s: &Settings, near: &Path) -> Result<Verdict> {
    judge_in(output, parent, s, near).with_context(|| {
        format!(
            "{} was written, but --judge could not evaluate {} with it against {}",
            near.display(),
            output.display(),
            parent.display()
        )
    })
}

/// [`judge`]'s evaluation and grade, temp files beside `near`.
fn judge_in(output: &Path, parent: &Path, s: &Settings, near: &Path) -> Result<Verdict> {
    let scratch = near.parent().filter(|p| !p.as_os_str().is_empty());
    let e = eval::evaluate(output, Some(parent), s, scratch)?;
    let (verdict, reason, ppl_ratio) =
        grade(&e).ok_or_else(|| anyhow::anyhow!("{}: no KL divergence figures", output.display()))?;
    Ok(Verdict { verdict, reason, ppl_ratio, evaluation: e })
}

/// `--judge`, when it was asked for (`s`): [`judge`] `output` against `parent`, and the
/// verdict printed ([`print`]); `None` when it was not.
///
/// # Errors
/// As [`judge`], or the verdict cannot be printed.
pub fn judged(output: &Path, parent: &Path, s: Option<&Settings>, w: &mut dyn Write) -> Result<Option<Verdict>> {
    s.map(|s| {
        let v = judge(output, parent, s)?;
        print(&v, w)?;
        Ok(v)
    })
    .transpose()
}

/// Prints a verdict after the evaluation's figures.
pub fn print(v: &Verdict, w: &mut dyn Write) -> Result<()> {
    eval::print(&v.evaluation, w)?;
    writeln!(w, "verdict: {} ({})", verdict_word(v.verdict), v.reason)?;
    Ok(())
}

/// A verdict's word as printed on stdout: coloured on a terminal ([`crate::paint`]).
pub fn verdict_word(g: Grade) -> String {
    use crate::paint::{BAD, GOOD, NOTE, WARN};
    let style = match g {
        Grade::Close => GOOD,
        Grade::Changed => NOTE,
        Grade::Degraded => WARN,
        Grade::Broken => BAD,
    };
    crate::paint::paint(g.name(), style, crate::paint::Stream::Stdout)
}

/// Before any work: refuses what `--judge` cannot evaluate once the output is written, so
/// a long write does not end in that error. `out` must be one GGUF file (llama.cpp reads no
/// organ directory; a split's shard names are known only once written), the parent a GGUF,
/// the text a file, llama-perplexity findable.
///
/// # Errors
/// Any of those.
pub fn check(parent: &Path, out: &Path, split: bool, s: &Settings) -> Result<()> {
    let is_gguf = out.extension().is_some_and(|e| e.eq_ignore_ascii_case("gguf"));
    if !is_gguf || split {
        anyhow::bail!(
            "--judge evaluates one GGUF file with llama.cpp: give a .gguf --out without --split-max-size \
             (or judge later with `organ eval OUT --base PARENT --text TEXT`)"
        );
    }
    crate::llama_cpp::find("llama-perplexity", s.llama_cpp.as_deref())?;
    eval::check_inputs(parent, s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llama_cpp::perplexity::{Divergence, Estimate};

    fn evaluation(ln_ratio: f64, kld: f64, top: f64) -> Evaluation {
        let est = |v| Estimate { value: v, error: 0.0 };
        Evaluation {
            model: "m".into(),
            base: Some("b".into()),
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
