//! Measuring a model by reads, one job per sample (§7): for callers that read a tensor's
//! bytes themselves through a [`ReadPlan`] (`organ measure --stream`, the browser). With
//! [`Mode::Sigma`] a sampled tensor is nine jobs, its sample and its [`DRAWS`] alternate
//! draws, each with the plan of its own seed, so a job holds no more memory than a plain
//! measure does; with [`Mode::Exact`] a job's plan is the whole tensor. An expert tensor
//! measured per expert (§6) also has, per expert, the same jobs of its slice (seeds
//! `NAME#e`, `NAME#e@k`). Both callers list the jobs, plan and measure them here, and put
//! the results back together here.

use super::experts::{expert_plan, ExpertLayout};
use super::{draw_name, Draws, Measurement, Mode, ReadPlan, DRAWS, SAMPLE_SIZE};
use crate::error::{Error, Result};
use crate::ggml_type::GgmlType;
use alloc::vec;
use alloc::vec::Vec;

/// A tensor's measurement and, in [`Mode::Sigma`] for a sampled tensor, its draws' θ.
pub type Measured = (Measurement, Option<Draws>);

/// One read-and-measure: tensor `tensor`'s sample seeded by its name (`draw` 0) or by
/// `NAME@draw` (§7), or, in [`Mode::Exact`], all of its values; or the same of its expert
/// `expert` (`NAME#e`, §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Job {
    /// The tensor's index in the model.
    pub tensor: usize,
    /// 0 for the sample, k = 1..=[`DRAWS`] for alternate draw k.
    pub draw: usize,
    /// The expert, for a job of one expert's slice.
    pub expert: Option<u64>,
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

/// The jobs of the tensors `tensors` ((index, element count, expert layout when measured
/// per expert), in the order they are to be read): each tensor's own sample and its
/// alternate draws, then each expert's.
pub fn jobs(mode: Mode, tensors: impl IntoIterator<Item = (usize, u64, Option<ExpertLayout>)>) -> Vec<Job> {
    let mut out = Vec::new();
    for (tensor, n, layout) in tensors {
        out.extend((0..=draws_of(mode, n)).map(|draw| Job { tensor, draw, expert: None }));
        if let Some(l) = layout {
            for e in 0..l.count {
                out.extend((0..=draws_of(mode, l.elements)).map(|draw| Job { tensor, draw, expert: Some(e) }));
            }
        }
    }
    out
}

impl Job {
    /// The job's plan for tensor `name` (of type `ty`, `n_elements` values, cut by
    /// `layout` for an expert's job), reads joined across gaps up to `max_gap` bytes (an
    /// expert's: `expert_gap`) and at most `max_len` bytes long ([`ReadPlan::new`]); and
    /// where the plan's offsets start in the tensor's data.
    ///
    /// # Errors
    /// As [`ReadPlan::new`]; [`Error::SizeMismatch`] for an expert's job without a layout.
    #[allow(clippy::too_many_arguments)]
    pub fn plan(
        &self,
        mode: Mode,
        name: &str,
        ty: GgmlType,
        n_elements: u64,
        layout: Option<&ExpertLayout>,
        max_gap: u64,
        expert_gap: u64,
        max_len: u64,
    ) -> Result<(ReadPlan, u64)> {
        match (mode, self.draw, self.expert) {
            (_, draw, Some(e)) => {
                let l = layout.ok_or(Error::SizeMismatch { what: "expert layout", expected: 1, got: 0 })?;
                expert_plan(mode, name, ty, l, e, draw, expert_gap, max_len)
            }
            (Mode::Exact, _, None) => Ok((ReadPlan::exact(ty, n_elements, max_len)?, 0)),
            (_, 0, None) => Ok((ReadPlan::new(name, ty, n_elements, max_gap, max_len)?, 0)),
            (_, k, None) => Ok((ReadPlan::new(&draw_name(name, k), ty, n_elements, max_gap, max_len)?, 0)),
        }
    }
}

/// Per tensor, its measurement (`None`: no job, not measurable) and, for a tensor measured
/// per expert, each expert's in order.
pub type Gathered = (Vec<Option<Measured>>, Vec<Option<Vec<Measured>>>);

/// Each tensor's measurement and, in [`Mode::Sigma`], its alternate draws, and the same of
/// each expert measured per expert, from the measurements of `jobs` (`found[j]` is job
/// j's): `n_tensors` entries each.
///
/// # Errors
/// [`Error::SizeMismatch`] when `found` does not match `jobs`, a job is left unmeasured,
/// a sample's draws are not all there, experts come before their tensor or out of order,
/// or a job names a tensor beyond `n_tensors`.
pub fn gather(jobs: &[Job], found: &[Option<Measurement>], n_tensors: usize) -> Result<Gathered> {
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
    let mut experts: Vec<Option<Vec<Measured>>> = vec![None; n_tensors];
    let mut j = 0;
    while j < jobs.len() {
        let Job { tensor, draw, expert } = jobs[j];
        let m = found[j].ok_or_else(|| unmeasured(j))?;
        if draw != 0 {
            return Err(unmeasured(j));
        }
        let n = jobs[j + 1..].iter().take_while(|x| x.tensor == tensor && x.expert == expert && x.draw != 0).count();
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
        let index = Error::SizeMismatch { what: "tensor index", expected: n_tensors as u64, got: tensor as u64 };
        match expert {
            None => *out.get_mut(tensor).ok_or(index)? = Some((m, draws)),
            Some(e) => {
                // An expert's jobs follow its tensor's, experts in order.
                let slot = experts.get_mut(tensor).ok_or(index)?;
                let list = slot.get_or_insert_with(Vec::new);
                if out[tensor].is_none() || list.len() as u64 != e {
                    return Err(Error::SizeMismatch { what: "expert", expected: list.len() as u64, got: e });
                }
                list.push((m, draws));
            }
        }
        j += n + 1;
    }
    Ok((out, experts))
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
            let js = jobs(mode, tensors.iter().enumerate().map(|(i, t)| (i, t.1, None)));
            let sampled = tensors.iter().filter(|t| t.1 > SAMPLE_SIZE as u64).count();
            assert_eq!(js.len(), 3 + if mode == Mode::Sigma { sampled * DRAWS } else { 0 }, "{mode:?}");
            let found: Vec<Option<Measurement>> = js
                .iter()
                .map(|j| {
                    let (ty, n) = tensors[j.tensor];
                    let (plan, at) = j.plan(mode, &name(j.tensor), ty, n, None, 4096, 4096, 1 << 16).unwrap();
                    assert_eq!(at, 0);
                    Some(measure_values(plan.values(&read(&plan, &data[j.tensor])).unwrap()))
                })
                .collect();
            let (got, experts) = gather(&js, &found, 4).unwrap();
            assert!(experts.iter().all(Option::is_none));
            assert_eq!(got[3], None);
            for (i, &(ty, n)) in tensors.iter().enumerate() {
                let want = measure_tensor_in(mode, &name(i), ty, n, &data[i]).unwrap();
                let (m, d) = got[i].unwrap();
                assert_eq!(m.theta.to_bits(), want.0.theta.to_bits(), "{mode:?} {ty:?}");
                assert_eq!(d.map(|d| d.map(f64::to_bits)), want.1.map(|d| d.map(f64::to_bits)), "{mode:?} {ty:?}");
            }
        }
    }

    /// An expert tensor's jobs, read through their plans at their offsets, give each
    /// expert's measurement as [`measure_expert`] gives it in memory, after the tensor's own.
    #[test]
    fn expert_jobs_by_reads_equal_the_experts_measured_in_memory() {
        use crate::zmeasure::experts::measure_expert;
        // 3 experts of 32 × 4 000 Q8_0 values: sampled, so σ mode has draws.
        let (ty, per, count) = (GgmlType::Q8_0, 32 * 4_000u64, 3u64);
        let data = tensor(ty, per * count);
        let layout = ExpertLayout { count, elements: per, bytes: data.len() as u64 / count };
        let name = "blk.0.ffn_up_exps.weight";
        for mode in [Mode::Sampled, Mode::Sigma, Mode::Exact] {
            let js = jobs(mode, [(0, per * count, Some(layout))]);
            assert_eq!(js.len(), (1 + count as usize) * (1 + draws_of(mode, per)), "{mode:?}");
            let found: Vec<Option<Measurement>> = js
                .iter()
                .map(|j| {
                    let (plan, at) = j.plan(mode, name, ty, per * count, Some(&layout), 0, 4096, 1 << 16).unwrap();
                    Some(measure_values(plan.values(&read(&plan, &data[at as usize..])).unwrap()))
                })
                .collect();
            let (whole, experts) = gather(&js, &found, 1).unwrap();
            let want = measure_tensor_in(mode, name, ty, per * count, &data).unwrap();
            assert_eq!(whole[0].unwrap().0.theta.to_bits(), want.0.theta.to_bits());
            let experts = experts[0].as_ref().unwrap();
            assert_eq!(experts.len(), count as usize);
            for (e, (m, d)) in experts.iter().enumerate() {
                let want = measure_expert(mode, name, ty, &layout, e as u64, &data).unwrap();
                assert_eq!(m.theta.to_bits(), want.0.theta.to_bits(), "{mode:?} expert {e}");
                assert_eq!(d.map(|d| d.map(f64::to_bits)), want.1.map(|d| d.map(f64::to_bits)), "{mode:?} expert {e}");
            }
            // An expert's job without its layout is refused, not guessed.
            let j = js.iter().find(|j| j.expert.is_some()).unwrap();
            assert!(j.plan(mode, name, ty, per * count, None, 0, 4096, 1 << 16).is_err());
        }
    }

    #[test]
    fn gather_refuses_what_does_not_fit() {
        let m = Some(measure_values(alloc::vec![1.0, 2.0, 3.0]));
        let js = jobs(Mode::Sigma, [(0, 1_000_000u64, None)]);
        assert!(gather(&js, &[m; 9], 1).is_ok());
        assert!(gather(&js, &[m; 8], 1).is_err(), "one result short");
        assert!(gather(&js[..5], &[m; 5], 1).is_err(), "draws missing");
        assert!(gather(&js, &[m; 9], 0).is_err(), "tensor index out of range");
        let mut holes = [m; 9];
        holes[4] = None;
        assert!(gather(&js, &holes, 1).is_err(), "a draw not measured");
        assert!(gather(&js[1..], &[m; 8], 1).is_err(), "draws without their sample");
        let layout = ExpertLayout { count: 2, elements: 10, bytes: 40 };
        let js = jobs(Mode::Sampled, [(0, 20u64, Some(layout))]);
        assert_eq!(js.len(), 3);
        assert!(gather(&js, &[m; 3], 1).is_ok());
        assert!(gather(&[js[1], js[0], js[2]], &[m; 3], 1).is_err(), "an expert before its tensor");
        assert!(gather(&[js[0], js[2], js[1]], &[m; 3], 1).is_err(), "experts out of order");
    }
}
