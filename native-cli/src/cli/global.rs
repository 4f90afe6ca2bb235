//! The flags every command takes (`global = true`), and how they are applied before the
//! command runs.

use super::{Argv, ToArgs};
use crate::progress;

/// Flags of `organ` itself, valid before or after the subcommand. In a subcommand's help
/// they come last, under their own headings; `-h` leaves out those few commands need
/// (remote reads, fsync, the header budget), which `--help` shows.
#[derive(clap::Args, Debug, Clone, Default, PartialEq)]
#[command(next_help_heading = "Global options")]
pub struct Global {
    /// Use organ directories' files without checking them against the digests their
    /// manifest records (BLAKE3, or sha256 in older directories; a warning says so).
    #[arg(long, global = true)]
    pub no_verify: bool,
    /// How progress, warnings and the final error are written to stderr: human (text and
    /// a progress bar) or jsonl (one JSON object per line, for programs; see README).
    #[arg(long, global = true, value_enum, value_name = "FORMAT", default_value = "human")]
    pub progress: progress::Format,
    /// Print lists whole: a plan's or a refusal's tensors one per line, where by default
    /// those alike but for their layer are one line with a count.
    #[arg(long, short = 'v', global = true)]
    pub verbose: bool,
    /// Flush every output to disk before renaming it into place (as `rsync --fsync`).
    /// Without it only outputs that replace an existing file (--force) are flushed, and
    /// new ones are written as cp writes them.
    #[arg(long, global = true, env = "ORGAN_FSYNC", action = clap::ArgAction::SetTrue, hide_short_help = true,
          value_parser = clap::builder::BoolishValueParser::new())]
    pub fsync: bool,
    #[command(flatten)]
    pub remote: RemoteFlags,
    /// The header budget: a GGUF whose header (metadata and tensor infos) takes more than
    /// this many bytes is refused, before more of it is read [default: 33554432]
    /// (docs/limits.md).
    #[arg(long, global = true, value_name = "BYTES", env = crate::input::MAX_HEADER_BYTES_ENV, hide_short_help = true)]
    pub max_header_bytes: Option<u64>,
}

/// How models at URLs are read (docs/remote.md); unset flags keep
/// [`crate::remote::Config`]'s defaults. Under one heading of `--help`, and not in `-h`.
#[derive(clap::Args, Debug, Clone, Default, PartialEq)]
#[command(next_help_heading = "Remote models (http(s)://, hf://, s3://, gs://, az://; docs/remote.md)")]
pub struct RemoteFlags {
    /// Remote models (http(s) URLs): sampled blocks closer than this many bytes share one
    /// range request [default: 262144] (docs/remote.md).
    #[arg(long, global = true, hide_short_help = true, value_name = "BYTES", env = "ORGAN_REMOTE_GAP")]
    pub remote_gap: Option<u64>,
    /// Remote models: range requests in flight at once [default: 8].
    #[arg(long, global = true, hide_short_help = true, value_name = "N")]
    pub remote_concurrency: Option<usize>,
    /// Remote models: retries of one request (429, 5xx, a reset, a timeout, a short body)
    /// before failing [default: 5].
    #[arg(long, global = true, hide_short_help = true, value_name = "N")]
    pub remote_retries: Option<u32>,
    /// Remote models: a server that ignores Range is read whole up to this many bytes,
    /// refused above; a model fetched whole to disk (diff, dissect, graft's donor) too
    /// [default: 268435456].
    #[arg(long, global = true, hide_short_help = true, value_name = "BYTES")]
    pub remote_max_whole: Option<u64>,
    /// Remote models: a transfer slower than this many bytes/s for --remote-speed-time
    /// seconds fails, as curl's --speed-limit [default: 1024].
    #[arg(long, global = true, hide_short_help = true, value_name = "BYTES")]
    pub remote_speed_limit: Option<u64>,
    /// Remote models: how long a transfer may stay below --remote-speed-limit (and a read
    /// wait for a byte) before it fails [default: 30].
    #[arg(long, global = true, hide_short_help = true, value_name = "SECS")]
    pub remote_speed_time: Option<u64>,
}

impl Global {
    /// Sets what the flags decide for the whole process: digest checks, fsync, the header
    /// budget, remote reads. (`--progress` is set first, by `main`, so that even a failure
    /// here is reported in the format asked for.)
    pub fn apply(&self) {
        crate::model::organ_dir::set_verify(!self.no_verify);
        crate::summary::set_verbose(self.verbose);
        crate::atomic::set_fsync(self.fsync);
        if let Some(b) = self.max_header_bytes {
            organ_core::limits::set_max_header_bytes(b);
        }
        crate::remote::configure(self.remote.config());
    }
}

impl RemoteFlags {
    /// The configuration of remote reads: the defaults, with what the flags set.
    pub fn config(&self) -> crate::remote::Config {
        let d = crate::remote::Config::default();
        crate::remote::Config {
            gap: self.remote_gap.unwrap_or(d.gap),
            concurrency: self.remote_concurrency.unwrap_or(d.concurrency).max(1),
            retries: self.remote_retries.unwrap_or(d.retries),
            max_whole: self.remote_max_whole.unwrap_or(d.max_whole),
            speed: crate::remote::pace::Speed {
                limit: self.remote_speed_limit.unwrap_or(d.speed.limit),
                time: self.remote_speed_time.map_or(d.speed.time, |t| std::time::Duration::from_secs(t.max(1))),
            },
        }
    }
}

impl ToArgs for Global {
    fn to_args(&self, a: &mut Argv) {
        use clap::ValueEnum;
        a.switch("--no-verify", self.no_verify);
        if let Some(p) = self.progress.to_possible_value() {
            a.value("--progress", p.get_name());
        }
        a.switch("--verbose", self.verbose)
            .switch("--fsync", self.fsync)
            .flags(&self.remote)
            .number("--max-header-bytes", self.max_header_bytes);
    }
}

impl ToArgs for RemoteFlags {
    fn to_args(&self, a: &mut Argv) {
        a.number("--remote-gap", self.remote_gap)
            .number("--remote-concurrency", self.remote_concurrency)
            .number("--remote-retries", self.remote_retries)
            .number("--remote-max-whole", self.remote_max_whole)
            .number("--remote-speed-limit", self.remote_speed_limit)
            .number("--remote-speed-time", self.remote_speed_time);
    }
}
