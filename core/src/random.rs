//! Seeded random values, the same on every platform: SplitMix64 and standard normals from
//! it (the routers of `organ moe`, the noise of `organ sensitivity --ablate noise`, the test
//! matrices of `organ lora extract`).

/// SplitMix64's state increment γ.
pub(crate) const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's output function of a state (the Z-measure sampler's stream uses it too).
#[inline(always)]
pub(crate) fn finalize(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// FNV-1a, 64 bits.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}

/// Output `k` (from 0) of SplitMix64 seeded with `seed` (Steele, Lea, Flood 2014): its
/// state after `k + 1` steps is `seed + (k + 1) * γ`, so any output is computed directly.
fn splitmix64(seed: u64, k: u64) -> u64 {
    finalize(seed.wrapping_add(k.wrapping_add(1).wrapping_mul(GAMMA)))
}

/// Standard normal value `i` of the stream of `seed`: Box–Muller on SplitMix64 outputs
/// `2i` and `2i + 1`, `u1 = (a >> 11 + 1) / 2^53` in (0, 1], `u2 = (b >> 11) / 2^53` in
/// [0, 1), `sqrt(-2 ln u1) * cos(2π u2)` in f64, rounded to f32.
pub fn normal(seed: u64, i: u64) -> f32 {
    let (a, b) = (splitmix64(seed, i.wrapping_mul(2)), splitmix64(seed, i.wrapping_mul(2).wrapping_add(1)));
    let scale = 1.0 / (1u64 << 53) as f64;
    let u1 = ((a >> 11) + 1) as f64 * scale;
    let u2 = (b >> 11) as f64 * scale;
    (libm::sqrt(-2.0 * libm::log(u1)) * libm::cos(2.0 * core::f64::consts::PI * u2)) as f32
}

/// A seed of a name (64-bit FNV-1a of its bytes), for a stream per tensor.
pub fn seed_of(name: &str) -> u64 {
    fnv1a64(name.as_bytes())
}

/// Uniform value `i` of the stream of `seed` in [0, 1): SplitMix64 output `i` shifted to
/// its top 53 bits, times 2^-53 (exact in f64, so NumPy's `(z >> 11) * 2.0**-53` on the
/// same outputs gives the same value; DARE's drop masks in `merge`).
pub fn uniform(seed: u64, i: u64) -> f64 {
    (splitmix64(seed, i) >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// Output 0 of SplitMix64 seeded with `seed`: a seed of a seed, for one stream per
/// (seed, tensor, model).
pub fn mix(seed: u64) -> u64 {
    splitmix64(seed, 0)
}
