//! Colour for people: `error` and `warning` on stderr, and on stdout `check`'s verdict
//! (`BROKEN`, `ok`) and severities, and the verdict words of `eval` and `--judge`.
//!
//! Whether a stream gets colour is anstream's rule, the one clap already applies to its
//! help: never when `NO_COLOR` is set and not empty; always when `CLICOLOR_FORCE` is set
//! (not `0`); else only on a terminal that supports colour (`CLICOLOR=0` or `TERM=dumb`
//! turns it off). Nothing else changes: the text is the same with the escapes removed.

use anstyle::{AnsiColor, Style};
use organ_core::report::Mark;
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

/// How a report's marked words ([`Mark`]: `check`'s verdict and severities, a verdict's
/// grade) look on `stream`: coloured when it gets colour, else `None` (as they are). The
/// core's renderer marks the words; only what reaches a terminal is coloured.
pub fn marks(stream: Stream) -> Option<fn(Mark, &str) -> String> {
    on(stream).then_some(marked as fn(Mark, &str) -> String)
}

/// `word` in the style of `mark`.
fn marked(mark: Mark, word: &str) -> String {
    let style = match mark {
        Mark::Bad => BAD,
        Mark::Warn => WARN,
        Mark::Good => GOOD,
        Mark::Note => NOTE,
    };
    styled(word, style, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use organ_core::check::{CheckReport, Counts, Finding, Kind, Severity};
    use organ_core::report::formats::TEXT;
    use organ_core::report::{AnyReport, Shown};

    #[test]
    fn check_text_colours_the_verdict_and_severities_only() {
        let finding = |severity, kind, subject: &str, message: &str| Finding {
            severity,
            kind,
            subject: subject.into(),
            message: message.into(),
        };
        let report = |error| CheckReport {
            check: "k1".into(),
            generator: "organ".into(),
            model: "m.gguf".into(),
            architecture: Some("llama".into()),
            shapes_checked: true,
            tensors: 3,
            bytes_scanned: 1000,
            counts: Counts { error, warning: 1, info: 1 },
            findings: [
                (error > 0).then(|| finding(Severity::Error, Kind::NonFinite, "blk.0", "2 NaN")),
                Some(finding(Severity::Warning, Kind::AllZero, "x", "all zero")),
                Some(finding(Severity::Info, Kind::Architecture, "", "y")),
            ]
            .into_iter()
            .flatten()
            .collect(),
            scans: Vec::new(),
        };
        let render = |r: &CheckReport, shown: &Shown| {
            let mut text = String::new();
            (TEXT.render)(AnyReport::Check(r), shown, &mut text).unwrap();
            text
        };
        let coloured = Shown { marks: Some(marked), ..Shown::WHOLE };
        let (broken, ok) = (report(1), report(0));
        let text = render(&broken, &Shown::WHOLE);
        let c = render(&broken, &coloured);
        assert!(c.contains("\x1b[1m\x1b[31mBROKEN\x1b[0m: 1 errors"), "{c:?}");
        assert!(c.contains("  \x1b[1m\x1b[31merror\x1b[0m   "), "{c:?}");
        assert!(c.contains("  \x1b[1m\x1b[33mwarning\x1b[0m "), "{c:?}");
        assert!(c.contains("\n  info    "), "{c:?}");
        // The escapes removed, the text is the plain one.
        let plain = c.replace("\x1b[1m", "").replace("\x1b[31m", "").replace("\x1b[33m", "").replace("\x1b[0m", "");
        assert_eq!(plain, text);
        assert!(render(&ok, &coloured).contains("\n\x1b[1m\x1b[32mok\x1b[0m: 0 errors"));
    }
}
