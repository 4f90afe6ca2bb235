//! Z-measure v1: a data-free angle θ per tensor, 0° noise to 90° structure.
//! The definition is `docs/z-measure.md`; this module follows it to the letter.
//!
//! The entry point for a tensor whose bytes are at hand (a memory map, or the blocks a
//! browser read) is [`measure_tensor`]. Callers that fetch bytes themselves can ask
//! [`SamplePlan`] which blocks the sampler needs first.

pub mod batch;
pub mod experts;
mod indicators;
pub mod jobs;
mod plan;
mod radix;
mod sample;
mod sum;

pub use indicators::{indicators, theta, Indicators};
pub use plan::{ByteRange, ReadPlan};
pub use sample::{draw_name, fnv1a64, sample_indices, Sampler, SplitMix64, DRAWS, SAMPLE_SIZE};
pub(crate) use sum::pairwise_sum;

/// Sample indices drawn and gathered at a time by [`measure_tensor`] (divides [`SAMPLE_SIZE`]).
const GATHER_CHUNK: usize = 1000;

use crate::error::Result;
use crate::ggml_type::GgmlType;
use crate::quant::ElementReader;
use alloc::vec;
use alloc::vec::Vec;
use serde::Serialize;

/// The measure's name in reports.
pub const MEASURE: &str = "z1";

/// The name of θ over every value (§7's `exact` mode) in reports.
pub const MEASURE_EXACT: &str = "z1-exact";

/// How each tensor's θ is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// θ of the sample seeded by the tensor's name (§1–3).
    #[default]
    Sampled,
    /// That θ, and its spread over [`DRAWS`] alternate draws (§7).
    Sigma,
    /// θ over all values, no sampling (§7's `exact` mode).
    Exact,
}

impl Mode {
    /// The measure's name in reports: [`MEASURE`], or [`MEASURE_EXACT`].
    pub fn label(self) -> &'static str {
        match self {
            Mode::Exact => MEASURE_EXACT,
            Mode::Sampled | Mode::Sigma => MEASURE,
        }
    }
}

/// θ of each of a tensor's alternate draws, draw k (1..=[`DRAWS`]) at index k − 1.
pub type Draws = [f64; DRAWS];

/// The population standard deviation of `x`, as numpy's `np.std` computes it (pairwise
/// sums of the values, then of the squared deviations); 0 for no values.
pub fn population_std(x: &[f64]) -> f64 {
    if x.is_empty() {
        return 0.0;
    }
    let n = x.len() as f64;
    let mean = pairwise_sum(x) / n;
    let sq: Vec<f64> = x.iter().map(|v| (v - mean) * (v - mean)).collect();
    libm::sqrt(pairwise_sum(&sq) / n)
}

/// What made a report: organ and its version (a front end may add its name).
pub const GENERATOR: &str = concat!("organ ", env!("CARGO_PKG_VERSION"));

/// The result of measuring one tensor.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Measurement {
    /// θ in degrees (0 when degenerate).
    pub theta: f64,
    /// Entropy H (`None` when degenerate).
    pub entropy: Option<f64>,
    /// Excess kurtosis K (`None` when degenerate).
    pub kurtosis: Option<f64>,
    /// Scale coherence C (`None` when degenerate).
    pub cv: Option<f64>,
    /// Fewer than 2 finite values, or all equal.
    pub degenerate: bool,
    /// Values read (all elements, or the sample).
    pub sampled: u64,
    /// Non-finite values dropped from them.
    pub dropped: u64,
}

/// Which elements of a tensor the sampler reads (§1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SamplePlan {
    /// All elements, in order (N ≤ [`SAMPLE_SIZE`]).
    All(u64),
    /// These indices, in sample order.
    Sample(Vec<u64>),
}

impl SamplePlan {
    /// The plan for a tensor called `name` with `n_elements` elements.
    pub fn new(name: &str, n_elements: u64) -> SamplePlan {
        if n_elements <= SAMPLE_SIZE as u64 {
            SamplePlan::All(n_elements)
        } else {
            SamplePlan::Sample(sample_indices(name, n_elements, SAMPLE_SIZE))
        }
    }

    /// The distinct block indices that hold sampled elements, ascending.
    pub fn blocks(&self, block_size: u64) -> Vec<u64> {
        match self {
            SamplePlan::All(n) => (0..n.div_ceil(block_size)).collect(),
            SamplePlan::Sample(ix) => {
                let mut b: Vec<u64> = ix.iter().map(|i| i / block_size).collect();
                b.sort_unstable();
                b.dedup();
                b
            }
        }
    }

    /// For callers that read bytes themselves (a browser, a streaming CLI): the distinct
    /// blocks that hold sampled elements (ascending), and every sampled index re-expressed
    /// as an element index into those blocks laid end to end. Gathering the remapped
    /// indices from the concatenated blocks gives the same values, in the same order, as
    /// gathering the original indices from the whole tensor.
    pub fn compact(&self, block_size: u64) -> (Vec<u64>, Vec<u64>) {
        let ix = match self {
            // Every block is needed, so every index stays where it is.
            SamplePlan::All(n) => return ((0..n.div_ceil(block_size)).collect(), (0..*n).collect()),
            SamplePlan::Sample(ix) => ix,
        };
        let n_blocks = ix.iter().max().map_or(0, |&m| m / block_size + 1);
        if n_blocks > BITMAP_MAX_BLOCKS {
            return self.compact_by_sorting(block_size);
        }
        // A bit per block, and the count of set bits before each word: a block's rank in
        // the needed list is then a popcount, with no sort and no search.
        let mut bits = vec![0u64; n_blocks.div_ceil(64) as usize];
        for &i in ix {
            let b = i / block_size;
            bits[(b / 64) as usize] |= 1 << (b % 64);
        }
        let mut before = Vec::with_capacity(bits.len());
        let mut count = 0u64;
        for w in &bits {
            before.push(count);
            count += u64::from(w.count_ones());
        }
        let mut blocks = Vec::with_capacity(count as usize);
        for (k, &w) in bits.iter().enumerate() {
            let mut w = w;
            while w != 0 {
                blocks.push(k as u64 * 64 + u64::from(w.trailing_zeros()));
                w &= w - 1;
            }
        }
        let remap = ix
            .iter()
            .map(|&i| {
                let b = i / block_size;
                let (k, bit) = ((b / 64) as usize, b % 64);
                let rank = before[k] + u64::from((bits[k] & ((1u64 << bit) - 1)).count_ones());
                rank * block_size + i % block_size
            })
            .collect();
        (blocks, remap)
    }

    /// [`SamplePlan::compact`] by sorting the block list and searching it: for tensors
    /// with so many blocks that a bitmap of them would be large.
    fn compact_by_sorting(&self, block_size: u64) -> (Vec<u64>, Vec<u64>) {
        let blocks = self.blocks(block_size);
        let remap = |i: u64| {
            // Every index's block is in `blocks`, so the search always succeeds.
            let rank = blocks.binary_search(&(i / block_size)).unwrap_or(0) as u64;
            rank * block_size + i % block_size
        };
        let remapped = match self {
            SamplePlan::All(n) => (0..*n).map(remap).collect(),
            SamplePlan::Sample(ix) => ix.iter().map(|&i| remap(i)).collect(),
        };
        (blocks, remapped)
    }
}

/// [`SamplePlan::compact`] uses a bitmap up to this many blocks (2 MiB of bits), and sorts
/// beyond.
const BITMAP_MAX_BLOCKS: u64 = 1 << 24;

/// Measures a set of values (§1 from "drop non-finite values" on, §2, §3).
pub fn measure_values(values: Vec<f32>) -> Measurement {
    measure_values_sorted(values).0
}

/// [`measure_values`], and the finite values in ascending order (`f32::total_cmp`'s): the
/// sorted copy the measure makes anyway, handed back for callers that show the values
/// (the report's histogram, `Histogram::of_sorted`) so they need not sort them again.
pub fn measure_values_sorted(mut values: Vec<f32>) -> (Measurement, Vec<f32>) {
    let sampled = values.len() as u64;
    values.retain(|v| v.is_finite());
    let dropped = sampled - values.len() as u64;
    let sorted = radix::sorted_f32(&values);
    let m = match indicators::indicators_sorted(&values, &sorted) {
        Some(ind) => Measurement {
            theta: theta(&ind),
            entropy: Some(ind.entropy),
            kurtosis: Some(ind.kurtosis),
            cv: Some(ind.cv),
            degenerate: false,
            sampled,
            dropped,
        },
        None => Measurement { theta: 0.0, entropy: None, kurtosis: None, cv: None, degenerate: true, sampled, dropped },
    };
    (m, sorted)
}

/// The runs of `sorted` (ascending) that share a bin, as (bin, length), lowest first.
/// `bin` must be non-decreasing in the value: then each bin is one run, and its end is
/// found by binary search with the same expression.
pub(crate) fn bin_runs<B: Fn(f32) -> usize>(
    sorted: &[f32],
    bin: B,
) -> impl Iterator<Item = (usize, usize)> + use<'_, B> {
    let mut start = 0;
    core::iter::from_fn(move || {
        let b = bin(*sorted.get(start)?);
        // At least sorted[start] is in the run, so every step advances.
        let len = sorted[start..].partition_point(|&v| bin(v) <= b);
        start += len;
        Some((b, len))
    })
}

/// The sampled values (§1, before dropping non-finite ones) of a tensor called `name` of
/// type `ty` with `n_elements` elements, whose bytes are `data`. Only the sampled elements
/// are decoded.
///
/// # Errors
/// [`crate::Error::NotDequantizable`] for types without a reference dequantizer;
/// [`crate::Error::SizeMismatch`] if `data` is not the tensor's size.
pub fn sample_values(name: &str, ty: GgmlType, n_elements: u64, data: &[u8]) -> Result<Vec<f32>> {
    sample_values_by(name, ty, n_elements, data, whole_is_cheaper(ty, n_elements))
}

/// [`sample_values`], decoding the whole tensor (`whole`) or each sampled element.
fn sample_values_by(name: &str, ty: GgmlType, n_elements: u64, data: &[u8], whole: bool) -> Result<Vec<f32>> {
    let mut reader = ElementReader::new(ty, data, n_elements)?;
    if n_elements <= SAMPLE_SIZE as u64 {
        return crate::quant::dequantize(ty, data);
    }
    // Indices go from the sampler to the reader a chunk at a time: no 800 kB index
    // array per tensor to write and read back.
    if whole {
        // ElementReader::new checked that `data` holds exactly n_elements values.
        return pick(name, &crate::quant::dequantize(ty, data)?);
    }
    let mut sampler = Sampler::new(name, n_elements);
    let mut chunk = [0u64; GATHER_CHUNK];
    let mut values = Vec::with_capacity(SAMPLE_SIZE);
    for _ in 0..SAMPLE_SIZE / GATHER_CHUNK {
        sampler.fill(&mut chunk);
        reader.gather_into(&chunk, &mut values)?;
    }
    Ok(values)
}

/// The sample of a tensor called `name` (N > [`SAMPLE_SIZE`]) picked out of all its values.
fn pick(name: &str, all: &[f32]) -> Result<Vec<f32>> {
    let n_elements = all.len() as u64;
    let mut sampler = Sampler::new(name, n_elements);
    let mut chunk = [0u64; GATHER_CHUNK];
    let mut values = Vec::with_capacity(SAMPLE_SIZE);
    for _ in 0..SAMPLE_SIZE / GATHER_CHUNK {
        sampler.fill(&mut chunk);
        // The sampler's indices are below N by construction; checked per chunk, so that the
        // loads of a chunk are independent of each other and their cache misses overlap.
        if let Some(&i) = chunk.iter().find(|&&i| i >= n_elements) {
            return Err(crate::Error::SizeMismatch { what: "element index", expected: n_elements, got: i });
        }
        values.extend(chunk.iter().map(|&i| all[i as usize]));
    }
    Ok(values)
}

/// Whether [`sample_values`] should dequantize all `n_elements` of a `ty` tensor and pick
/// the samples out of them, rather than decode each sampled element on its own: when the
/// tensor is small against the sample, so that each block holds several samples
/// (SmolLM2's attn_k has 110 592 elements: 29 samples per 32-element block), and the
/// type's whole-tensor dequantizer is fast. The values are the same either way (both
/// decoders are checked against gguf-py); only the time differs.
///
/// The costs are the quant table's (`quant::table`), measured by the dequant bench.
fn whole_is_cheaper(ty: GgmlType, n_elements: u64) -> bool {
    /// Picking a sample out of the dequantized tensor.
    const PICK_PS: u64 = 1_500;
    /// At most a 32 MiB f32 copy of a tensor.
    const MAX_ELEMENTS: u64 = 1 << 23;
    let Some(k) = crate::quant::table::kernels(ty) else {
        return false;
    };
    let (whole_ps, single_ps) = (k.cost.whole_ps, k.cost.single_ps);
    let s = SAMPLE_SIZE as u64;
    n_elements <= MAX_ELEMENTS && n_elements * whole_ps + s * PICK_PS < s * single_ps
}

/// Measures a tensor called `name` of type `ty` with `n_elements` elements, whose bytes
/// are `data`. Only the sampled elements are decoded.
///
/// # Errors
/// [`crate::Error::NotDequantizable`] for types without a reference dequantizer;
/// [`crate::Error::SizeMismatch`] if `data` is not the tensor's size.
pub fn measure_tensor(name: &str, ty: GgmlType, n_elements: u64, data: &[u8]) -> Result<Measurement> {
    Ok(measure_values(sample_values(name, ty, n_elements, data)?))
}

/// [`measure_tensor`], and the θ of the tensor's [`DRAWS`] alternate draws (§7; `None`
/// when N ≤ [`SAMPLE_SIZE`], where every value is used and σ_θ = 0). Where one sample is
/// picked out of the whole dequantized tensor ([`whole_is_cheaper`]), the tensor is
/// dequantized once for all nine. Elsewhere each draw decodes its own elements: deciding
/// for nine samples at once, by the quant table's costs, sent SmolLM2's 884 736-element
/// Q4_1 tensors the whole way, and `--sigma` took 22% more CPU (perf stat, 5 runs): nine
/// random picks from a 3.5 MB f32 copy miss the cache more than decoding from the 0.55
/// MB of blocks.
///
/// # Errors
/// As [`measure_tensor`].
pub fn measure_tensor_draws(
    name: &str,
    ty: GgmlType,
    n_elements: u64,
    data: &[u8],
) -> Result<(Measurement, Option<Draws>)> {
    if n_elements <= SAMPLE_SIZE as u64 {
        return Ok((measure_tensor(name, ty, n_elements, data)?, None));
    }
    let mut draws = [0.0; DRAWS];
    if whole_is_cheaper(ty, n_elements) {
        ElementReader::new(ty, data, n_elements)?;
        let all = crate::quant::dequantize(ty, data)?;
        let m = measure_values(pick(name, &all)?);
        for (k, d) in (1..).zip(draws.iter_mut()) {
            *d = measure_values(pick(&draw_name(name, k), &all)?).theta;
        }
        return Ok((m, Some(draws)));
    }
    let m = measure_tensor(name, ty, n_elements, data)?;
    for (k, d) in (1..).zip(draws.iter_mut()) {
        *d = measure_tensor(&draw_name(name, k), ty, n_elements, data)?.theta;
    }
    Ok((m, Some(draws)))
}

/// θ over all `n_elements` values of a `ty` tensor whose bytes are `data` (§7's `exact`
/// mode). Memory: the tensor as f32, twice (the values and their sorted copy).
///
/// # Errors
/// As [`measure_tensor`].
pub fn measure_tensor_exact(ty: GgmlType, n_elements: u64, data: &[u8]) -> Result<Measurement> {
    ElementReader::new(ty, data, n_elements)?;
    Ok(measure_values(crate::quant::dequantize(ty, data)?))
}

/// Measures a tensor in `mode`: [`measure_tensor`], [`measure_tensor_draws`] or
/// [`measure_tensor_exact`]. Draws are `Some` only in [`Mode::Sigma`], for sampled tensors.
///
/// # Errors
/// As [`measure_tensor`].
pub fn measure_tensor_in(
    mode: Mode,
    name: &str,
    ty: GgmlType,
    n_elements: u64,
    data: &[u8],
) -> Result<(Measurement, Option<Draws>)> {
    match mode {
        Mode::Sampled => Ok((measure_tensor(name, ty, n_elements, data)?, None)),
        Mode::Sigma => measure_tensor_draws(name, ty, n_elements, data),
        Mode::Exact => Ok((measure_tensor_exact(ty, n_elements, data)?, None)),
    }
}

/// Random bytes for a test tensor of `n` elements of `ty` (xorshift from `seed`), with
/// every other byte's top bits cleared so that f16 scales stay finite.
#[cfg(test)]
pub(crate) fn random_tensor(ty: GgmlType, n: u64, seed: u64) -> Vec<u8> {
    let len = n / ty.block_size() as u64 * ty.type_size() as u64;
    let mut x = seed;
    (0..len)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x as u8) & if i % 2 == 1 { 0x3f } else { 0xff }
        })
        .collect()
}

#[cfg(test)]
#[path = "mod_tests.rs"]
mod tests;
