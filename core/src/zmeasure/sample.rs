//! The Z-measure v1 sampler (§1): FNV-1a 64 of the tensor name seeds a SplitMix64 stream;
//! index_k = high word of z_k × N. Order is irrelevant to the measure, but we keep it, so
//! that sums run in the same order as the reference.

pub use crate::random::fnv1a64;
use crate::random::{finalize, GAMMA};
use alloc::vec::Vec;

/// Values taken from a tensor with more elements than this.
pub const SAMPLE_SIZE: usize = 100_000;

/// Alternate draws per sampled tensor for its uncertainty σ_θ (§7).
pub const DRAWS: usize = 8;

/// The name that seeds alternate draw `k` (1..=[`DRAWS`]) of a tensor called `name` (§7):
/// `NAME@k`, k in decimal. Measuring the tensor under this name gives that draw's θ.
pub fn draw_name(name: &str, k: usize) -> alloc::string::String {
    alloc::format!("{name}@{k}")
}

/// The SplitMix64 stream of the spec.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A stream from `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The next 64 bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GAMMA);
        finalize(self.0)
    }

    /// Fills `out` with the next outputs, each passed through `f`. The k-th output is
    /// `finalize(state + k × GAMMA)`: computed that way, the outputs do not wait on each other
    /// as `next_u64`'s chain of states does, and the loop vectorizes (twice the speed of
    /// calling `next_u64` in a loop, criterion, 100 000 sampler indices).
    #[inline]
    pub fn fill_with(&mut self, out: &mut [u64], f: impl Fn(u64) -> u64) {
        let s0 = self.0;
        for (k, o) in (1u64..).zip(out.iter_mut()) {
            *o = f(finalize(s0.wrapping_add(k.wrapping_mul(GAMMA))));
        }
        self.0 = s0.wrapping_add((out.len() as u64).wrapping_mul(GAMMA));
    }
}

/// The high word of the 128-bit product `a × b` (the spec's `index_k = (z × N) >> 64`).
#[inline]
fn mul_hi(a: u64, b: u64) -> u64 {
    ((u128::from(a) * u128::from(b)) >> 64) as u64
}

/// [`mul_hi`] for `b < 2³²` from two 32 × 64 products: `a × b = a_hi·b·2³² + a_lo·b`, and
/// neither product nor `a_hi·b + (a_lo·b >> 32)` (at most `2⁶⁴ − 2³²`) overflows.
///
/// On wasm32 a u128 product is a call into compiler-rt's full 128 × 128 multiply, and
/// LLVM turns the usual four-product ladder back into one: that call was 12% of the
/// core's time in wasm, and this path takes `bench/wasm-vs-native.sh` from 0.445 s to
/// 0.391 s. Every tensor with fewer than 2³² elements takes it there.
#[inline]
#[cfg_attr(target_pointer_width = "64", allow(dead_code))]
fn mul_hi_small(a: u64, b: u64) -> u64 {
    debug_assert!(b >> 32 == 0);
    ((a >> 32) * b + (((a & 0xFFFF_FFFF) * b) >> 32)) >> 32
}

/// The sampled element indices of a tensor named `name` with `n_total` elements, drawn a
/// chunk at a time.
#[derive(Debug, Clone)]
pub struct Sampler {
    rng: SplitMix64,
    n_total: u64,
}

impl Sampler {
    /// The sampler of a tensor called `name` with `n_total` elements.
    pub fn new(name: &str, n_total: u64) -> Self {
        Sampler { rng: SplitMix64::new(fnv1a64(name.as_bytes())), n_total }
    }

    /// Fills `out` with the next indices.
    #[inline]
    pub fn fill(&mut self, out: &mut [u64]) {
        let n = self.n_total;
        #[cfg(not(target_pointer_width = "64"))]
        if n >> 32 == 0 {
            return self.rng.fill_with(out, |z| mul_hi_small(z, n));
        }
        self.rng.fill_with(out, |z| mul_hi(z, n));
    }
}

/// The `n` sampled element indices of a tensor named `name` with `n_total` elements.
pub fn sample_indices(name: &str, n_total: u64, n: usize) -> Vec<u64> {
    let mut ix = alloc::vec![0; n];
    Sampler::new(name, n_total).fill(&mut ix);
    ix
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Chunked fills continue the stream exactly where `next_u64` would.
        #[test]
        fn fill_with_is_next_u64_in_a_loop(seed in any::<u64>(), chunks in proptest::collection::vec(0usize..300, 1..6)) {
            let (mut a, mut b) = (SplitMix64::new(seed), SplitMix64::new(seed));
            for len in chunks {
                let mut got = alloc::vec![0u64; len];
                a.fill_with(&mut got, |z| z);
                let want: Vec<u64> = (0..len).map(|_| b.next_u64()).collect();
                prop_assert_eq!(got, want);
            }
            prop_assert_eq!(a.next_u64(), b.next_u64());
        }

        #[test]
        fn high_word_of_a_small_factor_is_the_u128_product_s(a in any::<u64>(), b in any::<u32>()) {
            prop_assert_eq!(mul_hi_small(a, u64::from(b)), mul_hi(a, u64::from(b)));
        }
    }

    #[test]
    fn alternate_draws_are_seeded_by_name_at_k() {
        assert_eq!(draw_name("blk.0.ffn_up.weight", 1), "blk.0.ffn_up.weight@1");
        assert_eq!(draw_name("t", 8), "t@8");
        // The seed is FNV-1a of the whole string: "t@1" and "t" draw different indices.
        assert_eq!(fnv1a64(b"t@1"), fnv1a64(draw_name("t", 1).as_bytes()));
        assert_ne!(sample_indices("t@1", 1 << 20, 16), sample_indices("t", 1 << 20, 16));
        // Values from tests/oracle/zref.py's fnv1a64 and sample_indices.
        assert_eq!(fnv1a64(draw_name("a", 1).as_bytes()), 0xe6ac_6819_04df_b72f);
        assert_eq!(
            sample_indices(&draw_name("blk.0.ffn_up.weight", 3), 884_736, 4),
            [789_775, 802_837, 547_476, 96_709]
        );
    }

    #[test]
    fn high_word_of_a_small_factor_at_the_extremes() {
        let max = u64::from(u32::MAX);
        for (a, b) in
            [(u64::MAX, max), (u64::MAX, 1), (1 << 32, max), (0, max), (u64::MAX, 100_001), ((1 << 32) - 1, max)]
        {
            assert_eq!(mul_hi_small(a, b), ((u128::from(a) * u128::from(b)) >> 64) as u64, "{a} × {b}");
        }
    }
}
