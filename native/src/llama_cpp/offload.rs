//! Where llama-perplexity runs the model: `--gpu-layers` and `--device`, checked for form
//! and passed through (docs/judge.md).

use anyhow::Result;

/// Where llama-perplexity runs the model (docs/judge.md): the layers it offloads (its
/// `-ngl`: a number, `auto` or `all`) and the devices it uses (its `--device`: `CUDA0`,
/// `CUDA0,CUDA1`, `none` for the CPU alone; `llama-perplexity --list-devices` names
/// them). Each is passed through as given, checked for form only (llama.cpp says which
/// device it does not have); without them, llama.cpp's own defaults.
#[derive(clap::Args, Clone, Debug, Default, PartialEq, Eq)]
pub struct Offload {
    /// Layers llama-perplexity offloads to a device: N, auto or all (its -ngl; default:
    /// its own).
    #[arg(long, value_name = "N|auto|all", value_parser = gpu_layers)]
    pub gpu_layers: Option<String>,
    /// The devices llama-perplexity runs on, comma-separated (its --device; none: the CPU
    /// alone; llama-perplexity --list-devices names them).
    #[arg(long, value_name = "DEV[,DEV…]", value_parser = devices)]
    pub device: Option<String>,
}

impl Offload {
    /// The offload a request names (the HTTP API's `gpu_layers` and `device`), each
    /// checked as the flags are.
    ///
    /// # Errors
    /// A malformed value, named by its field.
    pub fn new(gpu_layers: Option<&str>, device: Option<&str>) -> Result<Offload> {
        let check = |field: &str, v: Option<&str>, f: fn(&str) -> Result<String, String>| {
            v.map(f).transpose().map_err(|e| anyhow::anyhow!("{field}: {e}"))
        };
        Ok(Offload {
            gpu_layers: check("gpu_layers", gpu_layers, self::gpu_layers)?,
            device: check("device", device, devices)?,
        })
    }
}

impl Offload {
    /// The offload of one of many evaluations run side by side (`organ sensitivity
    /// --jobs`): with several devices listed, job slot `slot` runs on device `slot mod
    /// k` alone, so the jobs spread evenly over the devices instead of each splitting
    /// the model over all of them; with one device or none, the offload as it is.
    pub fn for_slot(&self, slot: usize) -> Offload {
        match self.device.as_deref().map(|d| d.split(',').collect::<Vec<_>>()) {
            Some(list) if list.len() > 1 => {
                Offload { gpu_layers: self.gpu_layers.clone(), device: Some(list[slot % list.len()].to_owned()) }
            }
            _ => self.clone(),
        }
    }
}

/// `--gpu-layers`: a count, `auto` or `all`, as llama.cpp's `-ngl` takes it.
pub fn gpu_layers(s: &str) -> Result<String, String> {
    if s == "auto" || s == "all" || s.parse::<u32>().is_ok() {
        Ok(s.to_owned())
    } else {
        Err(format!("{s:?}: give a number of layers, auto or all"))
    }
}

/// The longest `--device` list taken.
const MAX_DEVICES_LEN: usize = 256;

/// `--device`: comma-separated device names (letters, digits, `_`, `-`, `.`, `:`), as
/// llama.cpp's `--device` takes them.
pub fn devices(s: &str) -> Result<String, String> {
    let name_ok = |d: &str| !d.is_empty() && d.chars().all(|c| c.is_ascii_alphanumeric() || "_-.:".contains(c));
    if s.len() <= MAX_DEVICES_LEN && s.split(',').all(name_ok) {
        Ok(s.to_owned())
    } else {
        Err(format!(
            "{:?}: give device names separated by commas (none for the CPU alone), at most {MAX_DEVICES_LEN} bytes",
            s.chars().take(64).collect::<String>()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::Offload;

    #[test]
    fn jobs_spread_over_the_devices_listed() {
        let o = |d: Option<&str>| Offload { gpu_layers: Some("all".into()), device: d.map(str::to_owned) };
        let two = o(Some("CUDA0,CUDA1"));
        let on: Vec<_> = (0..4).map(|slot| two.for_slot(slot).device.unwrap()).collect();
        assert_eq!(on, ["CUDA0", "CUDA1", "CUDA0", "CUDA1"]);
        assert_eq!(two.for_slot(1).gpu_layers.as_deref(), Some("all"));
        // One device, none listed, or the CPU alone: as given.
        for d in [Some("CUDA0"), None, Some("none")] {
            assert_eq!(o(d).for_slot(3), o(d));
        }
    }
}
