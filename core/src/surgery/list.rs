//! Lists of numbers and ranges, comma-separated (`0,2,5`, `5-20`, `3,7,9-11`): how layers
//! and experts are chosen. One reader for every such list; each caller says what it names
//! and how many it takes, and the CLI or the server names the flag or field it came from.

use alloc::string::String;
use alloc::vec::Vec;

/// What is wrong with a list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// The list is empty (only a caller that refuses it gives this one).
    Empty,
    /// A part that is neither a number (at most the caller's largest) nor a range `A-B`.
    NotANumber {
        /// The part, trimmed.
        part: String,
    },
    /// A range whose end comes before its start.
    Backwards {
        /// The part, trimmed.
        part: String,
    },
    /// More numbers in all than the caller takes.
    TooMany {
        /// The most it takes.
        max: u64,
    },
}

/// The parts of `s` as inclusive ranges `(a, b)`, in order, each number at most `largest`.
///
/// # Errors
/// The first part that is not a number or an ascending range ([`Fault::NotANumber`],
/// [`Fault::Backwards`]); an empty `s` is one empty part, not a number.
pub fn ranges(s: &str, largest: u64) -> Result<Vec<(u64, u64)>, Fault> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim) {
        let num = |x: &str| {
            x.trim()
                .parse::<u64>()
                .ok()
                .filter(|&n| n <= largest)
                .ok_or_else(|| Fault::NotANumber { part: part.into() })
        };
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => (num(part)?, num(part)?),
        };
        if a > b {
            return Err(Fault::Backwards { part: part.into() });
        }
        out.push((a, b));
    }
    Ok(out)
}

/// A list of numbers naming `what`s (`"expert"`, `"layer"`), refused: it displays as
/// `"LIST": why`, to follow the flag or field that gave it (`--keep "0-x": …`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NumbersError {
    /// The list as given.
    pub list: String,
    /// What its numbers name.
    pub what: &'static str,
    /// What is wrong.
    pub fault: Fault,
}

impl core::fmt::Display for NumbersError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let (list, what) = (&self.list, self.what);
        match &self.fault {
            Fault::Empty => write!(f, "is empty: give {what} numbers or ranges, e.g. 10-12,15"),
            Fault::NotANumber { part } => {
                let an = if what.starts_with(['a', 'e', 'i', 'o', 'u']) { "an" } else { "a" };
                write!(f, "{list:?}: {part:?} is not {an} {what} number or a range A-B")
            }
            Fault::Backwards { part } => write!(f, "{list:?}: the range {part:?} runs backwards"),
            Fault::TooMany { max } => write!(f, "{list:?}: more than {max} {what}s"),
        }
    }
}

/// The numbers of a list naming `what`s, every range expanded, at most `max` in all.
///
/// # Errors
/// A part (the empty list's one included) that is not a number or an ascending range, or
/// more than `max` numbers in all.
pub fn numbers(what: &'static str, s: &str, max: u64) -> Result<Vec<u64>, NumbersError> {
    let refused = |fault| NumbersError { list: s.into(), what, fault };
    let mut out = Vec::new();
    for (a, b) in ranges(s, u64::MAX).map_err(refused)? {
        if b - a >= max || out.len() as u64 + (b - a) >= max {
            return Err(refused(Fault::TooMany { max }));
        }
        out.extend(a..=b);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_ranges() {
        assert_eq!(ranges(" 3, 7 ,9-11", 20), Ok(alloc::vec![(3, 3), (7, 7), (9, 11)]));
        assert_eq!(ranges("21", 20), Err(Fault::NotANumber { part: "21".into() }));
        assert_eq!(ranges("5-2", 20), Err(Fault::Backwards { part: "5-2".into() }));
        assert_eq!(ranges("", 20), Err(Fault::NotANumber { part: "".into() }));
        assert_eq!(numbers("expert", "0-2, 7", 8), Ok(alloc::vec![0, 1, 2, 7]));
        let e = numbers("expert", "0-8", 8).unwrap_err();
        assert_eq!(alloc::format!("{e}"), "\"0-8\": more than 8 experts");
        let e = numbers("layer", "x", 8).unwrap_err();
        assert_eq!(alloc::format!("{e}"), "\"x\": \"x\" is not a layer number or a range A-B");
    }
}
