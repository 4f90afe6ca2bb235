//! Z-measure v1: a data-free angle θ per tensor, 0° noise to 90° structure.
//! The definition is `shared/docs/z-measure.md`; this module follows it to the letter.
//!
//! The entry point for a tensor whose bytes are at hand (a memory map, or the blocks a
//! browser read) is [`measure_tensor`]. Callers that fetch bytes themselves can ask
//! [`SamplePlan`] which blocks the sampler needs first.

pub mod html;
mod indicators;
mod plan;
mod radix;
pub mod report;
mod sample;
mod sum;
pub mod view;

pub use indicators::{indicators, theta, Indicators};
pub use plan::{ByteRange, ReadPlan};
pub use sample::{fnv1a64, sample_indices, Sampler, SplitMix64, SAMPLE_SIZE};

/// Sample indices drawn and gathered at a time by [`measure_tensor`] (divides [`SAMPLE_SIZE`]).
const GATHER_CHUNK: usize = 1000;

use crate::error::Result;
use crate::ggml_type::GgmlType;
use crate::quant::ElementReader;
use alloc::vec::Vec;
use serde::Serialize;

/// The measure's name in reports.
pub const MEASURE: &str = "z1";

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

/// Measures a set of values (§1 from "drop non-finite values" on, §2, §3).
pub fn measure_values(mut values: Vec<f32>) -> Measurement {
    let sampled = values.len() as u64;
    values.retain(|v| v.is_finite());
    let dropped = sampled - values.len() as u64;
    match indicators(&values) {
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
    }
}

/// Measures a tensor called `name` of type `ty` with `n_elements` elements, whose bytes
/// are `data`. Only the sampled elements are decoded.
///
/// # Errors
/// [`crate::Error::NotDequantizable`] for types without a reference dequantizer;
/// [`crate::Error::SizeMismatch`] if `data` is not the tensor's size.
pub fn measure_tensor(name: &str, ty: GgmlType, n_elements: u64, data: &[u8]) -> Result<Measurement> {
    let mut reader = ElementReader::new(ty, data, n_elements)?;
    let values = if n_elements <= SAMPLE_SIZE as u64 {
        crate::quant::dequantize(ty, data)?
    } else {
        // Indices go from the sampler to the reader a chunk at a time: no 800 kB index
        // array per tensor to write and read back.
        let mut sampler = Sampler::new(name, n_elements);
        let mut chunk = [0u64; GATHER_CHUNK];
        let mut values = Vec::with_capacity(SAMPLE_SIZE);
        for _ in 0..SAMPLE_SIZE / GATHER_CHUNK {
            sampler.fill(&mut chunk);
            reader.gather_into(&chunk, &mut values)?;
        }
        values
    };
    Ok(measure_values(values))
}
