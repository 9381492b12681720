//! Slows down repeated failed logins from one address.
//!
//! A first wrong password is answered at once. After that, every SASL attempt from the same
//! address waits its turn: the n-th failure makes the next attempt wait [`FIRST_DELAY`] ·
//! 2^(n-1) (at most [`MAX_DELAY`]) after it, and concurrent attempts are spaced by as much, so
//! opening many connections buys an attacker nothing. A success does not reset the count (one
//! known account would otherwise let an attacker guess others at full speed); a quiet
//! [`FORGET_AFTER`] does.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub const FIRST_DELAY: Duration = Duration::from_millis(200);
pub const MAX_DELAY: Duration = Duration::from_secs(5);
pub const FORGET_AFTER: Duration = Duration::from_secs(60);
/// Addresses remembered at most; the oldest are forgotten first.
const MAX_TRACKED: usize = 10_000;

#[derive(Clone, Copy, Debug)]
struct Failures {
    count: u32,
    last: Instant,
    /// The earliest time the next attempt may be judged.
    next_slot: Instant,
}

/// Failed logins by address: one per broker process, shared by its listeners.
#[derive(Debug, Default)]
pub struct LoginThrottle {
    failures: Mutex<HashMap<IpAddr, Failures>>,
}

impl LoginThrottle {
    /// How long an attempt from `ip` must wait before it is judged (zero without recent
    /// failures). Reserves the slot: call once per attempt.
    pub fn delay(&self, ip: IpAddr) -> Duration {
        self.delay_at(ip, Instant::now())
    }

    /// Records a failed login from `ip`.
    pub fn failed(&self, ip: IpAddr) {
        self.failed_at(ip, Instant::now())
    }

    fn delay_at(&self, ip: IpAddr, now: Instant) -> Duration {
        let mut failures = self.lock();
        let Some(f) = failures.get_mut(&ip) else {
            return Duration::ZERO;
        };
        if now.duration_since(f.last) >= FORGET_AFTER {
            failures.remove(&ip);
            return Duration::ZERO;
        }
        let step = step(f.count);
        let start = (f.last + step).max(f.next_slot).max(now);
        f.next_slot = start + step;
        start - now
    }

    fn failed_at(&self, ip: IpAddr, now: Instant) {
        let mut failures = self.lock();
        if failures.len() >= MAX_TRACKED && !failures.contains_key(&ip) {
            failures.retain(|_, f| now.duration_since(f.last) < FORGET_AFTER);
            if failures.len() >= MAX_TRACKED {
                if let Some(oldest) = failures.iter().min_by_key(|(_, f)| f.last).map(|(a, _)| *a) {
                    failures.remove(&oldest);
                }
            }
        }
        let f = failures.entry(ip).or_insert(Failures {
            count: 0,
            last: now,
            next_slot: now,
        });
        if now.duration_since(f.last) >= FORGET_AFTER {
            f.count = 0;
        }
        f.count = f.count.saturating_add(1);
        f.last = now;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, Failures>> {
        // A panic while holding the lock leaves counts that are still counts.
        self.failures.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The wait after `count` failures.
fn step(count: u32) -> Duration {
    let doublings = count.saturating_sub(1).min(16);
    (FIRST_DELAY * 2u32.pow(doublings)).min(MAX_DELAY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_slow_the_next_attempts_down_and_are_forgotten() {
        let throttle = LoginThrottle::default();
        let ip: IpAddr = [10, 0, 0, 1].into();
        let other: IpAddr = [10, 0, 0, 2].into();
        let t0 = Instant::now();
        assert_eq!(
            throttle.delay_at(ip, t0),
            Duration::ZERO,
            "first try at once"
        );
        throttle.failed_at(ip, t0);
        assert_eq!(throttle.delay_at(ip, t0), FIRST_DELAY);
        // A second connection at the same moment waits for the slot after.
        assert_eq!(throttle.delay_at(ip, t0), FIRST_DELAY * 2);
        assert_eq!(throttle.delay_at(other, t0), Duration::ZERO, "per address");
        let t1 = t0 + FIRST_DELAY * 3;
        throttle.failed_at(ip, t1);
        throttle.failed_at(ip, t1);
        assert_eq!(throttle.delay_at(ip, t1), FIRST_DELAY * 4, "doubles");
        for _ in 0..20 {
            throttle.failed_at(ip, t1);
        }
        let t2 = t1 + Duration::from_secs(30);
        assert_eq!(
            throttle.delay_at(ip, t2),
            Duration::ZERO,
            "the wait is over"
        );
        assert_eq!(
            throttle.delay_at(ip, t2),
            MAX_DELAY,
            "the next attempt in the same instant waits one step, capped"
        );
        assert_eq!(
            throttle.delay_at(ip, t1 + FORGET_AFTER),
            Duration::ZERO,
            "forgotten after a quiet minute"
        );
    }
}
