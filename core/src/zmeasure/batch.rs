//! Reads across tensors: the ranges of many tensors' [`ReadPlan`]s, in file order, joined
//! into few larger reads. Tensors lie one after another in a file, so a small tensor's
//! ranges and its neighbours' share a read when they lie close together.
//!
//! This is a plan only: each front end performs the reads its own way (positioned reads
//! in the CLI, `Blob.slice` in the browser, which is asynchronous) and hands each
//! [`Part`]'s bytes to [`ReadPlan::fill`]. One batching logic, two kinds of I/O.

use super::plan::ReadPlan;
use alloc::vec;
use alloc::vec::Vec;

/// One range of one tensor's plan, inside a [`Batch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Part {
    /// The tensor (its index as the caller numbers tensors).
    pub tensor: usize,
    /// The range's index in the tensor's plan.
    pub range: usize,
    /// Where the range starts in the file.
    pub start: u64,
    /// Where it ends.
    pub end: u64,
}

/// One read: `[start, end)` of file `file`, serving one or more [`Part`]s in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    /// Which file.
    pub file: usize,
    /// Where the read starts.
    pub start: u64,
    /// Where it ends.
    pub end: u64,
    /// Its longest.
    limit: u64,
    /// The ranges it serves.
    pub parts: Vec<Part>,
}

impl Batch {
    /// Bytes the read covers.
    pub fn len(&self) -> u64 {
        self.end - self.start
    }

    /// Whether it covers no bytes.
    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }

    /// Where part `p`'s bytes lie in the read's bytes.
    pub fn span(&self, p: &Part) -> core::ops::Range<usize> {
        // Parts lie inside their batch, whose length is at most its limit (a usize on
        // every target the callers read on: a read is one buffer).
        (p.start - self.start) as usize..(p.end - self.start) as usize
    }

    fn takes(&self, file: usize, start: u64, end: u64, max_gap: u64) -> bool {
        file == self.file
            && start >= self.end
            && start - self.end <= max_gap
            && end.checked_sub(self.start).is_some_and(|n| n <= self.limit)
    }
}

/// Joins ranges into batches as they come, in file order.
///
/// Ranges closer than `max_gap` bytes share a read of at most the current limit: the first
/// read's is `first_read`, and each next read may be twice as long, up to `max_read` (a
/// reader gets its first tensors soon, and the large reads that cost least per byte later).
#[derive(Debug, Clone)]
pub struct Batcher {
    max_gap: u64,
    max_read: u64,
    limit: u64,
    pending: Option<Batch>,
}

impl Batcher {
    /// A batcher (see [`Batcher`]); `first_read` is raised to 1 and `max_read` to
    /// `first_read` when smaller.
    pub fn new(max_gap: u64, first_read: u64, max_read: u64) -> Batcher {
        let limit = first_read.max(1);
        Batcher { max_gap, max_read: max_read.max(limit), limit, pending: None }
    }

    /// Sets the gap across which the next ranges join the read before them: a caller may
    /// choose it per tensor (the CLI does for range requests, from the tensor's sampling
    /// density: docs/remote.md).
    pub fn set_max_gap(&mut self, max_gap: u64) {
        self.max_gap = max_gap;
    }

    /// Adds range `range` of `tensor`, `[start, end)` of file `file`; returns the batch
    /// this completes, if the range could not join it.
    pub fn push(&mut self, tensor: usize, range: usize, file: usize, start: u64, end: u64) -> Option<Batch> {
        let end = end.max(start);
        let part = Part { tensor, range, start, end };
        match self.pending.as_mut() {
            Some(b) if b.takes(file, start, end, self.max_gap) => {
                b.end = end;
                b.parts.push(part);
                None
            }
            _ => {
                let next = Batch { file, start, end, limit: self.limit, parts: vec![part] };
                self.limit = self.limit.saturating_mul(2).min(self.max_read);
                self.pending.replace(next)
            }
        }
    }

    /// Adds every range of `plan`, for `tensor` whose data starts at `offset` in `file`;
    /// completed batches go to `out`.
    pub fn push_plan(&mut self, tensor: usize, plan: &ReadPlan, file: usize, offset: u64, out: &mut Vec<Batch>) {
        for (k, r) in plan.ranges.iter().enumerate() {
            let start = offset.saturating_add(r.offset);
            if let Some(b) = self.push(tensor, k, file, start, start.saturating_add(r.len)) {
                out.push(b);
            }
        }
    }

    /// The last batch, once every range was pushed.
    pub fn finish(&mut self) -> Option<Batch> {
        self.pending.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::GgmlType;

    #[test]
    fn close_ranges_of_neighbouring_tensors_share_a_read_within_the_limits() {
        let mut b = Batcher::new(10, 100, 400);
        assert_eq!(b.push(0, 0, 0, 0, 50), None);
        assert_eq!(b.push(1, 0, 0, 55, 90), None); // a gap of 5: joins
        let first = b.push(1, 1, 0, 95, 150).expect("past the first read's 100 bytes");
        assert_eq!((first.start, first.end, first.parts.len()), (0, 90, 2));
        assert_eq!(first.span(&first.parts[1]), 55..90);
        assert_eq!(b.push(2, 0, 0, 150, 290), None); // the second read may be 200 long
        let second = b.push(3, 0, 1, 300, 310).expect("another file");
        assert_eq!((second.file, second.start, second.end), (0, 95, 290));
        let gap = b.push(3, 1, 1, 330, 340).expect("a gap of 20");
        assert_eq!(gap.parts, [Part { tensor: 3, range: 0, start: 300, end: 310 }]);
        let last = b.finish().unwrap();
        assert_eq!((last.file, last.start, last.end), (1, 330, 340));
        assert_eq!(b.finish(), None);
    }

    #[test]
    fn every_range_of_every_plan_is_in_exactly_one_batch() {
        let plans: Vec<ReadPlan> = [(GgmlType::F32, 1000u64), (GgmlType::Q8_0, 32 * 50_000), (GgmlType::F16, 7)]
            .iter()
            .map(|&(ty, n)| ReadPlan::new("t", ty, n, 64, 1 << 16).unwrap())
            .collect();
        let mut b = Batcher::new(64, 1 << 10, 1 << 16);
        let mut out = Vec::new();
        let mut offset = 0;
        for (i, p) in plans.iter().enumerate() {
            b.push_plan(i, p, 0, offset, &mut out);
            offset += p.ranges.last().map_or(0, |r| r.offset + r.len) + 32;
        }
        out.extend(b.finish());
        for (i, p) in plans.iter().enumerate() {
            let n = out.iter().flat_map(|b| &b.parts).filter(|x| x.tensor == i).count();
            assert_eq!(n, p.ranges.len());
        }
        assert!(out.windows(2).all(|w| w[0].end <= w[1].start));
        assert!(out.iter().all(|b| b.parts.iter().all(|p| b.start <= p.start && p.end <= b.end)));
    }
}
