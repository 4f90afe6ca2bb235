//! Pre-tokenization: a text fragment cut into words before BPE, as llama.cpp's
//! `unicode_regex_split` cuts it, then each word's bytes mapped to GPT-2's byte alphabet.
//!
//! Two regex sets are supported, both built on the GPT-2 regex
//! `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)`, which llama.cpp
//! runs through a hand-written matcher (`unicode_regex_split_custom_gpt2`) ported below
//! step for step, boundary cases included (`\s+(?!\S)` looks ahead only inside the piece).

use super::unicode_table::{RANGES, WHITESPACE};
use alloc::string::String;
use alloc::vec::Vec;

/// Which regex set splits the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PreSplit {
    /// The GPT-2 regex alone (`gpt-2`, `mpt`, `olmo`, …).
    Gpt2,
    /// `\p{N}` first (every number code point a word of its own), then the GPT-2 regex on
    /// each piece (`smollm`, `starcoder`, `refact`, …).
    DigitsThenGpt2,
}

/// What the GPT-2 matcher asks of a code point. `defined` is false only past the end of
/// the piece (llama.cpp gives every real code point at least its "undefined" flag).
#[derive(Clone, Copy, Default)]
struct Flags {
    defined: bool,
    letter: bool,
    number: bool,
    space: bool,
}

fn flags(c: char) -> Flags {
    let cp = c as u32;
    // RANGES starts at 0, so the partition point is at least 1.
    let i = RANGES.partition_point(|&(start, _)| start <= cp);
    let class = RANGES.get(i.wrapping_sub(1)).map_or(0, |&(_, k)| k);
    Flags { defined: true, letter: class == 1, number: class == 2, space: WHITESPACE.binary_search(&cp).is_ok() }
}

/// Whether `c` is `\p{N}` in llama.cpp's table.
pub(super) fn is_number(c: char) -> bool {
    flags(c).number
}

/// The words of `text`, as byte ranges of it, in order; together they cover `text`.
pub(super) fn split(how: PreSplit, text: &str) -> Vec<core::ops::Range<usize>> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let byte_at = |i: usize| chars.get(i).map_or(text.len(), |&(b, _)| b);
    // Pieces (char index ranges) the GPT-2 matcher runs over, each on its own.
    let mut pieces = Vec::new();
    match how {
        PreSplit::Gpt2 => pieces.push(0..chars.len()),
        PreSplit::DigitsThenGpt2 => {
            let mut start = 0;
            for (i, &(_, c)) in chars.iter().enumerate() {
                if is_number(c) {
                    if start < i {
                        pieces.push(start..i);
                    }
                    pieces.push(i..i + 1);
                    start = i + 1;
                }
            }
            if start < chars.len() {
                pieces.push(start..chars.len());
            }
        }
    }
    let cps: Vec<char> = chars.iter().map(|&(_, c)| c).collect();
    let mut ends = Vec::new();
    for p in pieces {
        gpt2(&cps, p.start, p.end, &mut ends);
    }
    let mut words = Vec::with_capacity(ends.len());
    let mut start = 0;
    for e in ends {
        words.push(byte_at(start)..byte_at(e));
        start = e;
    }
    words
}

/// llama.cpp's `unicode_regex_split_custom_gpt2` over `cps[start..end]`: pushes the end
/// (char index) of each word.
fn gpt2(cps: &[char], start: usize, end: usize, ends: &mut Vec<usize>) {
    let get = |p: usize| if p < end { cps.get(p).copied() } else { None };
    let fl = |p: usize| get(p).map_or(Flags::default(), flags);
    let mut prev = start;
    let mut add = |e: usize, ends: &mut Vec<usize>| {
        if e > prev {
            ends.push(e);
        }
        prev = e;
    };
    let mut pos = start;
    while pos < end {
        let Some(c) = get(pos) else { break };
        let f = fl(pos);
        // 's|'t|'re|'ve|'m|'ll|'d
        if c == '\'' && pos + 1 < end {
            let n = get(pos + 1);
            if matches!(n, Some('s' | 't' | 'm' | 'd')) {
                pos += 2;
                add(pos, ends);
                continue;
            }
            if pos + 2 < end {
                let nn = get(pos + 2);
                if matches!((n, nn), (Some('r'), Some('e')) | (Some('v'), Some('e')) | (Some('l'), Some('l'))) {
                    pos += 3;
                    add(pos, ends);
                    continue;
                }
            }
        }
        let lead = usize::from(c == ' ');
        let mut f2 = if c == ' ' { fl(pos + 1) } else { f };
        // ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+'
        let other = |f: Flags| f.defined && !(f.space || f.letter || f.number);
        let class: Option<fn(Flags) -> bool> = if f2.letter {
            Some(|f: Flags| f.letter)
        } else if f2.number {
            Some(|f: Flags| f.number)
        } else if other(f2) {
            Some(|f: Flags| f.defined && !(f.space || f.letter || f.number))
        } else {
            None
        };
        if let Some(class) = class {
            pos += lead;
            while class(f2) {
                pos += 1;
                f2 = fl(pos);
            }
            add(pos, ends);
            continue;
        }
        let mut n_space = 0;
        while fl(pos + n_space).space {
            n_space += 1;
        }
        // '\s+(?!\S)': leave the last space to the word that follows
        if n_space > 1 && get(pos + n_space).is_some() {
            pos += n_space - 1;
            add(pos, ends);
            continue;
        }
        // '\s+'
        if n_space > 0 {
            pos += n_space;
            add(pos, ends);
            continue;
        }
        pos += 1;
        add(pos, ends);
    }
}

/// GPT-2's byte-to-character map: printable Latin-1 bytes stand for themselves, the rest
/// take the code points from U+0100 up, in byte order.
pub(super) fn byte_chars() -> [char; 256] {
    let mut map = ['\0'; 256];
    let mut next = 256u32;
    for (b, slot) in map.iter_mut().enumerate() {
        let printable = (0x21..=0x7E).contains(&b) || (0xA1..=0xAC).contains(&b) || (0xAE..=0xFF).contains(&b);
        let cp = if printable {
            b as u32
        } else {
            next += 1;
            next - 1
        };
        // Every value here is below U+0144, a valid scalar value.
        *slot = char::from_u32(cp).unwrap_or('\0');
    }
    map
}

/// `word`'s bytes in GPT-2's byte alphabet.
pub(super) fn byte_encode(map: &[char; 256], word: &str) -> String {
    word.bytes().map(|b| map[usize::from(b)]).collect()
}
