//! Flags several commands share: how the work is done ([`Work`]: threads, positioned
//! reads, `--stats`) and whether outputs may be replaced ([`Force`]). The thread pool is
//! built and `--stats` printed here, and nowhere else.

use super::{Argv, ToArgs};
use crate::progress::{self, Event};
use anyhow::Result;
use std::sync::atomic::{AtomicU64, Ordering};

/// How a command that reads models whole does its work.
#[derive(clap::Args, Debug, Clone, Default, PartialEq)]
pub struct Work {
    /// Worker threads (default: one per core).
    #[arg(long, short = 'j')]
    pub threads: Option<usize>,
    /// Read by positioned reads only, never mapping tensor data (automatic for models
    /// over 2 GiB): memory stays bounded whatever the size.
    #[arg(long)]
    pub stream: bool,
    /// Print bytes read and peak memory to stderr when done.
    #[arg(long)]
    pub stats: bool,
}

/// Which counters `--stats` prints.
pub enum Stats {
    /// `measure`: tensor bytes read, and the remote reads' figures when there were any.
    Measure,
    /// `diff`: bytes compared and bytes read.
    Diff,
    /// `check`: tensor bytes read.
    Check,
}

impl Work {
    /// Builds the global thread pool with `--threads` workers (rayon's default: one per core).
    pub fn start(&self) -> Result<()> {
        if let Some(n) = self.threads {
            rayon::ThreadPoolBuilder::new().num_threads(n.max(1)).build_global()?;
        }
        Ok(())
    }

    /// With `--stats`: prints what the command read, and the process's peak memory.
    pub fn finish(&self, what: Stats) {
        if !self.stats {
            return;
        }
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let peak_rss_kib = peak_rss_kib();
        match what {
            Stats::Measure => {
                let tensor_bytes_read = load(&crate::cmd::measure::BYTES_READ);
                progress::emit(&Event::Stats { tensor_bytes_read, peak_rss_kib });
                let (bytes_fetched, requests, retries) = crate::remote::stats();
                if requests > 0 {
                    let framing = load(&crate::remote::FRAMING);
                    progress::emit(&Event::RemoteStats { bytes_fetched, requests, retries, framing });
                }
            }
            Stats::Diff => progress::emit(&Event::DiffStats {
                bytes_compared: load(&crate::cmd::diff::BYTES_COMPARED),
                bytes_read: load(&crate::cmd::diff::BYTES_READ),
                peak_rss_kib,
            }),
            Stats::Check => {
                let tensor_bytes_read = load(&crate::cmd::check::BYTES_READ);
                progress::emit(&Event::Stats { tensor_bytes_read, peak_rss_kib });
            }
        }
    }
}

impl ToArgs for Work {
    fn to_args(&self, a: &mut Argv) {
        a.number("--threads", self.threads).switch("--stream", self.stream).switch("--stats", self.stats);
    }
}

/// `--force`, which every command that writes takes.
#[derive(clap::Args, Debug, Clone, Copy, Default, PartialEq)]
pub struct Force {
    /// Replace outputs that already exist (never an input of the run).
    #[arg(long)]
    pub force: bool,
}

impl ToArgs for Force {
    fn to_args(&self, a: &mut Argv) {
        a.switch("--force", self.force);
    }
}

/// Where a surgery that writes one GGUF puts it: `--out`, `--dry-run`, `--force` (layers,
/// experts).
#[derive(clap::Args, Debug, Clone, Default, PartialEq)]
pub struct Written {
    /// The result: one GGUF file (must not exist). Not needed with --dry-run.
    #[arg(long)]
    pub out: Option<std::path::PathBuf>,
    /// Print the plan and check it; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub force: Force,
}

impl ToArgs for Written {
    fn to_args(&self, a: &mut Argv) {
        a.opt("--out", self.out.as_ref()).switch("--dry-run", self.dry_run).flags(&self.force);
    }
}

/// The process's peak resident set size (VmHWM), in KiB; 0 where /proc is not there.
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}
