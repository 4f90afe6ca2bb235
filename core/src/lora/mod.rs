//! LoRA adapters as llama.cpp writes and loads them: a GGUF with `general.type =
//! "adapter"`, `adapter.type = "lora"`, `adapter.lora.alpha`, the base's
//! `general.architecture`, and for each adapted weight `NAME.weight` a pair
//! `NAME.weight.lora_a` and `NAME.weight.lora_b` (`convert_lora_to_gguf.py`;
//! `llama_adapter_lora_init_impl` in `llama-adapter.cpp`, and `export-lora.cpp`, of the
//! llama.cpp the tests build).
//!
//! The update of a pair is ΔW = s · (α / r) · B·A, where r is the rank and s the scale
//! `--lora-scaled` gives (1 for `--lora`); with α absent or 0 llama.cpp applies s · B·A.
//! In ggml order a weight `W` is `[n_in, n_out]`, `lora_a` is `[n_in, r]` and `lora_b`
//! `[r, n_out]`; `token_embd`'s pair is stored the other way round (`lora_a` is
//! `[r, n_vocab]`, `lora_b` `[r, n_embd]`: the converter transposes its A, see
//! `llm_build_inp_embd`).
//!
//! Both layouts come down to one form here ([`Factors`]): ΔW = scale · L·Rᵀ, row i of ΔW
//! (a row of `W` as ggml stores it) being L's row i against each row of R. An element is
//! then a dot product of two contiguous rows of r values, and ΔW is never materialized
//! whole ([`Factors::sample`], [`Factors::frobenius`]).

mod factors;
pub mod merge;
pub mod svd;

pub use factors::Factors;

use crate::ggml_type::GgmlType;
use crate::gguf::MetaValue;
use crate::model::{Model, OwnedValue, TensorEntry};
use alloc::borrow::ToOwned;
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::borrow::Borrow;
use serde::Serialize;

/// `general.type` of an adapter.
pub const GENERAL_TYPE: &str = "adapter";
/// `adapter.type` of a LoRA adapter.
pub const ADAPTER_TYPE: &str = "lora";
/// The key of `general.type`.
pub const KEY_GENERAL_TYPE: &str = "general.type";
/// The key of the adapter's type.
pub const KEY_ADAPTER_TYPE: &str = "adapter.type";
/// The key of α.
pub const KEY_ALPHA: &str = "adapter.lora.alpha";
/// The key of an aLoRA's invocation tokens (an array of u32).
pub const KEY_INVOCATION: &str = "adapter.alora.invocation_tokens";
/// The suffix of a pair's A half.
pub const SUFFIX_A: &str = ".lora_a";
/// The suffix of a pair's B half.
pub const SUFFIX_B: &str = ".lora_b";
/// The suffix organ gives ΔW of the weight `NAME.weight` in reports: `NAME.weight.lora`.
pub const SUFFIX_DELTA: &str = ".lora";

/// The types `convert_lora_to_gguf.py` writes a pair in (`--outtype`).
pub const WRITTEN_TYPES: [GgmlType; 4] = [GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0];

/// Whether a model's metadata says it is an adapter (`general.type = "adapter"`).
pub fn is_adapter<T>(m: &Model<T>) -> bool {
    m.text(KEY_GENERAL_TYPE).as_deref() == Some(GENERAL_TYPE)
}

/// Whether a model ties its output to `token_embd` (it has no `output.weight`): llama.cpp
/// 11434 then applies a `token_embd` pair to the output too, in the wrong layout, and
/// aborts (`GGML_ASSERT ggml_can_mul_mat`).
pub fn ties_output<T: Borrow<TensorEntry>>(m: &Model<T>) -> bool {
    !m.tensors.iter().any(|t| t.borrow().name == "output.weight")
}

/// One adapted weight: its two halves and the shape of the update.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pair {
    /// The adapted weight's name in the base (`blk.0.attn_q.weight`).
    pub target: String,
    /// The index of `TARGET.lora_a` among the adapter's tensors.
    #[serde(skip)]
    pub a: usize,
    /// The index of `TARGET.lora_b`.
    #[serde(skip)]
    pub b: usize,
    /// The rank r.
    pub rank: u64,
    /// ΔW's rows (ggml's `ne[1]`: `n_out`, or `n_vocab` for `token_embd`).
    pub rows: u64,
    /// ΔW's columns (ggml's `ne[0]`: `n_in`, or `n_embd`).
    pub cols: u64,
    /// Stored as `token_embd`'s pair is (A and B swapped and transposed).
    pub embedding: bool,
}

impl Pair {
    /// The name ΔW goes by in reports: `TARGET.lora`.
    pub fn delta_name(&self) -> String {
        format!("{}{SUFFIX_DELTA}", self.target)
    }

    /// ΔW's shape in ggml order, the adapted weight's: `[cols, rows]`.
    pub fn shape(&self) -> [u64; 2] {
        [self.cols, self.rows]
    }

    /// ΔW's element count.
    pub fn n_elements(&self) -> u64 {
        self.rows.saturating_mul(self.cols)
    }
}

/// How bad an adapter problem is: an error stops llama.cpp (or would make it apply
/// something else than the file says); a warning is worth knowing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// llama.cpp refuses the adapter, or organ cannot apply it as llama.cpp would.
    Error,
    /// Loads, but is not what a converter writes.
    Warning,
}

/// One thing wrong with an adapter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// How bad.
    pub severity: Severity,
    /// The tensor or metadata key it concerns (empty for the file).
    pub subject: String,
    /// What is wrong, and what was expected.
    pub message: String,
}

impl Problem {
    fn error(subject: &str, message: String) -> Problem {
        Problem { severity: Severity::Error, subject: subject.to_owned(), message }
    }
    fn warning(subject: &str, message: String) -> Problem {
        Problem { severity: Severity::Warning, subject: subject.to_owned(), message }
    }
}

/// Why [`Adapter::read_checked`] refuses an adapter: its first error, naming the adapter
/// by its label (and the base by its own).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// The adapter's own first error ([`Adapter::first_error`]).
    #[error("{label}: {}", .problem.sentence())]
    Adapter {
        /// The adapter's label.
        label: String,
        /// The error.
        problem: Problem,
    },
    /// Its first error against the base ([`Adapter::first_error_against`]).
    #[error("{label}: against the base {base}: {}", .problem.sentence())]
    AgainstBase {
        /// The adapter's label.
        label: String,
        /// The base's label.
        base: String,
        /// The error.
        problem: Problem,
    },
}

/// What an adapter file holds, read from its metadata and tensor list (no tensor bytes).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Adapter {
    /// `general.architecture`: the base's.
    pub architecture: Option<String>,
    /// `adapter.lora.alpha`, when present and a number.
    pub alpha: Option<f32>,
    /// The length of an aLoRA's invocation sequence, when it has one.
    pub invocation_tokens: Option<u64>,
    /// Every adapted weight, in the order of their A halves in the file.
    pub pairs: Vec<Pair>,
    /// Tensors llama.cpp skips (`*_norm.weight`, which mergekit's extractor adds).
    #[serde(skip)]
    pub skipped: Vec<usize>,
    /// What is wrong with it, in file order.
    pub problems: Vec<Problem>,
}

impl Adapter {
    /// Reads an adapter's metadata and pairs from `m`, noting every problem (none is
    /// fatal here: [`Adapter::first_error`] says whether it can be used).
    pub fn read<T: Borrow<TensorEntry>>(m: &Model<T>) -> Adapter {
        let mut problems = Vec::new();
        match m.text(KEY_GENERAL_TYPE) {
            Some(t) if t == GENERAL_TYPE => {}
            other => problems.push(Problem::error(
                KEY_GENERAL_TYPE,
                format!("expected \"{GENERAL_TYPE}\", got {}", shown(other.as_deref())),
            )),
        }
        match m.text(KEY_ADAPTER_TYPE) {
            Some(t) if t == ADAPTER_TYPE => {}
            other => problems.push(Problem::error(
                KEY_ADAPTER_TYPE,
                format!(
                    "expected \"{ADAPTER_TYPE}\" (the only adapter llama.cpp loads), got {}",
                    shown(other.as_deref())
                ),
            )),
        }
        let alpha = read_alpha(m, &mut problems);
        let invocation_tokens = match m.get(KEY_INVOCATION) {
            None => None,
            Some(OwnedValue::Array { elem_type, len, .. }) if *elem_type == crate::gguf::metadata::ValueType::U32 => {
                Some(*len)
            }
            Some(_) => {
                problems.push(Problem::error(KEY_INVOCATION, "expected an array of u32 token ids".into()));
                None
            }
        };
        if m.architecture().is_none() {
            problems.push(Problem::error(
                "general.architecture",
                "missing: llama.cpp compares it with the base's before loading".into(),
            ));
        }
        let (pairs, skipped) = read_pairs(&m.tensors, &mut problems);
        Adapter {
            architecture: m.architecture().map(|a| a.into_owned()),
            alpha,
            invocation_tokens,
            pairs,
            skipped,
            problems,
        }
    }

    /// The first error, as a sentence (`None`: llama.cpp would load it and organ can
    /// apply it as llama.cpp does).
    pub fn first_error(&self) -> Option<String> {
        first_error(&self.problems).map(Problem::sentence)
    }

    /// Reads `m` (called `label` in messages) as an adapter to measure or merge, and
    /// checks it, against `base` (a model and its label) when given: the adapter, or the
    /// first error as `LABEL: …` / `LABEL: against the base BASE: …`. What every front end
    /// does before any work.
    ///
    /// # Errors
    /// [`Refused`]: as [`Adapter::first_error`], then [`Adapter::first_error_against`].
    pub fn read_checked<T: Borrow<TensorEntry>, U: Borrow<TensorEntry>>(
        m: &Model<T>,
        label: &str,
        base: Option<(&Model<U>, &str)>,
    ) -> core::result::Result<Adapter, Refused> {
        let a = Adapter::read(m);
        if let Some(p) = first_error(&a.problems) {
            return Err(Refused::Adapter { label: label.into(), problem: p.clone() });
        }
        if let Some((b, name)) = base {
            if let Some(p) = first_error(&a.fits(b)) {
                return Err(Refused::AgainstBase { label: label.into(), base: name.into(), problem: p.clone() });
            }
        }
        Ok(a)
    }

    /// The first reason this adapter does not fit `base` ([`Adapter::fits`]: what merging
    /// and measuring against it need, not what a run needs), as a sentence (`None`: it
    /// fits; warnings are not errors).
    pub fn first_error_against<T: Borrow<TensorEntry>>(&self, base: &Model<T>) -> Option<String> {
        first_error(&self.fits(base)).map(Problem::sentence)
    }

    /// The factor of B·A for a pair of rank `rank`, at user scale `scale` (1 for
    /// `--lora`): s · α / r, or s where α is absent or 0 (llama.cpp's rule, in f64 here).
    pub fn scale(&self, rank: u64, scale: f64) -> f64 {
        match self.alpha {
            Some(a) if a != 0.0 && rank > 0 => scale * f64::from(a) / rank as f64,
            _ => scale,
        }
    }

    /// The ranks of the pairs, each once, ascending.
    pub fn ranks(&self) -> Vec<u64> {
        let mut r: Vec<u64> = self.pairs.iter().map(|p| p.rank).collect();
        r.sort_unstable();
        r.dedup();
        r
    }

    /// The problems of applying this adapter to `base` at run time, as llama.cpp does
    /// (also an [`Adapter`]'s own problems are not repeated): those of [`Adapter::fits`],
    /// and a `token_embd` pair on a base that ties its output to `token_embd`, which
    /// llama.cpp 11434 aborts on.
    pub fn against<T: Borrow<TensorEntry>>(&self, base: &Model<T>) -> Vec<Problem> {
        let mut out = self.fits(base);
        if is_adapter(base) {
            return out;
        }
        let tied = ties_output(base);
        for p in &self.pairs {
            if p.embedding && tied {
                out.push(Problem::error(
                    &p.target,
                    "the base ties its output to token_embd (it has no output.weight), and llama.cpp 11434 then \
                     applies this pair to the output too, in the wrong layout: --lora aborts (GGML_ASSERT \
                     ggml_can_mul_mat). Merging it (organ lora merge, llama-export-lora) works and changes both."
                        .into(),
                ));
            }
        }
        out
    }

    /// Where each pair's weight is in `base.tensors`, by name (`None`: the base has no
    /// tensor of that name; of two alike, the first). One map of the base's names, so a
    /// pair's lookup is a search, not a scan. The one lookup that the checks, the merge,
    /// and the CLI's and the browser's measures use.
    pub fn base_weights<T: Borrow<TensorEntry>>(&self, base: &Model<T>) -> Vec<Option<usize>> {
        let mut by_name: BTreeMap<&str, usize> = BTreeMap::new();
        for (i, t) in base.tensors.iter().enumerate() {
            by_name.entry(t.borrow().name.as_str()).or_insert(i);
        }
        self.pairs.iter().map(|p| by_name.get(p.target.as_str()).copied()).collect()
    }

    /// The problems of merging this adapter into `base` (its own problems are not
    /// repeated): another architecture, a weight the base lacks, a shape that is not the
    /// weight's, a base that is itself an adapter.
    pub fn fits<T: Borrow<TensorEntry>>(&self, base: &Model<T>) -> Vec<Problem> {
        let mut out = Vec::new();
        if is_adapter(base) {
            out.push(Problem::error("", "the base is itself an adapter (general.type = \"adapter\")".into()));
            return out;
        }
        let arch = base.architecture();
        if arch.as_deref() != self.architecture.as_deref() {
            out.push(Problem::error(
                "general.architecture",
                format!(
                    "the adapter is for {}, the base is {}",
                    shown(self.architecture.as_deref()),
                    shown(arch.as_deref())
                ),
            ));
        }
        for (p, at) in self.pairs.iter().zip(self.base_weights(base)) {
            match at.map(|i| base.tensors[i].borrow()) {
                None => out.push(Problem::error(&p.target, "the base has no such weight".into())),
                Some(t) if t.dims.len() != 2 || t.dims[..] != p.shape() => out.push(Problem::error(
                    &p.target,
                    format!("the pair makes a {:?} update, the base's weight is {:?}", p.shape(), t.dims),
                )),
                Some(_) => {}
            }
        }
        out
    }
}

/// The first of `problems` that is an error.
fn first_error(problems: &[Problem]) -> Option<&Problem> {
    problems.iter().find(|p| p.severity == Severity::Error)
}

impl Problem {
    /// The problem as one sentence: `SUBJECT: MESSAGE`.
    pub fn sentence(&self) -> String {
        if self.subject.is_empty() {
            self.message.clone()
        } else {
            format!("{}: {}", self.subject, self.message)
        }
    }
}

fn shown(v: Option<&str>) -> String {
    v.map_or_else(|| "nothing (the key is missing)".into(), |s| format!("{s:?}"))
}

/// α, noting a missing or non-numeric one. α is required here although llama.cpp reads
/// a missing one as 0 and then applies B·A unscaled: a converter always writes it, so a
/// file without it was written by hand, and organ will not guess which was meant.
fn read_alpha<T>(m: &Model<T>, problems: &mut Vec<Problem>) -> Option<f32> {
    let value = match m.get(KEY_ALPHA).map(OwnedValue::view) {
        None => {
            problems.push(Problem::error(
                KEY_ALPHA,
                "missing: llama.cpp would then apply B·A unscaled, as if α were the rank; organ does not guess \
                 (set it with gguf-py if that is what was meant)"
                    .into(),
            ));
            return None;
        }
        Some(Ok(v)) => v,
        Some(Err(_)) => {
            problems.push(Problem::error(KEY_ALPHA, "does not decode".into()));
            return None;
        }
    };
    match value {
        MetaValue::F32(a) if a.is_finite() => Some(a),
        MetaValue::F32(a) => {
            problems.push(Problem::error(KEY_ALPHA, format!("{a} is not a finite number")));
            None
        }
        other => {
            problems.push(Problem::error(
                KEY_ALPHA,
                format!("expected an f32 (llama.cpp reads no other type), got a {}", other.value_type().name()),
            ));
            None
        }
    }
}

/// The pairs of `tensors` (in the order of their A halves), the tensors llama.cpp skips,
/// and every problem of their names and shapes.
fn read_pairs<T: Borrow<TensorEntry>>(tensors: &[T], problems: &mut Vec<Problem>) -> (Vec<Pair>, Vec<usize>) {
    // Each target's place in `halves`, so that pairing is a search, not a scan.
    let mut at_of: BTreeMap<&str, usize> = BTreeMap::new();
    let mut halves: Vec<(&str, Option<usize>, Option<usize>)> = Vec::new();
    let mut skipped = Vec::new();
    for (i, t) in tensors.iter().enumerate() {
        let name = t.borrow().name.as_str();
        let (target, is_a) = if let Some(s) = name.strip_suffix(SUFFIX_A) {
            (s, true)
        } else if let Some(s) = name.strip_suffix(SUFFIX_B) {
            (s, false)
        } else if name.ends_with("_norm.weight") {
            skipped.push(i);
            continue;
        } else {
            problems.push(Problem::error(
                name,
                "not a LoRA tensor: llama.cpp loads only NAME.lora_a, NAME.lora_b and *_norm.weight".into(),
            ));
            continue;
        };
        let at = *at_of.entry(target).or_insert_with(|| {
            halves.push((target, None, None));
            halves.len() - 1
        });
        let slot = if is_a { &mut halves[at].1 } else { &mut halves[at].2 };
        *slot = Some(i);
    }
    let mut pairs = Vec::new();
    for (target, a, b) in halves {
        match (a, b) {
            (Some(a), Some(b)) => {
                if let Some(p) = pair(target, a, tensors[a].borrow(), b, tensors[b].borrow(), problems) {
                    pairs.push(p);
                }
            }
            (Some(_), None) => {
                problems.push(Problem::error(target, format!("{} is missing: half a pair", &SUFFIX_B[1..])))
            }
            (None, _) => problems.push(Problem::error(target, format!("{} is missing: half a pair", &SUFFIX_A[1..]))),
        }
    }
    (pairs, skipped)
}

/// The pair of `target` from its halves, or `None` with the problem noted.
fn pair(
    target: &str,
    ai: usize,
    a: &TensorEntry,
    bi: usize,
    b: &TensorEntry,
    problems: &mut Vec<Problem>,
) -> Option<Pair> {
    for t in [a, b] {
        if !t.ty.can_dequantize() {
            problems.push(Problem::error(&t.name, format!("type {} has no dequantizer in organ", t.ty.name())));
            return None;
        }
        if !WRITTEN_TYPES.contains(&t.ty) {
            problems.push(Problem::warning(
                &t.name,
                format!("type {} is not one convert_lora_to_gguf.py writes (F32, F16, BF16, Q8_0)", t.ty.name()),
            ));
        }
        if t.dims.len() != 2 {
            problems.push(Problem::error(
                &t.name,
                format!("a {}-D half: organ reads 2-D pairs (shape {:?})", t.dims.len(), t.dims),
            ));
            return None;
        }
    }
    let embedding = target.ends_with("token_embd.weight");
    // ggml order: [ne0, ne1].
    let (a0, a1, b0, b1) = (a.dims[0], a.dims[1], b.dims[0], b.dims[1]);
    let (rank, rows, cols) = if embedding {
        // A: [r, n_vocab], B: [r, n_embd].
        if a0 != b0 {
            problems.push(Problem::error(
                target,
                format!("token_embd's halves disagree on the rank: lora_a {:?}, lora_b {:?}", a.dims, b.dims),
            ));
            return None;
        }
        (a0, a1, b1)
    } else {
        // A: [n_in, r], B: [r, n_out].
        if a1 != b0 {
            problems.push(Problem::error(
                target,
                format!(
                    "lora_a {:?} and lora_b {:?} disagree on the rank (lora_a must be [n_in, r], lora_b [r, n_out]; \
                     adapters of the old finetune example are not transposed)",
                    a.dims, b.dims
                ),
            ));
            return None;
        }
        (a1, b1, a0)
    };
    if rank == 0 {
        problems.push(Problem::error(target, "rank 0: the pair changes nothing and llama.cpp cannot load it".into()));
        return None;
    }
    // Bounds every later product of the update's sides (its elements, its Gram matrices).
    if rows.checked_mul(cols).is_none_or(|n| n > crate::limits::MAX_TENSOR_ELEMENTS) {
        problems
            .push(Problem::error(target, format!("an update of {rows} × {cols} values: more than a tensor may hold")));
        return None;
    }
    if rank > rows.min(cols) {
        problems.push(Problem::error(
            target,
            format!(
                "rank {rank} above the update's smaller side ({rows} × {cols}): such a pair is larger than the \
                 weight it updates, and no converter writes one"
            ),
        ));
        return None;
    }
    Some(Pair { target: target.to_owned(), a: ai, b: bi, rank, rows, cols, embedding })
}

#[cfg(test)]
mod tests;
