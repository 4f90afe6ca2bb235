//! Measures every tensor of a GGUF held in memory, on one thread, with the same core
//! functions the browser's workers call (`sample_values`, `measure_values_sorted`,
//! `Histogram::of_sorted`).
//! Built as wasm it exports a C ABI for Node; built natively, `examples/native.rs` calls
//! `measure_all` directly.

use organ_core::report::Histogram;
use organ_core::zmeasure::{measure_values_sorted, sample_values};
use organ_core::Gguf;

/// Measures every measurable tensor of the GGUF `file`; returns how many were measured,
/// or -1 when the file does not parse or a tensor fails.
pub fn measure_all(file: &[u8]) -> i32 {
    let Ok(g) = Gguf::parse(file, file.len() as u64) else { return -1 };
    let mut n = 0;
    for t in g.tensors.iter().filter(|t| t.ty.can_dequantize()) {
        let Ok(bytes) = t.data(file) else { return -1 };
        let Ok(values) = sample_values(t.name, t.ty, t.n_elements, bytes) else { return -1 };
        // The browser also takes the 48-bin display histogram.
        let (m, sorted) = measure_values_sorted(values);
        std::hint::black_box((m, Histogram::of_sorted(&sorted, 48)));
        n += 1;
    }
    n
}

/// A buffer of `len` bytes for Node to copy the model into (leaked: one per run).
#[no_mangle]
pub extern "C" fn buffer(len: usize) -> *mut u8 {
    Vec::leak(vec![0u8; len]).as_mut_ptr()
}

/// [`measure_all`] over the `len` bytes at `ptr`, from [`buffer`].
///
/// # Safety
/// `ptr` and `len` must come from one call of [`buffer`].
#[no_mangle]
#[allow(unsafe_code)]
pub unsafe extern "C" fn measure(ptr: *const u8, len: usize) -> i32 {
    measure_all(unsafe { std::slice::from_raw_parts(ptr, len) })
}
