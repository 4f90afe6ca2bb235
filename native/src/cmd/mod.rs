//! One module per subcommand.
pub mod assemble;
pub mod check;
pub mod derived;
pub mod diff;
pub mod dissect;
pub mod eval;
pub mod experts;
pub mod graft;
pub mod inspect;
pub mod layers;
pub mod lora;
pub mod measure;
pub mod merge;
pub mod meta;
pub mod moe;
pub mod outputs;
pub mod purify;
pub mod quantize;
pub mod recipe;
pub mod sensitivity;

/// The most problems a refusal lists (a hostile model can have one per tensor).
const MAX_PROBLEMS_SHOWN: usize = 50;

/// "1 problem", "3 problems": a refusal's count.
pub(crate) fn problems(n: usize) -> String {
    if n == 1 {
        "1 problem".to_owned()
    } else {
        format!("{n} problems")
    }
}

/// The lines of a refusal: one per problem the core found, those alike but for their
/// layer as one with a count ([`crate::summary`]; every one with `--verbose`), the first
/// [`MAX_PROBLEMS_SHOWN`] of them, then how many more there are.
pub(crate) fn problem_lines(bad: &[organ_core::surgery::graft::Mismatch]) -> String {
    use crate::summary::{self, Line};
    let g = summary::lines(bad.iter().map(|m| Line { tensor: m.tensor.clone(), text: m.reason.clone() }).collect());
    let mut lines: Vec<String> = g.iter().take(MAX_PROBLEMS_SHOWN).map(|g| format!("  {g}")).collect();
    if g.len() > MAX_PROBLEMS_SHOWN {
        lines.push(format!("  … and {} more", g.len() - MAX_PROBLEMS_SHOWN));
    }
    if summary::any_grouped(&g) {
        lines.push(format!("  ({} problems in all; --verbose lists each tensor)", bad.len()));
    }
    lines.join("\n")
}
