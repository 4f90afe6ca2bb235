//! Any bytes through the merge configuration's readers and the flags' grammars: as a YAML
//! configuration (`organ merge CONFIG.yml`, through the CLI's own YAML loader), as the
//! JSON one the API and the browser hand the core, as a `--param KEY=VALUE` (its VALUE is
//! YAML) and as a `--set KEY=VALUE[:TYPE]`. Whatever is read must be refused or checked
//! without a panic, within the nesting and size caps (docs/limits.md), and what a
//! configuration reads must resolve for any tensor.
#![no_main]

use libfuzzer_sys::fuzz_target;
use organ_core::merge::config::Config;
use organ_core::surgery::meta;
use serde_json::Value;

/// The CLI's loader itself, not a copy: native-cli is a binary crate with the whole
/// server behind it, and this file needs only yaml-rust2, serde_json and anyhow.
#[path = "../../../native/src/yaml.rs"]
mod yaml;

const NAMES: [&str; 4] = ["token_embd.weight", "blk.0.attn_q.weight", "blk.3.ffn_down.weight", "output.weight"];

fn config(v: &Value) {
    let Ok(c) = Config::from_json(v) else { return };
    for name in NAMES {
        for layers in [None, Some(1), Some(4)] {
            let _ = c.resolve(name, layers);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(v) = serde_json::from_slice::<Value>(data) {
        config(&v);
    }
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(v) = yaml::to_json(text) {
        config(&v);
    }
    if let Some((_, value)) = text.split_once('=') {
        let _ = yaml::to_json(value);
    }
    if let Ok((key, value, ty)) = meta::parse_set(text) {
        let _ = meta::check_key(key);
        let _ = meta::parse_value(key, value, ty.as_ref(), None);
    }
});
