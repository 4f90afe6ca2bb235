//! How `organ` reports to whoever started it, on stderr: progress, warnings, notes, stats
//! and the final error. Every such line goes through here, in one of two forms
//! ([`Format`], the global `--progress` flag):
//!
//! - `human` (the default): a progress bar when stderr is a terminal, `organ: warning: …`,
//!   `organ: error: …` — text for people, unchanged from before the flag existed.
//! - `jsonl`: one JSON object per line ([`Event`]), for programs. `organ serve` runs its
//!   children this way and reads their progress and their error as typed events instead
//!   of parsing text. The lines:
//!
//! ```text
//! {"event":"progress","done":12,"total":272}   tensors done and known so far (measure)
//! {"event":"warning","message":"…"}
//! {"event":"note","message":"…"}
//! {"event":"stats","tensor_bytes_read":1234,"peak_rss_kib":56789}
//! {"event":"error","message":"…","kind":"format","path":"…","offset":24}
//! ```
//!
//! The error event comes last, once, when the command fails (exit status 1); its `message`
//! is the text a person would see after `organ: error: `. `kind` is `format` (the input is
//! not a GGUF or organ directory organ can read), `io` (reading or writing failed) or
//! `other`; `path` (the file the message names first) and `offset` (the byte offset in
//! that file) are there when known. A reader must accept event names and fields it does
//! not know (more may come).
//!
//! Why stderr and not a descriptor of its own: stdout carries the command's output
//! (`inspect --json`, reports), and stderr already carries exactly these things for
//! people; a separate descriptor would need the parent to set it up between fork and exec
//! (more unsafe code in `organ serve`) and would still leave stderr to be read for what
//! does not come from organ itself (a panic, clap's usage errors). Those lines are not
//! JSON: a reader takes them as plain text.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

/// How reports are written to stderr (the global `--progress` flag).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Text for people: a progress bar on a terminal, `organ: error: ...` lines.
    #[default]
    Human,
    /// One JSON object per line (see README), for programs.
    Jsonl,
}

static FORMAT: OnceLock<Format> = OnceLock::new();

/// Sets the format for the rest of the process (once; later calls change nothing).
pub fn set_format(f: Format) {
    let _ = FORMAT.set(f);
}

fn format() -> Format {
    FORMAT.get().copied().unwrap_or_default()
}

pub use organ_core::events::{ErrorEvent, ErrorKind, Event};

/// The typed form of `e`: its kind, and path and offset where the chain has them.
pub fn error_event(e: &anyhow::Error) -> ErrorEvent {
    let core = e.chain().find_map(|c| c.downcast_ref::<organ_core::Error>());
    let kind = if core.is_some() {
        ErrorKind::Format
    } else if e.chain().any(|c| c.is::<std::io::Error>()) {
        ErrorKind::Io
    } else {
        ErrorKind::Other
    };
    let path = e.chain().find_map(|c| named_path(&c.to_string()));
    ErrorEvent { message: format!("{e:#}"), kind, path, offset: core.and_then(core_offset) }
}

/// The path a message starts with (`PATH: what went wrong`, as organ's messages do), when
/// it names a file or directory that exists, or one whose directory exists.
fn named_path(msg: &str) -> Option<String> {
    let (head, _) = msg.split_once(": ")?;
    let p = Path::new(head);
    let parent_exists = head.contains('/') && p.parent().is_some_and(|d| d.as_os_str().is_empty() || d.is_dir());
    (!head.is_empty() && (p.exists() || parent_exists)).then(|| head.to_owned())
}

/// The byte offset a core error names, if it names one.
fn core_offset(e: &organ_core::Error) -> Option<u64> {
    use organ_core::Error as E;
    match e {
        E::Incomplete { offset, .. }
        | E::Truncated { offset, .. }
        | E::TooLarge { offset, .. }
        | E::BadValueType { offset, .. }
        | E::BadUtf8 { offset, .. }
        | E::DuplicateKey { offset, .. }
        | E::BadTensor { offset, .. }
        | E::DuplicateTensor { offset, .. } => Some(*offset),
        E::BadMagic { .. } => Some(0),
        E::UnsupportedVersion { .. } | E::BigEndian { .. } => Some(4),
        _ => None,
    }
}

/// Writes one event to stderr in the chosen format. A closed or failing stderr is
/// ignored: the report is for the caller, and the work goes on without it.
pub fn emit(ev: &Event) {
    let line = match format() {
        Format::Jsonl => match serde_json::to_string(ev) {
            Ok(j) => j,
            Err(_) => return,
        },
        Format::Human => match ev {
            Event::Progress { .. } => return, // the bar shows it
            Event::Warning { message } => format!("organ: {}: {message}", paint("warning", crate::paint::WARN)),
            Event::Note { message } => message.clone(),
            Event::Stats { tensor_bytes_read, peak_rss_kib } => {
                format!("stats: tensor bytes read by positioned reads {tensor_bytes_read}, peak RSS {peak_rss_kib} KiB")
            }
            Event::DiffStats { bytes_compared, bytes_read, peak_rss_kib } => format!(
                "stats: bytes compared {bytes_compared}, bytes read by positioned reads {bytes_read}, peak RSS {peak_rss_kib} KiB"
            ),
            Event::RemoteStats { bytes_fetched, requests, retries, framing } => format!(
                "stats: remote bytes fetched {bytes_fetched}, requests {requests}, retries {retries}, of the bytes multipart framing {framing}"
            ),
            Event::EvaluationStats { tensor, changed_bytes, bytes_written, .. } => {
                format!("stats: {tensor}: {bytes_written} bytes written for its evaluation (the changed tensor {changed_bytes})")
            }
            Event::SensitivityStats { staged_bytes, evaluations, bytes_written_max, bytes_written_total, linked } => {
                let how = if linked.is_empty() { String::new() } else { format!(", the staged shards linked by {linked}") };
                format!(
                    "stats: staging the model wrote {staged_bytes} bytes; {evaluations} evaluations wrote \
                     {bytes_written_total} bytes, at most {bytes_written_max} each{how}"
                )
            }
            Event::Error(e) => format!("organ: {}: {}", paint("error", crate::paint::BAD), e.message),
        },
    };
    // A URL's credentials (`http://user:password@…`) are never repeated.
    let line = redact(&line);
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(format!("{line}\n").as_bytes());
}

/// `word` coloured on stderr when it takes colour ([`crate::paint`]).
fn paint(word: &str, style: anstyle::Style) -> String {
    crate::paint::paint(word, style, crate::paint::Stream::Stderr)
}

/// A warning: `organ: warning: …`, or a warning event.
pub fn warn(message: impl Into<String>) {
    emit(&Event::Warning { message: message.into() });
}

/// A note for the user: the line as is, or a note event.
pub fn note(message: impl Into<String>) {
    emit(&Event::Note { message: message.into() });
}

/// The command failed with `e`: `organ: error: …`, or the error event.
pub fn error(e: &anyhow::Error) {
    emit(&Event::Error(error_event(e)));
}

/// The progress bar over tensors, for people (on stderr, when it is a terminal), hidden
/// with `--progress jsonl`, where [`tensor_done`] writes events instead. It is not drawn
/// before [`grow`] gives it a length: a bar of no length is drawn full, at "0/0".
pub fn tensor_bar() -> ProgressBar {
    bar("{spinner} {msg} [{bar:30}] {pos}/{len} tensors, {elapsed} (eta {eta})")
}

/// A hidden bar of `template`, [`grow`] or [`chunks_done`] shows it. On a thread that
/// [`watch`]es a bar, that bar, started again at 0 of 0.
fn bar(template: &str) -> ProgressBar {
    if let Some((w, _)) = WATCHED.with(|w| w.borrow().clone()) {
        w.reset();
        w.set_length(0);
        return w;
    }
    let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::hidden());
    bar.set_style(
        ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()).progress_chars("=> "),
    );
    bar
}

/// `n` more units to do: the bar's length grows, and a bar for people is shown once it has
/// a length (so its first frame is never a full bar at "0/0").
pub fn grow(bar: &ProgressBar, n: u64) {
    bar.inc_length(n);
    show(bar);
}

/// Draws `bar` on stderr from now on, for people, once it has a length (never after
/// [`never_draw`]).
fn show(bar: &ProgressBar) {
    if format() == Format::Human && bar.length().unwrap_or(0) > 0 && bar.is_hidden() && DRAW.load(Ordering::Relaxed) {
        bar.set_draw_target(ProgressDrawTarget::stderr());
    }
}

/// The progress bar over the chunks llama.cpp's llama-perplexity scores (`eval`,
/// `--judge`), `what` it runs on as its message; shown once the number of chunks is known.
pub fn chunk_bar(what: String) -> ProgressBar {
    let bar = bar("{spinner} {msg} [{bar:30}] {pos}/{len} chunks, {elapsed} (eta {eta})");
    bar.set_message(what);
    bar
}

/// `done` of `total` chunks scored: the bar, or with `--progress jsonl` a progress event
/// (only when the count moved, so every event is a step forward).
pub fn chunks_done(bar: &ProgressBar, done: u64, total: u64) {
    if (bar.position(), bar.length()) == (done, Some(total)) {
        return;
    }
    bar.set_length(total);
    bar.set_position(done);
    show(bar);
    if format() == Format::Jsonl {
        emit(&Event::Progress { done, total });
    }
}

/// One more tensor done: the bar advances, and with `--progress jsonl` a progress event
/// says how far.
///
/// Tensors finish on several threads: the advance, the reading of the count and the
/// event are one step under a lock, so events leave in the order of their counts (a
/// reader keeps the last one, which must be the highest).
pub fn tensor_done(bar: &ProgressBar) {
    if format() != Format::Jsonl {
        bar.inc(1);
        return;
    }
    static ORDER: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _in_order = ORDER.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    bar.inc(1);
    emit(&Event::Progress { done: bar.position(), total: bar.length().unwrap_or(0) });
}

/// Whether bars are drawn on stderr (for people, on a terminal): not in the Python module,
/// whose caller gets progress through a callback ([`watch`]).
static DRAW: AtomicBool = AtomicBool::new(true);

/// Bars are never drawn on stderr in this process from now on.
pub fn never_draw() {
    DRAW.store(false, Ordering::Relaxed);
}

thread_local! {
    /// The bar this thread's commands count on instead of bars of their own, and the flag
    /// that says their caller stopped waiting ([`watch`]).
    static WATCHED: std::cell::RefCell<Option<(ProgressBar, Arc<AtomicBool>)>> =
        const { std::cell::RefCell::new(None) };
}

/// The bars the command running on this thread makes ([`tensor_bar`], [`chunk_bar`]) are
/// `bar` from now on, each started again at 0 of 0: whoever holds a clone of `bar` sees
/// the command's progress (the Python module's callbacks). Setting `stop` says that
/// nobody waits for the command any more: it writes nothing more ([`interrupted`]). Bars
/// made on other threads are their own.
pub fn watch(bar: ProgressBar, stop: Arc<AtomicBool>) {
    WATCHED.with(|w| *w.borrow_mut() = Some((bar, stop)));
}

/// Whether the caller of the command running on this thread stopped waiting for it
/// ([`watch`]'s flag: Ctrl-C in Python): nothing more is to be written
/// ([`crate::atomic::Temp::commit`] refuses).
pub fn interrupted() -> bool {
    WATCHED.with(|w| w.borrow().as_ref().is_some_and(|(_, stop)| stop.load(Ordering::Relaxed)))
}

/// Whether the work `bar` counts should stop: whoever waits for it has stopped waiting and
/// abandoned the bar (the Python module, when its caller is interrupted). The commands
/// never abandon their own bars; `measure` looks before each tensor.
pub fn stopped(bar: &ProgressBar) -> bool {
    bar.is_finished()
}

/// `text` with the credentials of every URL in it (`scheme://user:password@host`) written
/// `***`: errors and warnings never repeat them.
pub fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        let end = tail.find(|c: char| "/?#\"'<>\\".contains(c) || c.is_whitespace()).unwrap_or(tail.len());
        let authority = &tail[..end];
        match authority.rfind('@') {
            Some(i) => {
                out.push_str("***@");
                out.push_str(&authority[i + 1..]);
            }
            None => out.push_str(authority),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_redacted() {
        assert_eq!(redact("http://u:p@h.example/x: HTTP 404"), "http://***@h.example/x: HTTP 404");
        assert_eq!(redact("a https://t@h/x and s3://b/k"), "a https://***@h/x and s3://b/k");
        assert_eq!(redact("http://h.example/a@b"), "http://h.example/a@b");
        assert_eq!(redact("no url here"), "no url here");
        assert_eq!(redact(r#"{"m":"http://u:p@h","n":"x@y"}"#), r#"{"m":"http://***@h","n":"x@y"}"#);
    }
}
