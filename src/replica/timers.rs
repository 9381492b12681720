//! A replica's timers. Time enters only as the `now` of each step, and a tick
//! ([`super::Input::Tick`]) fires what is due;
//! each timer is a deadline computed from the replica's state, so that a model checker can fire
//! any of them at any moment instead ([`super::Input::Timeout`]), and a driver can ask when to
//! wake the replica next ([`Replica::next_timeout`]).

use super::{FollowerPhase, Replica, Role, Timer};
use crate::config::Config;
use crate::log::Log;
use crate::message::Effects;
use crate::types::Tick;

/// The deadline of a running timer that time alone never fires.
const NEVER: Tick = Tick(u64::MAX);

impl<L: Log> Replica<L> {
    /// Time passed: fire every timer due by now.
    pub(super) fn on_tick(&mut self, cfg: &Config, effects: &mut Effects<L::Record>) {
        for (timer, deadline) in self.timers(cfg) {
            if deadline <= self.now {
                self.fire(cfg, timer, effects);
            }
        }
    }

    /// The earliest deadline among the running timers: the driver should tick the replica then
    /// at the latest. `None` while no timer runs, or none has a deadline (an idle partition:
    /// its followers' fetches held at its leader, everything checkpointed).
    pub fn next_timeout(&self, cfg: &Config) -> Option<Tick> {
        self.timers(cfg)
            .into_iter()
            .map(|(_, at)| at)
            .filter(|&at| at != NEVER)
            .min()
    }

    /// Every running timer with its deadline (`Tick(u64::MAX)` for one that time alone does not
    /// fire: a model checker, which fires any running timer at any moment, still fires it).
    pub fn timers(&self, cfg: &Config) -> Vec<(Timer, Tick)> {
        let after = |from: Tick, wait: Tick| Tick(from.0.saturating_add(wait.0));
        let mut timers = Vec::new();
        match &self.role {
            Role::Offline => return timers,
            Role::Follower(f) => {
                if f.leader.is_some() {
                    timers.push((
                        Timer::Request,
                        after(f.last_request, self.request_wait(cfg)),
                    ));
                }
            }
            Role::Leader(l) => {
                if l.proposed_isr.is_some() {
                    if let Some(sent) = l.proposal_sent {
                        timers.push((
                            Timer::AlterPartition,
                            after(sent, cfg.alter_partition_timeout),
                        ));
                    }
                } else {
                    // `replica_lag_max` is the most a follower may lag: it leaves once it lags
                    // longer, on the tick after.
                    let lag = Tick(cfg.replica_lag_max.0.saturating_add(1));
                    // A follower whose Fetch the leader holds is caught up for as long as it
                    // is held: it reached the LEO, and data arriving answers it.
                    for follower in l.isr.iter().filter(|&&f| f != self.id) {
                        if let Some(p) = l.followers.get(follower) {
                            let at = match l.parked.contains_key(follower) {
                                true => NEVER,
                                false => after(p.last_caught_up, lag),
                            };
                            timers.push((Timer::Lag(*follower), at));
                        }
                    }
                }
                if let Some(until) = l.parked.values().map(|p| p.until).min() {
                    timers.push((Timer::FetchWait, until));
                }
            }
        }
        if self.high_watermark.min(self.log.flushed_offset()) != self.hw_checkpoint {
            timers.push((
                Timer::Checkpoint,
                after(self.checkpointed_at, cfg.hw_checkpoint_interval),
            ));
        }
        timers
    }

    /// How long a follower waits for the answer to its request before asking again: a Fetch
    /// may be held by the leader for `fetch_max_wait` before its answer sets out, so it gets
    /// that long more than an OffsetForLeaderEpoch. A driver whose connections tell it of a
    /// lost request need not wait: it fires [`Timer::Request`] at once ([`super::Input::Timeout`]).
    pub(super) fn request_wait(&self, cfg: &Config) -> Tick {
        let held = match &self.role {
            Role::Follower(f) if f.phase == FollowerPhase::Fetching => cfg.fetch_max_wait.0,
            _ => 0,
        };
        Tick(cfg.request_timeout.0.saturating_add(held))
    }

    /// Fires one timer: whatever its deadline, as after enough time passed.
    pub(super) fn fire(&mut self, cfg: &Config, timer: Timer, effects: &mut Effects<L::Record>) {
        match timer {
            Timer::Request => self.send_request(cfg, effects),
            Timer::AlterPartition => self.resend_proposal(effects),
            Timer::FetchWait => self.answer_parked(cfg, effects),
            Timer::Lag(follower) => self.shrink_isr(cfg, follower, effects),
            Timer::Checkpoint => self.checkpoint(effects),
        }
    }
}
