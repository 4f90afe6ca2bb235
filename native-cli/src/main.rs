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
    // A closed pipe (`organ inspect x | head`) is not an error.
    if e.chain()
        .any(|c| c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe))
    {
        std::process::exit(0);
    }
    progress::error(e);
    std::process::exit(status);
}
