//! What a sensitivity run keeps so that it resumes after any stop and a finished run is
//! read back instead of rerun (a face's run directory): the run's [`Definition`], named
//! by the BLAKE3 of its JSON, and the base's scored run beside its saved logits. The
//! per-tensor results are the report's rows ([`super::report::Row`]).

use super::Change;
use alloc::borrow::ToOwned;
use alloc::string::String;
use serde::{Deserialize, Serialize};

/// The version of what a run directory holds: bump it when a result's form or meaning
/// changes.
pub const RUN_SCHEMA: u32 = 1;

/// Everything besides the model that decides a run's results.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Definition {
    /// [`RUN_SCHEMA`].
    pub run_schema: u32,
    /// The change, as [`Change::label`] names it.
    pub change: String,
    /// The BLAKE3 of the text scored.
    pub text_blake3: String,
    /// Tokens per context.
    pub ctx: u32,
    /// The most contexts scored, if capped.
    pub chunks: Option<u32>,
}

impl Definition {
    /// The definition of a run of `change` on the text whose BLAKE3 is `text_blake3`, in
    /// contexts of `ctx` tokens, at most `chunks` of them.
    #[must_use]
    pub fn new(change: Change, text_blake3: &str, ctx: u32, chunks: Option<u32>) -> Definition {
        Definition { run_schema: RUN_SCHEMA, change: change.label(), text_blake3: text_blake3.to_owned(), ctx, chunks }
    }
}

/// The base's run: what llama-perplexity scored when it saved the base's logits.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
pub struct BaseRun {
    /// Contexts scored.
    pub chunks: u32,
    /// Tokens per context.
    pub ctx: u32,
    /// The base's perplexity.
    pub ppl: f64,
    /// Its standard error.
    pub ppl_error: f64,
}
