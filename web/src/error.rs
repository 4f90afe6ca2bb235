//! The page's errors. Each says what it is, so that the page can treat them apart: a
//! cancellation is not a failure (the status line says "cancelled", not an error), and
//! what went wrong is told from where (a read, the core, the workers, the browser). Every
//! one but [`Error::Cancelled`] carries the sentence the status line shows, the file,
//! tensor or field it is about named first.

use core::fmt;

/// Why the page did not finish what it was asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// Stopped by the user (the stop button, or a new drop).
    Cancelled,
    /// A file or URL could not be read, or gave other bytes than were asked for.
    Read(String),
    /// What was read, or typed, is not what the core takes, or the core refused the work.
    Refused(String),
    /// The worker pool could not start, or a worker stopped before it answered.
    Workers(String),
    /// The browser lacks or refused what the page needs (a window, a Blob, a download).
    Browser(String),
    /// A state the page's own bookkeeping should never reach (a read for no tensor).
    Internal(&'static str),
}

impl Error {
    /// The core's refusal `e`, said as it is.
    pub fn refused(e: impl fmt::Display) -> Error {
        Error::Refused(e.to_string())
    }

    /// The same error said at `place` (a file, a tensor, a pair of models): `PLACE:
    /// sentence`. A cancellation stays one.
    #[must_use]
    pub fn at(self, place: impl fmt::Display) -> Error {
        let at = |s: String| format!("{place}: {s}");
        match self {
            Error::Cancelled => Error::Cancelled,
            Error::Read(s) => Error::Read(at(s)),
            Error::Refused(s) => Error::Refused(at(s)),
            Error::Workers(s) => Error::Workers(at(s)),
            Error::Browser(s) => Error::Browser(at(s)),
            Error::Internal(s) => Error::Refused(at(s.to_owned())),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Cancelled => f.write_str("cancelled"),
            Error::Read(s) | Error::Refused(s) | Error::Workers(s) | Error::Browser(s) => f.write_str(s),
            Error::Internal(s) => f.write_str(s),
        }
    }
}
