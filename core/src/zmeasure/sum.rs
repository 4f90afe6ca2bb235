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

/// Two pairwise sums over the same `n` indices in one traversal: the same tree as two
/// separate [`pairwise_sum_by`] calls, so the same bits, with half the index walks.
#[inline]
pub fn pairwise_sum2_by<F: Fn(usize) -> (f64, f64)>(start: usize, n: usize, f: &F) -> (f64, f64) {
    if n < 8 {
        let (mut a, mut b) = (0.0, 0.0);
        for i in start..start + n {
            let (x, y) = f(i);
            a += x;
            b += y;
        }
        (a, b)
    } else if n <= PW_BLOCKSIZE {
        let (mut r, mut s) = ([0f64; 8], [0f64; 8]);
        for j in 0..8 {
            (r[j], s[j]) = f(start + j);
        }
        let mut i = 8;
        while i < n - (n % 8) {
            for j in 0..8 {
                let (x, y) = f(start + i + j);
                r[j] += x;
                s[j] += y;
            }
            i += 8;
        }
        let mut a = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        let mut b = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
        while i < n {
            let (x, y) = f(start + i);
            a += x;
            b += y;
            i += 1;
        }
        (a, b)
    } else {
        let mut n2 = n / 2;
        n2 -= n2 % 8;
        let (a1, b1) = pairwise_sum2_by(start, n2, f);
        let (a2, b2) = pairwise_sum2_by(start + n2, n - n2, f);
        (a1 + a2, b1 + b2)
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
