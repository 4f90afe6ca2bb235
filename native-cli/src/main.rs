//! `organ`: open GGUF models like a surgeon. See `organ --help` and README.md.
//! The flags and what each command makes of them: `organ_cli::cli`.

/// See Cargo.toml: per-tensor buffers are reused instead of faulted in again.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::Parser;
use organ_cli::cli::{self, Cli, Exit};
use organ_cli::progress;

fn main() {
    let cli = Cli::parse();
    progress::set_format(cli.global.progress);
    let error_status = cli.command.error_status();
    match cli::run(cli, organ_cli::serve::run_args) {
        Ok(Exit::Done) => {}
        Ok(Exit::Changed) => std::process::exit(1),
        Err(e) => fail(&e, error_status),
    }
}

/// Reports `e` and exits with `status`.
fn fail(e: &anyhow::Error, status: i32) -> ! {
    // A closed pipe (`organ inspect x --json | head`) is not an error, whichever encoder
    // met it (serde_json wraps the io::Error in its own).
    if organ_cli::atomic::broken_pipe(e) {
        std::process::exit(0);
    }
    progress::error(e);
    std::process::exit(status);
}
