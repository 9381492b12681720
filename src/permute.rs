//! Renaming brokers: the same cluster with its brokers relabelled.
//!
//! Brokers are interchangeable up to their names: the initial leader is the first of `assigned`
//! and elections pick the first live replica in `assigned` order, so renaming every broker
//! identifier — `assigned` vectors included — yields a state that behaves exactly like the
//! original under the renamed actions, and satisfies the same properties (none of them names a
//! broker). A model checker may therefore explore one representative per class of renamed
//! states (symmetry reduction). This module only renames; choosing the representative is the
//! checker's business.

use crate::controller::{BrokerState, Controller};
use crate::error::AlterPartitionError;
use crate::log::Log;
use crate::message::{
    AlterPartitionRequest, AlterPartitionResponse, Envelope, FetchRequest, LeaderAndIsr, Message,
    OffsetForLeaderEpochRequest, PartitionState,
};
use crate::replica::{FollowerProgress, FollowerState, LeaderState, Replica, Role};
use crate::sim::{Cluster, Record};
use crate::types::{BrokerId, Node};
use std::collections::{BTreeMap, BTreeSet};

/// A value that names brokers and can be rewritten under a renaming `f` (a bijection).
pub trait RenameBrokers {
    fn rename_brokers(&self, f: &impl Fn(BrokerId) -> BrokerId) -> Self;
}

impl RenameBrokers for BrokerId {
    fn rename_brokers(&self, f: &impl Fn(BrokerId) -> BrokerId) -> Self {
        f(*self)
    }
}

impl RenameBrokers for Node {
    fn rename_brokers(&self, f: &impl Fn(BrokerId) -> BrokerId) -> Self {
        match self {
            Node::Broker(b) => Node::Broker(f(*b)),
            Node::Controller => Node::Controller,
        }
    }
}

impl<T: RenameBrokers> RenameBrokers for Option<T> {
    fn rename_brokers(&self, f: &impl Fn(BrokerId) -> BrokerId) -> Self {
        self.as_ref().map(|x| x.rename_brokers(f))
    }
}

impl<T: RenameBrokers> RenameBrokers for Vec<T> {
    fn rename_brokers(&self, f: &impl Fn(BrokerId) -> BrokerId) -> Self {
        self.iter().map(|x| x.rename_brokers(f)).collect()
    }
}

impl RenameBrokers for BTreeSet<BrokerId> {
    fn rename_brokers(&self, f: &impl Fn(BrokerId) -> BrokerId) -> Self {
        self.iter().map(|&b| f(b)).collect()
    }
}

impl<V: Clone> RenameBrokers for BTreeMap<BrokerId, V> {
    fn rename_brokers(&self, f: &impl Fn(BrokerId) -> BrokerId) -> Self {
        self.iter().map(|(&b, v)| (f(b), v.clone())).collect()
    }
}

impl RenameBrokers for PartitionState {
    fn rename_brokers(&self, f: &impl Fn(BrokerId) -> BrokerId) -> Self {
        PartitionState {
            assigned: self.assigned.rename_brokers(f),
            leader: self.leader.rename_brokers(f),
            isr: self.isr.rename_brokers(f),
            elr: self.elr.rename_brokers(f),
            ..self.clone()
        }
    }
}

impl<R: Clone> RenameBrokers for Message<R> {
    fn rename_brokers(&self, f: &impl Fn(BrokerId) -> BrokerId) -> Self {
        match self {
            Message::Fetch(m) => Message::Fetch(FetchRequest {
                replica: f(m.replica),
                ..m.clone()
            }),
            Message::OffsetForLeaderEpoch(m) => {
                Message::OffsetForLeaderEpoch(OffsetForLeaderEpochRequest {
                    replica: f(m.replica),
                    ..m.clone()
                })
            }
            Message::FetchResponse(_) | Message::OffsetForLeaderEpochResponse(_) => self.clone(),
            Message::AlterPartition(m) => Message::AlterPartition(AlterPartitionRequest {
                leader: f(m.leader),
                new_isr: m.new_isr.rename_brokers(f),
                broker_epochs: m.broker_epochs.rename_brokers(f),
                ..m.clone()
            }),
            Message::AlterPartitionResponse(m) => {
                Message::AlterPartitionResponse(AlterPartitionResponse {
                    requested_isr: m.requested_isr.rename_brokers(f),
                    requested_broker_epochs: m.requested_broker_epochs.rename_brokers(f),
                    result: match &m.result {
                        Ok(state) => Ok(state.rename_brokers(f)),
                        Err(AlterPartitionError::IneligibleReplica(b)) => {
                            Err(AlterPartitionError::IneligibleReplica(f(*b)))
                        }
                        Err(e) => Err(e.clone()),
                    },
                    ..m.clone()
                })
            }
            Message::LeaderAndIsr(m) => Message::LeaderAndIsr(LeaderAndIsr {
                partition: m.partition,
                state: m.state.rename_brokers(f),
                broker_epoch: m.broker_epoch,
            }),
            Message::BrokerRegistration {
                broker,
                clean_shutdown,
            } => Message::BrokerRegistration {
                broker: f(*broker),
                clean_shutdown: *clean_shutdown,
            },
            Message::BrokerHeartbeat { broker } => Message::BrokerHeartbeat { broker: f(*broker) },
        }
    }
}

impl<R: Clone> RenameBrokers for Envelope<R> {
    fn rename_brokers(&self, f: &impl Fn(BrokerId) -> BrokerId) -> Self {
        Envelope {
            from: self.from.rename_brokers(f),
            to: self.to.rename_brokers(f),
            message: self.message.rename_brokers(f),
        }
    }
}

impl RenameBrokers for Role {
    fn rename_brokers(&self, f: &impl Fn(BrokerId) -> BrokerId) -> Self {
        match self {
            Role::Offline => Role::Offline,
            Role::Follower(s) => Role::Follower(FollowerState {
                leader: s.leader.rename_brokers(f),
                phase: s.phase,
            }),
            Role::Leader(l) => Role::Leader(LeaderState {
                assigned: l.assigned.rename_brokers(f),
                isr: l.isr.rename_brokers(f),
                proposed_isr: l.proposed_isr.as_ref().map(|p| p.rename_brokers(f)),
                proposed_broker_epochs: l.proposed_broker_epochs.rename_brokers(f),
                followers: <BTreeMap<BrokerId, FollowerProgress>>::rename_brokers(&l.followers, f),
                ..l.clone()
            }),
        }
    }
}

impl<L: Log + Clone> RenameBrokers for Replica<L> {
    fn rename_brokers(&self, f: &impl Fn(BrokerId) -> BrokerId) -> Self {
        Replica {
            id: f(self.id),
            role: self.role.rename_brokers(f),
            ..self.clone()
        }
    }
}

impl RenameBrokers for Controller {
    fn rename_brokers(&self, f: &impl Fn(BrokerId) -> BrokerId) -> Self {
        Controller {
            brokers: <BTreeMap<BrokerId, BrokerState>>::rename_brokers(&self.brokers, f),
            partitions: self
                .partitions
                .iter()
                .map(|(&id, s)| (id, s.rename_brokers(f)))
                .collect(),
            group_offsets: self.group_offsets.clone(),
            registrations: self.registrations,
        }
    }
}

impl Cluster {
    /// The cluster under the broker permutation `perm`: broker `b` becomes `perm[b]`. Everything
    /// indexed by broker is reordered so that index `i` again holds broker `i`, and the network
    /// is re-sorted, so equal renamed clusters are equal values.
    ///
    /// `perm` must be a permutation of `0..replicas`: `perm[b]` is the new name of broker `b`.
    pub fn permute_brokers(&self, perm: &[u32]) -> Cluster {
        debug_assert_eq!(perm.len(), self.replicas.len());
        let f = |b: BrokerId| BrokerId(perm[b.0 as usize]);
        let mut replicas = self.replicas.clone();
        let mut last_stop_clean = self.last_stop_clean.clone();
        for (old, r) in self.replicas.iter().enumerate() {
            replicas[perm[old] as usize] = r.rename_brokers(&f);
            last_stop_clean[perm[old] as usize] = self.last_stop_clean[old];
        }
        let mut network: Vec<Envelope<Record>> = self.network.rename_brokers(&f);
        network.sort();
        Cluster {
            replicas,
            controller: self.controller.rename_brokers(&f),
            network,
            history: self.history.clone(),
            written: self.written,
            consumer_offset: self.consumer_offset,
            last_stop_clean,
            clean_crashes: self.clean_crashes,
            unclean_crashes: self.unclean_crashes,
            drops: self.drops,
            duplicates: self.duplicates,
            session_expiries: self.session_expiries,
            awaiting_rejoin: self.awaiting_rejoin.rename_brokers(&f),
            rejoined: self.rejoined,
        }
    }
}
