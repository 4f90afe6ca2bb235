//! Experts (§6 of `docs/z-measure.md`): an expert tensor (`_exps`, dims [d0, d1, E]) is E
//! experts laid end to end, expert e being elements e·d0·d1 … (e+1)·d0·d1 − 1, a contiguous
//! byte range. Each expert's θ is §1–3 over its slice under the sampler name `NAME#e`
//! (its σ under `NAME#e@k`, §7); the tensor's own θ is unchanged. Per tensor, the experts'
//! θ mark `outlier`s (median and MAD) and byte-identical experts `duplicate_of` the lowest
//! one.
//!
//! The front ends measure the slices their own way (a memory map: [`measure_expert`];
//! reads of the sampled blocks: [`expert_plan`]), find duplicates with a
//! [`DuplicateSearch`] fed the bytes it asks for, and turn both into report rows with
//! [`expert_rows`].

use super::{measure_tensor_in, Draws, Measurement, Mode, ReadPlan};
use crate::error::{Error, Result};
use crate::model::TensorEntry;
use crate::GgmlType;
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use serde::{Deserialize, Serialize};

/// How an expert tensor divides into experts (Z-measure v1 §6; Compare v1 §3): `count`
/// experts of `elements` elements and `bytes` bytes each, expert e at byte `e × bytes` of
/// the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExpertLayout {
    /// E, the last dimension.
    pub count: u64,
    /// d0 · d1.
    pub elements: u64,
    /// Bytes per expert.
    pub bytes: u64,
}

impl ExpertLayout {
    /// The layout of `t`, when it is an expert tensor: its name contains `_exps` and it has
    /// three dims. `None` otherwise.
    ///
    /// # Errors
    /// [`Error::BadLayout`] when its rows are not whole quant blocks, its data is not
    /// E equal slices (a file whose header says one thing and whose sizes another), or E
    /// is over [`crate::limits::MAX_EXPERTS`].
    pub fn of(t: &TensorEntry) -> Result<Option<ExpertLayout>> {
        let [d0, d1, e] = t.dims[..] else { return Ok(None) };
        if !t.name.contains("_exps") || e == 0 {
            return Ok(None);
        }
        let bad = |reason: String| Err(Error::BadLayout { tensor: t.name.clone(), reason });
        if e > crate::limits::MAX_EXPERTS {
            return bad(format!("{e} experts, more than the limit {}", crate::limits::MAX_EXPERTS));
        }
        let bs = t.ty.block_size() as u64;
        if bs == 0 || d0 % bs != 0 {
            return bad(format!("expert rows of {d0} elements are not whole blocks of {bs}"));
        }
        let elements = d0.saturating_mul(d1);
        let bytes = (elements / bs).saturating_mul(t.ty.type_size() as u64);
        if bytes.checked_mul(e) != Some(t.n_bytes) {
            return bad(format!("{} bytes are not {e} experts of {bytes} bytes", t.n_bytes));
        }
        Ok(Some(ExpertLayout { count: e, elements, bytes }))
    }

    /// [`ExpertLayout::of`] for a measure of every expert: a tensor named as an expert
    /// tensor (`_exps`) that is not one (not three dims, or no experts) is an error rather
    /// than a tensor measured whole only, since a reader asked for its experts.
    ///
    /// # Errors
    /// As [`ExpertLayout::of`], and [`Error::BadLayout`] for such a tensor.
    pub fn required(t: &TensorEntry) -> Result<Option<ExpertLayout>> {
        if !t.name.contains("_exps") {
            return Ok(None);
        }
        let bad = |reason: String| Err(Error::BadLayout { tensor: t.name.clone(), reason });
        match t.dims[..] {
            [_, _, 0] => bad(format!("an expert tensor of shape {:?} has no experts", t.dims)),
            [_, _, _] => ExpertLayout::of(t),
            _ => bad(format!("an expert tensor has {} dims {:?}, not 3 [d0, d1, experts]", t.dims.len(), t.dims)),
        }
    }

    /// Expert `e`'s byte range in the tensor's data.
    pub fn range(&self, e: u64) -> core::ops::Range<u64> {
        e * self.bytes..(e + 1) * self.bytes
    }

    /// Expert `e`'s bytes in `data`, the whole tensor's.
    ///
    /// # Errors
    /// [`Error::SizeMismatch`] when `data` is too short to hold it.
    pub fn slice<'a>(&self, data: &'a [u8], e: u64) -> Result<&'a [u8]> {
        let r = self.range(e);
        let got = data.len() as u64;
        let err = Error::SizeMismatch { what: "expert tensor bytes", expected: r.end, got };
        let (Ok(start), Ok(end)) = (usize::try_from(r.start), usize::try_from(r.end)) else { return Err(err) };
        data.get(start..end).ok_or(err)
    }
}

/// The sampler name of expert `e` of tensor `name` (Z-measure v1 §6): `NAME#e`.
pub fn expert_name(name: &str, e: u64) -> String {
    format!("{name}#{e}")
}

/// Measures expert `e` of the `ty` expert tensor `name` (whole bytes `data`) in `mode`:
/// its θ under `NAME#e`, its alternate draws under `NAME#e@k` ([`Mode::Sigma`]), or θ over
/// all its values ([`Mode::Exact`]).
///
/// # Errors
/// As [`super::measure_tensor`]; [`Error::SizeMismatch`] when `data` does not hold expert e.
pub fn measure_expert(
    mode: Mode,
    name: &str,
    ty: GgmlType,
    layout: &ExpertLayout,
    e: u64,
    data: &[u8],
) -> Result<(Measurement, Option<Draws>)> {
    measure_tensor_in(mode, &expert_name(name, e), ty, layout.elements, layout.slice(data, e)?)
}

/// For callers that read bytes themselves: the plan of expert `e`'s sample (`draw` 0, seed
/// `NAME#e`), of its alternate draw `draw` (seed `NAME#e@draw`), or, in [`Mode::Exact`], of
/// all its values; and where expert e's bytes start in the tensor's data (the plan's
/// offsets are from there). `max_gap` and `max_len` as [`ReadPlan::new`].
///
/// # Errors
/// As [`ReadPlan::new`].
#[allow(clippy::too_many_arguments)]
pub fn expert_plan(
    mode: Mode,
    name: &str,
    ty: GgmlType,
    layout: &ExpertLayout,
    e: u64,
    draw: usize,
    max_gap: u64,
    max_len: u64,
) -> Result<(ReadPlan, u64)> {
    let seed = match draw {
        0 => expert_name(name, e),
        k => super::draw_name(&expert_name(name, e), k),
    };
    let plan = match mode {
        Mode::Exact => ReadPlan::exact(ty, layout.elements, max_len)?,
        _ => ReadPlan::new(&seed, ty, layout.elements, max_gap, max_len)?,
    };
    Ok((plan, layout.range(e).start))
}

/// One expert's row in a report (§6, §7).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExpertTheta {
    /// e, 0-based.
    pub expert: u64,
    /// θ in degrees of the slice under the name `NAME#e` (0 when degenerate).
    pub theta: f64,
    /// Fewer than 2 finite values, or all equal.
    pub degenerate: bool,
    /// σ_θ over the draws `NAME#e@k` (§7), when asked for; 0 when every value was used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sigma: Option<f64>,
    /// |θ − median| over 3 × MAD of the tensor's experts (§6).
    pub outlier: bool,
    /// The lowest-numbered expert of the same tensor with identical bytes, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duplicate_of: Option<u64>,
    /// What it is among its tensor's experts, as the displays mark it ([`Standing`]; set
    /// by [`set_standings`] once the tensor's rows are known).
    #[serde(default)]
    pub standing: Standing,
}

/// The report rows of a tensor's experts: each one's measurement and draws, and each one's
/// `duplicate_of` ([`DuplicateSearch`]). With `with_sigma`, each row has σ_θ (0 for an
/// expert measured on every value).
pub fn expert_rows(
    measured: &[(Measurement, Option<Draws>)],
    duplicate_of: &[Option<u64>],
    with_sigma: bool,
) -> Vec<ExpertTheta> {
    let thetas: Vec<f64> = measured.iter().map(|(m, _)| m.theta).collect();
    let out = outliers(&thetas);
    (0u64..)
        .zip(measured.iter().zip(out))
        .map(|(e, ((m, d), outlier))| ExpertTheta {
            expert: e,
            theta: m.theta,
            degenerate: m.degenerate,
            sigma: with_sigma.then(|| d.as_ref().map_or(0.0, |d| super::population_std(d))),
            outlier,
            duplicate_of: duplicate_of.get(e as usize).copied().flatten(),
            standing: Standing::Typical,
        })
        .collect()
}

/// The median of `x` (for an even count, the mean of the two middle values); 0 for none.
pub fn median(x: &[f64]) -> f64 {
    let mut s = x.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => s[n / 2],
        _ => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

/// §6's outliers among a tensor's per-expert θ: with m their median and MAD the median of
/// |θ_e − m| (unscaled), expert e is one when MAD > 0 and |θ_e − m| > 3 × MAD.
pub fn outliers(thetas: &[f64]) -> Vec<bool> {
    let m = median(thetas);
    let dev: Vec<f64> = thetas.iter().map(|t| (t - m).abs()).collect();
    let mad = median(&dev);
    dev.iter().map(|&d| mad > 0.0 && d > 3.0 * mad).collect()
}

/// What an expert is among its tensor's experts, as every display marks it and the JSON
/// report gives it (`standing`). §6's `outlier` is a fact about the θ figures (over 3 MAD
/// from the median), and the reports keep it as such; an expert is called an outlier only
/// when that distance is beyond the sampling noise of its θ and it is not byte-identical
/// to another one: identical bytes whose θ differ show the noise, not an outlier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Standing {
    /// Not a §6 outlier: within its tensor's spread.
    #[default]
    Typical,
    /// Byte-identical to another expert of its tensor (`duplicate_of` it, or it of this
    /// one), whatever its θ.
    Copy,
    /// A §6 outlier within twice its σ_θ of the median (the larger of its own σ and the
    /// median σ of its tensor's experts, as §7 compares two figures): the noise.
    WithinNoise,
    /// A §6 outlier further from the median than twice its σ_θ, or one measured on every
    /// value (σ = 0): beyond its noise.
    Outlier,
    /// A §6 outlier measured on a sample without σ: whether it is beyond the noise is not
    /// known (`--sigma` measures it).
    #[serde(rename = "noise_not_measured")]
    Unconfirmed,
}

impl Standing {
    /// Its word in the JSON and CSV reports.
    pub fn name(self) -> &'static str {
        match self {
            Standing::Typical => "typical",
            Standing::Copy => "copy",
            Standing::WithinNoise => "within_noise",
            Standing::Outlier => "outlier",
            Standing::Unconfirmed => "noise_not_measured",
        }
    }

    /// Whether a display marks it (an outlier beyond the noise, or one not known to be
    /// within it).
    pub fn marked(self) -> bool {
        matches!(self, Standing::Outlier | Standing::Unconfirmed)
    }
}

/// The [`Standing`] of each of a tensor's experts. `sampled`: the slices were measured on a
/// sample (more than [`super::SAMPLE_SIZE`] elements each, not in `exact` mode), so their θ
/// carries sampling noise.
pub fn standings(rows: &[ExpertTheta], sampled: bool) -> Vec<Standing> {
    let thetas: Vec<f64> = rows.iter().map(|x| x.theta).collect();
    let m = median(&thetas);
    let sigmas: Vec<f64> = rows.iter().filter_map(|x| x.sigma).collect();
    let typical = median(&sigmas);
    // An expert with a byte-identical twin, whichever of the two is the lower: a set of
    // experts is grouped by the lowest of them, so a twin is found in one pass.
    let mut copied = alloc::vec![false; rows.len()];
    for (i, x) in rows.iter().enumerate() {
        if let Some(d) = x.duplicate_of {
            copied[i] = true;
            // Rows are in expert order; a row elsewhere is looked for.
            let at = usize::try_from(d).ok().filter(|&j| rows.get(j).is_some_and(|y| y.expert == d));
            if let Some(j) = at.or_else(|| rows.iter().position(|y| y.expert == d)) {
                copied[j] = true;
            }
        }
    }
    rows.iter()
        .zip(copied)
        .map(|(x, copy)| {
            if copy {
                return Standing::Copy;
            }
            if !x.outlier {
                return Standing::Typical;
            }
            if !sampled {
                return Standing::Outlier;
            }
            match x.sigma {
                Some(s) if (x.theta - m).abs() > 2.0 * s.max(typical) => Standing::Outlier,
                Some(_) => Standing::WithinNoise,
                None => Standing::Unconfirmed,
            }
        })
        .collect()
}

/// Sets each expert's `standing` in `rows`, the experts of a tensor of `n_elements`
/// elements of which its own θ read `sampled` ([`slices_sampled`]).
pub fn set_standings(rows: &mut [ExpertTheta], n_elements: u64, sampled: u64) {
    let s = standings(rows, slices_sampled(n_elements, sampled, rows.len() as u64));
    for (r, s) in rows.iter_mut().zip(s) {
        r.standing = s;
    }
}

/// Whether the experts of a tensor of `n_elements` elements, `sampled` of them read for its
/// own θ, in `count` experts, were measured on a sample: the tensor was (it was not
/// measured whole, as `exact` mode does), and each slice has more than
/// [`super::SAMPLE_SIZE`] elements.
pub fn slices_sampled(n_elements: u64, sampled: u64, count: u64) -> bool {
    sampled < n_elements && n_elements / count.max(1) > super::SAMPLE_SIZE as u64
}

/// Finds which experts of a tensor are byte-identical to a lower-numbered one (§6's
/// `duplicate_of`), reading as little as it can: experts are split into classes that agree
/// on the bytes compared so far, a chunk at a time, and only classes of two or more read
/// further. Experts that differ early (most do) cost one chunk each.
///
/// A front end loops: [`DuplicateSearch::next`] says which byte range of which experts to
/// read; it hands their bytes to [`DuplicateSearch::feed`]; when `next` says `None`,
/// [`DuplicateSearch::finish`] gives each expert's `duplicate_of`. Memory: one chunk per
/// expert still in a class, which the caller bounds by the chunk size.
#[derive(Debug, Clone)]
pub struct DuplicateSearch {
    bytes: u64,
    chunk: u64,
    at: u64,
    /// Classes of two or more experts equal on `[0, at)`, each ascending.
    open: Vec<Vec<u64>>,
    of: Vec<Option<u64>>,
}

impl DuplicateSearch {
    /// A search over the experts of `layout`, reading `chunk` bytes (at least 1) per expert
    /// per step.
    pub fn new(layout: &ExpertLayout, chunk: u64) -> DuplicateSearch {
        let n = usize::try_from(layout.count).unwrap_or(0);
        let mut s =
            DuplicateSearch { bytes: layout.bytes, chunk: chunk.max(1), at: 0, open: Vec::new(), of: vec![None; n] };
        if n > 1 {
            s.open.push((0..layout.count).collect());
        }
        s.settle();
        s
    }

    /// The byte range (from each expert's start) to read next and the experts to read it
    /// of, ascending by class; `None` when the search is over.
    pub fn next(&self) -> Option<(core::ops::Range<u64>, Vec<u64>)> {
        if self.open.is_empty() {
            return None;
        }
        let end = self.at.saturating_add(self.chunk).min(self.bytes);
        Some((self.at..end, self.open.iter().flatten().copied().collect()))
    }

    /// The bytes of the range [`DuplicateSearch::next`] gave, one slice per expert in its
    /// order.
    ///
    /// # Errors
    /// [`Error::SizeMismatch`] when the slices are not one per expert of the range's length.
    pub fn feed(&mut self, chunks: &[&[u8]]) -> Result<()> {
        let Some((range, experts)) = self.next() else { return Ok(()) };
        let len = range.end - range.start;
        if chunks.len() != experts.len() {
            let (expected, got) = (experts.len() as u64, chunks.len() as u64);
            return Err(Error::SizeMismatch { what: "expert chunks fed", expected, got });
        }
        if let Some(c) = chunks.iter().find(|c| c.len() as u64 != len) {
            return Err(Error::SizeMismatch { what: "expert chunk", expected: len, got: c.len() as u64 });
        }
        let mut next = Vec::new();
        let mut k = 0;
        for class in &self.open {
            // (index of the class's first chunk, members), in order of first member.
            let mut split: Vec<(usize, Vec<u64>)> = Vec::new();
            for &e in class {
                match split.iter_mut().find(|(first, _)| chunks[*first] == chunks[k]) {
                    Some((_, members)) => members.push(e),
                    None => split.push((k, vec![e])),
                }
                k += 1;
            }
            next.extend(split.into_iter().map(|(_, m)| m).filter(|m| m.len() > 1));
        }
        self.open = next;
        self.at = range.end;
        self.settle();
        Ok(())
    }

    /// Once every byte is compared, each class's lowest expert is the one the others
    /// duplicate.
    fn settle(&mut self) {
        if self.at < self.bytes {
            return;
        }
        for class in core::mem::take(&mut self.open) {
            for &e in &class[1..] {
                self.of[e as usize] = Some(class[0]);
            }
        }
    }

    /// Each expert's `duplicate_of` (all `None` if the search was left unfinished).
    pub fn finish(self) -> Vec<Option<u64>> {
        if self.open.is_empty() {
            self.of
        } else {
            vec![None; self.of.len()]
        }
    }
}

/// [`DuplicateSearch`] over the whole bytes of an expert tensor at hand (a memory map).
///
/// # Errors
/// [`Error::SizeMismatch`] when `data` is not the layout's size.
pub fn duplicates_in(layout: &ExpertLayout, data: &[u8]) -> Result<Vec<Option<u64>>> {
    if Some(data.len() as u64) != layout.bytes.checked_mul(layout.count) {
        let expected = layout.bytes.saturating_mul(layout.count);
        return Err(Error::SizeMismatch { what: "expert tensor bytes", expected, got: data.len() as u64 });
    }
    let mut s = DuplicateSearch::new(layout, layout.bytes);
    while let Some((r, experts)) = s.next() {
        let chunks: Vec<&[u8]> = experts
            .iter()
            .map(|&e| {
                let start = (layout.range(e).start + r.start) as usize;
                &data[start..start + (r.end - r.start) as usize]
            })
            .collect();
        s.feed(&chunks)?;
    }
    Ok(s.finish())
}

#[cfg(test)]
#[path = "experts_tests.rs"]
mod tests;
