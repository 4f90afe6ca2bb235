//! `organ quantize`'s report ([`crate::quantize::report::QuantizeReport`]) rendered: its
//! JSON is the plan (`--json`), its text what llama-quantize prints at the end, the sizes,
//! after every tensor's types for a dry run.

use crate::gguf::display::printable;
pub use crate::quantize::report::{QuantizeReport, Row};
use core::fmt;

/// A dry run's tensors (`NAME FROM -> TO`), then the sizes, then how many tensors fell
/// back for their rows.
///
/// # Errors
/// `out` refused a write.
pub fn text(r: &QuantizeReport, out: &mut dyn fmt::Write) -> fmt::Result {
    if r.outputs.is_empty() {
        for t in &r.tensors {
            writeln!(out, "{:<40} {:>8} -> {}", printable(&t.name), t.from.name(), t.to.name())?;
        }
    }
    let mib = |b: u64| b as f64 / 1024.0 / 1024.0;
    writeln!(out, "model size  = {:8.2} MiB ({:.2} BPW)", mib(r.bytes_in), r.bpw(r.bytes_in))?;
    writeln!(out, "quant size  = {:8.2} MiB ({:.2} BPW)", mib(r.bytes_out), r.bpw(r.bytes_out))?;
    if r.n_fallback > 0 {
        writeln!(
            out,
            "{} of {} tensors fell back to another type (rows not whole blocks)",
            r.n_fallback,
            r.tensors.len()
        )?;
    }
    Ok(())
}
