//! Which byte ranges of a tensor the sampler needs, for callers that read bytes themselves:
//! the CLI's streaming path (positioned reads) and the browser (`Blob.slice`). Both read
//! the ranges a [`ReadPlan`] lists, hand each range's bytes to [`ReadPlan::fill`], and
//! measure with [`ReadPlan::values`] + [`super::measure_values`]: one logic, two kinds of I/O.

use super::{sample_values, SamplePlan, SAMPLE_SIZE};
use crate::error::{Error, Result};
use crate::ggml_type::GgmlType;
use crate::quant::ElementReader;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

/// One read: `len` bytes at `offset` from the start of the tensor's data, holding the
/// plan's blocks `first_block..first_block + n_blocks` (plus unneeded blocks in the gaps).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteRange {
    /// Offset from the start of the tensor's data.
    pub offset: u64,
    /// Bytes to read.
    pub len: u64,
    /// Index (into [`ReadPlan::blocks`]) of the first needed block in this range.
    pub first_block: usize,
    /// How many needed blocks the range holds.
    pub n_blocks: usize,
}

/// The reads that give a tensor's sampled values.
///
/// A plan is *dense* when the merged reads would cover (nearly) the whole tensor anyway
/// and the tensor is not much larger than its sampled blocks: the sampler's indices then
/// need no working out in advance; the whole tensor is kept and sampled as
/// [`super::measure_tensor`] samples a memory map. Otherwise it is *sparse*: only the
/// needed blocks are kept, laid end to end, even when the reads cover the whole tensor.
#[derive(Debug, Clone)]
pub struct ReadPlan {
    /// The tensor's type.
    pub ty: GgmlType,
    name: String,
    n_elements: u64,
    /// The distinct blocks that hold sampled elements, ascending (empty in a dense plan,
    /// which keeps every block).
    pub blocks: Vec<u64>,
    /// Every sampled index, re-expressed into the needed blocks laid end to end.
    remap: Vec<u64>,
    /// The reads, ascending and disjoint.
    pub ranges: Vec<ByteRange>,
    dense: bool,
    /// Every value, not a sample (§7's `exact` mode; the plan is dense).
    exact: bool,
}

/// A dense plan holds its whole tensor, so only tensors of at most this many blocks per
/// sample get one. Beyond it a sparse buffer (at most one block per sample) is the
/// smaller: SmolLM2's 30 MB token embedding, read whole, keeps 3 MB of sampled blocks.
/// Every buffer is new memory for the reader to write, and in a browser tab that costs
/// far more than the copy itself. It also bounds a dense buffer: 200 000 blocks of at most
/// 210 bytes (Q6_K) is 42 MB, whatever the file claims.
const DENSE_MAX_BLOCKS_PER_SAMPLE: u64 = 2;

/// The reads of a whole `ty` tensor of `n_elements` elements: whole blocks per read, at
/// least one, at most `max_len` bytes unless a block is longer.
fn dense_ranges(ty: GgmlType, n_elements: u64, max_len: u64) -> Vec<ByteRange> {
    let (bs, ts) = (ty.block_size() as u64, ty.type_size() as u64);
    let bytes = (n_elements / bs).saturating_mul(ts);
    let step = (max_len / ts).max(1) * ts;
    // A step beyond usize (a 32-bit target, max_len near u64::MAX) is one range.
    (0..bytes)
        .step_by(usize::try_from(step).unwrap_or(usize::MAX))
        .map(|offset| {
            let len = step.min(bytes - offset);
            ByteRange { offset, len, first_block: (offset / ts) as usize, n_blocks: (len / ts) as usize }
        })
        .collect()
}

impl ReadPlan {
    /// The plan for tensor `name` of type `ty` with `n_elements` elements. Needed blocks
    /// closer than `max_gap` bytes share one read (fewer, larger reads where each read is
    /// expensive, as in a browser); no read is longer than `max_len` bytes, unless a single
    /// block is. When the sampled blocks lie closer together on average than `max_gap`
    /// (or every element is used), the plan is dense.
    ///
    /// # Errors
    /// [`Error::NotDequantizable`] for a type without a reference dequantizer.
    pub fn new(name: &str, ty: GgmlType, n_elements: u64, max_gap: u64, max_len: u64) -> Result<ReadPlan> {
        if !ty.can_dequantize() {
            return Err(Error::NotDequantizable { ty: ty.name() });
        }
        let (bs, ts) = (ty.block_size() as u64, ty.type_size() as u64);
        let n_blocks = n_elements / bs;
        let bytes = n_blocks.saturating_mul(ts);
        let spacing = bytes / n_blocks.min(SAMPLE_SIZE as u64).max(1);
        let few_blocks = n_blocks <= DENSE_MAX_BLOCKS_PER_SAMPLE * SAMPLE_SIZE as u64;
        if n_elements <= SAMPLE_SIZE as u64 || (few_blocks && spacing <= max_gap) {
            let ranges = dense_ranges(ty, n_elements, max_len);
            return Ok(ReadPlan {
                ty,
                name: name.into(),
                n_elements,
                blocks: Vec::new(),
                remap: Vec::new(),
                ranges,
                dense: true,
                exact: false,
            });
        }
        let (blocks, remap) = SamplePlan::new(name, n_elements).compact(bs);
        let mut ranges: Vec<ByteRange> = Vec::new();
        for (i, &b) in blocks.iter().enumerate() {
            let start = b * ts;
            if let Some(r) = ranges.last_mut() {
                let end = r.offset + r.len;
                if start - end <= max_gap && start + ts - r.offset <= max_len {
                    r.len = start + ts - r.offset;
                    r.n_blocks += 1;
                    continue;
                }
            }
            ranges.push(ByteRange { offset: start, len: ts, first_block: i, n_blocks: 1 });
        }
        Ok(ReadPlan { ty, name: name.into(), n_elements, blocks, remap, ranges, dense: false, exact: false })
    }

    /// The plan that reads all of a `ty` tensor of `n_elements` elements, in reads of at
    /// most `max_len` bytes (whole blocks, at least one), and whose [`ReadPlan::values`]
    /// are every value (§7's `exact` mode). Its buffer is the whole tensor.
    ///
    /// # Errors
    /// [`Error::NotDequantizable`] for a type without a reference dequantizer.
    pub fn exact(ty: GgmlType, n_elements: u64, max_len: u64) -> Result<ReadPlan> {
        if !ty.can_dequantize() {
            return Err(Error::NotDequantizable { ty: ty.name() });
        }
        let ranges = dense_ranges(ty, n_elements, max_len);
        let (blocks, remap) = (Vec::new(), Vec::new());
        Ok(ReadPlan { ty, name: String::new(), n_elements, blocks, remap, ranges, dense: true, exact: true })
    }

    /// Whether the plan reads the whole tensor (see [`ReadPlan`]).
    pub fn is_dense(&self) -> bool {
        self.dense
    }

    /// How many blocks the buffer holds.
    pub fn n_blocks(&self) -> usize {
        if self.dense {
            (self.n_elements / self.ty.block_size() as u64) as usize
        } else {
            self.blocks.len()
        }
    }

    /// Bytes the reads cover.
    pub fn bytes_to_read(&self) -> u64 {
        self.ranges.iter().map(|r| r.len).sum()
    }

    /// The size of the buffer [`ReadPlan::fill`] fills: the needed blocks, laid end to end
    /// (a dense plan: the tensor).
    pub fn buffer_len(&self) -> usize {
        self.n_blocks() * self.ty.type_size()
    }

    /// A zeroed buffer of [`ReadPlan::buffer_len`] bytes.
    pub fn buffer(&self) -> Vec<u8> {
        vec![0u8; self.buffer_len()]
    }

    /// Copies the needed blocks out of the bytes read for range `range` into `buf` (from
    /// [`ReadPlan::buffer`]).
    ///
    /// # Errors
    /// [`Error::SizeMismatch`] if `bytes` is not the range's length or `buf` not the
    /// buffer's.
    pub fn fill(&self, range: usize, bytes: &[u8], buf: &mut [u8]) -> Result<()> {
        let ts = self.ty.type_size();
        let Some(r) = self.ranges.get(range) else {
            return Err(Error::SizeMismatch {
                what: "read plan range index",
                expected: self.ranges.len() as u64,
                got: range as u64,
            });
        };
        if bytes.len() as u64 != r.len {
            return Err(Error::SizeMismatch {
                what: "bytes read for a range",
                expected: r.len,
                got: bytes.len() as u64,
            });
        }
        if buf.len() != self.buffer_len() {
            let expected = self.buffer_len() as u64;
            return Err(Error::SizeMismatch { what: "read plan buffer", expected, got: buf.len() as u64 });
        }
        if self.dense {
            // Dense ranges lie inside the tensor, which the buffer's length was checked to be.
            buf[r.offset as usize..(r.offset + r.len) as usize].copy_from_slice(bytes);
            return Ok(());
        }
        for k in r.first_block..r.first_block + r.n_blocks {
            // Block offsets inside the range are below r.len, which bytes.len() equals.
            let at = (self.blocks[k] * ts as u64 - r.offset) as usize;
            buf[k * ts..(k + 1) * ts].copy_from_slice(&bytes[at..at + ts]);
        }
        Ok(())
    }

    /// Where range `range`'s bytes go in the buffer, when they go there unchanged (a dense
    /// plan): a caller may copy them straight in instead of calling [`ReadPlan::fill`].
    pub fn dense_target(&self, range: usize) -> Option<core::ops::Range<usize>> {
        let r = self.ranges.get(range).filter(|_| self.dense)?;
        Some(r.offset as usize..(r.offset + r.len) as usize)
    }

    /// The sampled values, in sample order, from the filled buffer: the same values
    /// [`super::measure_tensor`] decodes from the whole tensor.
    ///
    /// # Errors
    /// [`Error::SizeMismatch`] if `buf` is not the buffer's size.
    pub fn values(&self, buf: &[u8]) -> Result<Vec<f32>> {
        if self.exact {
            ElementReader::new(self.ty, buf, self.n_elements)?;
            return crate::quant::dequantize(self.ty, buf);
        }
        if self.dense {
            return sample_values(&self.name, self.ty, self.n_elements, buf);
        }
        let n = self.blocks.len() as u64 * self.ty.block_size() as u64;
        ElementReader::new(self.ty, buf, n)?.gather(&self.remap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zmeasure::{measure_tensor, measure_values};

    fn tensor(ty: GgmlType, n: u64) -> Vec<u8> {
        crate::zmeasure::random_tensor(ty, n, 0x9E37_79B9_7F4A_7C15)
    }

    fn read_all(plan: &ReadPlan, data: &[u8]) -> Vec<u8> {
        let mut buf = plan.buffer();
        for (i, r) in plan.ranges.iter().enumerate() {
            plan.fill(i, &data[r.offset as usize..(r.offset + r.len) as usize], &mut buf).unwrap();
        }
        buf
    }

    #[test]
    fn reading_the_plan_measures_what_the_whole_tensor_does() {
        for (ty, n) in [(GgmlType::Q4_1, 32 * 40_000), (GgmlType::F16, 300_000), (GgmlType::Q8_0, 32 * 100)] {
            let data = tensor(ty, n);
            let whole = measure_tensor("blk.3.ffn_up.weight", ty, n, &data).unwrap();
            for (gap, max) in [(0, 1 << 20), (4096, 1 << 20), (u64::MAX, u64::MAX), (0, 1)] {
                let plan = ReadPlan::new("blk.3.ffn_up.weight", ty, n, gap, max).unwrap();
                let m = measure_values(plan.values(&read_all(&plan, &data)).unwrap());
                assert_eq!(m, whole, "{ty:?} gap {gap} max {max}");
                assert!(plan.ranges.windows(2).all(|w| w[0].offset + w[0].len <= w[1].offset));
                assert!(plan.ranges.iter().all(|r| r.len <= max.max(ty.type_size() as u64)));
                assert_eq!(plan.ranges.iter().map(|r| r.n_blocks).sum::<usize>(), plan.n_blocks());
            }
        }
    }

    #[test]
    fn close_samples_make_a_dense_plan_that_reads_the_tensor_once() {
        let (ty, n) = (GgmlType::Q4_1, 32 * 40_000);
        let data = tensor(ty, n);
        let whole = measure_tensor("blk.3.ffn_up.weight", ty, n, &data).unwrap();
        let dense = ReadPlan::new("blk.3.ffn_up.weight", ty, n, 64 << 10, 1 << 20).unwrap();
        assert!(dense.is_dense() && dense.blocks.is_empty());
        assert_eq!(dense.bytes_to_read(), data.len() as u64);
        assert_eq!(dense.ranges.len(), data.len().div_ceil(1 << 20));
        assert!(dense.ranges.iter().all(|r| r.len % 20 == 0), "whole blocks per read");
        assert_eq!(measure_values(dense.values(&read_all(&dense, &data)).unwrap()), whole);
        // Copying each range straight to its target fills the buffer as fill() does.
        let mut direct = dense.buffer();
        for k in 0..dense.ranges.len() {
            let t = dense.dense_target(k).unwrap();
            direct[t.clone()].copy_from_slice(&data[t]);
        }
        assert_eq!(direct, read_all(&dense, &data));
        // No gap allowed: only the needed blocks.
        assert!(!ReadPlan::new("blk.3.ffn_up.weight", ty, n, 0, 1 << 20).unwrap().is_dense());
    }

    #[test]
    fn a_large_tensor_read_whole_keeps_only_its_sampled_blocks() {
        // SmolLM2's token embedding: 49152 × 576 Q8_0, sampled blocks ~300 bytes apart.
        let (ty, n) = (GgmlType::Q8_0, 49_152 * 576);
        let data = tensor(ty, n);
        let plan = ReadPlan::new("token_embd.weight", ty, n, 64 << 10, 8 << 20).unwrap();
        assert!(!plan.is_dense());
        // The merged reads cover the tensor but for the ends before the first and after
        // the last sampled block, in as few reads as the size limit allows.
        assert!(plan.bytes_to_read() > data.len() as u64 / 100 * 99, "{}", plan.bytes_to_read());
        assert_eq!(plan.ranges.len(), data.len().div_ceil(8 << 20));
        assert!(plan.buffer_len() <= SAMPLE_SIZE * ty.type_size());
        let whole = measure_tensor("token_embd.weight", ty, n, &data).unwrap();
        assert_eq!(measure_values(plan.values(&read_all(&plan, &data)).unwrap()), whole);
    }

    #[test]
    fn a_dense_buffer_stays_under_64_mib_for_every_type() {
        for &ty in GgmlType::ALL.iter().filter(|t| t.can_dequantize()) {
            let most = DENSE_MAX_BLOCKS_PER_SAMPLE * SAMPLE_SIZE as u64 * ty.block_size() as u64;
            let dense = ReadPlan::new("t", ty, most, u64::MAX, u64::MAX).unwrap();
            assert!(dense.is_dense() && dense.buffer_len() < 64 << 20, "{ty:?}: {}", dense.buffer_len());
            let one_more = most + ty.block_size() as u64;
            assert!(!ReadPlan::new("t", ty, one_more, u64::MAX, u64::MAX).unwrap().is_dense(), "{ty:?}");
        }
    }

    #[test]
    fn gaps_trade_reads_for_bytes() {
        let (ty, n) = (GgmlType::Q4_1, 32 * 1_000_000);
        let tight = ReadPlan::new("t", ty, n, 0, u64::MAX).unwrap();
        let loose = ReadPlan::new("t", ty, n, 64 << 10, 8 << 20).unwrap();
        assert!(loose.ranges.len() < tight.ranges.len() / 10);
        assert!(loose.bytes_to_read() > tight.bytes_to_read());
        assert_eq!(tight.bytes_to_read(), tight.blocks.len() as u64 * ty.type_size() as u64);
    }

    #[test]
    fn an_exact_plan_reads_every_value() {
        let (ty, n) = (GgmlType::Q4_1, 32 * 40_000);
        let data = tensor(ty, n);
        let plan = ReadPlan::exact(ty, n, 1 << 16).unwrap();
        assert!(plan.is_dense());
        assert_eq!(plan.bytes_to_read(), data.len() as u64);
        assert_eq!(plan.buffer_len(), data.len());
        let m = measure_values(plan.values(&read_all(&plan, &data)).unwrap());
        assert_eq!(m, crate::zmeasure::measure_tensor_exact(ty, n, &data).unwrap());
        assert_eq!(m.sampled, n);
        assert!(ReadPlan::exact(GgmlType::Q8_K, 256, 1).is_err());
    }

    #[test]
    fn wrong_sizes_and_unmeasurable_types_are_errors() {
        assert!(matches!(ReadPlan::new("t", GgmlType::Q8_K, 256, 0, 1), Err(Error::NotDequantizable { .. })));
        let plan = ReadPlan::new("t", GgmlType::F32, 10, 0, 1 << 20).unwrap();
        let mut buf = plan.buffer();
        assert!(plan.fill(0, &[0u8; 39], &mut buf).is_err());
        assert!(plan.fill(1, &[0u8; 40], &mut buf).is_err());
        assert!(plan.fill(0, &[0u8; 40], &mut buf[1..]).is_err());
        assert!(plan.values(&buf[1..]).is_err());
    }
}
