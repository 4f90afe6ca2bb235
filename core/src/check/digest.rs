//! Which tensors the check hashes whole, and how: the rule every front end follows, so
//! the CLI and the browser find the same byte-identical tensors.
//!
//! A tensor's ends ([`HEAD`] bytes at each, and its size) are hashed during its scan
//! ([`Ends`]). Two byte-identical tensors always share their type, shape and ends, so only
//! a tensor that shares them with another may be a copy ([`hash_whole`]); those are
//! hashed whole ([`Hasher`]) and [`super::duplicate_findings`] compares the digests. That
//! spares hashing most of a model's bytes, and the duplicates found are exact.
//! BLAKE3: fast in software (wasm too), and collisions are out of reach.

use crate::model::TensorEntry;
use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use core::borrow::Borrow;

/// Bytes hashed at each end of a tensor during its scan.
pub const HEAD: u64 = 64 << 10;

/// A tensor's digest: BLAKE3 of its bytes, fed in order.
#[derive(Default)]
pub struct Hasher(blake3::Hasher);

impl Hasher {
    /// A digest of nothing yet.
    pub fn new() -> Hasher {
        Hasher(blake3::Hasher::new())
    }

    /// Feeds the next bytes.
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// The digest.
    pub fn finish(&self) -> [u8; 32] {
        *self.0.finalize().as_bytes()
    }
}

/// The ends of one tensor of `n_bytes` bytes, gathered from its chunks as they pass, in
/// any order: its first and last [`HEAD`] bytes (the same bytes when it is shorter).
pub struct Ends {
    n_bytes: u64,
    head: u64,
    first: Vec<u8>,
    last: Vec<u8>,
}

impl Ends {
    /// The ends of a tensor of `n_bytes` bytes, none seen yet.
    pub fn new(n_bytes: u64) -> Ends {
        let head = HEAD.min(n_bytes);
        // At most HEAD bytes each.
        let z = alloc::vec![0u8; head as usize];
        Ends { n_bytes, head, first: z.clone(), last: z }
    }

    /// Takes what lies in the ends from `chunk`, the tensor's bytes from offset `at`.
    pub fn feed(&mut self, at: u64, chunk: &[u8]) {
        let end = at.saturating_add(chunk.len() as u64);
        let (n, h) = (self.n_bytes, self.head);
        for (buf, from) in [(&mut self.first, 0), (&mut self.last, n - h)] {
            let (lo, hi) = (at.max(from), end.min(from + h));
            if lo < hi {
                let src = &chunk[(lo - at) as usize..(hi - at) as usize];
                buf[(lo - from) as usize..(hi - from) as usize].copy_from_slice(src);
            }
        }
    }

    /// The digest of the tensor's size and ends (whole when every chunk was fed).
    pub fn digest(&self) -> [u8; 32] {
        let mut h = Hasher::new();
        h.update(&self.n_bytes.to_le_bytes());
        h.update(&self.first);
        h.update(&self.last);
        h.finish()
    }
}

/// Which tensors to hash whole: those whose type, shape and ends' digest (`ends[i]`,
/// `None` when the tensor was not read) another tensor shares.
pub fn hash_whole<T: Borrow<TensorEntry>>(tensors: &[T], ends: &[Option<[u8; 32]>]) -> Vec<bool> {
    let key = |t: &T, e: &[u8; 32]| (t.borrow().ty as u32, t.borrow().dims.clone(), *e);
    let mut groups: BTreeMap<(u32, Vec<u64>, [u8; 32]), usize> = BTreeMap::new();
    for (t, e) in tensors.iter().zip(ends) {
        if let Some(e) = e {
            *groups.entry(key(t, e)).or_default() += 1;
        }
    }
    (tensors.iter().zip(ends))
        .map(|(t, e)| e.as_ref().is_some_and(|e| groups.get(&key(t, e)).copied().unwrap_or(0) >= 2))
        .chain(core::iter::repeat(false))
        .take(tensors.len())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ends gathered from chunks of any size are the bytes at the ends.
    #[test]
    fn ends_from_chunks_equal_the_ends() {
        for n in [0usize, 5, 1000, HEAD as usize, HEAD as usize + 3, 3 * HEAD as usize + 17] {
            let bytes: Vec<u8> = (0..n).map(|i| (i * 7 + i / 251) as u8).collect();
            let h = HEAD.min(n as u64) as usize;
            let mut want = Hasher::new();
            want.update(&(n as u64).to_le_bytes());
            want.update(&bytes[..h]);
            want.update(&bytes[n - h..]);
            for chunk in [1usize, 4096, 70_000, n.max(1)] {
                let mut e = Ends::new(n as u64);
                let mut at = 0;
                for c in bytes.chunks(chunk) {
                    e.feed(at, c);
                    at += c.len() as u64;
                }
                assert_eq!(e.digest(), want.finish(), "{n} bytes in chunks of {chunk}");
            }
        }
    }
}
