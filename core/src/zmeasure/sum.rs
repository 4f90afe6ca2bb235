//! numpy's summation, so that our means match the reference to the last bit where the
//! inputs match: `pairwise_sum` from numpy's `loops_utils.h.src` (unrolled by 8, leaves of
//! 128), which `np.sum`/`np.mean` use on contiguous float64 arrays.

const PW_BLOCKSIZE: usize = 128;

/// Pairwise sum of `a`, exactly as numpy computes it.
pub fn pairwise_sum(a: &[f64]) -> f64 {
    let n = a.len();
    if n < 8 {
        let mut res = 0.0;
        for &x in a {
            res += x;
        }
        res
    } else if n <= PW_BLOCKSIZE {
        let mut r = [0f64; 8];
        r.copy_from_slice(&a[..8]);
        let mut i = 8;
        while i < n - (n % 8) {
            for j in 0..8 {
                r[j] += a[i + j];
            }
            i += 8;
        }
        let mut res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        while i < n {
            res += a[i];
            i += 1;
        }
        res
    } else {
        let mut n2 = n / 2;
        n2 -= n2 % 8;
        pairwise_sum(&a[..n2]) + pairwise_sum(&a[n2..])
    }
}

/// `np.mean` of a non-empty slice: `0 + pairwise_sum / n`.
pub fn mean(a: &[f64]) -> f64 {
    (0.0 + pairwise_sum(a)) / a.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairwise_is_exact_on_integers() {
        for n in [0usize, 1, 7, 8, 9, 127, 128, 129, 1000, 100_001] {
            let v: alloc::vec::Vec<f64> = (0..n).map(|i| i as f64).collect();
            let want = (n * n.saturating_sub(1) / 2) as f64;
            assert_eq!(pairwise_sum(&v), want, "n={n}");
        }
    }
}
