//! Kafka's `log.cleaner.io.max.bytes.per.second`: the cleaner reads and writes at most so many
//! bytes a second, sleeping whenever it is ahead, so that its I/O comes as a steady trickle
//! beside the replica thread's appends and fsyncs rather than in bursts that the next produce
//! fsync waits behind (docs/performance.md, compaction under load). Unlimited by default, as
//! Kafka's.

use std::time::{Duration, Instant};

/// How long the count runs before it starts again (Kafka's throttler checks every 300 ms): a
/// pause longer than that is not made up for by a burst after it.
const WINDOW: Duration = Duration::from_millis(300);

/// Paces the cleaner's I/O.
#[derive(Debug)]
pub struct Throttle {
    /// Bytes a second; `None`: unlimited.
    rate: Option<f64>,
    window: Instant,
    /// Bytes counted since the window started.
    bytes: f64,
}

impl Throttle {
    /// At most `bytes_per_second` (`None`, or not a positive number: unlimited).
    pub fn new(bytes_per_second: Option<f64>) -> Throttle {
        Throttle {
            rate: bytes_per_second.filter(|r| r.is_finite() && *r > 0.0),
            window: Instant::now(),
            bytes: 0.0,
        }
    }

    /// No limit.
    pub fn unlimited() -> Throttle {
        Throttle::new(None)
    }

    /// Counts `bytes` read or written, and sleeps while the cleaner is ahead of its rate.
    pub fn pace(&mut self, bytes: u64) {
        let Some(rate) = self.rate else {
            return;
        };
        self.bytes += bytes as f64;
        let due = Duration::from_secs_f64(self.bytes / rate);
        let elapsed = self.window.elapsed();
        if due > elapsed {
            std::thread::sleep(due - elapsed);
        }
        if self.window.elapsed() >= WINDOW {
            self.window = Instant::now();
            self.bytes = 0.0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every window sleeps until its bytes are due, so the whole takes at least bytes / rate
    /// (a lower bound only: sleeping never takes less).
    #[test]
    fn a_limited_throttle_takes_at_least_bytes_over_rate() {
        let mut throttle = Throttle::new(Some(1_000_000.0));
        let started = Instant::now();
        for _ in 0..10 {
            throttle.pace(50_000);
        }
        assert!(started.elapsed() >= Duration::from_millis(500));
        // No limit, or a nonsensical one: no pacing state at all.
        for rate in [None, Some(0.0), Some(-1.0), Some(f64::INFINITY)] {
            assert!(Throttle::new(rate).rate.is_none(), "{rate:?}");
        }
    }
}
