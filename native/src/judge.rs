//! The verdict on a model that surgery made, against its parent (`--judge TEXT` of graft and
//! purify; moe's `--base` later): [`evaluate`](crate::llama_cpp::perplexity::evaluate) the output with
//! the parent as base, then grade it by the core's rule ([`organ_core::judge`], docs/judge.md).
//! Here: running the evaluation, printing the verdict, and the checks made before any work.

use crate::llama_cpp::perplexity::{self as eval, Settings};
use anyhow::{Context, Result};
use organ_core::report::{AnyReport, Shown};
use std::io::Write;
use std::path::Path;

pub use organ_core::judge::{grade, Grade, Verdict};

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

/// Prints a verdict after the evaluation's figures, as `organ eval` prints its report,
/// the grade coloured on a terminal.
pub fn print(v: &Verdict, w: &mut dyn Write) -> Result<()> {
    let report = organ_core::judge::EvalReport {
        evaluation: v.evaluation.clone(),
        verdict: Some((v.verdict, v.reason.clone(), v.ppl_ratio)),
    };
    let on_screen = Shown { marks: crate::paint::marks(crate::paint::Stream::Stdout), ..Shown::WHOLE };
    let mut text = String::new();
    (organ_core::report::formats::TEXT.render)(AnyReport::Eval(&report), &on_screen, &mut text)?;
    w.write_all(text.as_bytes())?;
    Ok(())
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
