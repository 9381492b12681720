//! The replicas one broker hosts, and when each must next be stepped.
//!
//! A replica's timers are its own state ([`Replica::next_timeout`]), but a broker hosts many
//! replicas, and asking each of them at every tick would make an idle broker cost in proportion
//! to its partitions: 100,000 partitions ticked every millisecond would be a hundred million
//! questions a second, nearly all answered "not yet". [`Replicas`] keeps each replica's next
//! deadline in one ordered queue instead, updated whenever the replica may have changed (after
//! each step, and after each change the driver makes through [`Replicas::update`]), so that a
//! tick costs what is due and nothing else.

#[cfg(test)]
#[path = "replicas_tests.rs"]
mod tests;

use crate::config::Config;
use crate::log::Log;
use crate::message::Effects;
use crate::replica::{Input, Replica};
use crate::types::{PartitionId, Tick};
use std::collections::{BTreeMap, BTreeSet};

/// The replicas one broker hosts, by partition, each with what its driver keeps beside it, and
/// the queue of their timers' deadlines: the protocol's part of Kafka's `ReplicaManager`.
///
/// `X` is what the driver keeps beside each replica, so that it finds it with the replica
/// instead of in a second map that could disagree with this one: the runtime keeps there the
/// partition's directory and the producers and consumers waiting for the replica's answers; a
/// driver that keeps nothing leaves it `()`.
///
/// Every change to a replica goes through this value and reschedules it — [`Replicas::step`]
/// for an input, [`Replicas::update`] for a change the driver makes itself (its fsync, a cleaned
/// log installed) — so the queue never goes stale: [`Replicas::tick`] steps every replica with a
/// timer due and no other, and [`Replicas::next_timeout`] is when the earliest is due. Pass the
/// same [`Config`] to every call: deadlines are computed with it.
///
/// ```
/// use isr::broker::Replicas;
/// use isr::{BrokerId, Config, Effect, MemLog, Message, PartitionId, Replica, Tick};
///
/// let cfg = Config::default();
/// let mut replicas: Replicas<MemLog<String>> = Replicas::new();
/// replicas.insert(&cfg, Replica::new(BrokerId(1), PartitionId(0), MemLog::new()), ());
/// // A replica that waits for the controller's order has no timer: nothing is due, ever.
/// assert_eq!(replicas.next_timeout(), None);
/// assert!(replicas.tick(&cfg, Tick(1_000)).is_empty());
/// ```
#[derive(Clone, Debug)]
pub struct Replicas<L: Log, X = ()> {
    hosted: BTreeMap<PartitionId, Hosted<L, X>>,
    /// Each scheduled replica's next deadline, earliest first (ties in partition order, so a
    /// tick steps them in an order that does not depend on how they were scheduled).
    deadlines: BTreeSet<(Tick, PartitionId)>,
}

/// One hosted replica, with what the driver keeps beside it and its place in the queue.
#[derive(Clone, Debug)]
struct Hosted<L: Log, X> {
    replica: Replica<L>,
    beside: X,
    /// Its entry in the deadline queue, if it has one.
    wake: Option<Tick>,
    /// Taken offline ([`Replicas::take_offline`]): never stepped or scheduled again.
    offline: bool,
}

impl<L: Log, X> Hosted<L, X> {
    /// Moves this replica's entry in `deadlines` to its next timeout, or takes it out if it has
    /// none (or is offline).
    fn schedule(&mut self, cfg: &Config, deadlines: &mut BTreeSet<(Tick, PartitionId)>) {
        let next = match self.offline {
            true => None,
            false => self.replica.next_timeout(cfg),
        };
        if next != self.wake {
            self.unschedule(deadlines);
            if let Some(at) = next {
                deadlines.insert((at, self.replica.partition()));
            }
            self.wake = next;
        }
    }

    /// Takes this replica's entry out of `deadlines`.
    fn unschedule(&mut self, deadlines: &mut BTreeSet<(Tick, PartitionId)>) {
        if let Some(at) = self.wake.take() {
            deadlines.remove(&(at, self.replica.partition()));
        }
    }
}

impl<L: Log, X> Default for Replicas<L, X> {
    fn default() -> Self {
        Replicas {
            hosted: BTreeMap::new(),
            deadlines: BTreeSet::new(),
        }
    }
}

impl<L: Log, X> Replicas<L, X> {
    /// A broker that hosts nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Hosts `replica` (for its partition), with what the driver keeps beside it, and schedules
    /// its timers: a broker comes to host a partition when its driver has a log to give the
    /// replica, on recovery or at the controller's first order for it. Returns the replica it
    /// replaces, if this broker hosted the partition already.
    pub fn insert(
        &mut self,
        cfg: &Config,
        replica: Replica<L>,
        beside: X,
    ) -> Option<(Replica<L>, X)> {
        let partition = replica.partition();
        let replaced = self.remove(partition);
        let mut hosted = Hosted {
            replica,
            beside,
            wake: None,
            offline: false,
        };
        hosted.schedule(cfg, &mut self.deadlines);
        self.hosted.insert(partition, hosted);
        replaced
    }

    /// Stops hosting `partition` (its topic was deleted) and forgets its timers; the replica and
    /// what was kept beside it, for the driver to dispose of (its files, its waiting clients).
    pub fn remove(&mut self, partition: PartitionId) -> Option<(Replica<L>, X)> {
        let mut hosted = self.hosted.remove(&partition)?;
        hosted.unschedule(&mut self.deadlines);
        Some((hosted.replica, hosted.beside))
    }

    /// The replica of `partition`, if this broker hosts it (offline or not), to read.
    pub fn get(&self, partition: PartitionId) -> Option<&Replica<L>> {
        self.hosted.get(&partition).map(|h| &h.replica)
    }

    /// The replica of `partition`, to read, and what the driver keeps beside it, to change:
    /// nothing the driver keeps moves a timer, so nothing is rescheduled. The replica itself
    /// changes only through [`Replicas::step`] and [`Replicas::update`], which reschedule it.
    pub fn get_mut(&mut self, partition: PartitionId) -> Option<(&Replica<L>, &mut X)> {
        self.hosted
            .get_mut(&partition)
            .map(|h| (&h.replica, &mut h.beside))
    }

    /// Every hosted replica (offline ones too) with what is kept beside it, in partition order.
    pub fn iter(&self) -> impl Iterator<Item = (PartitionId, &Replica<L>, &X)> {
        self.hosted
            .iter()
            .map(|(&partition, h)| (partition, &h.replica, &h.beside))
    }

    /// Steps the replica of `partition` with `input`, which happened at `now`, and reschedules
    /// it; its effects, in order ([`Replica::step`]). `None` when this broker does not host the
    /// partition or it is offline: nothing was stepped.
    pub fn step(
        &mut self,
        cfg: &Config,
        now: Tick,
        partition: PartitionId,
        input: Input<L::Record>,
    ) -> Option<Effects<L::Record>> {
        let hosted = self.hosted.get_mut(&partition).filter(|h| !h.offline)?;
        let effects = hosted.replica.step(cfg, now, input);
        hosted.schedule(cfg, &mut self.deadlines);
        Some(effects)
    }

    /// Changes the replica of `partition` (or its log, or what is kept beside it) outside a
    /// step, and reschedules it: the driver's own work on a replica — an fsync
    /// (`replica.log_mut().flush()`), a cleaned log installed, a segment setting — may move a
    /// timer (a flush can start the high watermark checkpoint's), and a change made anywhere
    /// else would leave the queue stale. `None` when this broker does not host the partition;
    /// an offline replica may be changed, and stays out of the queue.
    pub fn update<T>(
        &mut self,
        cfg: &Config,
        partition: PartitionId,
        change: impl FnOnce(&mut Replica<L>, &mut X) -> T,
    ) -> Option<T> {
        let hosted = self.hosted.get_mut(&partition)?;
        let changed = change(&mut hosted.replica, &mut hosted.beside);
        hosted.schedule(cfg, &mut self.deadlines);
        Some(changed)
    }

    /// The partitions whose replica has a timer due at `now`, earliest deadline first: what a
    /// tick at `now` steps. For a driver that carries out each replica's effects as it steps
    /// it (then [`Replicas::step`] each with [`Input::Tick`]); [`Replicas::tick`] does both. It
    /// reads only the due part of the queue: an idle replica costs nothing.
    pub fn due(&self, now: Tick) -> Vec<PartitionId> {
        self.deadlines
            .iter()
            .take_while(|&&(at, _)| at <= now)
            .map(|&(_, partition)| partition)
            .collect()
    }

    /// Time passed: steps every replica with a timer due by `now` with [`Input::Tick`], once,
    /// earliest deadline first, and no other (a replica's tick does nothing but fire its due
    /// timers, so skipping the others changes nothing); each replica's effects, in that order.
    pub fn tick(&mut self, cfg: &Config, now: Tick) -> Vec<(PartitionId, Effects<L::Record>)> {
        self.due(now)
            .into_iter()
            .filter_map(|partition| Some((partition, self.step(cfg, now, partition, Input::Tick)?)))
            .collect()
    }

    /// When the earliest timer of any hosted replica is due: the driver ticks then, or
    /// earlier. `None` while no replica has a timer with a deadline (every partition idle).
    pub fn next_timeout(&self) -> Option<Tick> {
        self.deadlines.first().map(|&(at, _)| at)
    }

    /// Takes the replica of `partition` offline for good, as Kafka does with the partitions of
    /// a failed log directory: it is never stepped again and leaves the queue, but stays hosted
    /// (its state readable, for status) until removed. The driver does this when the replica's
    /// storage failed, since stepping it again could report as durable what the disk lost.
    /// False when this broker does not host the partition.
    pub fn take_offline(&mut self, partition: PartitionId) -> bool {
        let Some(hosted) = self.hosted.get_mut(&partition) else {
            return false;
        };
        hosted.offline = true;
        hosted.unschedule(&mut self.deadlines);
        true
    }

    /// Whether the replica of `partition` was taken offline ([`Replicas::take_offline`]).
    pub fn is_offline(&self, partition: PartitionId) -> bool {
        self.hosted.get(&partition).is_some_and(|h| h.offline)
    }
}
