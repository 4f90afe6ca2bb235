//! organ-cli: the `organ` binary's faces over the host library ([`organ_native`]): its
//! flags and what each command makes of them ([`cli`]), and the HTTP API ([`serve`]),
//! as a library so that fuzz targets and tests can drive them (the binary is
//! `src/main.rs`). The host library's modules are re-exported under their own names,
//! so `organ_cli::cmd`, `organ_cli::model`, … are the ones the faces use.

pub mod cli;
pub mod serve;

pub use organ_native::{
    atomic, byte_source, cmd, digest, discover, input, judge, llama_cpp, location, model, model_file, paint, paths,
    predict, progress, remote, summary, write, yaml,
};
