//! numpy's summation, so that our means match the reference to the last bit where the
//! inputs match: `pairwise_sum` from numpy's `loops_utils.h.src` (unrolled by 8, leaves of
//! 128), which `np.sum`/`np.mean` use on contiguous float64 arrays.

const PW_BLOCKSIZE: usize = 128;

/// Pairwise sum of `a`, exactly as numpy computes it.
pub fn pairwise_sum(a: &[f64]) -> f64 {
    pairwise_sum_by(0, a.len(), &|i| a[i])
}

/// Pairwise sum of `f(start) .. f(start + n - 1)`, in numpy's order: the same as
/// materializing the terms in an array and calling `np.sum` on it, without the array.
#[inline]
pub fn pairwise_sum_by<F: Fn(usize) -> f64>(start: usize, n: usize, f: &F) -> f64 {
    if n < 8 {
        let mut res = 0.0;
        for i in start..start + n {
            res += f(i);
        }
        res
    } else if n <= PW_BLOCKSIZE {
        let mut r = [0f64; 8];
        for (j, r) in r.iter_mut().enumerate() {
            *r = f(start + j);
        }
        let mut i = 8;
        while i < n - (n % 8) {
            for (j, r) in r.iter_mut().enumerate() {
                *r += f(start + i + j);
            }
            i += 8;
        }
        let mut res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        while i < n {
            res += f(start + i);
            i += 1;
        }
        res
    } else {
        let mut n2 = n / 2;
        n2 -= n2 % 8;
        pairwise_sum_by(start, n2, f) + pairwise_sum_by(start + n2, n - n2, f)
    }
}

/// `np.mean` of the `n` terms `f(0) .. f(n - 1)`.
#[inline]
pub fn mean_by<F: Fn(usize) -> f64>(n: usize, f: &F) -> f64 {
    (0.0 + pairwise_sum_by(0, n, f)) / n as f64
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
