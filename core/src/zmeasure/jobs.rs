//! Measuring a model by reads, one job per sample (§7): for callers that read a tensor's
//! bytes themselves through a [`ReadPlan`] (`organ measure --stream`, the browser). With
//! [`Mode::Sigma`] a sampled tensor is nine jobs, its sample and its [`DRAWS`] alternate
//! draws, each with the plan of its own seed, so a job holds no more memory than a plain
//! measure does; with [`Mode::Exact`] a job's plan is the whole tensor. Both callers list
//! the jobs, plan and measure them here, and put the results back together here.

use super::{draw_name, Draws, Measurement, Mode, ReadPlan, DRAWS, SAMPLE_SIZE};
use crate::error::{Error, Result};
use crate::ggml_type::GgmlType;
use alloc::vec;
use alloc::vec::Vec;

/// A tensor's measurement and, in [`Mode::Sigma`] for a sampled tensor, its draws' θ.
pub type Measured = (Measurement, Option<Draws>);

/// One read-and-measure: tensor `tensor`'s sample seeded by its name (`draw` 0) or by
/// `NAME@draw` (§7), or, in [`Mode::Exact`], all of its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Job {
    /// The tensor's index in the model.
    pub tensor: usize,
    /// 0 for the tensor's own sample, k = 1..=[`DRAWS`] for alternate draw k.
    pub draw: usize,
}

/// The alternate draws a tensor of `n_elements` values gets in `mode`: [`DRAWS`] for a
/// sampled tensor (N > [`SAMPLE_SIZE`]) in [`Mode::Sigma`], else none.
pub fn draws_of(mode: Mode, n_elements: u64) -> usize {
    if mode == Mode::Sigma && n_elements > SAMPLE_SIZE as u64 {
        DRAWS
    } else {
        0
    }
}

/// The jobs of the tensors `tensors` ((index, element count), in the order they are to be
/// read): each tensor's own sample, then its alternate draws.
pub fn jobs(mode: Mode, tensors: impl IntoIterator<Item = (usize, u64)>) -> Vec<Job> {
    tensors.into_iter().flat_map(|(tensor, n)| (0..=draws_of(mode, n)).map(move |draw| Job { tensor, draw })).collect()
}

impl Job {
    /// The job's plan for tensor `name` (of type `ty`, `n_elements` values), reads joined
    /// across gaps up to `max_gap` bytes and at most `max_len` bytes long ([`ReadPlan::new`]).
    ///
    /// # Errors
    /// As [`ReadPlan::new`].
    pub fn plan(
        &self,
        mode: Mode,
        name: &str,
        ty: GgmlType,
        n_elements: u64,
        max_gap: u64,
        max_len: u64,
    ) -> Result<ReadPlan> {
        match (mode, self.draw) {
            (Mode::Exact, _) => ReadPlan::exact(ty, n_elements, max_len),
            (_, 0) => ReadPlan::new(name, ty, n_elements, max_gap, max_len),
            (_, k) => ReadPlan::new(&draw_name(name, k), ty, n_elements, max_gap, max_len),
        }
    }
}

/// Each tensor's measurement and, in [`Mode::Sigma`], its alternate draws, from the
/// measurements of `jobs` (`found[j]` is job j's): `n_tensors` entries, `None` for a
/// tensor with no job (not measurable).
///
/// # Errors
/// [`Error::SizeMismatch`] when `found` does not match `jobs`, a job is left unmeasured,
/// a tensor's draws are not all there, or a job names a tensor beyond `n_tensors`.
pub fn gather(jobs: &[Job], found: &[Option<Measurement>], n_tensors: usize) -> Result<Vec<Option<Measured>>> {
    let unmeasured =
        |j: usize| Error::SizeMismatch { what: "measured jobs", expected: jobs.len() as u64, got: j as u64 };
    if found.len() != jobs.len() {
        return Err(Error::SizeMismatch {
            what: "measured jobs",
            expected: jobs.len() as u64,
            got: found.len() as u64,
        });
    }
    let mut out: Vec<Option<Measured>> = vec![None; n_tensors];
    let mut j = 0;
    while j < jobs.len() {
        let Job { tensor, draw } = jobs[j];
        let m = found[j].ok_or_else(|| unmeasured(j))?;
        if draw != 0 {
            return Err(unmeasured(j));
        }
        let n = jobs[j + 1..].iter().take_while(|x| x.tensor == tensor && x.draw != 0).count();
        let draws = if n == 0 {
            None
        } else if n == DRAWS {
            let mut d: Draws = [0.0; DRAWS];
            for (k, x) in d.iter_mut().enumerate() {
                *x = found[j + 1 + k].ok_or_else(|| unmeasured(j + 1 + k))?.theta;
            }
            Some(d)
        } else {
            return Err(Error::SizeMismatch { what: "alternate draws", expected: DRAWS as u64, got: n as u64 });
        };
        let slot = out.get_mut(tensor).ok_or(Error::SizeMismatch {
            what: "tensor index",
            expected: n_tensors as u64,
            got: tensor as u64,
        })?;
        *slot = Some((m, draws));
        j += n + 1;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zmeasure::{measure_tensor_in, measure_values};

    fn tensor(ty: GgmlType, n: u64) -> Vec<u8> {
        let len = n / ty.block_size() as u64 * ty.type_size() as u64;
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x as u8) & 0x7f
            })
            .collect()
    }

    /// A plan's bytes read from the whole tensor, as a caller that reads does.
    fn read(plan: &ReadPlan, data: &[u8]) -> Vec<u8> {
        let mut buf = plan.buffer();
        for (k, r) in plan.ranges.iter().enumerate() {
            plan.fill(k, &data[r.offset as usize..(r.offset + r.len) as usize], &mut buf).unwrap();
        }
        buf
    }

    /// Jobs read through their plans give, bit for bit, what [`measure_tensor_in`] gives
    /// on the whole tensor in memory, in every mode, for sampled and unsampled tensors.
    #[test]
    fn jobs_by_reads_equal_the_tensor_measured_in_memory() {
        let tensors = [(GgmlType::Q8_0, 32 * 6_000u64), (GgmlType::F16, 4_000), (GgmlType::Q4_K, 256 * 1_000)];
        let data: Vec<Vec<u8>> = tensors.iter().map(|&(ty, n)| tensor(ty, n)).collect();
        let name = |i: usize| alloc::format!("blk.{i}.ffn_up.weight");
        for mode in [Mode::Sampled, Mode::Sigma, Mode::Exact] {
            let js = jobs(mode, tensors.iter().enumerate().map(|(i, t)| (i, t.1)));
            let sampled = tensors.iter().filter(|t| t.1 > SAMPLE_SIZE as u64).count();
            assert_eq!(js.len(), 3 + if mode == Mode::Sigma { sampled * DRAWS } else { 0 }, "{mode:?}");
            let found: Vec<Option<Measurement>> = js
                .iter()
                .map(|j| {
                    let (ty, n) = tensors[j.tensor];
                    let plan = j.plan(mode, &name(j.tensor), ty, n, 4096, 1 << 16).unwrap();
                    Some(measure_values(plan.values(&read(&plan, &data[j.tensor])).unwrap()))
                })
                .collect();
            let got = gather(&js, &found, 4).unwrap();
            assert_eq!(got[3], None);
            for (i, &(ty, n)) in tensors.iter().enumerate() {
                let want = measure_tensor_in(mode, &name(i), ty, n, &data[i]).unwrap();
                let (m, d) = got[i].unwrap();
                assert_eq!(m.theta.to_bits(), want.0.theta.to_bits(), "{mode:?} {ty:?}");
                assert_eq!(d.map(|d| d.map(f64::to_bits)), want.1.map(|d| d.map(f64::to_bits)), "{mode:?} {ty:?}");
            }
        }
    }

    #[test]
    fn gather_refuses_what_does_not_fit() {
        let m = Some(measure_values(alloc::vec![1.0, 2.0, 3.0]));
        let js = jobs(Mode::Sigma, [(0, 1_000_000u64)]);
        assert!(gather(&js, &[m; 9], 1).is_ok());
        assert!(gather(&js, &[m; 8], 1).is_err(), "one result short");
        assert!(gather(&js[..5], &[m; 5], 1).is_err(), "draws missing");
        assert!(gather(&js, &[m; 9], 0).is_err(), "tensor index out of range");
        let mut holes = [m; 9];
        holes[4] = None;
        assert!(gather(&js, &holes, 1).is_err(), "a draw not measured");
        assert!(gather(&js[1..], &[m; 8], 1).is_err(), "draws without their sample");
    }
}
