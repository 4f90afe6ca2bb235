//! The events `organ` writes on stderr with `--progress jsonl` (one JSON object a line),
//! which `organ serve` reads from its children and any program may: progress, warnings,
//! notes, stats and the final error, typed. Their form is here; a face writes and reads
//! them (native-cli's `progress`, whose documentation shows the lines).

use alloc::string::String;
use alloc::vec::Vec;
use serde::{Deserialize, Serialize};

/// One line of `--progress jsonl` output.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// Units done so far, of all known so far (tensors, for measure; the total grows as
    /// each model of a fleet is opened).
    Progress {
        /// Units done.
        done: u64,
        /// Units known.
        total: u64,
    },
    /// Something the user should know; the command goes on.
    Warning {
        /// What to know.
        message: String,
    },
    /// Information for the user (e.g. how many reports came from the cache).
    Note {
        /// The note.
        message: String,
    },
    /// `measure --stats`: the tensor bytes read by positioned reads, and peak memory.
    Stats {
        /// Tensor bytes read by positioned reads.
        tensor_bytes_read: u64,
        /// Peak resident memory, KiB.
        peak_rss_kib: u64,
    },
    /// `diff --stats`: bytes compared to decide which pairs are identical (both sides),
    /// bytes read by positioned reads (0 when the models were mapped), and peak memory.
    DiffStats {
        /// Bytes compared (both sides).
        bytes_compared: u64,
        /// Bytes read by positioned reads.
        bytes_read: u64,
        /// Peak resident memory, KiB.
        peak_rss_kib: u64,
    },
    /// `measure --stats` of a remote model: bytes received in answers, requests sent and
    /// retries made, and of the bytes those of multipart framing (docs/remote.md).
    RemoteStats {
        /// Bytes received in answers.
        bytes_fetched: u64,
        /// Requests sent.
        requests: u64,
        /// Retries made.
        retries: u64,
        /// Of the bytes received, multipart framing.
        framing: u64,
    },
    /// `sensitivity --stats`, as each evaluation ends: the bytes written to make its
    /// changed model (docs/sensitivity.md, Disk).
    EvaluationStats {
        /// The tensor changed.
        tensor: String,
        /// Its bytes as changed.
        changed_bytes: u64,
        /// Bytes written to make the changed model.
        bytes_written: u64,
        /// Its mean KL divergence and error after each chunk scored, chunk 1 first (as
        /// llama-perplexity's table prints them, to 5 decimals): what 1, 2, … chunks
        /// would have measured (bench/sensitivity-chunks.sh reads them).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        kld_by_chunk: Vec<[f64; 2]>,
    },
    /// `sensitivity --stats`, at the end: the bytes written to stage the model (once per
    /// batch of tensors), and per evaluation, with how the staged shards were linked.
    SensitivityStats {
        /// Bytes written staging the model.
        staged_bytes: u64,
        /// Evaluations run.
        evaluations: u64,
        /// The most bytes one evaluation wrote.
        bytes_written_max: u64,
        /// Bytes all evaluations wrote.
        bytes_written_total: u64,
        /// How the changed models used the staged shards ("hard links"; empty when
        /// nothing was staged).
        linked: String,
    },
    /// Why the command failed; the last line it writes.
    Error(ErrorEvent),
}

/// A failure, typed: what a person would read, and what kind, which file and where in
/// it, as far as known.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorEvent {
    /// The whole message, causes included (`{:#}` of the error).
    pub message: String,
    /// What kind of failure.
    pub kind: ErrorKind,
    /// The file or directory the message names first, when it names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The byte offset in that file where the format error is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
}

/// What kind of failure an [`ErrorEvent`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The input is not a GGUF (or organ directory) that organ can read or write.
    Format,
    /// Reading or writing a file failed.
    Io,
    /// Anything else (a bad argument, a refused output, an input outside the served root…).
    #[serde(other)]
    Other,
}
