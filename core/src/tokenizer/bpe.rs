//! Byte-pair merging of one pre-tokenized word, as llama.cpp's `llm_tokenizer_bpe_session`:
//! start from the word's characters, repeatedly merge the adjacent pair of lowest rank
//! (leftmost on a tie), then look each piece up, falling back to its single bytes.
//! A heap keeps this O(n log n) in the word's length, whatever the input.

use super::vocab::Vocab;
use crate::error::{Error, Result};
use alloc::collections::BinaryHeap;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::cmp::Reverse;

const NONE: usize = usize::MAX;

struct Sym {
    start: usize,
    end: usize, // start == end: merged into its left neighbour
    id: Option<u32>,
    prev: usize,
    next: usize,
}

/// A candidate merge: (rank, left index, right index, left end, right end). The ends tell
/// a stale entry (a side changed since it was queued) from a live one.
type Candidate = Reverse<(u32, usize, usize, usize, usize)>;

fn push(v: &Vocab, syms: &[Sym], heap: &mut BinaryHeap<Candidate>, l: usize, r: usize) {
    if l == NONE || r == NONE {
        return;
    }
    let (a, b) = (&syms[l], &syms[r]);
    if let (Some(x), Some(y)) = (a.id, b.id) {
        if let Some(rank) = v.rank(x, y) {
            heap.push(Reverse((rank, l, r, a.end, b.end)));
        }
    }
}

/// Appends the ids of `word` (already in GPT-2's byte alphabet) to `out`.
///
/// # Errors
/// A piece with no token of its own whose bytes have none either (a vocabulary without
/// GPT-2's 256 byte tokens); llama.cpp drops such bytes silently.
pub(super) fn encode_word(v: &Vocab, word: &str, out: &mut Vec<u32>) -> Result<()> {
    let bytes = word.as_bytes();
    let mut syms: Vec<Sym> = Vec::with_capacity(word.len());
    for (i, (start, c)) in word.char_indices().enumerate() {
        let end = start + c.len_utf8();
        syms.push(Sym { start, end, id: v.id(&bytes[start..end]), prev: i.wrapping_sub(1), next: i + 1 });
    }
    if let Some(last) = syms.last_mut() {
        last.next = NONE;
    }
    if let Some(first) = syms.first_mut() {
        first.prev = NONE;
    }
    let mut heap = BinaryHeap::new();
    for i in 1..syms.len() {
        push(v, &syms, &mut heap, i - 1, i);
    }
    while let Some(Reverse((_, l, r, lend, rend))) = heap.pop() {
        let (a, b) = (&syms[l], &syms[r]);
        if a.start == a.end || b.start == b.end || a.end != lend || b.end != rend {
            continue;
        }
        let (start, end, next) = (a.start, b.end, b.next);
        syms[r].end = syms[r].start;
        syms[l].end = end;
        syms[l].id = v.id(&bytes[start..end]);
        syms[l].next = next;
        if next != NONE {
            syms[next].prev = l;
        }
        let prev = syms[l].prev;
        push(v, &syms, &mut heap, prev, l);
        push(v, &syms, &mut heap, l, next);
    }
    for s in syms.iter().filter(|s| s.start < s.end) {
        if let Some(id) = s.id {
            out.push(id);
            continue;
        }
        for &b in &bytes[s.start..s.end] {
            let id = v.id(&[b]).ok_or_else(|| Error::BadMetadata {
                key: String::from(super::vocab::KEY_TOKENS),
                reason: format!("no token for {:?} nor for its byte {b:#04x}", &word[s.start..s.end]),
            })?;
            out.push(id);
        }
    }
    Ok(())
}
