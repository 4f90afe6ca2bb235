//! One tensor's merge, on f32 values, as mergekit's `merge_methods/` computes it:
//! `linear.py` ([`linear`]), `generalized_task_arithmetic.py` with `sparsify.py`
//! ([`task_arithmetic`]: task arithmetic, TIES, DARE linear, DARE TIES) and `slerp.py`
//! ([`slerp`]).
//!
//! Deltas `x − base` are f32 (what mergekit gets from float32 tensors, and what NumPy's
//! float32 subtraction gives bit for bit); every sum, product and norm after that is f64,
//! and each output value is rounded to f32 once. So organ's result is the exact result
//! rounded, whatever the summation order, and the oracle (`tests/oracle/merge_ref.py`,
//! float64 NumPy) agrees with it to an ulp or so.

use super::Method;
use crate::error::{Error, Result};
use crate::random::{mix, seed_of, uniform};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

/// mergekit's `divisor[divisor.abs() < 1e-8] = 1` (task arithmetic without consensus).
const DIVISOR_EPS: f64 = 1e-8;
/// `rescaled_masked_tensor`'s `eps`: below it a norm is not rescaled to.
const RESCALE_EPS: f64 = 1e-7;
/// `slerp`'s `DOT_THRESHOLD`: closer to colinear than this, SLERP is linear.
const DOT_THRESHOLD: f64 = 0.9995;
/// `slerp`'s `normalize` eps: a vector of a smaller norm is not normalized.
const NORM_EPS: f64 = 1e-8;

/// One model's share of a tensor.
#[derive(Debug, Clone, Copy)]
pub struct Part<'a> {
    /// Its values, in the base's order.
    pub values: &'a [f32],
    /// Its weight.
    pub weight: f64,
    /// The fraction of its delta kept (TIES, DARE): in (0, 1].
    pub density: f64,
}

/// The merge-wide settings of the task-arithmetic family.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    /// Divide the mixed delta by the sum of the weights (TIES: of those that agree).
    pub normalize: bool,
    /// Rescale each sparsified delta to its L1 norm before (DARE's 1/density, as mergekit
    /// does it).
    pub rescale: bool,
    /// The mixed delta's factor (mergekit's `lambda`).
    pub lambda: f64,
    /// DARE's seed.
    pub seed: u64,
}

/// Which of a delta's values a sparsification keeps.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Keep {
    /// Every value.
    All,
    /// TIES's magnitude pruning: the `k` largest magnitudes, ties to the lower index (a
    /// stable sort by descending magnitude, cut at `k`): those above `mag`, and those equal
    /// to it up to index `last`.
    Top { mag: f32, last: usize },
    /// DARE's random drop: value `i` is kept when `uniform(stream, i) < density`.
    Random { stream: u64, density: f64 },
}

impl Keep {
    fn keeps(self, i: usize, d: f32) -> bool {
        match self {
            Keep::All => true,
            Keep::Top { mag, last } => {
                let a = d.abs();
                a > mag || (a == mag && i <= last)
            }
            Keep::Random { stream, density } => uniform(stream, i as u64) < density,
        }
    }
}

/// The stream of DARE's drops for model `index` (from 0, the base not counted) of tensor
/// `name`: SplitMix64's first output for `seed ^ fnv1a64(name)`, then for that plus the
/// index (`merge_ref.py` computes the same).
pub fn dare_stream(seed: u64, name: &str, index: usize) -> u64 {
    mix(mix(seed ^ seed_of(name)).wrapping_add(index as u64))
}

/// A model's weight and density, without its values (which a [`Read`] gives).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Share {
    /// Its weight.
    pub weight: f64,
    /// The fraction of its delta kept (TIES, DARE): in (0, 1].
    pub density: f64,
}

/// An input of a streamed merge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    /// The base.
    Base,
    /// The `j`-th model merged (from 0, in the order of the shares).
    Part(usize),
}

/// Reads values `range` of `input` into the vector (replacing what it held). A range
/// always starts and ends on a row of the length the merge was given (or is the whole
/// tensor), so it is whole blocks of any type.
pub type Read<'r> = dyn FnMut(Input, core::ops::Range<usize>, &mut Vec<f32>) -> Result<()> + 'r;

/// The values of every model a streamed merge holds at once, across the models: rows of
/// all of them are read a span at a time, so memory does not grow with their number.
pub const SPAN_VALUES: usize = 1 << 20;

/// The values per span: whole rows, together at most [`SPAN_VALUES`] over `parts` models
/// (one row when a row alone is larger).
fn span(row: usize, parts: usize) -> usize {
    let row = row.max(1);
    (SPAN_VALUES / parts.max(1) / row).max(1) * row
}

/// Reads `range` of `input`, checked to be that many values.
fn read_checked(
    name: &str,
    read: &mut Read<'_>,
    input: Input,
    range: core::ops::Range<usize>,
    into: &mut Vec<f32>,
) -> Result<()> {
    let want = range.len();
    read(input, range, into)?;
    if into.len() != want {
        return Err(bad(name, format!("an input gave {} values, {want} expected", into.len())));
    }
    Ok(())
}

/// Reads span `range` of every model into `buf`, model after model.
fn read_span(
    name: &str,
    read: &mut Read<'_>,
    parts: usize,
    range: core::ops::Range<usize>,
    buf: &mut Vec<f32>,
    one: &mut Vec<f32>,
) -> Result<()> {
    buf.clear();
    for j in 0..parts {
        read_checked(name, read, Input::Part(j), range.clone(), one)?;
        buf.extend_from_slice(one);
    }
    Ok(())
}

/// The values of parts given in memory, as a [`Read`] gives them.
fn from_slices<'a>(
    base: &'a [f32],
    parts: &'a [Part<'a>],
) -> impl FnMut(Input, core::ops::Range<usize>, &mut Vec<f32>) -> Result<()> + 'a {
    move |input, range, into| {
        let v = match input {
            Input::Base => base,
            Input::Part(j) => parts[j].values,
        };
        into.clear();
        into.extend_from_slice(&v[range]);
        Ok(())
    }
}

fn shares(parts: &[Part<'_>]) -> Vec<Share> {
    parts.iter().map(|p| Share { weight: p.weight, density: p.density }).collect()
}

/// `linear.py`: `Σ wᵢ xᵢ`, divided by `Σ wᵢ` when `normalize`.
///
/// # Errors
/// No parts, parts of another length than `out`, or weights summing to 0 under
/// `normalize` (mergekit would write infinities).
pub fn linear(name: &str, parts: &[Part<'_>], normalize: bool, out: &mut [f32]) -> Result<()> {
    same_lengths(name, parts.iter().map(|p| p.values.len()), out.len())?;
    let n = out.len();
    linear_streamed(name, &shares(parts), normalize, n, &mut from_slices(&[], parts), out)
}

/// [`linear`] on models read a span of `row`-value rows at a time: memory holds `out` and
/// [`SPAN_VALUES`] values, whatever the number of models; the result is [`linear`]'s bit
/// for bit (each value's sum runs over the models in the same order).
///
/// # Errors
/// As [`linear`], and a read's error or a read of the wrong length.
pub fn linear_streamed(
    name: &str,
    shares: &[Share],
    normalize: bool,
    row: usize,
    read: &mut Read<'_>,
    out: &mut [f32],
) -> Result<()> {
    if shares.is_empty() {
        return Err(bad(name, String::from("nothing to merge")));
    }
    let total: f64 = shares.iter().map(|p| p.weight).sum();
    if normalize && total.abs() < DIVISOR_EPS {
        return Err(bad(name, format!("the weights sum to {total}, and normalize divides by their sum")));
    }
    let divisor = if normalize { total } else { 1.0 };
    let (n, step) = (out.len(), span(row, shares.len()));
    let (mut buf, mut one) = (Vec::new(), Vec::new());
    for lo in (0..n).step_by(step) {
        let hi = (lo + step).min(n);
        read_span(name, read, shares.len(), lo..hi, &mut buf, &mut one)?;
        let len = hi - lo;
        for (k, o) in out[lo..hi].iter_mut().enumerate() {
            let sum: f64 = shares.iter().enumerate().map(|(j, p)| p.weight * f64::from(buf[j * len + k])).sum();
            *o = (sum / divisor) as f32;
        }
    }
    Ok(())
}

/// `generalized_task_arithmetic.py` for `method` (task arithmetic, TIES, DARE linear or
/// DARE TIES): each part's delta `xᵢ − base` sparsified (TIES: magnitude, DARE: random,
/// then rescaled to its former L1 norm when `rescale`), weighted, TIES's sign election
/// ("sum": the sign of `Σ wᵢ dᵢ`, only the agreeing deltas kept), summed, divided by the
/// (agreeing) weights' sum when `normalize`, times `lambda`, added to the base.
///
/// # Errors
/// No parts, lengths that differ, a density outside (0, 1], a density that keeps no value
/// (mergekit's assert), weights summing to 0 under `normalize` without sign election.
pub fn task_arithmetic(
    name: &str,
    method: Method,
    base: &[f32],
    parts: &[Part<'_>],
    s: &Settings,
    out: &mut [f32],
) -> Result<()> {
    same_lengths(name, parts.iter().map(|p| p.values.len()).chain([base.len()]), out.len())?;
    let n = out.len();
    task_arithmetic_streamed(name, method, &shares(parts), s, n, &mut from_slices(base, parts), out)
}

/// [`task_arithmetic`] on models read as [`linear_streamed`] reads them, bit for bit the
/// same. The base is read whole; a model whose sparsification needs its whole delta (TIES's
/// magnitudes, a rescale's L1 norms) is read whole once first, one model at a time; then
/// every model a span at a time. Memory holds the base, `out`, one model and its
/// magnitudes, and [`SPAN_VALUES`] values, whatever the number of models.
///
/// # Errors
/// As [`task_arithmetic`], and a read's error or a read of the wrong length.
pub fn task_arithmetic_streamed(
    name: &str,
    method: Method,
    shares: &[Share],
    s: &Settings,
    row: usize,
    read: &mut Read<'_>,
    out: &mut [f32],
) -> Result<()> {
    if shares.is_empty() {
        return Err(bad(name, String::from("nothing to merge")));
    }
    let consensus = method.consensus();
    let total: f64 = shares.iter().map(|p| p.weight).sum();
    if s.normalize && !consensus && total.abs() < DIVISOR_EPS {
        return Err(bad(name, format!("the weights sum to {total}, and normalize divides by their sum")));
    }
    let n = out.len();
    let mut base = Vec::new();
    read_checked(name, read, Input::Base, 0..n, &mut base)?;
    let mut keep = Vec::with_capacity(shares.len());
    let mut scale = Vec::with_capacity(shares.len());
    let mut whole = Vec::new();
    for (index, p) in shares.iter().enumerate() {
        if !(p.density > 0.0 && p.density <= 1.0) {
            return Err(bad(name, format!("density {} is outside (0, 1]", p.density)));
        }
        let k = match method {
            _ if p.density >= 1.0 => Keep::All,
            Method::Ties => {
                read_checked(name, read, Input::Part(index), 0..n, &mut whole)?;
                top(name, &base, &whole, p.density)?
            }
            Method::DareLinear | Method::DareTies => {
                Keep::Random { stream: dare_stream(s.seed, name, index), density: p.density }
            }
            _ => Keep::All,
        };
        let sc = if s.rescale && k != Keep::All {
            if method != Method::Ties {
                read_checked(name, read, Input::Part(index), 0..n, &mut whole)?;
            }
            l1_scale(&base, &whole, k)
        } else {
            1.0
        };
        scale.push(sc);
        keep.push(k);
    }
    drop(whole);
    let step = span(row, shares.len());
    let (mut buf, mut one) = (Vec::new(), Vec::new());
    let mut wd = Vec::with_capacity(shares.len());
    for lo in (0..n).step_by(step) {
        let hi = (lo + step).min(n);
        read_span(name, read, shares.len(), lo..hi, &mut buf, &mut one)?;
        let len = hi - lo;
        for (k, o) in out[lo..hi].iter_mut().enumerate() {
            let i = lo + k;
            wd.clear();
            for (j, ((p, &kp), &sc)) in shares.iter().zip(&keep).zip(&scale).enumerate() {
                let d = buf[j * len + k] - base[i];
                // The rescaled delta is f32 in mergekit (masked * before / after).
                let d = if kp.keeps(i, d) { (f64::from(d) * sc) as f32 } else { 0.0 };
                wd.push(p.weight * f64::from(d));
            }
            let (mut mixed, mut divisor) = (0.0f64, 0.0f64);
            if consensus {
                let majority = if wd.iter().sum::<f64>() >= 0.0 { 1.0 } else { -1.0 };
                for (p, &x) in shares.iter().zip(&wd) {
                    if sign(x) == majority {
                        mixed += x;
                        divisor += p.weight;
                    }
                }
                if divisor == 0.0 {
                    divisor = 1.0;
                }
            } else {
                mixed = wd.iter().sum();
                divisor = if total.abs() < DIVISOR_EPS { 1.0 } else { total };
            }
            if s.normalize {
                mixed /= divisor;
            }
            *o = (f64::from(base[i]) + mixed * s.lambda) as f32;
        }
    }
    Ok(())
}

/// `slerp.py`: spherical interpolation from `a` (t = 0) to `b` (t = 1) of the tensors as
/// vectors, each normalized when its norm exceeds 1e-8; linear when they are within
/// `DOT_THRESHOLD` of colinear.
///
/// # Errors
/// Lengths that differ.
pub fn slerp(name: &str, t: f64, a: &[f32], b: &[f32], out: &mut [f32]) -> Result<()> {
    same_lengths(name, [a.len(), b.len()].into_iter(), out.len())?;
    let norm = |v: &[f32]| libm::sqrt(v.iter().map(|&x| f64::from(x) * f64::from(x)).sum::<f64>());
    let (na, nb) = (norm(a), norm(b));
    let (na, nb) = (if na > NORM_EPS { na } else { 1.0 }, if nb > NORM_EPS { nb } else { 1.0 });
    let dot: f64 = a.iter().zip(b).map(|(&x, &y)| (f64::from(x) / na) * (f64::from(y) / nb)).sum();
    let (s0, s1) = if dot.abs() > DOT_THRESHOLD {
        (1.0 - t, t)
    } else {
        let theta0 = libm::acos(dot);
        let sin0 = libm::sin(theta0);
        let theta_t = theta0 * t;
        (libm::sin(theta0 - theta_t) / sin0, libm::sin(theta_t) / sin0)
    };
    for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
        *o = (s0 * f64::from(x) + s1 * f64::from(y)) as f32;
    }
    Ok(())
}

/// `sparsify.magnitude`: keep `k = ⌊density · n⌋` values of the delta, the largest in
/// magnitude (ties to the lower index).
fn top(name: &str, base: &[f32], values: &[f32], density: f64) -> Result<Keep> {
    let n = base.len();
    let k = (density * n as f64) as usize;
    if k == 0 {
        return Err(bad(name, format!("density {density} keeps none of its {n} values")));
    }
    let mut mags: Vec<f32> = values.iter().zip(base).map(|(&x, &b)| (x - b).abs()).collect();
    let (_, &mut mag, _) = mags.select_nth_unstable_by(k - 1, |x, y| y.total_cmp(x));
    let above = values.iter().zip(base).filter(|(&x, &b)| (x - b).abs().total_cmp(&mag).is_gt()).count();
    // Of the values equal to the k-th, the first k − above (by index) are kept.
    let mut equal = k - above;
    let mut last = 0;
    for (i, (&x, &b)) in values.iter().zip(base).enumerate() {
        if equal == 0 {
            break;
        }
        if (x - b).abs() == mag {
            last = i;
            equal -= 1;
        }
    }
    Ok(Keep::Top { mag, last })
}

/// `rescaled_masked_tensor` with the L1 norm: `‖d‖₁ / ‖kept d‖₁`, or 1 when either is
/// below its eps.
fn l1_scale(base: &[f32], values: &[f32], k: Keep) -> f64 {
    let (mut before, mut after) = (0.0f64, 0.0f64);
    for (i, (&x, &b)) in values.iter().zip(base).enumerate() {
        let d = x - b;
        before += f64::from(d.abs());
        if k.keeps(i, d) {
            after += f64::from(d.abs());
        }
    }
    if before < RESCALE_EPS || after < RESCALE_EPS {
        1.0
    } else {
        before / after
    }
}

/// torch.sign: −1, 0 or 1.
fn sign(x: f64) -> f64 {
    if x > 0.0 {
        1.0
    } else if x < 0.0 {
        -1.0
    } else {
        0.0
    }
}

fn same_lengths(name: &str, lens: impl Iterator<Item = usize>, out: usize) -> Result<()> {
    let mut any = false;
    for n in lens {
        any = true;
        if n != out {
            return Err(bad(name, format!("an input of {n} values, {out} expected")));
        }
    }
    if !any {
        return Err(bad(name, String::from("nothing to merge")));
    }
    Ok(())
}

fn bad(tensor: &str, reason: String) -> Error {
    Error::BadLayout { tensor: tensor.into(), reason }
}
