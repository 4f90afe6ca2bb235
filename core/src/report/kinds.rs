//! What the report formats render ([`super::formats`]): a report of any kind, and how much
//! of it the text shows. Below the registry and its renderers, which all use it.

use super::quantize::QuantizeReport;
use super::recipe::Recipe;
use super::surgery::Surgery;
use super::Report;
use crate::check::CheckReport;
use crate::compare::CompareReport;
use crate::judge::EvalReport;
use crate::sensitivity::predicted::PredictionReport;
use crate::sensitivity::report::Report as SensitivityReport;

/// The kinds of report a format may apply to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A θ report (`organ measure`, `organ report merge`, the app's measure mode).
    Measure,
    /// A compare report (`organ diff`, the app's compare mode).
    Compare,
    /// A check report (`organ check`, the app's check mode).
    Check,
    /// A measured sensitivity report (`organ sensitivity --to/--ablate`).
    Sensitivity,
    /// A predicted sensitivity report (`organ sensitivity --predict`, the app's prediction).
    Prediction,
    /// An evaluation by llama.cpp, graded against a base (`organ eval`).
    Eval,
    /// What a surgery that writes a model did (`--json` of graft, layers, experts, moe,
    /// merge).
    Surgery,
    /// A quantization recipe (`organ recipe`).
    Recipe,
    /// What `organ quantize` planned and wrote.
    Quantize,
}

/// A report of any kind, borrowed for rendering.
#[derive(Clone, Copy)]
pub enum AnyReport<'a> {
    /// A θ report.
    Measure(&'a Report),
    /// A compare report.
    Compare(&'a CompareReport),
    /// A check report.
    Check(&'a CheckReport),
    /// A measured sensitivity report.
    Sensitivity(&'a SensitivityReport),
    /// A predicted sensitivity report.
    Prediction(&'a PredictionReport),
    /// An evaluation report.
    Eval(&'a EvalReport),
    /// A surgery's report.
    Surgery(&'a Surgery<'a>),
    /// A recipe.
    Recipe(&'a Recipe),
    /// A quantization.
    Quantize(&'a QuantizeReport),
}

impl Kind {
    /// Every kind of report.
    pub const ALL: &'static [Kind] = &[
        Kind::Measure,
        Kind::Compare,
        Kind::Check,
        Kind::Sensitivity,
        Kind::Prediction,
        Kind::Eval,
        Kind::Surgery,
        Kind::Recipe,
        Kind::Quantize,
    ];
}

impl AnyReport<'_> {
    /// Which kind of report this is.
    pub fn kind(&self) -> Kind {
        match self {
            AnyReport::Measure(_) => Kind::Measure,
            AnyReport::Compare(_) => Kind::Compare,
            AnyReport::Check(_) => Kind::Check,
            AnyReport::Sensitivity(_) => Kind::Sensitivity,
            AnyReport::Prediction(_) => Kind::Prediction,
            AnyReport::Eval(_) => Kind::Eval,
            AnyReport::Surgery(_) => Kind::Surgery,
            AnyReport::Recipe(_) => Kind::Recipe,
            AnyReport::Quantize(_) => Kind::Quantize,
        }
    }
}

/// What a word of a report's text says, for a face that shows it apart (a terminal's
/// colour): the renderer marks the word, so a face never has to find it in the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    /// Broken, an error.
    Bad,
    /// A warning, degraded.
    Warn,
    /// Well: `ok`, `close`.
    Good,
    /// Of note: `changed`.
    Note,
}

/// How much of a report the text shows: the CLI's `--summary-only`, `--wells` and `--top`,
/// and how its marked words look. The other formats always hold everything, unmarked.
#[derive(Debug, Clone, Copy)]
pub struct Shown {
    /// A θ report's text: models' summaries only, no tensor lists.
    pub summary_only: bool,
    /// A θ report's text: how many wells (lowest θ) each model lists.
    pub wells: usize,
    /// A θ report's text: the wells among all tensors (§4's, as the JSON holds them), norm
    /// vectors and routers included; else among the weight matrices
    /// ([`super::summary::is_weight_matrix`]).
    pub all_wells: bool,
    /// A compare report's text: how many of the most changed tensors it lists.
    pub top: usize,
    /// How a marked word is shown (a terminal's colour around it); `None`: as it is.
    pub marks: Option<fn(Mark, &str) -> alloc::string::String>,
}

impl Shown {
    /// Every report's whole text: no θ summary cut, no wells or most-changed list (the
    /// choices of `measure` and `diff`); what check, sensitivity and a rendered file show.
    pub const WHOLE: Shown = Shown { summary_only: false, wells: 0, all_wells: false, top: 0, marks: None };

    /// `word`, marked `mark`, as this text shows it.
    #[must_use]
    pub fn mark<'a>(&self, mark: Mark, word: &'a str) -> alloc::borrow::Cow<'a, str> {
        match self.marks {
            Some(f) => f(mark, word).into(),
            None => word.into(),
        }
    }
}
