//! What `llama-perplexity` prints, read back: the one place organ parses llama.cpp's text
//! (tools/perplexity/perplexity.cpp of the llama.cpp organ builds, scripts/build-llama.sh).
//!
//! The figures are split between the streams: `LOG_INF`/`LOG_ERR` lines (`Final estimate:
//! PPL = …`, the chunk count, every error) go to stderr with a time and level prefix, and
//! not always at a line start (the ETA's newline goes to stdout); `LOG` lines (the KL
//! divergence statistics) go to stdout. Both streams are searched, by substring.
//!
//! llama-perplexity exits with status 0 after most of its failures (a text too short, a
//! vocabulary that differs from the saved base's, too few tokens for statistics), so every
//! figure expected and not found is a named error here, never a zero. A figure missing
//! with no error line, where every run that gets that far prints it, is [`Error::CutShort`]:
//! llama.cpp's log thread is not waited for at exit, and a busy machine loses the last
//! lines (once in a clean-clone CI run: the last chunk's row and the whole statistics
//! block); the caller runs the tool again.

use std::fmt;

/// A figure and its uncertainty as printed (`X +/- Y`, `X ± Y`).
pub use organ_core::judge::Estimate;

/// A plain perplexity run (and the base run of a KL divergence, which saves the logits).
#[derive(Clone, Debug, PartialEq)]
pub struct Perplexity {
    /// Chunks scored, and the context of each (`calculating perplexity over N chunks, n_ctx=C`).
    pub chunks: u32,
    pub ctx: u32,
    /// `Final estimate: PPL = X +/- Y`.
    pub ppl: Estimate,
}

/// A `--kl-divergence` run against saved base logits.
#[derive(Clone, Debug, PartialEq)]
pub struct KlDivergence {
    pub chunks: u32,
    pub ctx: u32,
    /// `Mean PPL(Q)` and `Mean PPL(base)` (the base's from its saved 16-bit log-probabilities).
    pub ppl: Estimate,
    pub ppl_base: Estimate,
    /// `Mean ln(PPL(Q)/PPL(base))`.
    pub ln_ppl_ratio: Estimate,
    /// `Mean KLD`, `Median KLD`, `99.0% KLD`, `Maximum KLD`, in nats.
    pub kld_mean: Estimate,
    pub kld_median: f64,
    pub kld_p99: f64,
    pub kld_max: f64,
    /// `Same top p`, as a fraction (llama.cpp prints percent).
    pub same_top: Estimate,
    /// The running mean KL divergence after each chunk (the table's `KL Divergence`
    /// column, printed to 5 decimals): what a run of 1, 2, … chunks would report, the
    /// last equal to `kld_mean` but for its 6th decimal.
    pub kld_by_chunk: Vec<Estimate>,
}

/// Why the output holds no result.
#[derive(Clone, Debug, PartialEq)]
pub enum Error {
    /// `you need at least NEED tokens to evaluate perplexity with a context of CTX` /
    /// `the data file you provided tokenizes to only HAVE tokens`.
    TooShort { need: u64, ctx: u64, have: Option<u64> },
    /// `inconsistent vocabulary (BASE vs MODEL)`.
    Vocabulary { base: u64, model: u64 },
    /// `… has been computed with N, while the current context is C`.
    Context { saved: u64, current: u64 },
    /// An error line llama.cpp printed (level `E`), when no figure follows it.
    Failed(String),
    /// A line or block that should be there is not.
    Missing(&'static str),
    /// The run exited 0, reported no error, and its output stops before a line or block
    /// it prints on every run that gets that far. llama.cpp's log is written by a thread
    /// that is not waited for at exit, so a run can lose its last lines (its `common_log`
    /// is left unflushed on purpose: ggml-org/llama.cpp#22142); running it again gives them.
    CutShort(&'static str),
}

impl Error {
    /// Whether running the tool again may give the whole output.
    pub fn cut_short(&self) -> bool {
        matches!(self, Error::CutShort(_))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::TooShort { need, ctx, have } => {
                write!(f, "the text is too short: a context of {ctx} needs at least {need} tokens (two contexts)")?;
                match have {
                    Some(h) => write!(f, ", and it has {h}"),
                    None => Ok(()),
                }?;
                write!(f, "; give a longer text or a smaller --ctx")
            }
            Error::Vocabulary { base, model } => write!(
                f,
                "the base and the model have different vocabularies ({base} and {model} tokens): \
                 KL divergence compares the same tokens' probabilities"
            ),
            Error::Context { saved, current } => {
                write!(f, "the base's logits were saved with a context of {saved}, the model's run has {current}")
            }
            Error::Failed(line) => write!(f, "llama-perplexity failed: {line}"),
            Error::Missing(what) => write!(f, "llama-perplexity's output has no {what}"),
            Error::CutShort(what) => write!(
                f,
                "llama-perplexity's output stops before its {what}, though it exited 0 with no error \
                 (llama.cpp can lose its last lines at exit)"
            ),
        }
    }
}

impl std::error::Error for Error {}

/// Reads a plain perplexity run's output (also the base run of a KL divergence).
///
/// # Errors
/// The run failed or printed no `Final estimate`.
pub fn perplexity(stdout: &str, stderr: &str) -> Result<Perplexity, Error> {
    failures(stderr)?;
    let (chunks, ctx) = chunks(stderr, "calculating perplexity over ").ok_or(Error::Missing(
        "`perplexity: calculating perplexity over N chunks, n_ctx=C` line (the run stopped before scoring)",
    ))?;
    // Printed on every run that scored its chunks, unless with an error line.
    let ppl = after(&[stderr, stdout], "Final estimate: PPL = ")
        .and_then(|s| pair(s, "+/-"))
        .ok_or_else(|| last_error(stderr).unwrap_or(Error::CutShort("`Final estimate: PPL = X +/- Y` line")))?;
    Ok(Perplexity { chunks, ctx, ppl })
}

/// Reads a `--kl-divergence` run's output.
///
/// # Errors
/// The run failed, the vocabularies differ, or a statistic is missing (llama.cpp prints
/// none when fewer than 100 tokens were scored).
pub fn kl_divergence(stdout: &str, stderr: &str) -> Result<KlDivergence, Error> {
    failures(stderr)?;
    let (chunks, ctx) = chunks(stderr, "kl_divergence: computing over ")
        .ok_or(Error::Missing("`kl_divergence: computing over N chunks, n_ctx=C` line (the run stopped early)"))?;
    let no_block = |what| move || last_error(stderr).unwrap_or(Error::CutShort(what));
    if !stdout.contains("====== KL divergence statistics ======") {
        // llama.cpp prints it when at least 100 tokens were scored: the second half of
        // each context but its last token (`first = n_ctx/2`).
        if u64::from(chunks) * u64::from(ctx.saturating_sub(1 + ctx / 2)) < 100 {
            return Err(last_error(stderr).unwrap_or(Error::Missing(
                "`====== KL divergence statistics ======` block (llama.cpp prints it only when at least \
                 100 tokens were scored: give a longer text or a larger --ctx)",
            )));
        }
        return Err(no_block("`====== KL divergence statistics ======` block")());
    }
    let est = |label: &'static str, what: &'static str| {
        after(&[stdout], label).and_then(|s| pair(s, "±")).ok_or_else(no_block(what))
    };
    let one = |label: &'static str, what: &'static str| {
        after(&[stdout], label).and_then(|s| number(s.split_whitespace().next()?)).ok_or_else(no_block(what))
    };
    let same = est("Same top p:", "`Same top p: X ± Y %` line")?;
    Ok(KlDivergence {
        chunks,
        ctx,
        ppl: est("Mean PPL(Q)                   :", "`Mean PPL(Q)` line")?,
        ppl_base: est("Mean PPL(base)                :", "`Mean PPL(base)` line")?,
        ln_ppl_ratio: est("Mean ln(PPL(Q)/PPL(base))     :", "`Mean ln(PPL(Q)/PPL(base))` line")?,
        kld_mean: est("Mean    KLD:", "`Mean    KLD` line")?,
        kld_median: one("Median  KLD:", "`Median  KLD` line")?,
        kld_p99: one("99.0%   KLD:", "`99.0%   KLD` line")?,
        kld_max: one("Maximum KLD:", "`Maximum KLD` line")?,
        same_top: Estimate { value: same.value / 100.0, error: same.error / 100.0 },
        kld_by_chunk: kld_rows(stdout, chunks),
    })
}

/// The table's running KL divergence, chunk 1 first: a row is `N  PPL ± E  LN ± E  KLD ±
/// E  …`, and rows are taken while they number 1, 2, … up to `chunks` (anything else, a
/// row out of order or unreadable, ends the list: it is a figure kept beside the result,
/// never the result).
fn kld_rows(stdout: &str, chunks: u32) -> Vec<Estimate> {
    let mut out = Vec::new();
    for line in stdout.lines() {
        if out.len() >= chunks as usize {
            break;
        }
        let Some(n) = chunk_scored(line) else { continue };
        if n as usize != out.len() + 1 {
            break;
        }
        // Split at each `±`: the third piece ends with the KLD, the fourth starts with its error.
        let parts: Vec<&str> = line.split('±').collect();
        let kld = parts.get(2).and_then(|p| number(p.split_whitespace().last()?));
        let err = parts.get(3).and_then(|p| number(p.split_whitespace().next()?));
        match (kld, err) {
            (Some(value), Some(error)) => out.push(Estimate { value, error }),
            _ => break,
        }
    }
    out
}

/// The failures llama-perplexity reports and then exits 0 after (or goes on from, with
/// figures that mean nothing: a vocabulary mismatch).
fn failures(stderr: &str) -> Result<(), Error> {
    if let Some(s) = after(&[stderr], "you need at least ") {
        let mut w = s.split_whitespace();
        let need = w.next().and_then(|n| n.parse().ok());
        let ctx = after(&[s], "with a context of ").and_then(|c| c.split_whitespace().next()?.parse().ok());
        let have = after(&[stderr], "tokenizes to only ").and_then(|h| h.split_whitespace().next()?.parse().ok());
        if let (Some(need), Some(ctx)) = (need, ctx) {
            return Err(Error::TooShort { need, ctx, have });
        }
    }
    if let Some(s) = after(&[stderr], "inconsistent vocabulary (") {
        let nums: Vec<u64> = s.split([' ', ')']).filter_map(|t| t.parse().ok()).take(2).collect();
        if let [base, model] = nums[..] {
            return Err(Error::Vocabulary { base, model });
        }
        return Err(Error::Failed(format!("inconsistent vocabulary ({}", first_line(s))));
    }
    if let Some(s) = after(&[stderr], " has been computed with ") {
        let saved = s.split([',', ' ']).next().and_then(|n| n.parse().ok());
        let current = after(&[s], "current context is ").and_then(|c| c.split_whitespace().next()?.parse().ok());
        if let (Some(saved), Some(current)) = (saved, current) {
            return Err(Error::Context { saved, current });
        }
    }
    Ok(())
}

/// The last error line (level `E`) of stderr, as an error.
fn last_error(stderr: &str) -> Option<Error> {
    stderr
        .lines()
        .rev()
        .find_map(|l| l.split_once(" E ").map(|(_, m)| m.trim()).filter(|m| !m.is_empty()))
        .map(|m| Error::Failed(m.to_owned()))
}

/// How far a run of llama-perplexity is, read from its text as it is printed (in pieces of
/// any size, from both streams): the chunks it will score (stderr's `calculating
/// perplexity over N chunks` or `kl_divergence: computing over N chunks`), and the last
/// chunk scored (stdout's `[N]12.3,` in a perplexity run, a table row `   N   12.6 ± …`
/// in a KL run).
#[derive(Debug, Default)]
pub struct Meter {
    total: Option<u32>,
    done: u32,
    /// What follows the last complete piece of each stream.
    out: Vec<u8>,
    err: Vec<u8>,
}

/// The longest piece kept waiting for its end: a line longer than this is no chunk line.
const MAX_PIECE: usize = 4096;

impl Meter {
    /// Reads more of stdout.
    pub fn stdout(&mut self, bytes: &[u8]) {
        let done = &mut self.done;
        pieces(&mut self.out, bytes, b",\n", |p| {
            if let Some(n) = chunk_scored(p) {
                *done = (*done).max(n);
            }
        });
    }

    /// Reads more of stderr.
    pub fn stderr(&mut self, bytes: &[u8]) {
        let total = &mut self.total;
        pieces(&mut self.err, bytes, b"\n", |line| {
            let labels = ["calculating perplexity over ", "kl_divergence: computing over "];
            if let Some((n, _)) = labels.iter().find_map(|l| chunks(line, l)) {
                *total = Some(n);
            }
        });
    }

    /// Chunks scored and to score, once the total is known.
    pub fn progress(&self) -> Option<(u32, u32)> {
        self.total.map(|t| (self.done.min(t), t))
    }
}

/// Appends `bytes` to `pending` and hands `each` every piece that ended (at one of `ends`).
fn pieces(pending: &mut Vec<u8>, bytes: &[u8], ends: &[u8], mut each: impl FnMut(&str)) {
    pending.extend_from_slice(bytes);
    if let Some(cut) = pending.iter().rposition(|b| ends.contains(b)) {
        for piece in pending[..cut].split(|b| ends.contains(b)) {
            each(&String::from_utf8_lossy(piece));
        }
        pending.drain(..=cut);
    }
    if pending.len() > MAX_PIECE {
        pending.clear();
    }
}

/// The chunk a piece of stdout says was scored: `[N]PPL` (a perplexity run) or a KL run's
/// table row, `N  PPL ± E  …`.
fn chunk_scored(piece: &str) -> Option<u32> {
    let p = piece.trim();
    if let Some(rest) = p.strip_prefix('[') {
        let (n, ppl) = rest.split_once(']')?;
        return (!ppl.is_empty()).then(|| n.parse().ok()).flatten();
    }
    let mut words = p.split_whitespace();
    let n = words.next()?.parse().ok()?;
    words.next()?.parse::<f64>().ok()?;
    p.contains('±').then_some(n)
}

/// `N chunks, n_ctx=C` after `label`.
fn chunks(stderr: &str, label: &str) -> Option<(u32, u32)> {
    let s = after(&[stderr], label)?;
    let n = s.split_whitespace().next()?.parse().ok()?;
    let c = after(&[s], "n_ctx=")?.split(',').next()?.trim().parse().ok()?;
    Some((n, c))
}

/// The rest of the first line (in any of `texts`) that holds `label`, after it.
fn after<'a>(texts: &[&'a str], label: &str) -> Option<&'a str> {
    texts.iter().find_map(|t| t.find(label).map(|i| first_line(&t[i + label.len()..])))
}

fn first_line(s: &str) -> &str {
    s.split('\n').next().unwrap_or("").trim_end_matches('\r')
}

/// `X SEP Y` (trailing `%` or text ignored), both finite.
fn pair(s: &str, sep: &str) -> Option<Estimate> {
    let (x, y) = s.split_once(sep)?;
    let value = number(x.trim())?;
    let error = number(y.split_whitespace().next()?)?;
    Some(Estimate { value, error })
}

fn number(s: &str) -> Option<f64> {
    s.trim_end_matches('%').parse::<f64>().ok().filter(|v| v.is_finite())
}

#[cfg(test)]
mod tests {
    //! On output captured from scripts/build-llama.sh's llama-perplexity, SmolLM2 Q4_1 and
    //! tests/data/perplexity.txt at -c 128 -b 128 (tests/data/llama-perplexity/).
    use super::*;

    macro_rules! captured {
        ($name:literal) => {
            (
                include_str!(concat!("../../../tests/data/llama-perplexity/", $name, ".stdout")),
                include_str!(concat!("../../../tests/data/llama-perplexity/", $name, ".stderr")),
            )
        };
    }

    /// The captured runs fed in pieces of every size: the total first (stderr), then every
    /// chunk, to the last.
    #[test]
    fn the_meter_follows_every_chunk_in_pieces_of_any_size() {
        for name in ["ppl", "base", "kl-q8_0"] {
            let (out, err) = match name {
                "ppl" => captured!("ppl"),
                "base" => captured!("base"),
                _ => captured!("kl-q8_0"),
            };
            for size in [1, 2, 7, 64, 100_000] {
                let mut m = Meter::default();
                assert_eq!(m.progress(), None);
                for piece in err.as_bytes().chunks(size) {
                    m.stderr(piece);
                }
                assert_eq!(m.progress(), Some((0, 9)), "{name} in pieces of {size}");
                let mut seen = Vec::new();
                for piece in out.as_bytes().chunks(size) {
                    m.stdout(piece);
                    seen.push(m.progress().unwrap().0);
                }
                assert_eq!(m.progress(), Some((9, 9)), "{name} in pieces of {size}");
                assert!(seen.windows(2).all(|w| w[0] <= w[1]), "{name}: went back");
                if size == 1 {
                    let mut steps = seen.clone();
                    steps.dedup();
                    assert_eq!(steps, (0..=9).collect::<Vec<u32>>(), "{name}: a chunk skipped");
                }
            }
        }
        // Neither the header row, nor times, nor a line without its end are chunks.
        let mut m = Meter::default();
        m.stderr(b"0.1 I perplexity: calculating perplexity over 40 chunks, n_ctx=512, batch_size=512\n");
        m.stdout(b"chunk   PPL   ln(PPL(Q)/PPL(base))\n0.37 minutes\n[1]12.4,[2]1");
        assert_eq!(m.progress(), Some((1, 40)));
    }

    #[test]
    fn a_perplexity_run_gives_its_final_estimate() {
        let (out, err) = captured!("ppl");
        let p = perplexity(out, err).unwrap();
        // The line, as printed mid-line after the ETA: `Final estimate: PPL = 22.5325 +/- 2.60969`.
        assert!(err.contains("Final estimate: PPL = 22.5325 +/- 2.60969"));
        assert_eq!(p, Perplexity { chunks: 9, ctx: 128, ppl: Estimate { value: 22.5325, error: 2.60969 } });
        // The base run of a KL divergence prints the same estimate.
        let (out, err) = captured!("base");
        assert_eq!(perplexity(out, err).unwrap().ppl, p.ppl);
    }

    #[test]
    fn a_kl_run_gives_every_statistic() {
        let (out, err) = captured!("kl-q8_0");
        let k = kl_divergence(out, err).unwrap();
        let want_lines = [
            "Mean PPL(Q)                   :  22.710849 ±   2.632755",
            "Mean PPL(base)                :  22.532542 ±   2.609696",
            "Mean    KLD:   0.004924 ±   0.000152",
            "Median  KLD:   0.004184",
            "99.0%   KLD:   0.017266",
            "Same top p: 95.238 ± 0.895 %",
        ];
        for l in want_lines {
            assert!(out.contains(l), "{l}");
        }
        assert_eq!((k.chunks, k.ctx), (9, 128));
        assert_eq!(k.ppl, Estimate { value: 22.710849, error: 2.632755 });
        assert_eq!(k.ppl_base, Estimate { value: 22.532542, error: 2.609696 });
        assert_eq!(k.ln_ppl_ratio, Estimate { value: 0.007882, error: 0.004226 });
        assert_eq!(k.kld_mean, Estimate { value: 0.004924, error: 0.000152 });
        assert_eq!((k.kld_median, k.kld_p99, k.kld_max), (0.004184, 0.017266, 0.025128));
        assert!((k.same_top.value - 0.95238).abs() < 1e-12 && (k.same_top.error - 0.00895).abs() < 1e-12);
        // The running KL divergence after each of the 9 chunks, the last the mean's to 5 decimals.
        assert_eq!(k.kld_by_chunk.len(), 9);
        assert_eq!(k.kld_by_chunk[0], Estimate { value: 0.00478, error: 0.00055 });
        assert_eq!(k.kld_by_chunk[8], Estimate { value: 0.00492, error: 0.00015 });
        // Rows out of order, or fewer than the chunks, give what was in order.
        let swapped = out.replace("   2      22.7670", "   7      22.7670");
        assert_eq!(kld_rows(&swapped, 9).len(), 1);
        assert_eq!(kld_rows(out, 3).len(), 3);
        assert_eq!(kld_rows("   1  12.6 ± 3.4  nan ± 1  x ± y\n", 9), Vec::new());
    }

    #[test]
    fn a_text_too_short_is_named() {
        let (out, err) = captured!("short");
        let e = perplexity(out, err).unwrap_err();
        assert_eq!(e, Error::TooShort { need: 256, ctx: 128, have: Some(63) });
        assert!(e.to_string().contains("needs at least 256 tokens"), "{e}");
    }

    #[test]
    fn a_vocabulary_mismatch_is_named_though_figures_follow() {
        // llama.cpp goes on and prints a KL divergence of about 19 nats: meaningless.
        let (out, err) = captured!("vocab");
        assert!(out.contains("Same top p") || out.contains("chunk"));
        assert_eq!(kl_divergence(out, err).unwrap_err(), Error::Vocabulary { base: 49152, model: 49216 });
    }

    #[test]
    fn every_missing_line_is_a_named_error() {
        let (out, err) = captured!("kl-q8_0");
        // Each statistic's line removed in turn, no error printed: the output was cut short
        // (llama.cpp lost its last lines at exit), and the error names the line.
        for label in ["Mean PPL(Q)", "Mean PPL(base)", "Mean    KLD", "Median  KLD", "99.0%   KLD", "Same top p:"] {
            let cut: String = out.lines().filter(|l| !l.starts_with(label)).map(|l| format!("{l}\n")).collect();
            match kl_divergence(&cut, err) {
                Err(e @ Error::CutShort(what)) => {
                    assert!(what.contains(label.trim_end_matches(':')), "{label}: {what}");
                    assert!(e.cut_short());
                }
                other => panic!("{label}: {other:?}"),
            }
        }
        // No statistics block after 9 chunks of 63 scored tokens: cut short, from the last
        // chunk row on (as CI once saw) or from the block on.
        let head: String = out.lines().take_while(|l| !l.starts_with("======")).map(|l| format!("{l}\n")).collect();
        let rows: String = out.lines().take_while(|l| !l.starts_with("   9 ")).map(|l| format!("{l}\n")).collect();
        for cut in [&head, &rows] {
            let e = kl_divergence(cut, err).unwrap_err();
            assert!(matches!(e, Error::CutShort(w) if w.contains("statistics")), "{e:?}");
            assert!(e.to_string().contains("exited 0"), "{e}");
        }
        // After one chunk (63 tokens), llama.cpp prints no statistics at all: that is the
        // text's or the context's fault, and running again would not help.
        let one = err.replace("computing over 9 chunks", "computing over 1 chunks");
        let e = kl_divergence(&head, &one).unwrap_err();
        assert!(matches!(e, Error::Missing(w) if w.contains("100 tokens")), "{e:?}");
        assert!(!e.cut_short());
        // No final estimate (and no error line): cut short; no chunk line, nothing at all:
        // the run stopped before scoring.
        let (out, err) = captured!("ppl");
        let cut = err.replace("Final estimate", "Final");
        assert!(matches!(perplexity(out, &cut), Err(Error::CutShort(w)) if w.contains("Final estimate")));
        assert!(matches!(perplexity("", ""), Err(Error::Missing(w)) if w.contains("chunks")));
        assert!(matches!(kl_divergence("", ""), Err(Error::Missing(_))));
    }

    #[test]
    fn an_error_line_is_reported_when_figures_are_missing() {
        let err = "0.00.1 I kl_divergence: computing over 9 chunks, n_ctx=128, batch_size=128, n_seq=1\n\
                   0.00.2 E kl_divergence: failed reading log-probs for chunk 3\n";
        assert_eq!(
            kl_divergence("", err).unwrap_err(),
            Error::Failed("kl_divergence: failed reading log-probs for chunk 3".into())
        );
    }

    #[test]
    fn non_finite_figures_are_not_figures() {
        assert_eq!(pair("nan +/- 1", "+/-"), None);
        assert_eq!(pair("inf ± 1", "±"), None);
        assert_eq!(number("95.2%"), Some(95.2));
    }
}
