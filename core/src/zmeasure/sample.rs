//! The Z-measure v1 sampler (§1): FNV-1a 64 of the tensor name seeds a SplitMix64 stream;
//! index_k = high word of z_k × N. Order is irrelevant to the measure, but we keep it, so
//! that sums run in the same order as the reference.

use alloc::vec::Vec;

/// Values taken from a tensor with more elements than this.
pub const SAMPLE_SIZE: usize = 100_000;

/// FNV-1a, 64 bits.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
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
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
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
        for o in out {
            *o = ((u128::from(self.rng.next_u64()) * u128::from(self.n_total)) >> 64) as u64;
        }
    }
}

/// The `n` sampled element indices of a tensor named `name` with `n_total` elements.
pub fn sample_indices(name: &str, n_total: u64, n: usize) -> Vec<u64> {
    let mut ix = alloc::vec![0; n];
    Sampler::new(name, n_total).fill(&mut ix);
    ix
}
