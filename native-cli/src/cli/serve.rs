//! `organ serve`: its flags. The server turns them into its options itself
//! (`serve/flags.rs`), as it also depends on this module for its children's argv.

use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct ServeArgs {
    /// Every path a request names lies under this directory; outputs go to ROOT/results.
    #[arg(long)]
    pub root: PathBuf,
    /// Address to listen on. Anything but loopback requires --token.
    #[arg(long, default_value = "127.0.0.1:8935")]
    pub addr: SocketAddr,
    /// Require `Authorization: Bearer TOKEN` on /api (default: the ORGAN_TOKEN variable).
    #[arg(long, env = "ORGAN_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Jobs running at once; the rest queue.
    #[arg(long, default_value_t = 2)]
    pub jobs: usize,
    /// The browser app's build to serve at / (default: ./dist when it holds index.html).
    #[arg(long, value_name = "DIR")]
    pub web: Option<PathBuf>,
    /// Largest request body accepted, in bytes.
    #[arg(long, default_value_t = 1 << 20)]
    pub max_body: usize,
    /// Also accept requests naming this host (in `Host`, and browsers' `Origin`), e.g. the
    /// machine's name; localhost, 127.0.0.1, [::1] and the listening address always are
    /// (repeatable).
    #[arg(long = "allow-host", value_name = "NAME")]
    pub allow_hosts: Vec<String>,
    /// Connections served at once; more wait to be accepted.
    #[arg(long, default_value_t = 512)]
    pub max_connections: usize,
    /// Model arguments may also be URLs, which the server then fetches (off by default:
    /// anyone who may call the API could have it fetch any URL; docs/api.md).
    #[arg(long)]
    pub allow_remote: bool,
    /// The longest a job may run, in seconds (its wait in the queue not counted); past
    /// it the job's processes are killed and it fails saying so. 0: no limit.
    #[arg(long, value_name = "SECS", default_value_t = 48 * 3600)]
    pub job_timeout: u64,
    /// How long a finished job's entry and results are kept, in seconds (DELETE
    /// /api/jobs/ID removes them sooner).
    #[arg(long, value_name = "SECS", default_value_t = 24 * 3600, value_parser = clap::value_parser!(u64).range(1..))]
    pub job_retention: u64,
    /// The most finished jobs kept; beyond, the oldest are removed, results and all.
    #[arg(long, value_name = "N", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_finished_jobs: u64,
    /// With --allow-remote: the URL schemes a request may name (of https, http, hf, s3,
    /// gs, az). Stores and hf:// use only the ORGAN_API_* credentials (docs/api.md).
    #[arg(long, value_name = "LIST", value_delimiter = ',', default_value = "https,http")]
    pub allow_remote_schemes: Vec<String>,
    /// With --allow-remote: also read from loopback, private, link-local and this
    /// machine's own addresses (refused by default; metadata services always are).
    #[arg(long)]
    pub allow_remote_private: bool,
    /// With --allow-remote: read from this one address although it is private, e.g. an
    /// internal mirror (ADDR:PORT; port 0 for any; repeatable).
    #[arg(long, value_name = "ADDR:PORT")]
    pub allow_remote_to: Vec<SocketAddr>,
    // Timeouts, in milliseconds (hidden: for tests and unusual setups).
    #[arg(long, hide = true, env = "ORGAN_SERVE_INSPECT_TIMEOUT_MS", default_value_t = 60_000)]
    pub inspect_timeout_ms: u64,
    /// The most of an inspect's JSON the server holds and returns (hidden: for tests).
    #[arg(long, hide = true, env = "ORGAN_SERVE_INSPECT_MAX_BYTES", default_value_t = 128 << 20)]
    pub inspect_max_bytes: u64,
    #[arg(long, hide = true, env = "ORGAN_SERVE_HEADER_TIMEOUT_MS", default_value_t = 10_000)]
    pub header_timeout_ms: u64,
    #[arg(long, hide = true, env = "ORGAN_SERVE_BODY_TIMEOUT_MS", default_value_t = 30_000)]
    pub body_timeout_ms: u64,
    #[arg(long, hide = true, env = "ORGAN_SERVE_IDLE_TIMEOUT_MS", default_value_t = 300_000)]
    pub idle_timeout_ms: u64,
}
