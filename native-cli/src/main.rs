//! `organ`: open GGUF models like a surgeon. See `organ --help` and README.md.

/// See Cargo.toml: per-tensor buffers are reused instead of faulted in again.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use anyhow::Result;
use clap::{Parser, Subcommand};
use organ_cli::{cmd, progress, serve, write};
use std::io::Write;
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "organ",
    version,
    about = "Open GGUF models like a surgeon: inspect them and measure every tensor's θ (Z-measure v1)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Use organ directories' files without checking them against the digests their
    /// manifest records (BLAKE3, or sha256 in older directories; a warning says so).
    #[arg(long, global = true)]
    no_verify: bool,
    /// How progress, warnings and the final error are written to stderr: human (text and
    /// a progress bar) or jsonl (one JSON object per line, for programs; see README).
    #[arg(long, global = true, value_enum, value_name = "FORMAT", default_value = "human")]
    progress: progress::Format,
    /// Flush every output to disk before renaming it into place (as `rsync --fsync`).
    /// Without it only outputs that replace an existing file (--force) are flushed, and
    /// new ones are written as cp writes them.
    #[arg(long, global = true, env = "ORGAN_FSYNC", action = clap::ArgAction::SetTrue,
          value_parser = clap::builder::BoolishValueParser::new())]
    fsync: bool,
    /// Remote models (http(s) URLs): sampled blocks closer than this many bytes share one
    /// range request [default: 262144] (docs/remote.md).
    #[arg(long, global = true, value_name = "BYTES", env = "ORGAN_REMOTE_GAP")]
    remote_gap: Option<u64>,
    /// Remote models: range requests in flight at once [default: 8].
    #[arg(long, global = true, value_name = "N")]
    remote_concurrency: Option<usize>,
    /// Remote models: retries of one request (429, 5xx, a reset, a timeout, a short body)
    /// before failing [default: 5].
    #[arg(long, global = true, value_name = "N")]
    remote_retries: Option<u32>,
    /// Remote models: a server that ignores Range is read whole up to this many bytes,
    /// refused above; a model fetched whole to disk (diff, dissect, graft's donor) too
    /// [default: 268435456].
    #[arg(long, global = true, value_name = "BYTES")]
    remote_max_whole: Option<u64>,
    /// Remote models: a transfer slower than this many bytes/s for --remote-speed-time
    /// seconds fails, as curl's --speed-limit [default: 1024].
    #[arg(long, global = true, value_name = "BYTES")]
    remote_speed_limit: Option<u64>,
    /// Remote models: how long a transfer may stay below --remote-speed-limit (and a read
    /// wait for a byte) before it fails [default: 30].
    #[arg(long, global = true, value_name = "SECS")]
    remote_speed_time: Option<u64>,
    /// The header budget: a GGUF whose header (metadata and tensor infos) takes more than
    /// this many bytes is refused, before more of it is read [default: 33554432]
    /// (docs/limits.md).
    #[arg(long, global = true, value_name = "BYTES", env = organ_cli::input::MAX_HEADER_BYTES_ENV)]
    max_header_bytes: Option<u64>,
}

/// Which tensors an operation touches; every criterion given must hold.
#[derive(clap::Args)]
struct SelectArgs {
    /// Layers: ranges and lists, e.g. 5-20 or 3,7,9-11.
    #[arg(long)]
    layers: Option<String>,
    /// Anatomy groups: organ, skeleton, embed, norm, adapter, other (repeat or comma-separate).
    #[arg(long = "type", value_name = "GROUP")]
    types: Vec<String>,
    /// Tensor name patterns, `*` matching anything (repeatable).
    #[arg(long = "name", value_name = "PATTERN")]
    names: Vec<String>,
}

/// What `measure` and `report merge` write besides the text on stdout, and how much of it.
#[derive(clap::Args)]
struct ReportOutputs {
    /// Also write the full report as JSON (schema: docs/report.schema.json).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Also write one CSV row per tensor.
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
    /// Also write the report as one self-contained static HTML page (the browser app's
    /// export): opens offline, fetches nothing, embeds the JSON.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// Also write the ranking with per-group mean θ as CSV.
    #[arg(long, value_name = "FILE")]
    ranking_csv: Option<PathBuf>,
    /// Print only the summaries, groups and wells, not the per-tensor tables.
    #[arg(long)]
    summary_only: bool,
    /// How many lowest-θ tensors ("wells") to print.
    #[arg(long, default_value_t = 10)]
    wells: usize,
}

#[derive(Subcommand)]
enum Command {
    /// Show a model's metadata and one row per tensor (name, anatomy group, layer, type, shape, offset, bytes).
    Inspect {
        /// The GGUF file.
        model: PathBuf,
        /// Print everything as JSON (arrays in full) instead of a summary.
        #[arg(long)]
        json: bool,
    },
    /// Measure every tensor's θ (Z-measure v1) with its entropy H, kurtosis K and coherence C.
    Measure {
        /// GGUF files, split shards (the whole split is measured), organ directories, or
        /// directories of models (fleets); with several models, a ranking follows.
        #[arg(required_unless_present = "fleet")]
        models: Vec<PathBuf>,
        #[command(flatten)]
        report: ReportOutputs,
        /// Worker threads (default: one per core).
        #[arg(long, short = 'j')]
        threads: Option<usize>,
        /// Read only the sampled blocks with positioned reads, never mapping tensor data
        /// (automatic for models over 2 GiB): memory stays bounded whatever the size.
        #[arg(long)]
        stream: bool,
        /// Print bytes read and peak memory to stderr when done.
        #[arg(long)]
        stats: bool,
        /// Keep finished reports here, keyed by the model's BLAKE3 and the measure's
        /// definition, and reuse them (a fleet
        /// run resumes where it stopped). Default when a directory is measured:
        /// ~/.cache/organ/measure.
        #[arg(long, value_name = "DIR")]
        cache: Option<PathBuf>,
        /// Never read or write the report cache.
        #[arg(long, conflicts_with = "cache")]
        no_cache: bool,
        /// Replace outputs that already exist (never an input of the run).
        #[arg(long)]
        force: bool,
        /// Also measure how noisy each θ is: σ_θ over 8 alternate samples, and σ of θ_mean
        /// (docs/uncertainty.md). About 9× the work of a plain run.
        #[arg(long, conflicts_with = "exact")]
        sigma: bool,
        /// θ over every value instead of a 100 000-value sample (reports say
        /// "z1-exact"). Memory grows with the largest tensor.
        #[arg(long)]
        exact: bool,
        /// Also measure each expert of every expert tensor (`_exps`) as a tensor of its own
        /// (Z-measure §6), flagging outliers and byte-identical experts. One sample per
        /// expert: about E times the work of an expert tensor.
        #[arg(long)]
        experts: bool,
        /// Measure a fleet in shards (docs/fleet.md): every model below DIR, or those LIST
        /// names (a path or URL a line), sorted by name, model j going to shard j mod N.
        /// This process measures its shard's models into --results; `organ report merge`
        /// ranks them.
        #[arg(long, value_name = "LIST|DIR", requires = "results",
              conflicts_with_all = ["models", "json", "csv", "html", "ranking_csv", "cache"])]
        fleet: Option<PathBuf>,
        /// With --fleet: this process's shard, I/N (I from 0). Also from JOB_COMPLETION_INDEX
        /// with --shards N (a Kubernetes Indexed Job), or SLURM_ARRAY_TASK_ID −
        /// SLURM_ARRAY_TASK_MIN of SLURM_ARRAY_TASK_COUNT (a Slurm array); all given must agree.
        #[arg(long, value_name = "I/N", requires = "fleet")]
        shard: Option<String>,
        /// With --fleet: how many shards, this one's index coming from the environment.
        #[arg(long, value_name = "N", requires = "fleet")]
        shards: Option<u64>,
        /// With --fleet: the directory, or object-store prefix (s3://BUCKET/PREFIX, gs://,
        /// az://), that receives one report per model, named by the model's identity and
        /// the measure's definition; a run skips what is there.
        #[arg(long, value_name = "DIR|URL", requires = "fleet")]
        results: Option<PathBuf>,
    },
    /// Reports of fleets measured in shards (docs/fleet.md).
    Report {
        #[command(subcommand)]
        what: ReportCommand,
    },
    /// Compare two models tensor by tensor (Compare v1): which tensors changed, by how
    /// much (cos, rel_l2, max_abs, dθ), in which layers and groups.
    Diff {
        /// The base: a GGUF, a split GGUF (any shard) or an organ directory.
        a: PathBuf,
        /// The other model, of any of those kinds and any quant types.
        b: PathBuf,
        /// Also write the full report as JSON (schema: docs/report.schema.json, "compare": "c1").
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
        /// Also write one CSV row per pair (and per expert of expert tensors).
        #[arg(long, value_name = "FILE")]
        csv: Option<PathBuf>,
        /// Also write the report as one self-contained static HTML page (the browser app's
        /// export, with the 1 − cos heatmap and the θ scatter): opens offline, embeds the JSON.
        #[arg(long, value_name = "FILE")]
        html: Option<PathBuf>,
        /// How many of the most changed tensors to print.
        #[arg(long, default_value_t = 10)]
        top: usize,
        /// List only changed pairs in the per-tensor outputs (CSV rows, the JSON's "pairs");
        /// the counts and summaries still cover every pair.
        #[arg(long)]
        only_changed: bool,
        /// Exit with status 1 when anything differs: a comparable pair not byte-identical,
        /// a name in one model only, or a shape mismatch. Errors then exit with 2, as
        /// diff(1)'s do (without this flag, with 1, as every command's do).
        #[arg(long)]
        fail_on_change: bool,
        /// Worker threads (default: one per core).
        #[arg(long, short = 'j')]
        threads: Option<usize>,
        /// Read by positioned reads only, never mapping tensor data (automatic when either
        /// model is over 2 GiB): memory stays bounded whatever the size.
        #[arg(long)]
        stream: bool,
        /// Print bytes compared, bytes read and peak memory to stderr when done.
        #[arg(long)]
        stats: bool,
        /// Replace outputs that already exist (never an input of the run).
        #[arg(long)]
        force: bool,
    },
    /// Check a model's health without running it (Check k1): non-finite values and block
    /// scales, zero, constant and duplicated tensors (a full scan), shapes and required
    /// tensors against the architecture (llama, qwen2, gemma3, deepseek2), tokenizer,
    /// chat-template, expert and split metadata. Exits 1 when any finding is an error.
    Check {
        /// A GGUF, a split GGUF (any shard) or an organ directory.
        model: PathBuf,
        /// Also write the report as JSON (schema: docs/report.schema.json, "check": "k1").
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
        /// Worker threads (default: one per core).
        #[arg(long, short = 'j')]
        threads: Option<usize>,
        /// Read by positioned reads only, never mapping tensor data (automatic for models
        /// over 2 GiB): memory stays bounded whatever the size.
        #[arg(long)]
        stream: bool,
        /// Print bytes read and peak memory to stderr when done.
        #[arg(long)]
        stats: bool,
        /// Exit 0 even when a finding is an error (the report still says so).
        #[arg(long)]
        exit_zero: bool,
        /// Replace outputs that already exist (never an input of the run).
        #[arg(long)]
        force: bool,
    },
    /// Split a GGUF into an organ directory: one .bin per tensor under skeleton/, organs/,
    /// embed/, norm/, adapters/, other/, plus manifest.json (all metadata, order, BLAKE3s).
    Dissect {
        /// The GGUF file.
        model: PathBuf,
        /// The directory to create (must not exist).
        #[arg(long)]
        out: PathBuf,
        /// Also record each tensor's θ in the manifest.
        #[arg(long)]
        measure: bool,
        /// Also record the source's sha256 (the Hub's LFS id) in the manifest: one more
        /// pass over its bytes (BLAKE3 is always recorded).
        #[arg(long)]
        sha256: bool,
        /// Replace outputs that already exist (never an input of the run).
        #[arg(long)]
        force: bool,
    },
    /// Build a GGUF from an organ directory (byte-identical to the dissected original).
    Assemble {
        /// The organ directory.
        dir: PathBuf,
        /// The GGUF file to create (must not exist).
        #[arg(long)]
        out: PathBuf,
        /// Write a split model instead: shards OUT-0000i-of-0000N.gguf of at most this much
        /// tensor data each (500M, 2G…), as llama-gguf-split writes them.
        #[arg(long, value_name = "SIZE")]
        split_max_size: Option<String>,
        /// Replace outputs that already exist (never an input of the run).
        #[arg(long)]
        force: bool,
    },
    /// Transplant tensors from a donor into a recipient of the same architecture.
    /// Either may be a GGUF or an organ directory; --out ending in .gguf writes a GGUF,
    /// anything else an organ directory.
    Graft {
        /// Where the tensors come from.
        #[arg(long, visible_alias = "source")]
        donor: PathBuf,
        /// The model that receives them.
        #[arg(long, visible_alias = "target")]
        recipient: PathBuf,
        /// The result (must not exist). Not needed with --dry-run.
        #[arg(long)]
        out: Option<PathBuf>,
        #[command(flatten)]
        select: SelectArgs,
        /// Print the plan and check it; write nothing.
        #[arg(long)]
        dry_run: bool,
        /// With a .gguf --out: write a split model with shards of at most this much tensor data.
        #[arg(long, value_name = "SIZE")]
        split_max_size: Option<String>,
        /// Also record the donor's sha256 (organ.graft.donor_sha256) beside its BLAKE3.
        #[arg(long)]
        sha256: bool,
        /// Replace outputs that already exist (never an input of the run).
        #[arg(long)]
        force: bool,
        /// Also write the report (the tensors grafted, and --judge's verdict) as JSON.
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
        #[command(flatten)]
        judge: cmd::eval::JudgeArgs,
    },
    /// Experts as organs: extract one as a dense model, or prune an MoE to some of them.
    Experts {
        #[command(subcommand)]
        op: cmd::experts::Op,
    },
    /// Build a mixture of experts (llama's Mixtral layout) from a dense llama base and
    /// dense donors of its shapes, one expert each (docs/moe.md).
    Moe {
        /// The model whose attention, embeddings and norms the MoE keeps.
        #[arg(long)]
        base: PathBuf,
        /// A donor whose FFN becomes an expert (repeat, in expert order).
        #[arg(long = "expert", value_name = "MODEL", required = true)]
        experts: Vec<PathBuf>,
        /// Experts used per token (llama.expert_used_count).
        #[arg(long, default_value_t = 2)]
        experts_used: u64,
        /// How the routers are made: uniform (all zero), random (seeded normal) or embed
        /// (mergekit's cheap_embed from --prompts).
        #[arg(long, default_value = "uniform")]
        router: String,
        /// With --router embed: one prompt file per expert, in expert order (one prompt a line).
        #[arg(long, num_args = 1.., value_name = "FILE")]
        prompts: Vec<PathBuf>,
        /// With --router embed: one negative prompt file per expert.
        #[arg(long, num_args = 1.., value_name = "FILE")]
        negative_prompts: Vec<PathBuf>,
        /// The random router's seed.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Requantize to this type where the donors' types for a tensor disagree.
        #[arg(long = "type", value_name = "TYPE")]
        ty: Option<String>,
        /// The GGUF file to create.
        #[arg(long)]
        out: PathBuf,
        /// Replace outputs that already exist (never an input of the run).
        #[arg(long)]
        force: bool,
        /// Also write the report (experts, router, requantized tensors, --judge's verdict) as JSON.
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
        #[command(flatten)]
        judge: cmd::eval::JudgeArgs,
    },
    /// Denoise tensors (spectral FFT or fractal Haar, docs/purify.md), keeping each one's
    /// mean, std and type, and write the model with organ.purify.* metadata.
    Purify {
        /// A GGUF, split GGUF or organ directory.
        model: PathBuf,
        /// fractal or spectral.
        #[arg(long)]
        method: String,
        /// The result (.gguf, else an organ directory; must not exist).
        #[arg(long)]
        out: PathBuf,
        #[command(flatten)]
        select: SelectArgs,
        /// fractal: 0..1, how far incoherent coefficients are pulled to 0.
        #[arg(long, default_value_t = 0.5)]
        strength: f64,
        /// spectral: fraction of each row's energy to keep.
        #[arg(long, default_value_t = 0.95)]
        keep: f64,
        /// Write purified tensors as this type (f16) instead of their own.
        #[arg(long = "as", value_name = "TYPE")]
        as_type: Option<String>,
        /// Keep a purified tensor only when its θ rises.
        #[arg(long)]
        only_if_improves: bool,
        /// Also write the per-tensor report as JSON.
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
        /// With a .gguf --out: write a split model.
        #[arg(long, value_name = "SIZE")]
        split_max_size: Option<String>,
        /// Replace outputs that already exist (never an input of the run).
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        judge: cmd::eval::JudgeArgs,
    },
    /// Perplexity of a model on a text and, with --base, its KL divergence from the base
    /// and top-token agreement, measured by llama.cpp's llama-perplexity (docs/judge.md).
    Eval {
        /// The GGUF model (a split model: its first shard).
        model: PathBuf,
        /// The text to score (plain UTF-8, at least two contexts of tokens).
        #[arg(long, value_name = "FILE")]
        text: PathBuf,
        /// The model to compare with (its parent): same vocabulary, same context.
        #[arg(long, value_name = "PARENT")]
        base: Option<PathBuf>,
        /// Tokens per context (llama-perplexity's -c; the second half of each is scored).
        #[arg(long, value_name = "N", default_value_t = cmd::eval::DEFAULT_CTX)]
        ctx: u32,
        /// llama-perplexity's threads (default: its own).
        #[arg(long, short = 'j', value_name = "N")]
        threads: Option<u32>,
        /// Score at most this many contexts (default: all the text holds).
        #[arg(long, value_name = "N")]
        chunks: Option<u32>,
        /// Also write the figures as JSON.
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
        /// llama.cpp's bin directory, holding llama-perplexity (default: ORGAN_LLAMA_CPP, then PATH).
        #[arg(long, value_name = "DIR")]
        llama_cpp: Option<PathBuf>,
        /// Replace outputs that already exist (never an input of the run).
        #[arg(long)]
        force: bool,
    },
    /// Serve every operation over HTTP (docs/openapi.json), and the browser app when built.
    Serve {
        /// Every path a request names lies under this directory; outputs go to ROOT/results.
        #[arg(long)]
        root: PathBuf,
        /// Address to listen on. Anything but loopback requires --token.
        #[arg(long, default_value = "127.0.0.1:8935")]
        addr: std::net::SocketAddr,
        /// Require `Authorization: Bearer TOKEN` on /api (default: the ORGAN_TOKEN variable).
        #[arg(long, env = "ORGAN_TOKEN", hide_env_values = true)]
        token: Option<String>,
        /// Jobs running at once; the rest queue.
        #[arg(long, default_value_t = 2)]
        jobs: usize,
        /// The browser app's build to serve at / (default: ./dist when it holds index.html).
        #[arg(long, value_name = "DIR")]
        web: Option<PathBuf>,
        /// Largest request body accepted, in bytes.
        #[arg(long, default_value_t = 1 << 20)]
        max_body: usize,
        /// Also accept requests naming this host (in `Host`, and browsers' `Origin`), e.g. the
        /// machine's name; localhost, 127.0.0.1, [::1] and the listening address always are
        /// (repeatable).
        #[arg(long = "allow-host", value_name = "NAME")]
        allow_hosts: Vec<String>,
        /// Connections served at once; more wait to be accepted.
        #[arg(long, default_value_t = 512)]
        max_connections: usize,
        /// Model arguments may also be URLs, which the server then fetches (off by default:
        /// anyone who may call the API could have it fetch any URL; docs/api.md).
        #[arg(long)]
        allow_remote: bool,
        /// The longest a job may run, in seconds (its wait in the queue not counted); past
        /// it the job's processes are killed and it fails saying so. 0: no limit.
        #[arg(long, value_name = "SECS", default_value_t = 48 * 3600)]
        job_timeout: u64,
        /// How long a finished job's entry and results are kept, in seconds (DELETE
        /// /api/jobs/ID removes them sooner).
        #[arg(long, value_name = "SECS", default_value_t = 24 * 3600, value_parser = clap::value_parser!(u64).range(1..))]
        job_retention: u64,
        /// The most finished jobs kept; beyond, the oldest are removed, results and all.
        #[arg(long, value_name = "N", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
        max_finished_jobs: u64,
        /// With --allow-remote: the URL schemes a request may name (of https, http, hf, s3,
        /// gs, az). Stores and hf:// use only the ORGAN_API_* credentials (docs/api.md).
        #[arg(long, value_name = "LIST", value_delimiter = ',', default_value = "https,http")]
        allow_remote_schemes: Vec<String>,
        /// With --allow-remote: also read from loopback, private, link-local and this
        /// machine's own addresses (refused by default; metadata services always are).
        #[arg(long)]
        allow_remote_private: bool,
        /// With --allow-remote: read from this one address although it is private, e.g. an
        /// internal mirror (ADDR:PORT; port 0 for any; repeatable).
        #[arg(long, value_name = "ADDR:PORT")]
        allow_remote_to: Vec<std::net::SocketAddr>,
        // Timeouts, in milliseconds (hidden: for tests and unusual setups).
        #[arg(long, hide = true, env = "ORGAN_SERVE_INSPECT_TIMEOUT_MS", default_value_t = 60_000)]
        inspect_timeout_ms: u64,
        /// The most of an inspect's JSON the server holds and returns (hidden: for tests).
        #[arg(long, hide = true, env = "ORGAN_SERVE_INSPECT_MAX_BYTES", default_value_t = 128 << 20)]
        inspect_max_bytes: u64,
        #[arg(long, hide = true, env = "ORGAN_SERVE_HEADER_TIMEOUT_MS", default_value_t = 10_000)]
        header_timeout_ms: u64,
        #[arg(long, hide = true, env = "ORGAN_SERVE_BODY_TIMEOUT_MS", default_value_t = 30_000)]
        body_timeout_ms: u64,
        #[arg(long, hide = true, env = "ORGAN_SERVE_IDLE_TIMEOUT_MS", default_value_t = 300_000)]
        idle_timeout_ms: u64,
    },
}

#[derive(Subcommand)]
enum ReportCommand {
    /// The fleet's tables and ranking from the reports `organ measure --fleet … --results
    /// RESULTS` wrote: what `organ measure DIR` prints and writes for the same models.
    Merge {
        /// The results of the fleet's shards: a directory or s3://BUCKET/PREFIX (gs://, az://).
        results: PathBuf,
        #[command(flatten)]
        report: ReportOutputs,
        /// Replace outputs that already exist.
        #[arg(long)]
        force: bool,
    },
}

/// The serve flags' remote policy: schemes checked against those organ reads.
fn remote_policy(
    schemes: Vec<String>,
    private: bool,
    allow_to: Vec<std::net::SocketAddr>,
) -> Result<organ_cli::remote::policy::Policy> {
    let schemes: Vec<String> =
        schemes.iter().map(|s| s.trim().to_ascii_lowercase()).filter(|s| !s.is_empty()).collect();
    if let Some(bad) = schemes.iter().find(|s| !["https", "http", "hf", "s3", "gs", "az"].contains(&s.as_str())) {
        anyhow::bail!("--allow-remote-schemes: {bad} is not one of https, http, hf, s3, gs, az");
    }
    Ok(organ_cli::remote::policy::Policy { schemes, private, allow_to })
}

/// How a command that did not fail ends.
enum Exit {
    /// Status 0.
    Done,
    /// `diff --fail-on-change` found a change, or `check` an error finding: status 1.
    Changed,
}

fn run(cli: Cli) -> Result<Exit> {
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    // Where the text report goes when a report is written to standard output (`-`).
    let mut sink = std::io::sink();
    organ_cli::model::organ_dir::set_verify(!cli.no_verify);
    organ_cli::atomic::set_fsync(cli.fsync);
    if let Some(b) = cli.max_header_bytes {
        organ_core::limits::set_max_header_bytes(b);
    }
    let d = organ_cli::remote::Config::default();
    organ_cli::remote::configure(organ_cli::remote::Config {
        gap: cli.remote_gap.unwrap_or(d.gap),
        concurrency: cli.remote_concurrency.unwrap_or(d.concurrency).max(1),
        retries: cli.remote_retries.unwrap_or(d.retries),
        max_whole: cli.remote_max_whole.unwrap_or(d.max_whole),
        speed: organ_cli::remote::pace::Speed {
            limit: cli.remote_speed_limit.unwrap_or(d.speed.limit),
            time: cli.remote_speed_time.map_or(d.speed.time, |t| std::time::Duration::from_secs(t.max(1))),
        },
    });
    match cli.command {
        Command::Inspect { model, json } => cmd::inspect::run(&model, json, &mut out)?,
        Command::Measure {
            models,
            report: ReportOutputs { json, csv, html, ranking_csv, summary_only, wells },
            threads,
            stream,
            stats,
            cache,
            no_cache,
            force,
            sigma,
            exact,
            experts,
            fleet: fleet_list,
            shard,
            shards,
            results,
        } => {
            let reports = [&json, &csv, &html, &ranking_csv];
            guard(&models, reports.iter().filter_map(|p| p.as_deref()), force)?;
            let printed: &mut dyn Write = if to_stdout(reports)? { &mut sink } else { &mut out };
            if let Some(n) = threads {
                rayon::ThreadPoolBuilder::new().num_threads(n.max(1)).build_global()?;
            }
            // A fleet (a directory of models) resumes from the default cache.
            let fleet = models.iter().any(|m| m.is_dir() && !m.join("manifest.json").exists());
            let cache = match (no_cache, cache) {
                (true, _) => None,
                (false, Some(c)) => Some(c),
                (false, None) if fleet => std::env::var_os("ORGAN_CACHE")
                    .map(PathBuf::from)
                    .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/organ")))
                    .map(|c| c.join("measure")),
                (false, None) => None,
            };
            let opts = cmd::measure::Options {
                models,
                json,
                csv,
                html,
                summary_only,
                wells,
                stream,
                cache,
                ranking_csv,
                force,
                mode: match (sigma, exact) {
                    (true, _) => organ_core::zmeasure::Mode::Sigma,
                    (_, true) => organ_core::zmeasure::Mode::Exact,
                    _ => organ_core::zmeasure::Mode::Sampled,
                },
                experts,
            };
            match (fleet_list, results) {
                (Some(fleet), Some(results)) => {
                    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
                    let shard = cmd::measure::shard::Shard::resolve(shard.as_deref(), shards, &env)?;
                    cmd::measure::fleet::run(&opts, &fleet, shard, &results, printed)?;
                }
                _ => cmd::measure::run(&opts, printed)?,
            }
            if stats {
                let read = cmd::measure::BYTES_READ.load(std::sync::atomic::Ordering::Relaxed);
                progress::emit(&progress::Event::Stats { tensor_bytes_read: read, peak_rss_kib: peak_rss_kib() });
                let (bytes_fetched, requests, retries) = organ_cli::remote::stats();
                if requests > 0 {
                    let framing = organ_cli::remote::FRAMING.load(std::sync::atomic::Ordering::Relaxed);
                    progress::emit(&progress::Event::RemoteStats { bytes_fetched, requests, retries, framing });
                }
            }
        }
        Command::Report {
            what:
                ReportCommand::Merge {
                    results,
                    report: ReportOutputs { json, csv, html, ranking_csv, summary_only, wells },
                    force,
                },
        } => {
            guard(&[], [&json, &csv, &html, &ranking_csv].into_iter().filter_map(|p| p.as_deref()), force)?;
            let printed: &mut dyn Write =
                if to_stdout([&json, &csv, &html, &ranking_csv])? { &mut sink } else { &mut out };
            let opts = cmd::measure::Options {
                models: Vec::new(),
                json,
                csv,
                html,
                summary_only,
                wells,
                stream: false,
                cache: None,
                ranking_csv,
                force,
                mode: organ_core::zmeasure::Mode::Sampled,
                experts: false,
            };
            cmd::measure::fleet::merge(&results, &opts, printed)?;
        }
        Command::Diff { a, b, json, csv, html, top, only_changed, fail_on_change, threads, stream, stats, force } => {
            guard(&[a.clone(), b.clone()], [&json, &csv, &html].into_iter().filter_map(|p| p.as_deref()), force)?;
            let printed: &mut dyn Write = if to_stdout([&json, &csv, &html])? { &mut sink } else { &mut out };
            if let Some(n) = threads {
                rayon::ThreadPoolBuilder::new().num_threads(n.max(1)).build_global()?;
            }
            let opts = cmd::diff::Options { a, b, json, csv, html, top, only_changed, stream, force };
            let changed = cmd::diff::run(&opts, printed)?;
            if stats {
                let load = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
                progress::emit(&progress::Event::DiffStats {
                    bytes_compared: load(&cmd::diff::BYTES_COMPARED),
                    bytes_read: load(&cmd::diff::BYTES_READ),
                    peak_rss_kib: peak_rss_kib(),
                });
            }
            if fail_on_change && changed {
                printed.flush()?;
                return Ok(Exit::Changed);
            }
        }
        Command::Check { model, json, threads, stream, stats, exit_zero, force } => {
            guard(std::slice::from_ref(&model), json.as_deref(), force)?;
            let printed: &mut dyn Write = if to_stdout([&json])? { &mut sink } else { &mut out };
            if let Some(n) = threads {
                rayon::ThreadPoolBuilder::new().num_threads(n.max(1)).build_global()?;
            }
            let broken = cmd::check::run(&cmd::check::Options { model, json, stream, force }, printed)?;
            if stats {
                let read = cmd::check::BYTES_READ.load(std::sync::atomic::Ordering::Relaxed);
                progress::emit(&progress::Event::Stats { tensor_bytes_read: read, peak_rss_kib: peak_rss_kib() });
            }
            if broken && !exit_zero {
                printed.flush()?;
                return Ok(Exit::Changed);
            }
        }
        Command::Dissect { model, out: dir, measure, sha256, force } => {
            guard(std::slice::from_ref(&model), None, force)?;
            organ_cli::input::check_dest_of(&dir, force, organ_cli::input::Output::OrganDir)?;
            cmd::dissect::run(&cmd::dissect::Options { model: &model, out: &dir, measure, sha256, force }, &mut out)?
        }
        Command::Assemble { dir, out: file, split_max_size, force } => {
            guard(std::slice::from_ref(&dir), [file.as_path()], force)?;
            let max = split_max_size.as_deref().map(write::parse_size).transpose()?;
            cmd::assemble::run(&dir, &file, max, force, &mut out)?
        }
        Command::Purify {
            model,
            method,
            out: dest,
            select,
            strength,
            keep,
            as_type,
            only_if_improves,
            json,
            split_max_size,
            force,
            judge,
        } => {
            use organ_core::surgery::purify::Method;
            let method = match method.as_str() {
                "fractal" => Method::Fractal { strength },
                "spectral" => Method::Spectral { keep },
                m => anyhow::bail!("--method {m:?}: use fractal or spectral"),
            };
            method.check().map_err(anyhow::Error::msg)?;
            guard(std::slice::from_ref(&model), json.as_deref(), force)?;
            organ_cli::input::check_dest_of(&dest, force, model_output(&dest))?;
            let printed: &mut dyn Write = if to_stdout([&json])? { &mut sink } else { &mut out };
            let as_type = match as_type.as_deref() {
                None => None,
                Some(t) => Some(
                    organ_core::GgmlType::from_name(t)
                        .filter(|t| organ_core::quant::quantize::can_quantize(*t))
                        .ok_or_else(|| {
                            let types: Vec<&str> = organ_core::GgmlType::ALL
                                .iter()
                                .filter(|t| organ_core::quant::quantize::can_quantize(**t))
                                .map(|t| t.name())
                                .collect();
                            anyhow::anyhow!("--as {t:?}: organ writes {}", types.join(", "))
                        })?,
                ),
            };
            let selection = selection(&select)?;
            let o = cmd::purify::Options {
                model: &model,
                out: &dest,
                method,
                selection,
                as_type,
                only_if_improves,
                split_max: split_max_size.as_deref().map(write::parse_size).transpose()?,
                json: json.as_deref(),
                force,
                judge: judge.settings(),
            };
            cmd::purify::run(&o, printed)?;
        }
        Command::Eval { model, text, base, ctx, threads, chunks, json, llama_cpp, force } => {
            let inputs: Vec<PathBuf> =
                [Some(model.clone()), base.clone(), Some(text.clone())].into_iter().flatten().collect();
            guard(&inputs, json.as_deref(), force)?;
            let printed: &mut dyn Write = if to_stdout([&json])? { &mut sink } else { &mut out };
            let settings = cmd::eval::Settings { text, ctx, threads, chunks, llama_cpp };
            let o = cmd::eval::Options { model: &model, base: base.as_deref(), settings, json: json.as_deref(), force };
            cmd::eval::run(&o, printed)?;
        }
        Command::Serve {
            root,
            addr,
            token,
            jobs,
            web,
            max_body,
            allow_hosts,
            max_connections,
            allow_remote,
            job_timeout,
            job_retention,
            max_finished_jobs,
            allow_remote_schemes,
            allow_remote_private,
            allow_remote_to,
            inspect_timeout_ms,
            inspect_max_bytes,
            header_timeout_ms,
            body_timeout_ms,
            idle_timeout_ms,
        } => {
            // clap takes an empty ORGAN_TOKEN for no token at all; serve refuses it instead.
            let token = token.or_else(|| std::env::var("ORGAN_TOKEN").ok());
            let ms = std::time::Duration::from_millis;
            serve::run(serve::Options {
                root,
                addr,
                token,
                jobs,
                web,
                max_body,
                allow_hosts,
                inspect_timeout: ms(inspect_timeout_ms.max(1)),
                inspect_max_bytes,
                header_timeout: ms(header_timeout_ms.max(1)),
                body_timeout: ms(body_timeout_ms.max(1)),
                idle_timeout: ms(idle_timeout_ms.max(1)),
                max_connections,
                allow_remote,
                job_timeout: (job_timeout > 0).then(|| std::time::Duration::from_secs(job_timeout)),
                job_retention: std::time::Duration::from_secs(job_retention),
                max_finished_jobs: usize::try_from(max_finished_jobs).unwrap_or(usize::MAX),
                remote: remote_policy(allow_remote_schemes, allow_remote_private, allow_remote_to)?,
            })?
        }
        Command::Graft { donor, recipient, out: dest, select, dry_run, split_max_size, sha256, force, json, judge } => {
            guard(&[donor.clone(), recipient.clone()], json.as_deref(), force)?;
            if let Some(d) = &dest {
                organ_cli::input::check_dest_of(d, force, model_output(d))?;
            }
            let printed: &mut dyn Write = if to_stdout([&json])? { &mut sink } else { &mut out };
            let selection = selection(&select)?;
            let o = cmd::graft::Options {
                donor: &donor,
                recipient: &recipient,
                out: dest.as_deref(),
                selection,
                layers_arg: select.layers.clone(),
                dry_run,
                split_max: split_max_size.as_deref().map(write::parse_size).transpose()?,
                sha256,
                force,
                judge: judge.settings(),
                json: json.as_deref(),
            };
            cmd::graft::run(&o, printed)?;
        }
        Command::Experts { op } => {
            let printed: &mut dyn Write = if to_stdout([&op.common().json])? { &mut sink } else { &mut out };
            cmd::experts::run(&op, printed)?
        }
        Command::Moe {
            base,
            experts,
            experts_used,
            router,
            prompts,
            negative_prompts,
            seed,
            ty,
            out: dest,
            force,
            json,
            judge,
        } => {
            let mut inputs = vec![base.clone()];
            inputs.extend(experts.iter().chain(&prompts).chain(&negative_prompts).cloned());
            guard(&inputs, [Some(dest.as_path()), json.as_deref()].into_iter().flatten(), force)?;
            let printed: &mut dyn Write = if to_stdout([&json])? { &mut sink } else { &mut out };
            let router = organ_core::surgery::moe::RouterMode::parse(&router)
                .ok_or_else(|| anyhow::anyhow!("--router {router:?}: use uniform, random or embed"))?;
            let ty = match ty.as_deref() {
                None => None,
                Some(t) => Some(
                    organ_core::GgmlType::from_name(t).ok_or_else(|| anyhow::anyhow!("--type {t:?}: no such type"))?,
                ),
            };
            let o = cmd::moe::Options {
                base: &base,
                experts: &experts,
                experts_used,
                router,
                prompts: &prompts,
                negative_prompts: &negative_prompts,
                seed,
                ty,
                out: &dest,
                force,
                judge: judge.settings(),
                json: json.as_deref(),
            };
            cmd::moe::run(&o, printed)?;
        }
    }
    out.flush()?;
    Ok(Exit::Done)
}

/// Before any work: records the named inputs (every shard of a split model) and checks
/// that no output would replace one, or replace anything without `--force`. The writers
/// check again when they rename their output into place.
fn guard<'a>(inputs: &[PathBuf], outputs: impl IntoIterator<Item = &'a std::path::Path>, force: bool) -> Result<()> {
    for i in inputs {
        organ_cli::input::declare(i);
        for shard in organ_cli::source::split_shards(i).unwrap_or_default() {
            organ_cli::input::declare(&shard);
        }
    }
    for o in outputs {
        organ_cli::input::check_dest(o, force)?;
    }
    Ok(())
}

/// Whether a report output is standard output (`-`): then the text report is not printed,
/// so that stdout holds that output alone. One output at most may be `-`.
fn to_stdout<'a>(outputs: impl IntoIterator<Item = &'a Option<PathBuf>>) -> Result<bool> {
    let n = outputs.into_iter().flatten().filter(|p| organ_cli::atomic::is_stdout(p)).count();
    if n > 1 {
        anyhow::bail!("-: {n} outputs name standard output; one at most can go there");
    }
    Ok(n == 1)
}

/// What a model output is: a GGUF file when it ends in `.gguf`, else an organ directory
/// (as [`write::write_model`] decides).
fn model_output(p: &std::path::Path) -> organ_cli::input::Output {
    if p.extension().is_some_and(|e| e.eq_ignore_ascii_case("gguf")) {
        organ_cli::input::Output::File
    } else {
        organ_cli::input::Output::OrganDir
    }
}

/// The tensors --layers, --type and --name pick (every criterion given must hold).
fn selection(a: &SelectArgs) -> Result<organ_core::surgery::select::Selection> {
    use organ_core::surgery::select::{Layers, Selection};
    Ok(Selection {
        layers: a.layers.as_deref().map(Layers::parse).transpose().map_err(anyhow::Error::msg)?,
        groups: Selection::parse_groups(&a.types).map_err(anyhow::Error::msg)?,
        patterns: a.names.clone(),
    })
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

fn main() {
    let cli = Cli::parse();
    progress::set_format(cli.progress);
    // `diff --fail-on-change` exits 1 for "changed", so its errors take 2, as diff(1)'s do;
    // so do `check`'s, which exits 1 for "broken". Every other error exits 1.
    let error_status = match cli.command {
        Command::Diff { fail_on_change: true, .. } | Command::Check { .. } => 2,
        _ => 1,
    };
    match run(cli) {
        Ok(Exit::Done) => {}
        Ok(Exit::Changed) => std::process::exit(1),
        Err(e) => fail(&e, error_status),
    }
}

/// Reports `e` and exits with `status`.
fn fail(e: &anyhow::Error, status: i32) -> ! {
    // A closed pipe (`organ inspect x | head`) is not an error.
    if e.chain()
        .any(|c| c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe))
    {
        std::process::exit(0);
    }
    progress::error(e);
    std::process::exit(status);
}
