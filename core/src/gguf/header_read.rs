//! A GGUF header read in growing pieces, where the file is not in memory (a file at a URL,
//! a file in the browser): one state machine for every reader. It is fed the bytes read
//! from the file's start so far and answers with the parsed header or how many bytes it
//! needs; the reader performs the reads, blocking or async, as its side does them.
//!
//! Reads start at [`HEADER_FIRST_READ`] and grow at least twofold, so the largest header
//! costs a handful of reads; they never pass the file, and never the header budget
//! ([`max_header_bytes`]): [`Gguf::parse`] refuses a header longer than that.

use super::Gguf;
use crate::limits::{max_header_bytes, HEADER_FIRST_READ};
use crate::Error;

/// What [`HeaderRead::step`] makes of the bytes read so far.
#[derive(Debug)]
pub enum Step<'a> {
    /// The header is whole: parsed (borrowing the bytes).
    Done(Gguf<'a>),
    /// Read on until this many bytes from the file's start are read (more than given, at
    /// most the file's length and the header budget).
    Need(u64),
}

/// The header read of one file of `file_len` bytes.
#[derive(Clone, Copy, Debug)]
pub struct HeaderRead {
    file_len: u64,
    /// Whether tensor data past the file's end is allowed ([`Gguf::parse_cut_short`]).
    cut_short: bool,
}

impl HeaderRead {
    /// The header read of a file of `file_len` bytes.
    pub fn new(file_len: u64) -> HeaderRead {
        HeaderRead { file_len, cut_short: false }
    }

    /// The header read of a file of `file_len` bytes that may be cut short (a partial
    /// download): its header whole, its tensors' data ending past its end
    /// ([`Gguf::parse_cut_short`]; [`crate::gguf::cut::Cut::of`] says what is missing).
    pub fn cut_short(file_len: u64) -> HeaderRead {
        HeaderRead { file_len, cut_short: true }
    }

    /// How many bytes to read first, from offset 0.
    pub fn first(&self) -> u64 {
        self.file_len.min(HEADER_FIRST_READ)
    }

    /// Parses `prefix` (the file's first bytes) or says how many bytes to hold next.
    ///
    /// # Errors
    /// The header is not a valid GGUF, it needs more bytes than the file has, or it is
    /// longer than the header budget ([`Error::HeaderBudget`]).
    pub fn step<'a>(&self, prefix: &'a [u8]) -> Result<Step<'a>, Error> {
        let parsed = if self.cut_short {
            Gguf::parse_cut_short(prefix, self.file_len)
        } else {
            Gguf::parse(prefix, self.file_len)
        };
        let e = match parsed {
            Ok(g) => return Ok(Step::Done(g)),
            Err(e) => e,
        };
        let have = prefix.len() as u64;
        match e.needed_len() {
            // The parser refuses a header past the budget, so `needed` is within it.
            Some(needed) if needed <= self.file_len && needed > have => {
                let doubled = have.saturating_mul(2).min(self.file_len).min(max_header_bytes());
                Ok(Step::Need(needed.max(doubled)))
            }
            _ => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::writer::plan;
    use alloc::string::String;
    use alloc::vec;
    use alloc::vec::Vec;

    /// A GGUF whose header is about `string_len` bytes (one long string value), then
    /// `data` bytes of tensor data (no tensors).
    fn gguf(string_len: usize, data: usize) -> Vec<u8> {
        let s: String = core::iter::repeat_n('x', string_len).collect();
        let kvs = [("k", crate::gguf::MetaValue::Str(s.as_bytes()))];
        let mut out = plan(3, &kvs, &[]).expect("a header").header;
        out.resize(out.len() + data, 0);
        out
    }

    #[test]
    fn a_file_cut_short_parses_only_when_asked() {
        let kvs = [("k", crate::gguf::MetaValue::U32(1))];
        let specs = [crate::gguf::writer::TensorSpec { name: "t", dims: &[64], ty: crate::GgmlType::F32 }];
        let layout = plan(3, &kvs, &specs).expect("a header");
        let mut file = layout.header.clone();
        file.resize(layout.header.len() + 100, 0);
        let len = file.len() as u64;
        assert!(HeaderRead::new(len).step(&file).is_err(), "tensor data past the end");
        let Ok(Step::Done(g)) = HeaderRead::cut_short(len).step(&file) else { panic!("the header parses") };
        let cut = crate::gguf::cut::Cut::of(&g).expect("cut short");
        assert_eq!(cut.missing_bytes(), 256 - 100);
    }

    /// Feeds `file` to a header read as a reader would; the lengths it held.
    fn read(file: &[u8]) -> Result<Vec<u64>, Error> {
        let hr = HeaderRead::new(file.len() as u64);
        let mut prefix = file[..hr.first() as usize].to_vec();
        let mut held = vec![prefix.len() as u64];
        loop {
            let want = match hr.step(&prefix)? {
                Step::Done(_) => return Ok(held),
                Step::Need(n) => n,
            };
            assert!(want > prefix.len() as u64 && want <= file.len() as u64, "{want}");
            prefix.extend_from_slice(&file[prefix.len()..want as usize]);
            held.push(want);
        }
    }

    #[test]
    fn a_small_header_is_one_read_and_a_large_one_doubles() {
        assert_eq!(read(&gguf(100, 10)).unwrap(), [gguf(100, 10).len() as u64]);
        // Many keys: the parser asks for a little more each time, the reads double.
        let (mut h, mut prev) = (Vec::new(), 0);
        for k in 0..40_000 {
            h.push((alloc::format!("key.{k:05}"), [0u8; 64]));
        }
        let kvs: Vec<_> = h.iter().map(|(k, v)| (k.as_str(), crate::gguf::MetaValue::Str(v))).collect();
        let mut big = plan(3, &kvs, &[]).expect("a header").header;
        let header = big.len() as u64;
        big.resize(big.len() + (4 << 20), 0);
        let held = read(&big).unwrap();
        assert_eq!(held[..3], [1 << 20, 2 << 20, 4 << 20]);
        for &n in &held[1..] {
            assert!(n >= 2 * prev && n <= big.len() as u64, "{held:?}");
            prev = n;
        }
        assert!(prev >= header && prev < 2 * header, "{held:?}");
        // One long value: the parser asks for all of it at once.
        let long = gguf(5 << 20, 10);
        let string_end = long.iter().rposition(|&b| b == b'x').unwrap() as u64 + 1;
        assert_eq!(read(&long).unwrap()[..2], [1 << 20, string_end]);
    }

    #[test]
    fn a_file_that_ends_in_its_header_is_refused() {
        let mut file = gguf(3 << 20, 0);
        file.truncate(2 << 20);
        assert!(read(&file).is_err());
        assert!(read(b"GGUF").is_err());
        assert!(read(b"").is_err());
    }
}
