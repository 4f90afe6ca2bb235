//! LSD radix sort of f32 values: three passes of 11 bits over order-preserving u32 keys.
//! On the 100 000 values of a Z-measure sample it is several times faster than a
//! comparison sort, and 25% faster than radsort's four 8-bit passes (bench `zmeasure`).
//! The order is `f32::total_cmp`'s (so -0 sorts before +0).

use alloc::vec;

const BITS: u32 = 11;
const BUCKETS: usize = 1 << BITS;
const PASSES: usize = 3;

#[inline]
fn key(v: f32) -> u32 {
    let b = v.to_bits();
    if b & 0x8000_0000 != 0 {
        !b
    } else {
        b | 0x8000_0000
    }
}

#[inline]
fn value(k: u32) -> f32 {
    f32::from_bits(if k & 0x8000_0000 != 0 { k & 0x7FFF_FFFF } else { !k })
}

/// A sorted copy of `x` (ascending, `f32::total_cmp` order); `x` is left as it is.
pub fn sorted_f32(x: &[f32]) -> alloc::vec::Vec<f32> {
    // Counts are u32: longer inputs (never a Z-measure sample) take the comparison sort.
    if x.len() < 64 || x.len() > u32::MAX as usize {
        let mut v = x.to_vec();
        v.sort_unstable_by(f32::total_cmp);
        return v;
    }
    let mut a: alloc::vec::Vec<u32> = x.iter().map(|&v| key(v)).collect();
    let mut b = vec![0u32; a.len()];
    // u32 counts keep the three histograms (24 KiB) inside L1.
    let mut hist = [[0u32; BUCKETS]; PASSES];
    for &k in &a {
        for (p, h) in hist.iter_mut().enumerate() {
            h[((k >> (BITS * p as u32)) as usize) & (BUCKETS - 1)] += 1;
        }
    }
    for (p, h) in hist.iter_mut().enumerate() {
        // A pass where every key has the same digit changes nothing.
        if h.iter().any(|&c| c as usize == a.len()) {
            continue;
        }
        let mut sum = 0u32;
        for c in h.iter_mut() {
            let n = *c;
            *c = sum;
            sum += n;
        }
        let shift = BITS * p as u32;
        for &k in &a {
            let d = ((k >> shift) as usize) & (BUCKETS - 1);
            b[h[d] as usize] = k;
            h[d] += 1;
        }
        core::mem::swap(&mut a, &mut b);
    }
    a.into_iter().map(value).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn sorts_like_total_cmp(bits in proptest::collection::vec(any::<u32>(), 0..3000)) {
            let x: Vec<f32> = bits.iter().map(|&b| f32::from_bits(b)).collect();
            let mut want = x.clone();
            want.sort_by(f32::total_cmp);
            let x = sorted_f32(&x);
            let got: Vec<u32> = x.iter().map(|v| v.to_bits()).collect();
            let want: Vec<u32> = want.iter().map(|v| v.to_bits()).collect();
            prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn narrow_ranges_skip_passes_and_stay_sorted() {
        let x: Vec<f32> = (0..5000).map(|i| ((i * 7919) % 5000) as f32 * 0.5 - 100.0).collect();
        let x = sorted_f32(&x);
        assert!(x.windows(2).all(|w| w[0] <= w[1]));
    }
}
