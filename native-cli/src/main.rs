//! `organ`: open GGUF models like a surgeon. See `organ --help` and README.md.

mod cmd;
mod model;
mod output;

use anyhow::Result;
use clap::{Parser, Subcommand};
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
        /// One or more GGUF files; with several, a ranking table follows.
        #[arg(required = true)]
        models: Vec<PathBuf>,
        /// Also write the full report as JSON (schema: docs/report.schema.json).
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
        /// Also write one CSV row per tensor.
        #[arg(long, value_name = "FILE")]
        csv: Option<PathBuf>,
        /// Print only the summary, groups and wells, not the per-tensor table.
        #[arg(long)]
        summary_only: bool,
        /// How many lowest-θ tensors ("wells") to print.
        #[arg(long, default_value_t = 10)]
        wells: usize,
        /// Worker threads (default: one per core).
        #[arg(long, short = 'j')]
        threads: Option<usize>,
    },
}

fn run(cli: Cli) -> Result<()> {
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    match cli.command {
        Command::Inspect { model, json } => cmd::inspect::run(&model, json, &mut out)?,
        Command::Measure {
            models,
            json,
            csv,
            summary_only,
            wells,
            threads,
        } => {
            if let Some(n) = threads {
                rayon::ThreadPoolBuilder::new()
                    .num_threads(n.max(1))
                    .build_global()?;
            }
            let opts = cmd::measure::Options {
                models,
                json,
                csv,
                summary_only,
                wells,
            };
            cmd::measure::run(&opts, &mut out)?;
        }
    }
    out.flush()?;
    Ok(())
}

fn main() {
    let cli = Cli::parse();
    if let Err(e) = run(cli) {
        // A closed pipe (`organ inspect x | head`) is not an error.
        if e.chain().any(|c| {
            c.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
        }) {
            std::process::exit(0);
        }
        eprintln!("organ: error: {e:#}");
        std::process::exit(1);
    }
}
