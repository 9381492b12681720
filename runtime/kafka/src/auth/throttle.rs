//! Slows down repeated failed logins from one address.
//!
//! A login is judged (the password checked) only after it waited its turn. Failures are
//! counted per address and user, and per address:
//! - after the n-th failure for one user from one address, that user's next attempt from that
//!   address waits [`FIRST_DELAY`] · 2^(n-1) (at most [`MAX_DELAY`]), and concurrent attempts
//!   are spaced by as much, so opening many connections buys a password guesser nothing;
//! - an address with more than [`FREE_FAILURES`] failures over all users (guessing users
//!   rather than passwords) waits likewise for every user.
//!
//! A first wrong password is answered at once, and other users at the same address are not
//! slowed by one user's mistakes. A success does not reset a count (one known account would
//! otherwise let a guesser go at full speed); a quiet [`FORGET_AFTER`] does.

use std::collections::HashMap;
use std::hash::Hash;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub const FIRST_DELAY: Duration = Duration::from_millis(200);
pub const MAX_DELAY: Duration = Duration::from_secs(5);
pub const FORGET_AFTER: Duration = Duration::from_secs(60);
/// Failures an address may have over all users before all its logins wait.
pub const FREE_FAILURES: u32 = 10;
/// Keys remembered at most per map; the oldest are forgotten first.
const MAX_TRACKED: usize = 10_000;

#[derive(Clone, Copy, Debug)]
struct Failures {
    count: u32,
    last: Instant,
    /// The earliest time the next attempt may be judged.
    next_slot: Instant,
}

/// Failures by key, each waiting `step(count - free)` once over `free`.
#[derive(Debug)]
struct Counts<K> {
    free: u32,
    failures: HashMap<K, Failures>,
}

impl<K: Hash + Eq + Clone> Counts<K> {
    fn new(free: u32) -> Counts<K> {
        Counts {
            free,
            failures: HashMap::new(),
        }
    }

    /// When an attempt under `key` may be judged; reserves that slot.
    fn start(&mut self, key: &K, now: Instant) -> Instant {
        let Some(f) = self.failures.get_mut(key) else {
            return now;
        };
        if now.duration_since(f.last) >= FORGET_AFTER {
            self.failures.remove(key);
            return now;
        }
        if f.count <= self.free {
            return now;
        }
        let step = step(f.count - self.free);
        let start = (f.last + step).max(f.next_slot).max(now);
        f.next_slot = start + step;
        start
    }

    fn failed(&mut self, key: K, now: Instant) {
        if self.failures.len() >= MAX_TRACKED && !self.failures.contains_key(&key) {
            self.failures
                .retain(|_, f| now.duration_since(f.last) < FORGET_AFTER);
            if self.failures.len() >= MAX_TRACKED {
                let oldest = self
                    .failures
                    .iter()
                    .min_by_key(|(_, f)| f.last)
                    .map(|(k, _)| k.clone());
                if let Some(oldest) = oldest {
                    self.failures.remove(&oldest);
                }
            }
        }
        let f = self.failures.entry(key).or_insert(Failures {
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
}

/// Failed logins: one per broker process, shared by its listeners.
#[derive(Debug)]
pub struct LoginThrottle {
    state: Mutex<Failed>,
}

/// The failures counted: per address and user, and per address.
#[derive(Debug)]
struct Failed {
    by_user: Counts<(IpAddr, String)>,
    by_address: Counts<IpAddr>,
}

impl Default for LoginThrottle {
    fn default() -> LoginThrottle {
        LoginThrottle {
            state: Mutex::new(Failed {
                by_user: Counts::new(0),
                by_address: Counts::new(FREE_FAILURES),
            }),
        }
    }
}

impl LoginThrottle {
    /// How long `user`'s attempt from `ip` must wait before it is judged (zero without recent
    /// failures). Reserves the slot: call once per attempt.
    pub fn delay(&self, ip: IpAddr, user: &str) -> Duration {
        self.delay_at(ip, user, Instant::now())
    }

    /// Records a failed login of `user` from `ip`.
    pub fn failed(&self, ip: IpAddr, user: &str) {
        self.failed_at(ip, user, Instant::now())
    }

    fn delay_at(&self, ip: IpAddr, user: &str, now: Instant) -> Duration {
        let mut state = self.lock();
        let start = state.by_user.start(&(ip, user.to_owned()), now);
        start.max(state.by_address.start(&ip, now)) - now
    }

    fn failed_at(&self, ip: IpAddr, user: &str, now: Instant) {
        let mut state = self.lock();
        state.by_user.failed((ip, user.to_owned()), now);
        state.by_address.failed(ip, now);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Failed> {
        // A panic while holding the lock leaves counts that are still counts.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The wait after `count` counted failures.
fn step(count: u32) -> Duration {
    let doublings = count.saturating_sub(1).min(16);
    (FIRST_DELAY * 2u32.pow(doublings)).min(MAX_DELAY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_users_failures_slow_its_next_attempts_down_and_are_forgotten() {
        let throttle = LoginThrottle::default();
        let ip: IpAddr = [10, 0, 0, 1].into();
        let other: IpAddr = [10, 0, 0, 2].into();
        let t0 = Instant::now();
        assert_eq!(
            throttle.delay_at(ip, "a", t0),
            Duration::ZERO,
            "first try at once"
        );
        throttle.failed_at(ip, "a", t0);
        assert_eq!(throttle.delay_at(ip, "a", t0), FIRST_DELAY);
        // A second connection at the same moment waits for the slot after.
        assert_eq!(throttle.delay_at(ip, "a", t0), FIRST_DELAY * 2);
        assert_eq!(
            throttle.delay_at(other, "a", t0),
            Duration::ZERO,
            "per address"
        );
        assert_eq!(throttle.delay_at(ip, "b", t0), Duration::ZERO, "per user");
        let t1 = t0 + FIRST_DELAY * 3;
        throttle.failed_at(ip, "a", t1);
        throttle.failed_at(ip, "a", t1);
        assert_eq!(throttle.delay_at(ip, "a", t1), FIRST_DELAY * 4, "doubles");
        for _ in 0..20 {
            throttle.failed_at(ip, "a", t1);
        }
        let t2 = t1 + Duration::from_secs(30);
        assert_eq!(
            throttle.delay_at(ip, "a", t2),
            Duration::ZERO,
            "the wait is over"
        );
        assert_eq!(
            throttle.delay_at(ip, "a", t2),
            MAX_DELAY,
            "the next attempt in the same instant waits one step, capped"
        );
        assert!(
            throttle.delay_at(ip, "b", t2) > Duration::ZERO,
            "past the free failures, the whole address waits"
        );
        assert_eq!(
            throttle.delay_at(ip, "a", t1 + FORGET_AFTER),
            Duration::ZERO,
            "forgotten after a quiet minute"
        );
    }

    #[test]
    fn guessing_users_from_one_address_is_slowed_too() {
        let throttle = LoginThrottle::default();
        let ip: IpAddr = [10, 0, 0, 3].into();
        let t0 = Instant::now();
        for n in 0..FREE_FAILURES {
            throttle.failed_at(ip, &format!("user{n}"), t0);
        }
        assert_eq!(throttle.delay_at(ip, "fresh", t0), Duration::ZERO);
        throttle.failed_at(ip, "another", t0);
        assert_eq!(throttle.delay_at(ip, "fresh", t0), FIRST_DELAY);
    }
}
