//! organ-native: organ's host library on a machine with files, processes and a network.
//! Where a model's bytes come from (files, split sets, organ directories, URLs, object
//! stores), the llama.cpp tools run and their output read, the writers (atomic, split),
//! and each command's work over the core. The faces are over it: the `organ` binary and
//! its HTTP API (native-cli), the Python module (python); none of them depends on another.

pub mod atomic;
pub mod byte_source;
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
pub mod summary;
pub mod write;
pub mod yaml;
