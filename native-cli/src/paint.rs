//! Colour for people: `error` and `warning` on stderr, and on stdout `check`'s verdict
//! (`BROKEN`, `ok`) and severities, and the verdict words of `eval` and `--judge`.
//!
//! Whether a stream gets colour is anstream's rule, the one clap already applies to its
//! help: never when `NO_COLOR` is set and not empty; always when `CLICOLOR_FORCE` is set
//! (not `0`); else only on a terminal that supports colour (`CLICOLOR=0` or `TERM=dumb`
//! turns it off). Nothing else changes: the text is the same with the escapes removed.

use anstyle::{AnsiColor, Style};
use std::sync::OnceLock;

/// Red and bold: errors, `BROKEN`, the `broken` verdict.
pub const BAD: Style = AnsiColor::Red.on_default().bold();
/// Yellow: warnings, the `degraded` verdict.
pub const WARN: Style = AnsiColor::Yellow.on_default().bold();
/// Green: `ok`, the `close` verdict.
pub const GOOD: Style = AnsiColor::Green.on_default().bold();
/// Cyan: the `changed` verdict (no worse, but it predicts differently).
pub const NOTE: Style = AnsiColor::Cyan.on_default().bold();

/// A standard stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// Whether `stream` gets colour (decided once per process).
pub fn on(stream: Stream) -> bool {
    static OUT: OnceLock<bool> = OnceLock::new();
    static ERR: OnceLock<bool> = OnceLock::new();
    let wants = |c: anstream::ColorChoice| c != anstream::ColorChoice::Never;
    match stream {
        Stream::Stdout => *OUT.get_or_init(|| wants(anstream::AutoStream::choice(&std::io::stdout()))),
        Stream::Stderr => *ERR.get_or_init(|| wants(anstream::AutoStream::choice(&std::io::stderr()))),
    }
}

/// `text` in `style` when `stream` gets colour, else as it is.
pub fn paint(text: &str, style: Style, stream: Stream) -> String {
    styled(text, style, on(stream))
}

/// `text` in `style` when `on`.
pub fn styled(text: &str, style: Style, on: bool) -> String {
    if on {
        format!("{}{text}{}", style.render(), style.render_reset())
    } else {
        text.to_owned()
    }
}

/// `check`'s text report with its verdict word (`BROKEN`, `ok`) and each finding's severity
/// (`error`, `warning`) coloured when `on`. The core writes the report (the same text goes
/// to a file); only what reaches a terminal is coloured, here.
pub fn check_text(text: &str, on: bool) -> String {
    if !on {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len() + 64);
    for line in text.split_inclusive('\n') {
        let painted = [("BROKEN:", "BROKEN", BAD), ("ok:", "ok", GOOD)]
            .iter()
            .find(|(head, _, _)| line.starts_with(head))
            .map(|&(_, word, style)| format!("{}{}", styled(word, style, true), &line[word.len()..]))
            .or_else(|| {
                [("  error ", "error", BAD), ("  warning ", "warning", WARN)]
                    .iter()
                    .find(|(head, _, _)| line.starts_with(head))
                    .map(|&(_, word, style)| format!("  {}{}", styled(word, style, true), &line[2 + word.len()..]))
            });
        out.push_str(painted.as_deref().unwrap_or(line));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_text_colours_the_verdict_and_severities_only() {
        let text = "m.gguf  llama  3 tensors  1 KB scanned\n\n  error   nan              blk.0: 2 NaN\n  \
                    warning zero             x: all zero\n  info    note             y\n\nBROKEN: 1 errors, 1 \
                    warnings, 1 notes (shapes checked)\n";
        let c = check_text(text, true);
        assert!(c.contains("\x1b[1m\x1b[31mBROKEN\x1b[0m: 1 errors"), "{c:?}");
        assert!(c.contains("  \x1b[1m\x1b[31merror\x1b[0m   nan"), "{c:?}");
        assert!(c.contains("  \x1b[1m\x1b[33mwarning\x1b[0m zero"), "{c:?}");
        assert!(c.contains("\n  info    note"), "{c:?}");
        // The escapes removed, the text is the core's.
        let plain = c.replace("\x1b[1m", "").replace("\x1b[31m", "").replace("\x1b[33m", "").replace("\x1b[0m", "");
        assert_eq!(plain, text);
        assert_eq!(check_text(text, false), text);
        assert!(check_text("ok: 0 errors\n", true).starts_with("\x1b[1m\x1b[32mok\x1b[0m: 0 errors"));
    }
}
