//! `organ serve`, started for real on a loopback port: every endpoint on SmolLM2, measure
//! equal to `organ measure --json`, diff equal to `organ diff --json`, check equal to
//! `organ check --json`, sensitivity and recipe equal to `organ sensitivity --predict
//! --json` and `organ recipe --json`, hostile requests answered 4xx with the server still
//! up, 200 concurrent inspects with 4 concurrent measure jobs, and cancellation without
//! partial output.

mod check;
mod diff;
mod endpoints;
mod eval;
mod experts;
mod experts_surgery;
mod jobs;
mod layers;
mod limits;
mod lora;
mod memory;
mod memory_estimate;
mod merge;
mod meta;
mod moe;
mod quantize;
mod remote;
mod remote_policy;
mod retention;
mod security;
mod server;
mod sigma;
