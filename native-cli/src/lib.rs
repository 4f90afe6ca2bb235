//! organ-cli: the `organ` binary's commands, model sources, writers and HTTP server, as a
//! library so that fuzz targets and tests can drive them (the binary is `src/main.rs`).

pub mod atomic;
pub mod byte_source;
pub mod cli;
pub mod cmd;
pub mod digest;
pub mod discover;
pub mod input;
pub mod judge;
pub mod llama_cpp;
pub mod location;
pub mod model;
pub mod model_file;
pub mod paint;
pub mod paths;
pub mod predict;
pub mod progress;
pub mod remote;
pub mod serve;
pub mod summary;
pub mod write;
pub mod yaml;
