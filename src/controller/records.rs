//! What a controller step must make durable before its messages may leave: records.
//!
//! A record is the new value of one entity of the controller's state — a partition, a broker,
//! the controller epoch — as KRaft's `PartitionChangeRecord` and `RegisterBrokerRecord` are. A
//! driver that persists the controller asks for a step's records with [`Controller::handle`]
//! (or [`Controller::begin`] … [`Controller::finish`] around several operations that make one
//! change, such as a topic's creation): it gets a [`Ready`], makes its records durable, and only
//! then carries out its effects (rule 11). Its cost is that of the change, never of the cluster:
//! the controller notes each entity's value before the step's first change to it (its journal),
//! and the records are the values after the step of the entities it changed. If the store
//! refuses the records, [`Controller::undo`] puts those entities back as they were, as if the
//! step never ran.
//!
//! Records are also how a controller is rebuilt: from a snapshot ([`Controller::records`]) and
//! the records written after it, applied in order ([`Controller::apply`]). Applying a record is
//! idempotent (it sets a value), so replaying records a snapshot already holds changes nothing.
//!
//! Heartbeats are not records: a session's freshness is the running controller's business, and
//! a controller that takes office gives every live broker a fresh session anyway
//! ([`Controller::take_over`]).

use super::Effects;
use super::{BrokerState, Controller};
use crate::message::PartitionState;
use crate::types::{BrokerId, ControllerEpoch, PartitionId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One change to the controller's durable state: the new value of one entity.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum MetadataRecord {
    /// A controller took office in this controller epoch.
    ControllerEpoch(ControllerEpoch),
    /// A broker registered or was fenced: what the controller knows of it now; `None`: nothing
    /// (it never registered).
    Broker {
        /// The broker.
        id: BrokerId,
        /// Its registration, liveness and broker epoch.
        state: Option<BrokerState>,
    },
    /// A partition's state now (its leader, ISR, ELR, epochs); `None`: it was deleted.
    Partition {
        /// The partition.
        id: PartitionId,
        /// Its whole state, as LeaderAndIsr carries it.
        state: Option<PartitionState>,
    },
}

impl MetadataRecord {
    /// The entity the record sets: two records of one key replace each other.
    fn key(&self) -> Key {
        match self {
            MetadataRecord::ControllerEpoch(_) => Key::Epoch,
            MetadataRecord::Broker { id, .. } => Key::Broker(*id),
            MetadataRecord::Partition { id, .. } => Key::Partition(*id),
        }
    }
}

/// An entity of the controller's durable state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Key {
    Epoch,
    Broker(BrokerId),
    Partition(PartitionId),
}

/// What one step of the controller decided, in the order to carry it out (raft-rs's `Ready`):
/// first make [`Ready::records`] durable, then carry out [`Ready::effects`] in order. A step
/// that changed nothing durable has no records, and its effects may leave at once — once the
/// driver has confirmed it still holds the controller role (rule 11).
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use = "a step's records must be made durable and its effects carried out"]
pub struct Ready<R> {
    /// The new values of the entities the step changed, in key order: what to persist.
    pub records: Vec<MetadataRecord>,
    /// What may leave once the records are durable.
    pub effects: Effects<R>,
    /// The same entities' values before the step, for [`Controller::undo`].
    undo: Vec<MetadataRecord>,
    /// The count of registrations before the step.
    registrations: u64,
}

impl<R> Ready<R> {
    /// Whether the step changed nothing durable and asked for nothing.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty() && self.effects.is_empty()
    }
}

/// The values the step under way changed, as they were before its first change of each: the
/// controller's journal. It is no part of the controller's state: two controllers that differ
/// only in their journals are equal, hash alike, and it is never serialized.
#[derive(Clone, Debug, Default)]
pub(crate) struct Journal(Option<BTreeMap<Key, MetadataRecord>>, u64);

not_state!(Journal);

impl Controller {
    /// Starts noting the changes of a step, for [`Controller::finish`]. Changes made outside
    /// `begin` … `finish` (as the model checker makes them: it persists whole states) are not
    /// noted at all, at no cost.
    pub fn begin(&mut self) {
        self.journal = Journal(Some(BTreeMap::new()), self.registrations);
    }

    /// Ends the step that [`Controller::begin`] started: the records of every entity it changed,
    /// and the effects to carry out once they are durable.
    pub fn finish<R>(&mut self, effects: Effects<R>) -> Ready<R> {
        let before = self.journal.0.take().unwrap_or_default();
        let mut records = Vec::with_capacity(before.len());
        let mut undo = Vec::with_capacity(before.len());
        for (key, old) in before {
            let new = self.record_of(key);
            if new != old {
                records.push(new);
                undo.push(old);
            }
        }
        Ready {
            records,
            effects,
            undo,
            registrations: self.journal.1,
        }
    }

    /// [`Controller::step`], noting what it changed: its [`Ready`].
    pub fn handle<R>(
        &mut self,
        cfg: &crate::config::Config,
        now: crate::types::Tick,
        input: super::Input<R>,
    ) -> Ready<R> {
        self.begin();
        let effects = self.step(cfg, now, input);
        self.finish(effects)
    }

    /// Puts back what `ready`'s step changed, as it was before: the store refused or could not
    /// take its records, so the step must be as if it never ran. Its effects are dropped.
    pub fn undo<R>(&mut self, ready: Ready<R>) {
        for record in &ready.undo {
            self.apply(record);
        }
        self.registrations = ready.registrations;
    }

    /// Applies a durable record: how a controller is rebuilt from its store, and how a reader
    /// of the records (a standby, a broker) follows the active controller's state.
    pub fn apply(&mut self, record: &MetadataRecord) {
        self.note(record.key());
        match record {
            MetadataRecord::ControllerEpoch(epoch) => self.epoch = *epoch,
            MetadataRecord::Broker { id, state: Some(s) } => {
                // Broker epochs come from the count of registrations, which never goes back.
                self.registrations = self.registrations.max(s.epoch.0);
                self.brokers.insert(*id, s.clone());
            }
            MetadataRecord::Broker { id, state: None } => {
                self.brokers.remove(id);
            }
            MetadataRecord::Partition { id, state: Some(s) } => {
                self.partitions.insert(*id, s.clone());
            }
            MetadataRecord::Partition { id, state: None } => {
                self.partitions.remove(id);
            }
        }
    }

    /// The whole durable state as records: a snapshot, from which [`Controller::apply`] rebuilds
    /// an equal controller (but for heartbeat times, which are no records' business).
    pub fn records(&self) -> Vec<MetadataRecord> {
        std::iter::once(MetadataRecord::ControllerEpoch(self.epoch))
            .chain(
                self.brokers
                    .iter()
                    .map(|(&id, state)| MetadataRecord::Broker {
                        id,
                        state: Some(state.clone()),
                    }),
            )
            .chain(
                self.partitions
                    .iter()
                    .map(|(&id, state)| MetadataRecord::Partition {
                        id,
                        state: Some(state.clone()),
                    }),
            )
            .collect()
    }

    /// Notes `key`'s value before the step under way first changes it; nothing outside a step.
    /// Every change of durable state goes through here first.
    pub(super) fn note(&mut self, key: Key) {
        self.unlooked.0 = true;
        if self
            .journal
            .0
            .as_ref()
            .is_some_and(|j| !j.contains_key(&key))
        {
            let before = self.record_of(key);
            if let Some(journal) = self.journal.0.as_mut() {
                journal.insert(key, before);
            }
        }
    }

    /// Notes a partition's value before a change ([`Controller::note`]).
    pub(super) fn note_partition(&mut self, id: PartitionId) {
        self.note(Key::Partition(id));
    }

    /// Notes a broker's value before a change ([`Controller::note`]).
    pub(super) fn note_broker(&mut self, id: BrokerId) {
        self.note(Key::Broker(id));
    }

    /// The current value of an entity, as a record.
    fn record_of(&self, key: Key) -> MetadataRecord {
        match key {
            Key::Epoch => MetadataRecord::ControllerEpoch(self.epoch),
            Key::Broker(id) => MetadataRecord::Broker {
                id,
                state: self.brokers.get(&id).cloned(),
            },
            Key::Partition(id) => MetadataRecord::Partition {
                id,
                state: self.partitions.get(&id).cloned(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::controller::Input;
    use crate::message::{AlterPartitionRequest, Message};
    use crate::types::{BrokerId, Node, PartitionEpoch, Tick};
    use std::collections::BTreeSet;

    /// Three live brokers and `partitions` partitions over all three, led by b1, b2, b3 in turn.
    fn cluster(partitions: u32) -> (Config, Controller) {
        let cfg = Config::default();
        let mut c = Controller::new();
        for b in 1..=3 {
            let _: Effects<()> = c.step(
                &cfg,
                Tick(0),
                Input::Register {
                    broker: BrokerId(b),
                    clean_shutdown: true,
                    elects: Vec::new(),
                },
            );
        }
        for p in 0..partitions {
            let assigned = (0..3).map(|k| BrokerId((p + k) % 3 + 1)).collect();
            let _: Effects<()> = c
                .create_partition(PartitionId(p), assigned, 2)
                .expect("created");
        }
        (cfg, c)
    }

    /// Rebuilds a controller from records, as a store's recovery does.
    fn rebuilt(records: &[MetadataRecord]) -> Controller {
        let mut c = Controller::new();
        for r in records {
            c.apply(r);
        }
        c
    }

    #[test]
    fn a_snapshot_and_the_records_after_it_rebuild_the_controller() {
        let (cfg, mut c) = cluster(6);
        let snapshot = c.records();
        assert_eq!(rebuilt(&snapshot), c);
        let ready: Ready<()> = c.handle(&cfg, Tick(1), Input::Expire(BrokerId(1)));
        // b1 itself, and the partitions it led or was in the ISR of: all six.
        assert_eq!(ready.records.len(), 7, "{:?}", ready.records);
        assert!(!ready.effects.is_empty());
        let mut log = snapshot.clone();
        log.extend(ready.records.iter().cloned());
        assert_eq!(rebuilt(&log), c);
        // Replaying records a snapshot already holds changes nothing.
        let mut again = rebuilt(&c.records());
        for r in &ready.records {
            again.apply(r);
        }
        assert_eq!(again, c);
    }

    #[test]
    fn a_step_that_changes_one_partition_has_one_record_whatever_the_cluster_size() {
        let (cfg, mut c) = cluster(1000);
        let p = PartitionId(500);
        let state = c.partition(p).expect("p").clone();
        let leader = state.leader.expect("led");
        let new_isr: BTreeSet<BrokerId> = state.isr.iter().copied().take(2).collect();
        let request = AlterPartitionRequest {
            partition: p,
            leader,
            leader_epoch: state.leader_epoch,
            partition_epoch: state.partition_epoch,
            new_isr: new_isr.iter().copied().chain([leader]).collect(),
            broker_epochs: Default::default(),
            controller_epoch: c.epoch(),
        };
        let input = Input::Message {
            from: Node::Broker(leader),
            message: Message::AlterPartition(request),
        };
        let ready: Ready<()> = c.handle(&cfg, Tick(1), input);
        assert_eq!(
            ready.records,
            vec![MetadataRecord::Partition {
                id: p,
                state: c.partition(p).cloned(),
            }]
        );
        assert_eq!(
            c.partition(p).map(|s| s.partition_epoch),
            Some(PartitionEpoch(2))
        );
        // A heartbeat changes nothing durable.
        let heartbeat = Input::Message {
            from: Node::Broker(leader),
            message: Message::BrokerHeartbeat { broker: leader },
        };
        let ready: Ready<()> = c.handle(&cfg, Tick(2), heartbeat);
        assert!(ready.is_empty(), "{ready:?}");
    }

    #[test]
    fn undo_puts_back_what_a_refused_step_changed() {
        let (cfg, mut c) = cluster(4);
        let before = c.clone();
        let ready: Ready<()> = c.handle(
            &cfg,
            Tick(3),
            Input::Register {
                broker: BrokerId(2),
                clean_shutdown: false,
                elects: Vec::new(),
            },
        );
        assert_ne!(c, before);
        assert!(!ready.records.is_empty());
        c.undo(ready);
        assert_eq!(c, before);
        // A first registration is undone too: the broker is unknown again.
        let ready: Ready<()> = c.handle(
            &cfg,
            Tick(3),
            Input::Register {
                broker: BrokerId(9),
                clean_shutdown: true,
                elects: Vec::new(),
            },
        );
        assert_eq!(ready.records.len(), 1);
        c.undo(ready);
        assert_eq!(c, before);
    }

    #[test]
    fn taking_office_records_the_new_epoch_alone() {
        let (_, mut c) = cluster(3);
        let next = c.epoch().next();
        c.begin();
        let effects = c.take_office(next, Tick(7));
        let ready: Ready<()> = c.finish(effects);
        assert_eq!(ready.records, vec![MetadataRecord::ControllerEpoch(next)]);
        // Each live assigned broker is told each of its partitions: 3 × 3.
        assert_eq!(ready.effects.len(), 9);
        let (over, effects) =
            Controller::take_over::<()>(&rebuilt(&cluster(3).1.records()), next, Tick(7));
        assert_eq!(over, c);
        assert_eq!(effects, ready.effects);
    }

    #[test]
    fn the_next_timeout_is_the_first_session_to_expire() {
        let (cfg, mut c) = cluster(1);
        assert_eq!(c.next_timeout(&cfg), Some(Tick(cfg.session_timeout.0 + 1)));
        for b in [1, 2] {
            let heartbeat = Input::Message {
                from: Node::Broker(BrokerId(b)),
                message: Message::BrokerHeartbeat {
                    broker: BrokerId(b),
                },
            };
            let _: Effects<()> = c.step(&cfg, Tick(5), heartbeat);
        }
        assert_eq!(c.next_timeout(&cfg), Some(Tick(cfg.session_timeout.0 + 1)));
        let _: Effects<()> = c.step(&cfg, Tick(cfg.session_timeout.0 + 1), Input::Tick);
        assert!(!c.is_alive(BrokerId(3)));
        assert_eq!(
            c.next_timeout(&cfg),
            Some(Tick(5 + cfg.session_timeout.0 + 1))
        );
        let _: Effects<()> = c.step(&cfg, Tick(100), Input::Tick);
        assert_eq!(c.next_timeout(&cfg), None);
    }
}
