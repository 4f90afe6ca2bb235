//! An adapter measured as a model of its updates: one row per pair, ΔW named
//! `TARGET.lora` and measured by Z-measure v1 as a tensor of that name and shape (§1–3;
//! its draws, §7, under [`Mode::Sigma`]), with the figures only an update has
//! ([`Update`]). ΔW's sampled elements are computed from its factors ([`sample`]);
//! only [`Mode::Exact`], θ over every value, makes it whole.

pub use super::adapter_figures::{Facts, Update};
use super::{ModelReport, TensorReport};
use crate::error::Result;
use crate::ggml_type::GgmlType;
use crate::lora::{Adapter, Factors, Pair};
use crate::model::Model;
use crate::zmeasure::{draw_name, measure_values, Draws, Measurement, Mode, Sampler, DRAWS, SAMPLE_SIZE};
use alloc::vec::Vec;

/// ΔW of `f` measured in `mode` as a tensor called `name`: θ of its sample, and the θ of
/// its alternate draws in [`Mode::Sigma`] when it is sampled (N > [`SAMPLE_SIZE`]).
pub fn measure(name: &str, f: &Factors, mode: Mode) -> (Measurement, Option<Draws>) {
    if mode == Mode::Exact {
        let all = (0..f.rows).flat_map(|i| (0..f.cols).map(move |j| (i, j))).map(|(i, j)| f.element(i, j));
        return (measure_values(all.collect()), None);
    }
    let m = measure_values(sample(f, name));
    if mode != Mode::Sigma || f.n_elements() <= SAMPLE_SIZE as u64 {
        return (m, None);
    }
    let mut draws = [0.0; DRAWS];
    for (k, d) in (1..).zip(draws.iter_mut()) {
        *d = measure_values(sample(f, &draw_name(name, k))).theta;
    }
    (m, Some(draws))
}

/// The report's row for `pair` of `adapter`: ΔW's name, the shape of the weight it
/// updates, the bytes of its two halves, its measurement in `mode`, and `update`.
pub fn row(
    pair: &Pair,
    halves_bytes: u64,
    measured: &(Measurement, Option<Draws>),
    mode: Mode,
    update: Update,
) -> TensorReport {
    let mut r =
        TensorReport::from_parts(&pair.delta_name(), GgmlType::F32, &pair.shape(), halves_bytes, Some(&measured.0))
            .in_mode(mode, measured.1.as_ref());
    r.update = Some(update);
    r
}

/// The [`Update`] of `pair` from its factors, and ‖W‖_F of its weight in the base.
pub fn update(pair: &Pair, f: &Factors, base_frobenius: Option<f64>) -> Update {
    Update { rank: pair.rank, scale: f.scale, frobenius: f.frobenius(), base_frobenius }
}

/// The report's row for pair `i` of `adapter` (at user scale 1, as `--lora` applies it),
/// from the bytes of its two halves, each read whole (`a`: the bytes of `lora_a`, of type
/// `a_ty`; `b`: `lora_b`'s), measured in `mode`; `base_frobenius` is ‖W‖_F of the
/// weight it updates, when a base was given ([`weight_frobenius`]). The one path from a
/// pair's bytes to its row, for every front end.
///
/// # Errors
/// A half whose type has no dequantizer or whose bytes are not the size of its shape
/// ([`Factors::of`]).
pub fn pair_row(
    adapter: &Adapter,
    i: usize,
    (a_ty, a): (GgmlType, &[u8]),
    (b_ty, b): (GgmlType, &[u8]),
    mode: Mode,
    base_frobenius: Option<f64>,
) -> Result<TensorReport> {
    let p = &adapter.pairs[i];
    let f = Factors::of(p, a_ty, a, b_ty, b, adapter.scale(p.rank, 1.0))?;
    let measured = measure(&p.delta_name(), &f, mode);
    let halves = (a.len() as u64).saturating_add(b.len() as u64);
    Ok(row(p, halves, &measured, mode, update(p, &f, base_frobenius)))
}

/// ‖W‖_F of a base's weight of type `ty` from its bytes, read whole.
///
/// # Errors
/// A type without a dequantizer, or bytes that are not whole blocks.
pub fn weight_frobenius(ty: GgmlType, bytes: &[u8]) -> Result<f64> {
    Ok(frobenius_of(&crate::quant::dequantize(ty, bytes)?))
}

/// The adapter's report as one model's: `rows` (from [`pair_row`], in pair order) under
/// the adapter's facts, measured against the base labelled `base` if one was given.
pub fn report<T>(
    adapter: &Adapter,
    label: &str,
    m: &Model<T>,
    file_bytes: u64,
    rows: Vec<TensorReport>,
    base: Option<&str>,
) -> ModelReport {
    let mut r = ModelReport::new(label, m, file_bytes, rows);
    r.adapter = Some(adapter.facts(base));
    r
}

impl Adapter {
    /// The facts of the adapter for a report, measured against `base` (its label) if given.
    pub fn facts(&self, base: Option<&str>) -> Facts {
        Facts {
            alpha: self.alpha,
            ranks: self.ranks(),
            pairs: self.pairs.len() as u64,
            invocation_tokens: self.invocation_tokens,
            base: base.map(alloc::borrow::ToOwned::to_owned),
        }
    }
}

/// ‖W‖_F of a weight's values, in f64.
pub fn frobenius_of(values: &[f32]) -> f64 {
    libm::sqrt(values.iter().map(|&v| f64::from(v) * f64::from(v)).sum())
}

/// The values of ΔW that Z-measure v1 samples of a tensor called `name` with ΔW's
/// shape (§1): every element in order when there are at most [`SAMPLE_SIZE`], else the
/// sampler's indices, each element computed from its two rows.
pub fn sample(f: &Factors, name: &str) -> Vec<f32> {
    let n = f.n_elements();
    let wide = Wide::of(f);
    if n <= SAMPLE_SIZE as u64 {
        return (0..n).map(|x| wide.at(x)).collect();
    }
    let mut sampler = Sampler::new(name, n);
    let mut chunk = [0u64; 1000];
    let mut out = Vec::with_capacity(SAMPLE_SIZE);
    let mut at = [(0usize, 0usize); 1000];
    while out.len() < SAMPLE_SIZE {
        sampler.fill(&mut chunk);
        for (p, &x) in at.iter_mut().zip(&chunk) {
            *p = wide.position(x);
        }
        out.extend(at.iter().map(|&(i, j)| wide.dot(i, j)));
    }
    out
}

/// The factors in f64, for computing many elements: no conversion in the inner loop
/// (twice the speed of converting each pair of values, on SmolLM2's adapters).
struct Wide {
    l: Vec<f64>,
    r: Vec<f64>,
    rank: usize,
    cols: u64,
    inv_cols: f64,
    scale: f64,
}

impl Wide {
    fn of(f: &Factors) -> Wide {
        let wide = |v: &[f32]| v.iter().map(|&x| f64::from(x)).collect();
        let cols = f.cols as u64;
        Wide { l: wide(&f.l), r: wide(&f.r), rank: f.rank, cols, inv_cols: 1.0 / cols.max(1) as f64, scale: f.scale }
    }

    /// Element `x` of ΔW in row-major order (`x < rows · cols`), as
    /// [`Factors::element`].
    #[inline(always)]
    fn at(&self, x: u64) -> f32 {
        let (i, j) = self.position(x);
        self.dot(i, j)
    }

    /// The row and column of element `x` in row-major order, found without a 64-bit
    /// division (a multiply by 1/cols in f64, exact below 2^53, then corrected by one
    /// either way).
    #[inline(always)]
    fn position(&self, x: u64) -> (usize, usize) {
        let cols = self.cols;
        // Through i64, whose conversions to and from f64 are one instruction each (x and
        // the row are far below 2^63).
        let mut i = ((x as i64) as f64 * self.inv_cols) as i64 as u64;
        if i * cols > x {
            i -= 1;
        } else if x - i * cols >= cols {
            i += 1;
        }
        (i as usize, (x - i * cols) as usize)
    }

    /// Element (i, j): the dot product of L's row i and R's row j, times the scale.
    #[inline(always)]
    fn dot(&self, i: usize, j: usize) -> f32 {
        let k = self.rank;
        let (a, b) = (&self.l[i * k..(i + 1) * k], &self.r[j * k..(j + 1) * k]);
        (self.scale * dot(a, b)) as f32
    }
}

/// The dot product of two rows as [`crate::lora::Factors::element`] sums it: four
/// running sums, then the tail.
#[inline(always)]
fn dot(a: &[f64], b: &[f64]) -> f64 {
    let mut acc = [0f64; 4];
    let (ca, cb) = (a.chunks_exact(4), b.chunks_exact(4));
    let tail: f64 = ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in ca.zip(cb) {
        for t in 0..4 {
            acc[t] += x[t] * y[t];
        }
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lora::Pair;
    use alloc::vec::Vec;

    fn values(n: usize, seed: u64) -> Vec<f32> {
        (0..n as u64).map(|i| crate::random::normal(seed, i)).collect()
    }

    fn bytes(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    /// ΔW from numpy-shaped B (n_out × r) and A (r × n_in), in f64 rounded once.
    fn dense(b: &[f32], a: &[f32], n_out: usize, r: usize, n_in: usize, scale: f64) -> Vec<f32> {
        let mut d = alloc::vec![0f32; n_out * n_in];
        for o in 0..n_out {
            for j in 0..n_in {
                let s: f64 = (0..r).map(|k| f64::from(b[o * r + k]) * f64::from(a[k * n_in + j])).sum();
                d[o * n_in + j] = (scale * s) as f32;
            }
        }
        d
    }

    #[test]
    fn a_large_update_is_sampled_as_a_tensor_of_its_name() {
        let (n_out, r, n_in) = (400, 2, 300);
        let (a, b) = (values(r * n_in, 5), values(n_out * r, 6));
        let pair = Pair { target: "w".into(), a: 0, b: 1, rank: 2, rows: 400, cols: 300, embedding: false };
        let f = Factors::of(&pair, GgmlType::F32, &bytes(&a), GgmlType::F32, &bytes(&b), 2.0).unwrap();
        let all = dense(&b, &a, n_out, r, n_in, 2.0);
        let ix = crate::zmeasure::sample_indices("w.lora", all.len() as u64, crate::zmeasure::SAMPLE_SIZE);
        let want: Vec<f32> = ix.iter().map(|&i| all[i as usize]).collect();
        assert_eq!(sample(&f, "w.lora"), want);
        let small =
            Factors { rows: 3, cols: 2, rank: 1, l: alloc::vec![1.0, 2.0, 3.0], r: alloc::vec![1.0, -1.0], scale: 0.5 };
        assert_eq!(sample(&small, "x"), [0.5, -0.5, 1.0, -1.0, 1.5, -1.5]);
    }
}
