//! organ's end-to-end tests, one binary with a module per area: the `organ` binary run as
//! a child process on synthetic files and on SmolLM2, against gguf-py, zref and llama.cpp.
//!
//! A test that needs what `scripts/test.sh` installs (the model, the gguf-py oracle,
//! llama.cpp) starts with a [`common::need`] guard: without it, the test prints one
//! `skipped:` line and passes, or fails under `CI=true`. See docs/testing.md.

mod build;
mod common;

mod api;
mod azure;
mod chat_template;
mod check;
mod cli_errors;
mod cut_short;
mod diff;
mod digests;
mod eval;
mod eval_handed;
mod eval_logits_cache;
mod experts;
mod experts_surgery;
mod fleet;
mod fleet_shards;
mod fleet_store;
mod fleet_verify;
mod force;
mod harden;
mod hostile;
mod hub;
mod layers;
mod llama;
mod lora_extract;
mod lora_measure;
mod lora_merge;
mod measure_stop;
mod memory;
mod merge;
mod meta;
mod meta_tensors;
mod moe;
mod moto;
mod predict;
mod purify;
mod quant_q2_0;
mod quantize;
mod recipe;
mod remote;
mod remote_limits;
mod remote_multi;
mod remote_urls;
mod sensitivity;
mod sensitivity_sweep;
mod sigma;
mod smollm2;
mod split;
mod store;
mod surgery;
mod tokenizer;
mod ux_cli;
mod ux_clicks;
mod ux_look;
