//! Which shard of a fleet this process measures: `--shard I/N`, or the index a batch
//! engine gives each task (`JOB_COMPLETION_INDEX` in a Kubernetes Indexed Job, with
//! `--shards N`; `SLURM_ARRAY_TASK_ID − SLURM_ARRAY_TASK_MIN` of `SLURM_ARRAY_TASK_COUNT` in
//! a Slurm array). Every source given must agree; docs/fleet.md.

use anyhow::{bail, Context, Result};

/// The most shards a fleet is split in (above Kubernetes' 100 000 completions and Slurm's
/// largest `MaxArraySize`, 4 000 001).
pub const MAX_SHARDS: u64 = 1 << 22;

/// Shard `index` of `count` (from 0): model j of the sorted fleet is shard j mod count's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: u64,
    pub count: u64,
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// A decimal number, digits only.
fn number(what: &str, s: &str) -> Result<u64> {
    if s.is_empty() || s.len() > 19 || !s.bytes().all(|b| b.is_ascii_digit()) {
        bail!("{what}: {s:?} is not a number (digits 0-9)");
    }
    s.parse().with_context(|| format!("{what}: {s:?} is not a number"))
}

impl Shard {
    /// The whole fleet in one process.
    pub const WHOLE: Shard = Shard { index: 0, count: 1 };

    /// Whether model `j` of the sorted fleet is this shard's.
    pub fn holds(&self, j: usize) -> bool {
        j as u64 % self.count == self.index
    }

    /// The shard given by `--shard I/N` (`flag`), `--shards N` (`shards`) and the
    /// environment (`env`: a variable's value, `None` when unset or empty). Without any,
    /// the whole fleet.
    ///
    /// # Errors
    /// A value that is not a number, an index without a count or a count without an
    /// index, sources that disagree, a count of 0 or above [`MAX_SHARDS`], an index out
    /// of range.
    pub fn resolve(flag: Option<&str>, shards: Option<u64>, env: &dyn Fn(&str) -> Option<String>) -> Result<Shard> {
        // Each source of the index and of the count, named as the user wrote it.
        let mut index: Vec<(String, u64)> = Vec::new();
        let mut count: Vec<(String, u64)> = Vec::new();
        if let Some(f) = flag {
            let what = format!("--shard {f}");
            let (i, n) = f.split_once('/').with_context(|| format!("{what}: write it I/N, e.g. 0/3"))?;
            index.push((what.clone(), number(&what, i)?));
            count.push((what.clone(), number(&what, n)?));
        }
        if let Some(n) = shards {
            count.push((format!("--shards {n}"), n));
        }
        if let Some(v) = env("JOB_COMPLETION_INDEX") {
            let what = format!("JOB_COMPLETION_INDEX={v}");
            index.push((what.clone(), number(&what, &v)?));
        }
        if let Some(id) = env("SLURM_ARRAY_TASK_ID") {
            let var = |name: &str| -> Result<Option<(String, u64)>> {
                env(name).map(|v| Ok((format!("{name}={v}"), number(&format!("{name}={v}"), &v)?))).transpose()
            };
            let (id_what, id) =
                (format!("SLURM_ARRAY_TASK_ID={id}"), number(&format!("SLURM_ARRAY_TASK_ID={id}"), &id)?);
            let (min_what, min) = var("SLURM_ARRAY_TASK_MIN")?
                .with_context(|| format!("{id_what} is set, SLURM_ARRAY_TASK_MIN is not"))?;
            let (step_what, step) = var("SLURM_ARRAY_TASK_STEP")?.unwrap_or_else(|| (String::new(), 1));
            let what = format!("{id_what} − {min_what}");
            let Some(offset) = id.checked_sub(min) else { bail!("{what}: the task's id is below the array's first") };
            if step == 0 || offset % step != 0 {
                bail!("{what}, {step_what}: not a task of a range a-b[:step]; give the array as a range (--array=0-N)");
            }
            index.push((if step == 1 { what } else { format!("({what}) / {step_what}") }, offset / step));
            if let Some(c) = var("SLURM_ARRAY_TASK_COUNT")? {
                count.push(c);
            }
        }
        let agreed = |what: &str, found: &[(String, u64)]| -> Result<Option<u64>> {
            let Some((first_what, first)) = found.first() else { return Ok(None) };
            if let Some((w, v)) = found.iter().find(|(_, v)| v != first) {
                bail!("conflicting shard {what}: {first_what} gives {first}, {w} gives {v}");
            }
            Ok(Some(*first))
        };
        let from = |found: &[(String, u64)]| found.iter().map(|(w, _)| w.as_str()).collect::<Vec<_>>().join(", ");
        let shard = match (agreed("indexes", &index)?, agreed("counts", &count)?) {
            (None, None) => return Ok(Shard::WHOLE),
            (Some(_), None) => {
                bail!("{} gives the shard's index but not how many shards there are: add --shards N", from(&index))
            }
            (None, Some(_)) => bail!(
                "{} gives how many shards there are but not which one this is: --shard I/N, JOB_COMPLETION_INDEX \
                 (a Kubernetes Indexed Job) or SLURM_ARRAY_TASK_ID (a Slurm array)",
                from(&count)
            ),
            (Some(index), Some(count)) => Shard { index, count },
        };
        if shard.count == 0 || shard.count > MAX_SHARDS {
            bail!("{}: the shard count must be 1 to {MAX_SHARDS}", from(&count));
        }
        if shard.index >= shard.count {
            bail!(
                "{}: shard {} is out of range: {} shards are numbered 0 to {}",
                from(&index),
                shard.index,
                shard.count,
                shard.count - 1
            );
        }
        Ok(shard)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(flag: Option<&str>, shards: Option<u64>, vars: &[(&str, &str)]) -> Result<Shard> {
        let env = |k: &str| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| (*v).to_owned());
        Shard::resolve(flag, shards, &env)
    }

    fn err(flag: Option<&str>, shards: Option<u64>, vars: &[(&str, &str)]) -> String {
        format!("{:#}", resolve(flag, shards, vars).unwrap_err())
    }

    #[test]
    fn every_source_gives_the_same_shard() {
        let s = |index, count| Shard { index, count };
        assert_eq!(resolve(None, None, &[]).unwrap(), Shard::WHOLE);
        assert_eq!(resolve(Some("2/3"), None, &[]).unwrap(), s(2, 3));
        assert_eq!(resolve(None, Some(3), &[("JOB_COMPLETION_INDEX", "2")]).unwrap(), s(2, 3));
        let slurm = [("SLURM_ARRAY_TASK_ID", "7"), ("SLURM_ARRAY_TASK_MIN", "5"), ("SLURM_ARRAY_TASK_COUNT", "3")];
        assert_eq!(resolve(None, None, &slurm).unwrap(), s(2, 3));
        assert_eq!(resolve(Some("2/3"), Some(3), &slurm).unwrap(), s(2, 3));
        // --array=0-8:2 gives ids 0, 2, 4, 6, 8: id 6 is the fourth task.
        let stepped = [
            ("SLURM_ARRAY_TASK_ID", "6"),
            ("SLURM_ARRAY_TASK_MIN", "0"),
            ("SLURM_ARRAY_TASK_STEP", "2"),
            ("SLURM_ARRAY_TASK_COUNT", "5"),
        ];
        assert_eq!(resolve(None, None, &stepped).unwrap(), s(3, 5));
        let holds: Vec<usize> = (0..8).filter(|&j| s(1, 3).holds(j)).collect();
        assert_eq!(holds, [1, 4, 7]);
    }

    #[test]
    fn bad_values_are_refused_by_name() {
        let k8s = |v| [("JOB_COMPLETION_INDEX", v)];
        for (got, want) in [
            (err(Some("3/3"), None, &[]), "--shard 3/3: shard 3 is out of range: 3 shards are numbered 0 to 2"),
            (err(Some("0/0"), None, &[]), "--shard 0/0: the shard count must be 1 to"),
            (err(Some("1"), None, &[]), "--shard 1: write it I/N"),
            (err(Some("-1/3"), None, &[]), "--shard -1/3: \"-1\" is not a number"),
            (err(Some("a/3"), None, &[]), "is not a number"),
            (err(None, Some(3), &k8s("x")), "JOB_COMPLETION_INDEX=x: \"x\" is not a number"),
            (err(None, Some(3), &k8s("3")), "JOB_COMPLETION_INDEX=3: shard 3 is out of range"),
            (err(None, None, &k8s("1")), "JOB_COMPLETION_INDEX=1 gives the shard's index but not how many"),
            (err(None, Some(3), &[]), "--shards 3 gives how many shards there are but not which one"),
            (
                err(Some("1/3"), None, &k8s("2")),
                "conflicting shard indexes: --shard 1/3 gives 1, JOB_COMPLETION_INDEX=2",
            ),
            (err(Some("1/3"), Some(4), &[]), "conflicting shard counts: --shard 1/3 gives 3, --shards 4 gives 4"),
            (err(None, None, &[("SLURM_ARRAY_TASK_ID", "1")]), "SLURM_ARRAY_TASK_MIN is not"),
            (
                err(None, Some(2), &[("SLURM_ARRAY_TASK_ID", "1"), ("SLURM_ARRAY_TASK_MIN", "2")]),
                "below the array's first",
            ),
            (
                err(
                    None,
                    Some(3),
                    &[("SLURM_ARRAY_TASK_ID", "4"), ("SLURM_ARRAY_TASK_MIN", "0"), ("SLURM_ARRAY_TASK_COUNT", "4")],
                ),
                "conflicting shard counts: --shards 3 gives 3, SLURM_ARRAY_TASK_COUNT=4 gives 4",
            ),
        ] {
            assert!(got.contains(want), "{got:?} should say {want:?}");
        }
    }
}
