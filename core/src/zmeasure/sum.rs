//! numpy's summation, so that our means match the reference to the last bit where the
//! inputs match: `pairwise_sum` from numpy's `loops_utils.h.src` (unrolled by 8, leaves of
//! 128), which `np.sum`/`np.mean` use on contiguous float64 arrays.

const PW_BLOCKSIZE: usize = 128;

/// Pairwise sum of `a`, exactly as numpy computes it.
pub fn pairwise_sum(a: &[f64]) -> f64 {
    let [s] = pairwise(0, a.len(), &|i| [a[i]], &|i| {
        let c = &a[i..i + 8];
        [core::array::from_fn(|j| c[j])]
    });
    s
}

/// `K` pairwise sums over the same `n` indices `start..start + n`, in numpy's order: the
/// same bits as materializing each sum's terms in an array and calling `np.sum` on it,
/// without the arrays, and with one walk over the indices for all `K`.
///
/// `one(i)` gives the `K` terms at index `i`; `eight(i)` the terms at `i .. i + 8`, which
/// numpy's unrolled loop adds lane by lane into eight partial sums. Reading the terms
/// eight at a time, from a slice checked once, lets the compiler keep the eight partial
/// sums in vector registers: each lane still adds its terms in numpy's order, so the
/// bits do not change.
#[inline]
pub fn pairwise<const K: usize, F1, F8>(start: usize, n: usize, one: &F1, eight: &F8) -> [f64; K]
where
    F1: Fn(usize) -> [f64; K],
    F8: Fn(usize) -> [[f64; 8]; K],
{
    if n < 8 {
        let mut res = [0.0; K];
        for i in start..start + n {
            let t = one(i);
            for k in 0..K {
                res[k] += t[k];
            }
        }
        res
    } else if n <= PW_BLOCKSIZE {
        let mut r = eight(start);
        let mut i = 8;
        while i < n - (n % 8) {
            let t = eight(start + i);
            for k in 0..K {
                for j in 0..8 {
                    r[k][j] += t[k][j];
                }
            }
            i += 8;
        }
        let mut res: [f64; K] = core::array::from_fn(|k| {
            ((r[k][0] + r[k][1]) + (r[k][2] + r[k][3])) + ((r[k][4] + r[k][5]) + (r[k][6] + r[k][7]))
        });
        while i < n {
            let t = one(start + i);
            for k in 0..K {
                res[k] += t[k];
            }
            i += 1;
        }
        res
    } else {
        let mut n2 = n / 2;
        n2 -= n2 % 8;
        let a = pairwise(start, n2, one, eight);
        let b = pairwise(start + n2, n - n2, one, eight);
        core::array::from_fn(|k| a[k] + b[k])
    }
}

/// `np.mean` of the `n` terms at `0 .. n` (see [`pairwise`] for `one` and `eight`).
#[inline]
pub fn mean<F1, F8>(n: usize, one: &F1, eight: &F8) -> f64
where
    F1: Fn(usize) -> [f64; 1],
    F8: Fn(usize) -> [[f64; 8]; 1],
{
    let [s] = pairwise(0, n, one, eight);
    (0.0 + s) / n as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;
    use proptest::prelude::*;

    /// numpy's `pairwise_sum` (`loops_utils.h.src`), transcribed line by line.
    fn numpy_pairwise(a: &[f64]) -> f64 {
        let n = a.len();
        if n < 8 {
            let mut res = 0.0;
            for &v in a {
                res += v;
            }
            res
        } else if n <= PW_BLOCKSIZE {
            let mut r = [a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]];
            let mut i = 8;
            while i < n - (n % 8) {
                r[0] += a[i];
                r[1] += a[i + 1];
                r[2] += a[i + 2];
                r[3] += a[i + 3];
                r[4] += a[i + 4];
                r[5] += a[i + 5];
                r[6] += a[i + 6];
                r[7] += a[i + 7];
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
            numpy_pairwise(&a[..n2]) + numpy_pairwise(&a[n2..])
        }
    }

    proptest! {
        /// Eight terms at a time, and two sums in one walk, give numpy's bits.
        #[test]
        fn bit_identical_to_numpy(a in proptest::collection::vec(-1e6f64..1e6, 0..2000)) {
            let b: Vec<f64> = a.iter().map(|v| v * 0.37 - 1.0).collect();
            prop_assert_eq!(pairwise_sum(&a).to_bits(), numpy_pairwise(&a).to_bits());
            let [x, y] = pairwise(0, a.len(), &|i| [a[i], b[i]], &|i| {
                [core::array::from_fn(|j| a[i + j]), core::array::from_fn(|j| b[i + j])]
            });
            prop_assert_eq!((x.to_bits(), y.to_bits()), (numpy_pairwise(&a).to_bits(), numpy_pairwise(&b).to_bits()));
        }
    }

    #[test]
    fn pairwise_is_exact_on_integers() {
        for n in [0usize, 1, 7, 8, 9, 127, 128, 129, 1000, 100_001] {
            let v: alloc::vec::Vec<f64> = (0..n).map(|i| i as f64).collect();
            let want = (n * n.saturating_sub(1) / 2) as f64;
            assert_eq!(pairwise_sum(&v), want, "n={n}");
        }
    }
}
