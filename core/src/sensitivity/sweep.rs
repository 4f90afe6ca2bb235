//! A sensitivity sweep spread over workers (`organ sensitivity … --shard I/N --results R`)
//! and merged (`organ report merge R`): the files the workers share, and the checks and
//! assembly of the merge. A face stores, names and fetches them; what they hold, the
//! bounds a reader keeps and the report they give are here, so every face agrees.
//!
//! - `sweep.json` ([`Sweep`]): what every worker must agree on: the model's BLAKE3, the
//!   change, each text's BLAKE3 and settings ([`Definition`]), the shard count and the
//!   tensors, in the model's order (tensor j is shard j mod N's).
//! - one result per tensor and text ([`SweepResult`], named by [`result_name`]), tied to
//!   the model's BLAKE3 and the text's definition, stored as its evaluation ends;
//! - one index per finished shard ([`SweepIndex`]): its bases (the unchanged model's run on
//!   each text, which every shard must share) and its results with their bytes' BLAKE3.

use super::report::{Estimate, Report, Row, Setup, SCHEMA};
use super::run::{BaseRun, Definition};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use serde::{Deserialize, Serialize};

/// The version of the files below; a file of another version is refused by name.
pub const FORMAT: u32 = 1;

/// The sweep's own file in the results.
pub const SWEEP_FILE: &str = "sweep.json";

/// The most tensors a sweep measures (a model's tensors: the largest released mixtures of
/// experts hold a few thousand).
pub const MAX_SWEEP_TENSORS: usize = 1 << 16;

/// The largest `sweep.json` read: [`MAX_SWEEP_TENSORS`] names of 200 bytes.
pub const MAX_SWEEP_FILE_BYTES: u64 = 16 << 20;

/// The largest result read: one row of a few hundred bytes, its name at most 64 KiB.
pub const MAX_RESULT_BYTES: u64 = 256 << 10;

/// An index's bytes besides its entries, and per entry (plus six per byte of the
/// tensor's name, JSON's `\u00XX`): [`index_cap`].
const INDEX_HEAD_BYTES: u64 = 64 << 10;
const INDEX_ENTRY_BYTES: u64 = 512;

/// The largest index of a shard that measures `names` on `texts` texts, in bytes:
/// proportional to what it must hold.
pub fn index_cap<'a>(names: impl Iterator<Item = &'a String>, texts: usize) -> u64 {
    names.fold(INDEX_HEAD_BYTES, |n, m| {
        n.saturating_add((INDEX_ENTRY_BYTES + 6 * m.len() as u64).saturating_mul(texts as u64))
    })
}

/// A shard's index: `shard-I-of-N.json`.
pub fn shard_file(shard: u64, shards: u64) -> String {
    format!("shard-{shard}-of-{shards}.json")
}

/// The name of `tensor`'s result on the text of `definition`: the BLAKE3s of both, so a
/// result of another text, change or setting is never read as this one's.
pub fn result_name(definition: &Definition, tensor: &str) -> String {
    let def = serde_json::to_vec(definition).unwrap_or_default();
    let d = blake3::hash(&def).to_hex();
    let t = blake3::hash(tensor.as_bytes()).to_hex();
    format!("result-{}-{}.json", &d[..16], &t[..24])
}

/// A text of the sweep: as the first worker named it (the report's `text`), and what
/// decides its results.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct SweepText {
    /// The text as the first worker named it.
    pub text: String,
    /// The change, the text's BLAKE3 and the settings.
    pub definition: Definition,
}

/// `sweep.json`: what every worker of a sweep must agree on.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Sweep {
    /// [`FORMAT`].
    pub organ_sweep: u32,
    /// The model as the first worker named it (the report's `model`).
    pub model: String,
    /// BLAKE3 of the model's bytes.
    pub model_blake3: String,
    /// The change, as [`super::Change::label`] names it.
    pub change: String,
    /// `--text`, then `--repeat-text` if given.
    pub texts: Vec<SweepText>,
    /// How many shards the tensors are split in.
    pub shards: u64,
    /// The tensors measured, in the model's order.
    pub tensors: Vec<String>,
}

/// A short name for a BLAKE3 in messages.
fn short(h: &str) -> &str {
    h.get(..16).unwrap_or(h)
}

impl Sweep {
    /// What makes two sweeps the same one, for messages: the model's BLAKE3, the change,
    /// each text's BLAKE3 and settings, the shards and how many tensors.
    pub fn identity(&self) -> String {
        let texts: Vec<String> = self.texts.iter().map(|t| definition(&t.definition)).collect();
        format!(
            "model BLAKE3 {}…, {} on {}, {} shards, {} tensors",
            short(&self.model_blake3),
            self.change,
            texts.join(" and "),
            self.shards,
            self.tensors.len()
        )
    }

    /// Whether `other` is the same sweep: everything but how the model and texts were named.
    pub fn same_as(&self, other: &Sweep) -> bool {
        let defs = |s: &Sweep| s.texts.iter().map(|t| t.definition.clone()).collect::<Vec<_>>();
        self.model_blake3 == other.model_blake3
            && self.change == other.change
            && defs(self) == defs(other)
            && self.shards == other.shards
            && self.tensors == other.tensors
    }

    /// Whether tensor `j` (of [`Sweep::tensors`]) is shard `shard`'s.
    pub fn holds(&self, shard: u64, j: usize) -> bool {
        self.shards > 0 && j as u64 % self.shards == shard
    }
}

/// A text's definition in messages: `text BLAKE3 …, ctx 128, 2 chunks`.
fn definition(d: &Definition) -> String {
    let chunks = d.chunks.map_or_else(|| String::from("every chunk"), |c| format!("{c} chunks"));
    format!("text BLAKE3 {}… (ctx {}, {chunks})", short(&d.text_blake3), d.ctx)
}

/// One tensor's result on one text, tied to what decides it.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct SweepResult {
    /// [`FORMAT`].
    pub organ_sweep: u32,
    /// BLAKE3 of the model measured.
    pub model_blake3: String,
    /// The change, text and settings it was measured under.
    pub definition: Definition,
    /// What was measured.
    pub row: Row,
}

impl SweepResult {
    /// What the result is of, for messages.
    pub fn identity(&self) -> String {
        format!(
            "{}: model BLAKE3 {}…, {} on {}",
            self.row.name,
            short(&self.model_blake3),
            self.definition.change,
            definition(&self.definition)
        )
    }

    /// Whether it is the result of `tensor` on text `text` of `sweep`.
    pub fn is_of(&self, sweep: &Sweep, text: usize, tensor: &str) -> bool {
        self.model_blake3 == sweep.model_blake3
            && sweep.texts.get(text).is_some_and(|t| t.definition == self.definition)
            && self.row.name == tensor
    }
}

/// A result listed in an index.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Indexed {
    /// Which text (0: `--text`, 1: `--repeat-text`).
    pub text: usize,
    /// The tensor's name.
    pub tensor: String,
    /// The result's name ([`result_name`]).
    pub result: String,
    /// BLAKE3 of the result's bytes as stored.
    pub result_blake3: String,
}

/// `shard-I-of-N.json`: a finished shard.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct SweepIndex {
    /// [`FORMAT`].
    pub organ_sweep: u32,
    /// This shard's index, from 0.
    pub shard: u64,
    /// How many shards.
    pub shards: u64,
    /// BLAKE3 of the model this shard measured.
    pub model_blake3: String,
    /// The unchanged model's run on each text, as this shard's llama-perplexity scored it.
    pub bases: Vec<BaseRun>,
    /// The llama-perplexity that measured it.
    pub llama_perplexity: String,
    /// The shard's results, text by text.
    pub results: Vec<Indexed>,
}

/// One text's setup in the report, from the sweep and a base run.
pub fn setup(t: &SweepText, base: &BaseRun) -> Setup {
    Setup {
        text: t.text.clone(),
        text_blake3: t.definition.text_blake3.clone(),
        ctx: base.ctx,
        chunks: base.chunks,
        base_perplexity: Estimate { value: base.ppl, error: base.ppl_error },
    }
}

impl Report {
    /// The report of a measurement: the rows of the first text, with the second text's
    /// KLDs beside them and Spearman's ρ between the two when there is one. Both the one
    /// machine run and the merge of a sweep's shards build it here.
    pub fn assemble(
        (model, model_blake3, change): (String, String, String),
        first: (Setup, Vec<Row>),
        repeat: Option<(Setup, Vec<Row>)>,
        llama_perplexity: String,
    ) -> Report {
        let (setup, mut tensors) = first;
        if let Some((_, again)) = &repeat {
            for (row, a) in tensors.iter_mut().zip(again) {
                row.repeat_kld = Some(a.kld);
            }
        }
        let repeat_rho = repeat.as_ref().and_then(|_| Report::repeat_rho(&tensors));
        Report {
            organ_sensitivity: SCHEMA,
            model,
            model_blake3,
            change,
            text: setup,
            repeat: repeat.map(|(s, _)| s),
            repeat_rho,
            llama_perplexity,
            tensors,
        }
    }
}
