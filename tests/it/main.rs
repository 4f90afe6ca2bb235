//! organ's end-to-end tests, one binary with a module per area: the `organ` binary run as
//! a child process on synthetic files and on SmolLM2, against gguf-py, zref and llama.cpp.

mod common;

mod api;
mod cli_errors;
mod fleet;
mod harden;
mod hostile;
mod llama;
mod purify;
mod smollm2;
mod split;
mod surgery;
