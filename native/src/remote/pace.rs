//! A stalled transfer fails, as curl's `--speed-limit`/`--speed-time` make it: a body that
//! moves below `--remote-speed-limit` bytes/s for `--remote-speed-time` seconds is an
//! error naming the rate. A read timeout alone would not do: a server sending one byte
//! every few seconds never lets a read wait long. The rate is measured over a sliding
//! window from the request's start, so a slow start counts as much as a slow middle.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// The least throughput a transfer keeps, and for how long it may fall below it.
#[derive(Clone, Copy, Debug)]
pub struct Speed {
    /// Bytes per second.
    pub limit: u64,
    /// How long the rate may stay below `limit` before the transfer fails.
    pub time: Duration,
}

impl Default for Speed {
    /// 1 KiB/s over 30 s: never reached by a server that is answering.
    fn default() -> Speed {
        Speed { limit: 1024, time: Duration::from_secs(30) }
    }
}

/// Why a transfer was stopped: its rate over the window, for the message.
#[derive(Debug)]
pub struct Stalled {
    bytes: u64,
    over: Duration,
    speed: Speed,
}

impl std::fmt::Display for Stalled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the transfer stalled: {} bytes in the last {:.1} s, below {} bytes/s for {} s \
             (--remote-speed-limit, --remote-speed-time)",
            self.bytes,
            self.over.as_secs_f64(),
            self.speed.limit,
            self.speed.time.as_secs()
        )
    }
}

impl std::error::Error for Stalled {}

/// The bytes a transfer has moved, sampled in time: enough samples to look back one
/// window, at most about 64 of them.
pub struct Pace {
    speed: Speed,
    marks: VecDeque<(Instant, u64)>,
    total: u64,
    step: Duration,
}

impl Pace {
    /// A transfer starting now.
    pub fn new(speed: Speed) -> Pace {
        let step = (speed.time / 64).max(Duration::from_millis(50));
        Pace { speed, marks: VecDeque::from([(Instant::now(), 0)]), total: 0, step }
    }

    /// Counts `n` more bytes; fails when, over the last window of at least the speed
    /// time, fewer than `limit` bytes/s moved.
    ///
    /// # Errors
    /// The transfer stalled.
    pub fn tick(&mut self, n: usize) -> Result<(), Stalled> {
        let now = Instant::now();
        self.total += n as u64;
        // The window starts at the newest mark at least one speed time old.
        while self.marks.len() >= 2 && now.duration_since(self.marks[1].0) >= self.speed.time {
            self.marks.pop_front();
        }
        if let Some(&(t0, b0)) = self.marks.front() {
            let over = now.duration_since(t0);
            let bytes = self.total - b0;
            if over >= self.speed.time && (bytes as f64) < self.speed.limit as f64 * over.as_secs_f64() {
                return Err(Stalled { bytes, over, speed: self.speed });
            }
        }
        if self.marks.back().is_none_or(|(t, _)| now.duration_since(*t) >= self.step) {
            self.marks.push_back((now, self.total));
        }
        Ok(())
    }

    /// The stall of a read that waited a whole [`Self::read_timeout`] for nothing.
    pub fn idle(&self) -> Stalled {
        Stalled { bytes: 0, over: Self::read_timeout(self.speed), speed: self.speed }
    }

    /// The read timeout that goes with it: a read that waits a whole window for its first
    /// byte is a stall.
    pub fn read_timeout(speed: Speed) -> Duration {
        speed.time.max(Duration::from_secs(1))
    }
}

/// A body read through a [`Pace`]: a stall, or a read that timed out, is an I/O error
/// holding [`Stalled`].
pub struct Paced<R> {
    inner: R,
    pace: Pace,
}

impl<R> Paced<R> {
    pub fn new(inner: R, pace: Pace) -> Paced<R> {
        Paced { inner, pace }
    }
}

impl<R: std::io::Read> std::io::Read for Paced<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = match self.inner.read(buf) {
            Ok(n) => n,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock) => {
                // Nothing came for a whole read timeout: no bytes over the window.
                return Err(std::io::Error::other(self.pace.idle()));
            }
            Err(e) => return Err(e),
        };
        self.pace.tick(n).map_err(std::io::Error::other)?;
        Ok(n)
    }
}

/// The [`Stalled`] an I/O error holds, if it holds one.
pub fn stalled(e: &std::io::Error) -> Option<&Stalled> {
    e.get_ref().and_then(|i| i.downcast_ref::<Stalled>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trickle_fails_and_a_flow_does_not() {
        let speed = Speed { limit: 1000, time: Duration::from_millis(300) };
        let mut flow = Pace::new(speed);
        for _ in 0..40 {
            std::thread::sleep(Duration::from_millis(10));
            flow.tick(100).unwrap();
        }
        let mut trickle = Pace::new(speed);
        let t0 = Instant::now();
        let err = loop {
            std::thread::sleep(Duration::from_millis(20));
            if let Err(e) = trickle.tick(1) {
                break e;
            }
            assert!(t0.elapsed() < Duration::from_secs(2), "a trickle never failed");
        };
        assert!(t0.elapsed() >= speed.time);
        let msg = err.to_string();
        assert!(msg.contains("stalled") && msg.contains("below 1000 bytes/s"), "{msg}");
    }
}
