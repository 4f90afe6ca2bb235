//! A streaming measure stopped part way (its bar abandoned, as the Python module does when
//! its caller is interrupted) ends within a read and joins every thread it started before
//! it returns: none is left blocked, and none of rayon's global pool is started for it.

use crate::build::{noise, t, write_model};
use indicatif::ProgressBar;
use organ_core::zmeasure::Mode;
use organ_core::GgmlType;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Tensors of the model stopped: enough that a stop at the first lands well before the end.
const TENSORS: usize = 48;

#[test]
fn an_interrupted_streaming_measure_joins_its_threads_and_stops_within_a_tensor() {
    let tensors: Vec<_> = (0..TENSORS)
        .map(|i| t(&format!("blk.{i}.ffn_up.weight"), &[512, 512], GgmlType::Q8_0, noise(i as u64, 512 * 512)))
        .collect();
    let model = write_model("stop.gguf", "llama", &tensors);
    // Threads are counted in a process of its own: this one runs other tests beside it.
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "measure_stop::stop_helper", "--test-threads", "1", "--nocapture"])
        .env("ORGAN_STOP_MODEL", &model)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("stop_helper: stopped"), "the helper did not run: {text}");
}

/// The threads of this process (the kernel's list: a thread is gone from it once reaped).
fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

/// Not a test of its own: when ORGAN_STOP_MODEL names a model, measures it streamed with
/// `--sigma` in a rayon pool of one thread (as `organ.measure(threads=1)` does), abandons
/// the bar at the first tensor done, and checks what the measure left behind.
#[test]
fn stop_helper() {
    let Some(model) = std::env::var_os("ORGAN_STOP_MODEL") else { return };
    let before = threads();
    // The pool's threads are joined below: a dropped pool only tells them to end.
    let handles = Arc::new(Mutex::new(Vec::new()));
    let spawned = Arc::clone(&handles);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .spawn_handler(move |t| {
            spawned.lock().unwrap().push(std::thread::Builder::new().spawn(move || t.run())?);
            Ok(())
        })
        .build()
        .unwrap();
    let bar = ProgressBar::hidden();
    let returned = AtomicBool::new(false);
    let (stopped_at, r, after) = std::thread::scope(|s| {
        let watcher = s.spawn(|| {
            while !returned.load(Ordering::Relaxed) {
                if bar.position() >= 1 {
                    bar.abandon();
                    return Some(bar.position());
                }
                std::thread::sleep(Duration::from_micros(200));
            }
            None
        });
        let r = pool.install(|| organ_cli::cmd::measure::measure_model(model.as_ref(), true, Mode::Sigma, false, &bar));
        let after = bar.position();
        returned.store(true, Ordering::Relaxed);
        (watcher.join().unwrap(), r, after)
    });
    drop(pool);
    for h in std::mem::take(&mut *handles.lock().unwrap()) {
        h.join().unwrap();
    }
    let at = stopped_at.expect("the measure ended before its first tensor was counted");
    let Err(err) = r else { panic!("a stopped measure returned a report") };
    let err = format!("{err:#}");
    assert!(err.contains("stopped"), "{err}");
    assert!(at < TENSORS as u64, "stopped at {at} of {TENSORS}");
    // The pool's one thread had at most one job under way when the bar was abandoned.
    assert!(after - at <= 1, "{} tensors measured after the stop at {at}", after - at);
    assert_eq!(threads(), before, "threads left running after the measure returned");
    println!("stop_helper: stopped at {at} of {TENSORS}, {} after", after - at);
}
