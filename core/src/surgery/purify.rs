//! Purification: denoising a tensor's values while keeping its mean and standard
//! deviation. Two methods, defined exactly in `docs/purify.md`:
//!
//! - **spectral** (needs the `std` feature, for rustfft): per row, keep the highest-energy
//!   frequency components up to a fraction `keep` of the row's energy, drop the rest;
//! - **fractal**: a multi-level orthonormal Haar decomposition of the whole tensor
//!   (mirror-padded to a power of two); each detail coefficient is attenuated by how
//!   little energy its parent at the next coarser scale carries (patterns present at
//!   scale s and 2s are signal), scaled by `strength`.
//!
//! Pure functions over f32 values: the CLI dequantizes, calls these, and requantizes.

use alloc::vec;
use alloc::vec::Vec;

/// How to purify.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Method {
    /// Keep the strongest frequency components holding `keep` (0..=1) of each row's energy.
    #[cfg(feature = "std")]
    Spectral {
        /// Fraction of each row's energy to keep; 1.0 keeps everything (identity).
        keep: f64,
    },
    /// Attenuate Haar detail coefficients whose parent scale is weak; 0 is the identity.
    Fractal {
        /// 0..=1: how far an incoherent coefficient is pulled towards 0.
        strength: f64,
    },
}

/// A method's parameter out of its range ([`Method::check`]): it displays as
/// `VALUE: must be a number from 0 to 1`, after the parameter's flag or field.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OutOfRange {
    /// `keep` or `strength`.
    pub parameter: &'static str,
    /// The value given.
    pub value: f64,
}

impl core::fmt::Display for OutOfRange {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}: must be a number from 0 to 1", self.value)
    }
}

impl Method {
    /// Checks the method's parameter: `keep` and `strength` are finite and within 0..=1.
    ///
    /// # Errors
    /// The parameter and the value it got.
    pub fn check(&self) -> Result<(), OutOfRange> {
        let (parameter, value) = match *self {
            #[cfg(feature = "std")]
            Method::Spectral { keep } => ("keep", keep),
            Method::Fractal { strength } => ("strength", strength),
        };
        if value.is_finite() && (0.0..=1.0).contains(&value) {
            Ok(())
        } else {
            Err(OutOfRange { parameter, value })
        }
    }
}

/// Mean and population standard deviation, in f64.
fn mean_std(x: impl Iterator<Item = f64> + Clone) -> (f64, f64) {
    let (mut n, mut s) = (0usize, 0.0);
    for v in x.clone() {
        n += 1;
        s += v;
    }
    let mean = s / n as f64;
    let var = x.map(|v| (v - mean) * (v - mean)).sum::<f64>() / n as f64;
    (mean, libm::sqrt(var))
}

/// Purifies a tensor's `values` (rows of `row_len`). Returns `None`, meaning "leave the
/// tensor as it is", for tensors with non-finite values, fewer than 2 values, zero spread,
/// or a row length that does not divide the values.
pub fn purify(values: &[f32], row_len: usize, method: Method) -> Option<Vec<f32>> {
    if values.len() < 2 || row_len == 0 || values.len() % row_len != 0 || values.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let (mean, std) = mean_std(values.iter().map(|&v| f64::from(v)));
    if std <= 0.0 || !std.is_finite() {
        return None;
    }
    let x: Vec<f64> = values.iter().map(|&v| f64::from(v)).collect();
    let y = match method {
        #[cfg(feature = "std")]
        Method::Spectral { keep } => spectral(&x, row_len, keep.clamp(0.0, 1.0)),
        Method::Fractal { strength } => fractal(&x, strength.clamp(0.0, 1.0)),
    };
    let (my, sy) = mean_std(y.iter().copied());
    if sy <= 0.0 || !sy.is_finite() {
        return None;
    }
    let scale = std / sy;
    Some(y.iter().map(|&v| ((v - my) * scale + mean) as f32).collect())
}

/// `(‖a − b‖², ‖a‖²)`, in f64: what [`relative_l2`] divides, for a caller that sums it
/// over slabs of a tensor.
pub fn l2_sums(a: &[f32], b: &[f32]) -> (f64, f64) {
    let (mut d, mut n) = (0.0f64, 0.0f64);
    for (&x, &y) in a.iter().zip(b) {
        let (x, y) = (f64::from(x), f64::from(y));
        d += (x - y) * (x - y);
        n += x * x;
    }
    (d, n)
}

/// Relative L2 change `‖a − b‖ / ‖a‖`.
pub fn relative_l2(a: &[f32], b: &[f32]) -> f64 {
    let (d, n) = l2_sums(a, b);
    if n > 0.0 {
        libm::sqrt(d / n)
    } else {
        0.0
    }
}

/// Orthonormal Haar analysis of `x` (length a power of two): returns the details of every
/// level, finest first, and the final approximation (length 1).
pub fn haar_forward(x: &[f64]) -> (Vec<Vec<f64>>, f64) {
    let r = core::f64::consts::FRAC_1_SQRT_2;
    let mut a = x.to_vec();
    let mut details = Vec::new();
    while a.len() > 1 {
        let half = a.len() / 2;
        let mut na = Vec::with_capacity(half);
        let mut d = Vec::with_capacity(half);
        for k in 0..half {
            na.push((a[2 * k] + a[2 * k + 1]) * r);
            d.push((a[2 * k] - a[2 * k + 1]) * r);
        }
        details.push(d);
        a = na;
    }
    (details, a.first().copied().unwrap_or(0.0))
}

/// The inverse of [`haar_forward`].
pub fn haar_inverse(details: &[Vec<f64>], approx: f64) -> Vec<f64> {
    let r = core::f64::consts::FRAC_1_SQRT_2;
    let mut a = vec![approx];
    for d in details.iter().rev() {
        let mut na = Vec::with_capacity(2 * a.len());
        for (k, &ak) in a.iter().enumerate() {
            na.push((ak + d[k]) * r);
            na.push((ak - d[k]) * r);
        }
        a = na;
    }
    a
}

/// Mirror-pads `x` to the next power of two: `x₀ … x_{n−1} x_{n−1} x_{n−2} …`.
fn mirror_pad(x: &[f64]) -> Vec<f64> {
    let n = x.len();
    let p = n.next_power_of_two();
    let mut out = Vec::with_capacity(p);
    out.extend_from_slice(x);
    let mut i = 0;
    while out.len() < p {
        out.push(x[n - 1 - (i % n)]);
        i += 1;
    }
    out
}

/// The noise level of orthonormal detail coefficients, estimated from the finest level
/// as `median(|d|) / 0.6745` (Donoho & Johnstone): white noise has the same σ at every
/// scale of an orthonormal transform.
fn noise_sigma(finest: &[f64]) -> f64 {
    let mut a: Vec<f64> = finest.iter().map(|v| v.abs()).collect();
    if a.is_empty() {
        return 0.0;
    }
    a.sort_by(f64::total_cmp);
    let mid = a.len() / 2;
    let median = if a.len() % 2 == 1 { a[mid] } else { (a[mid - 1] + a[mid]) / 2.0 };
    median / 0.6745
}

/// How many noise σ a coefficient (or its parent) must reach to count as structure.
const COHERENCE_SIGMAS: f64 = 3.0;

fn fractal(x: &[f64], strength: f64) -> Vec<f64> {
    let padded = mirror_pad(x);
    let (mut details, approx) = haar_forward(&padded);
    let tau = COHERENCE_SIGMAS * details.first().map_or(0.0, |d| noise_sigma(d));
    if tau > 0.0 {
        // Coarse to fine, reading each parent before its own level is changed.
        for j in (0..details.len().saturating_sub(1)).rev() {
            let (fine, coarse) = details.split_at_mut(j + 1);
            let parent = &coarse[0];
            for (k, c) in fine[j].iter_mut().enumerate() {
                // A pattern present at scale s or at 2s, above the noise, is structure.
                let coherence = (c.abs().max(parent[k / 2].abs()) / tau).min(1.0);
                *c *= 1.0 - strength * (1.0 - coherence);
            }
        }
    }
    let mut y = haar_inverse(&details, approx);
    y.truncate(x.len());
    y
}

#[cfg(feature = "std")]
fn spectral(x: &[f64], row_len: usize, keep: f64) -> Vec<f64> {
    use rustfft::num_complex::Complex;
    let n = row_len;
    let mut planner = rustfft::FftPlanner::<f64>::new();
    let fwd = planner.plan_fft_forward(n);
    let inv = planner.plan_fft_inverse(n);
    let mut out = Vec::with_capacity(x.len());
    let mut buf = vec![Complex::new(0.0, 0.0); n];
    for row in x.chunks_exact(n) {
        for (b, &v) in buf.iter_mut().zip(row) {
            *b = Complex::new(v, 0.0);
        }
        fwd.process(&mut buf);
        // Bins 0..=n/2 stand for themselves and their mirrors n−k (same energy, real input).
        let half = n / 2;
        let weight = |k: usize| if k == 0 || (n % 2 == 0 && k == half) { 1.0 } else { 2.0 };
        let mut bins: Vec<(f64, usize)> = (0..=half).map(|k| (buf[k].norm_sqr() * weight(k), k)).collect();
        let total: f64 = bins.iter().map(|b| b.0).sum();
        bins.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut kept = vec![false; half + 1];
        let mut acc = 0.0;
        for &(e, k) in &bins {
            if acc >= keep * total && keep < 1.0 {
                break;
            }
            kept[k] = true;
            acc += e;
        }
        for (k, b) in buf.iter_mut().enumerate() {
            let bin = if k <= half { k } else { n - k };
            if !kept[bin] {
                *b = Complex::new(0.0, 0.0);
            }
        }
        inv.process(&mut buf);
        out.extend(buf.iter().map(|c| c.re / n as f64));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_range_parameters_are_refused_by_flag() {
        for bad in [f64::NAN, -1.0, 1.5, 1e308, f64::INFINITY] {
            // As the CLI says it: the flag, then the error.
            let flagged = |e: OutOfRange| alloc::format!("--{} {e}", e.parameter);
            let e = flagged(Method::Fractal { strength: bad }.check().unwrap_err());
            assert!(e.starts_with("--strength ") && e.ends_with("must be a number from 0 to 1"), "{e}");
            #[cfg(feature = "std")]
            assert!(flagged(Method::Spectral { keep: bad }.check().unwrap_err()).starts_with("--keep "));
        }
        assert_eq!(Method::Fractal { strength: 0.0 }.check(), Ok(()));
        #[cfg(feature = "std")]
        assert_eq!(Method::Spectral { keep: 1.0 }.check(), Ok(()));
    }

    fn signal(n: usize) -> Vec<f32> {
        (0..n).map(|i| (i as f32 * 0.05).sin() + 0.3 * ((i * 7919) % 13) as f32 / 13.0 - 0.1).collect()
    }

    #[test]
    fn haar_round_trip_is_exact_to_f32_rounding() {
        let x: Vec<f64> = signal(1024).iter().map(|&v| f64::from(v)).collect();
        let (d, a) = haar_forward(&x);
        let y = haar_inverse(&d, a);
        for (p, q) in x.iter().zip(&y) {
            assert_eq!(*p as f32, *q as f32, "{p} vs {q}");
        }
    }

    #[test]
    fn identities_and_preserved_moments() {
        let x = signal(4096);
        let (m0, s0) = mean_std(x.iter().map(|&v| f64::from(v)));
        let f0 = purify(&x, 512, Method::Fractal { strength: 0.0 }).unwrap();
        assert!(relative_l2(&x, &f0) < 1e-6);
        #[cfg(feature = "std")]
        {
            let s1 = purify(&x, 512, Method::Spectral { keep: 1.0 }).unwrap();
            assert!(x.iter().zip(&s1).all(|(a, b)| (a - b).abs() <= 1e-6), "spectral keep=1 is the identity");
            let s9 = purify(&x, 512, Method::Spectral { keep: 0.9 }).unwrap();
            let (m, s) = mean_std(s9.iter().map(|&v| f64::from(v)));
            assert!((m - m0).abs() <= 1e-6 * s0 && (s - s0).abs() <= 1e-6 * s0, "{m} {s} vs {m0} {s0}");
            assert!(relative_l2(&x, &s9) > 1e-3, "keep=0.9 changes something");
        }
        let f = purify(&x, 512, Method::Fractal { strength: 0.8 }).unwrap();
        assert_eq!(Method::Fractal { strength: 0.8 }.check(), Ok(()));
        let (m, s) = mean_std(f.iter().map(|&v| f64::from(v)));
        assert!((m - m0).abs() <= 1e-6 * s0 && (s - s0).abs() <= 1e-6 * s0, "{m} {s} vs {m0} {s0}");
        assert!(relative_l2(&x, &f) > 1e-3);
    }

    #[test]
    fn non_finite_and_degenerate_tensors_are_left_alone() {
        let mut x = signal(64);
        x[3] = f32::NAN;
        assert!(purify(&x, 64, Method::Fractal { strength: 1.0 }).is_none());
        assert!(purify(&[2.0; 64], 64, Method::Fractal { strength: 1.0 }).is_none());
        assert!(purify(&[1.0], 1, Method::Fractal { strength: 1.0 }).is_none());
        assert!(purify(&signal(64), 60, Method::Fractal { strength: 1.0 }).is_none());
    }

    #[test]
    fn fractal_removes_more_noise_than_signal() {
        // A smooth signal plus white noise: purification moves the values towards the
        // smooth signal.
        let n = 8192;
        let clean: Vec<f32> = (0..n).map(|i| (i as f32 * 0.01).sin()).collect();
        let mut s: u64 = 7;
        let noisy: Vec<f32> = clean
            .iter()
            .map(|&c| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                c + ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.2
            })
            .collect();
        let purified = purify(&noisy, n, Method::Fractal { strength: 1.0 }).unwrap();
        assert!(relative_l2(&clean, &purified) < relative_l2(&clean, &noisy));
    }
}
