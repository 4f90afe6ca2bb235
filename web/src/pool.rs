//! The compute pool: rayon on Web Workers sharing the wasm memory (wasm-bindgen-rayon),
//! one worker per core. Work is started with `rayon::spawn` and its result comes back
//! through a oneshot channel, so the UI thread never blocks or spins. A page that is not
//! cross-origin isolated cannot share memory with workers: then the work runs on the page's
//! own thread, between awaits, and the UI says so.

use crate::error::Error;
use std::cell::Cell;
use wasm_bindgen_futures::JsFuture;

thread_local! {
    /// Worker threads in the pool: 0 until it is up, 1 when running without a pool.
    static THREADS: Cell<usize> = const { Cell::new(0) };
}

/// Whether the page may share memory with workers (COOP/COEP headers were sent).
pub fn cross_origin_isolated() -> bool {
    js_sys::Reflect::get(&js_sys::global(), &"crossOriginIsolated".into()).ok().and_then(|v| v.as_bool()) == Some(true)
}

/// Starts the pool (once). Returns the number of threads measuring tensors.
pub async fn start() -> Result<usize, Error> {
    let have = THREADS.with(Cell::get);
    if have > 0 {
        return Ok(have);
    }
    let n = if cross_origin_isolated() {
        let cores = web_sys::window().map_or(1.0, |w| w.navigator().hardware_concurrency()) as usize;
        let n = cores.clamp(1, 16);
        JsFuture::from(wasm_bindgen_rayon::init_thread_pool(n))
            .await
            .map_err(|e| Error::Workers(format!("could not start the worker pool: {e:?}")))?;
        n
    } else {
        1
    };
    THREADS.with(|t| t.set(n));
    Ok(n)
}

/// Threads measuring tensors (0 before [`start`]).
pub fn threads() -> usize {
    THREADS.with(Cell::get)
}

/// Whether work runs on the worker pool (else on the page's thread).
pub fn pooled() -> bool {
    cross_origin_isolated() && threads() > 0
}

/// Starts `f` on the pool; the receiver gets its result without blocking the page.
/// Without a pool, `f` runs now, on the page's thread.
pub fn spawn<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> futures_channel::oneshot::Receiver<T> {
    let (tx, rx) = futures_channel::oneshot::channel();
    if pooled() {
        rayon::spawn(move || {
            let _ = tx.send(f());
        });
    } else {
        let _ = tx.send(f());
    }
    rx
}

/// Milliseconds since the page started.
pub fn now_ms() -> f64 {
    web_sys::window().and_then(|w| w.performance()).map_or(0.0, |p| p.now())
}
