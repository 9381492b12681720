//! Renaming brokers: the same cluster with its brokers relabelled.
//!
//! Brokers are interchangeable up to their names: renaming every broker identifier yields a
//! state that behaves exactly like the original under the renamed actions, and satisfies the
//! same properties (none of them names a broker). A model checker may therefore explore one
//! representative per class of renamed states (symmetry reduction). This module only renames;
//! choosing the representative is the checker's business.
//!
//! Two more things tie a simulated state to its broker names, and a [`Renaming`] forgets both,
//! since the simulated cluster never depends on them:
//!
//! * The *order* of `assigned`: the runtime prefers the first eligible replica in that order as
//!   leader, but in the sim any candidate may win an election
//!   ([`Controller::election_candidates`] lists them in that order only so that the first is
//!   the runtime's choice), and the first leader is fixed in the initial state. With
//!   [`Renaming::forgetting_assignment_order`], a renamed assignment is listed in ascending
//!   order.
//! * The *values* of broker epochs (incarnations, KIP-903): the controller numbers
//!   registrations globally (b0, b1, b2 register as 1, 2, 3), but the protocol only ever
//!   compares two epochs of the same broker (equal? newer?). With
//!   [`Renaming::ranking_epochs`], each broker's epochs are renumbered 1, 2, … in their
//!   order (0, "none", stays 0) and every controller's registration counter becomes the largest
//!   rank, so a later registration still gets an epoch above every one in the state. (The
//!   counter of the controller that hands out epochs — the active one, and the store it writes
//!   to — is always at least every epoch in the state, since broker epochs come from the
//!   store's own counter, which no write rolls back: [`Controller::written_over`]. A zombie's
//!   counter may lag, but a zombie never hands one out.)
//!
//! Without the first, no renamed state but the identity's would ever be reached; without the
//! second, none would be reached from the initial state either.

use crate::controller::Controller;
use crate::error::AlterPartitionError;
use crate::log::Log;
use crate::message::{Effect, Envelope, FetchRequest, Message, PartitionState};
use crate::replica::{Replica, Role};
use crate::sim::Cluster;
use crate::types::{BrokerEpoch, BrokerId, Node};
use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// Every nonzero broker epoch a state holds, as (broker, epoch), sorted and without repeats:
/// from it, [`Renaming::ranking_epochs`] renumbers each broker's epochs 1, 2, … in order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct EpochTable(Vec<(BrokerId, BrokerEpoch)>);

impl EpochTable {
    /// The rank of epoch `e` among broker `b`'s (0 stays 0).
    fn rank(&self, b: BrokerId, e: BrokerEpoch) -> BrokerEpoch {
        if e.0 == 0 {
            return e;
        }
        let first = self.0.partition_point(|&x| x < (b, BrokerEpoch(0)));
        let at = self.0.partition_point(|&x| x < (b, e));
        BrokerEpoch((at - first + 1) as u64)
    }

    /// Whether every broker's epochs are already 1, 2, … (renumbering changes none).
    pub fn is_ranked(&self) -> bool {
        let mut last = None;
        let mut next = 1;
        for &(b, e) in &self.0 {
            if last != Some(b) {
                last = Some(b);
                next = 1;
            }
            if e.0 != next {
                return false;
            }
            next += 1;
        }
        true
    }

    /// The most epochs any one broker has: the largest rank.
    fn max_rank(&self) -> u64 {
        let mut best = 0;
        let mut run = 0;
        let mut last = None;
        for &(b, _) in &self.0 {
            run = if last == Some(b) { run + 1 } else { 1 };
            last = Some(b);
            best = best.max(run);
        }
        best
    }
}

/// A bijection on broker names; for symmetry reduction, also forgetting the order of
/// assignments and renumbering each broker's epochs (see the module documentation).
#[derive(Clone, Copy, Debug)]
pub struct Renaming<'a> {
    /// Broker `b` becomes `names[b]`.
    names: &'a [u32],
    /// List renamed assignments in the order of this key.
    assignment_order: Option<fn(BrokerId) -> u32>,
    /// Renumber each broker's epochs by rank in this table (of the state being renamed).
    epochs: Option<&'a EpochTable>,
}

impl<'a> Renaming<'a> {
    /// Broker `b` becomes `names[b]`; `names` must be a permutation of `0..brokers`. Nothing
    /// else changes: the renamed state is the same state under other names.
    pub fn new(names: &'a [u32]) -> Self {
        Renaming {
            names,
            assignment_order: None,
            epochs: None,
        }
    }

    /// Also lists every renamed assignment in ascending order.
    pub fn forgetting_assignment_order(self) -> Self {
        self.ordering_assignments_by(|b| b.0)
    }

    /// Also lists every renamed assignment in the order of `key` (of the new names): with
    /// the identity's names, a state that differs from the original in that order alone.
    pub fn ordering_assignments_by(self, key: fn(BrokerId) -> u32) -> Self {
        Renaming {
            assignment_order: Some(key),
            ..self
        }
    }

    /// Also renumbers each broker's epochs by rank, from the table [`Cluster::broker_epochs`]
    /// gives for the cluster being renamed.
    pub fn ranking_epochs(self, table: &'a EpochTable) -> Self {
        Renaming {
            epochs: Some(table),
            ..self
        }
    }

    /// The new name of broker `b`.
    pub fn broker(&self, b: BrokerId) -> BrokerId {
        BrokerId(self.names[b.0 as usize])
    }

    /// The new number of epoch `e` of broker `of` (its old name).
    pub fn epoch(&self, of: BrokerId, e: BrokerEpoch) -> BrokerEpoch {
        match self.epochs {
            Some(table) => table.rank(of, e),
            None => e,
        }
    }

    fn moves(&self, b: &BrokerId) -> bool {
        self.names[b.0 as usize] != b.0
    }

    fn rename(&self, b: &mut BrokerId) {
        *b = self.broker(*b);
    }

    fn set(&self, s: &mut BTreeSet<BrokerId>) {
        if s.iter().any(|b| self.moves(b)) {
            let old = std::mem::take(s);
            for b in old {
                s.insert(self.broker(b));
            }
        }
    }

    /// A map keyed by broker, each value rewritten by `value(old broker, value)`.
    fn map<V>(&self, m: &mut BTreeMap<BrokerId, V>, value: impl Fn(BrokerId, &mut V)) {
        if m.keys().any(|b| self.moves(b)) {
            let old = std::mem::take(m);
            for (b, mut v) in old {
                value(b, &mut v);
                m.insert(self.broker(b), v);
            }
        } else {
            for (&b, v) in m.iter_mut() {
                value(b, v);
            }
        }
    }

    fn epochs_of(&self, m: &mut BTreeMap<BrokerId, BrokerEpoch>) {
        self.map(m, |b, e| *e = self.epoch(b, *e));
    }

    /// A renamed assignment, in ascending order if asked (see the module documentation).
    fn assignment(&self, assigned: &mut [BrokerId]) {
        for b in assigned.iter_mut() {
            self.rename(b);
        }
        if let Some(key) = self.assignment_order {
            assigned.sort_unstable_by_key(|&b| key(b));
        }
    }
}

/// A value that names brokers and can be rewritten in place under a [`Renaming`].
pub trait RenameBrokers {
    /// Rewrites this value in place as `r` says: every broker it names gets its new name
    /// ([`Renaming::broker`]), every broker epoch its new number ([`Renaming::epoch`]), and
    /// every assignment its new order, if `r` forgets assignment order.
    fn rename_brokers(&mut self, r: &Renaming);
}

impl RenameBrokers for Node {
    fn rename_brokers(&mut self, r: &Renaming) {
        if let Node::Broker(b) = self {
            r.rename(b);
        }
    }
}

impl RenameBrokers for PartitionState {
    fn rename_brokers(&mut self, r: &Renaming) {
        r.assignment(&mut self.assigned);
        if let Some(b) = &mut self.leader {
            r.rename(b);
        }
        r.set(&mut self.isr);
        r.set(&mut self.elr);
    }
}

impl<R> RenameBrokers for Envelope<R> {
    fn rename_brokers(&mut self, r: &Renaming) {
        match &mut self.message {
            Message::Fetch(m) => m.rename_brokers(r),
            Message::OffsetForLeaderEpoch(m) => r.rename(&mut m.replica),
            Message::FetchResponse(_) | Message::OffsetForLeaderEpochResponse(_) => {}
            Message::AlterPartition(m) => {
                r.rename(&mut m.leader);
                r.set(&mut m.new_isr);
                r.epochs_of(&mut m.broker_epochs);
            }
            Message::AlterPartitionResponse(m) => {
                r.set(&mut m.requested_isr);
                r.epochs_of(&mut m.requested_broker_epochs);
                match &mut m.result {
                    Ok(state) => state.rename_brokers(r),
                    Err(AlterPartitionError::IneligibleReplicas(brokers)) => r.set(brokers),
                    Err(_) => {}
                }
            }
            // The epoch a LeaderAndIsr carries is its receiver's.
            Message::LeaderAndIsr(m) => {
                m.state.rename_brokers(r);
                if let Node::Broker(to) = self.to {
                    m.broker_epoch = r.epoch(to, m.broker_epoch);
                }
            }
            Message::BrokerRegistration { broker, .. } | Message::BrokerHeartbeat { broker } => {
                r.rename(broker)
            }
        }
        self.from.rename_brokers(r);
        self.to.rename_brokers(r);
    }
}

impl RenameBrokers for Role {
    fn rename_brokers(&mut self, r: &Renaming) {
        match self {
            Role::Offline => {}
            Role::Follower(s) => {
                if let Some(b) = &mut s.leader {
                    r.rename(b);
                }
            }
            Role::Leader(l) => {
                r.assignment(&mut l.assigned);
                r.set(&mut l.isr);
                if let Some(p) = &mut l.proposed_isr {
                    r.set(p);
                }
                r.epochs_of(&mut l.proposed_broker_epochs);
                r.map(&mut l.followers, |b, p| {
                    p.broker_epoch = r.epoch(b, p.broker_epoch)
                });
                r.map(&mut l.parked, |_, p| p.request.rename_brokers(r));
            }
        }
    }
}

impl RenameBrokers for FetchRequest {
    fn rename_brokers(&mut self, r: &Renaming) {
        self.broker_epoch = r.epoch(self.replica, self.broker_epoch);
        r.rename(&mut self.replica);
    }
}

impl<R> RenameBrokers for Effect<R> {
    fn rename_brokers(&mut self, r: &Renaming) {
        if let Effect::Send(e) = self {
            e.rename_brokers(r);
        }
    }
}

impl<L: Log> RenameBrokers for Replica<L> {
    fn rename_brokers(&mut self, r: &Renaming) {
        self.broker_epoch = r.epoch(self.id, self.broker_epoch);
        r.rename(&mut self.id);
        self.role.rename_brokers(r);
        for (_, effect) in &mut self.held {
            effect.rename_brokers(r);
        }
    }
}

impl RenameBrokers for Controller {
    fn rename_brokers(&mut self, r: &Renaming) {
        r.map(&mut self.brokers, |b, s| s.epoch = r.epoch(b, s.epoch));
        for state in self.partitions.values_mut() {
            state.rename_brokers(r);
        }
        if let Some(table) = r.epochs {
            self.registrations = table.max_rank();
        }
    }
}

impl Cluster {
    /// The cluster under the broker permutation `perm`: broker `b` becomes `perm[b]`, epochs
    /// unchanged. See [`Cluster::rename_brokers`].
    pub fn permute_brokers(&self, perm: &[u32]) -> Cluster {
        self.renamed(&Renaming::new(perm))
    }

    /// A renamed copy of the cluster.
    pub fn renamed(&self, r: &Renaming) -> Cluster {
        let mut c = self.clone();
        c.rename_brokers(r);
        c
    }

    /// Whether renumbering epochs by `table` (this cluster's) would change nothing.
    pub fn epochs_are_ranked(&self, table: &EpochTable) -> bool {
        table.is_ranked()
            && self
                .controllers()
                .all(|c| c.registrations == table.max_rank())
    }

    /// Renames the cluster in place. Everything indexed by broker is reordered so that index
    /// `i` again holds broker `i`, and the network is re-sorted, so equal renamed clusters are
    /// equal values.
    pub fn rename_brokers(&mut self, r: &Renaming) {
        debug_assert_eq!(r.names.len(), self.broker_count());
        for replica in &mut self.replicas {
            Arc::make_mut(replica).rename_brokers(r);
        }
        self.replicas
            .sort_unstable_by_key(|replica| (replica.partition(), replica.id));
        let old = self.last_stop_clean.clone();
        for (b, clean) in old.into_iter().enumerate() {
            self.last_stop_clean[r.names[b] as usize] = clean;
        }
        for e in self.network.iter_mut().chain(&mut self.fresh) {
            e.rename_brokers(r);
        }
        self.network.sort_unstable();
        self.fresh.sort_unstable();
        Arc::make_mut(&mut self.controller).rename_brokers(r);
        for c in self.zombie.iter_mut().chain(self.stale_store.iter_mut()) {
            Arc::make_mut(c).rename_brokers(r);
        }
        r.set(&mut self.awaiting_rejoin);
        for b in self
            .stalled_reconciliation
            .iter_mut()
            .chain(&mut self.timely_retry)
        {
            r.rename(b);
        }
        if let Some(consumers) = &mut self.consumers {
            let consumers = Arc::make_mut(consumers);
            let old = consumers.coordinators.clone();
            for (b, coordinator) in old.into_iter().enumerate() {
                consumers.coordinators[r.names[b] as usize] = coordinator;
            }
            for (b, _) in consumers.members.iter_mut().filter_map(|m| m.at.as_mut()) {
                r.rename(b);
            }
        }
    }

    /// A digest of what broker `b` is, in terms no renaming changes: its replicas' epochs,
    /// log shapes (end, flushed offset, epoch starts), high watermarks and roles (not whom they
    /// follow), and what the controller and the ghost state say of it. Renamed brokers keep
    /// their signature, so a checker need only try the renamings that list brokers in signature
    /// order: ties are the only real choices.
    pub fn broker_signature(&self, b: BrokerId) -> u64 {
        let mut h = FxHasher(0);
        for r in self.replicas_on(b) {
            r.epoch_cache.entries().hash(&mut h);
            (r.log.log_end_offset(), r.log.flushed_offset()).hash(&mut h);
            (r.high_watermark, r.hw_checkpoint).hash(&mut h);
            (r.leader_epoch, r.partition_epoch, r.held.len()).hash(&mut h);
            match &r.role {
                Role::Offline => 0u8.hash(&mut h),
                Role::Follower(f) => (1u8, f.leader.is_some(), f.phase).hash(&mut h),
                Role::Leader(l) => {
                    (2u8, l.epoch_start_offset, &l.pending_writes).hash(&mut h);
                    (l.isr.len(), l.proposed_isr.as_ref().map(BTreeSet::len)).hash(&mut h);
                    l.parked.len().hash(&mut h);
                }
            }
        }
        for c in self.controllers() {
            c.is_alive(b).hash(&mut h);
            for state in self.partitions().filter_map(|p| c.partition(p)) {
                let roles = (
                    state.leader == Some(b),
                    state.isr.contains(&b),
                    state.elr.contains(&b),
                );
                roles.hash(&mut h);
            }
        }
        self.last_stop_clean[b.0 as usize].hash(&mut h);
        self.awaiting_rejoin.contains(&b).hash(&mut h);
        h.finish()
    }

    /// Every nonzero epoch of every broker the state holds (the controllers', the broker's own,
    /// its leader's record of its fetches, and those in flight): the table for
    /// [`Renaming::ranking_epochs`].
    pub fn broker_epochs(&self) -> EpochTable {
        let mut table = Vec::with_capacity(4 * self.replicas.len() + 2 * self.network.len());
        self.note_node_epochs(&mut table);
        for e in &self.network {
            note_envelope_epochs(e, &mut table);
        }
        EpochTable::from_notes(table)
    }

    /// The nonzero epochs held outside the network: the controllers', the brokers' own, their
    /// leaders' records of fetches and proposals, and those of the messages sent this tick.
    fn note_node_epochs(&self, table: &mut Vec<(BrokerId, BrokerEpoch)>) {
        let mut note = |b: BrokerId, e: BrokerEpoch| {
            if e.0 != 0 {
                table.push((b, e));
            }
        };
        for c in self.controllers() {
            for (&b, s) in &c.brokers {
                note(b, s.epoch);
            }
        }
        for replica in &self.replicas {
            note(replica.id, replica.broker_epoch);
            if let Role::Leader(l) = &replica.role {
                for (&b, &e) in &l.proposed_broker_epochs {
                    note(b, e);
                }
                for (&b, p) in &l.followers {
                    note(b, p.broker_epoch);
                }
                for parked in l.parked.values() {
                    note(parked.request.replica, parked.request.broker_epoch);
                }
            }
            for (_, effect) in replica.held() {
                if let Effect::Send(Envelope {
                    message: Message::Fetch(m),
                    ..
                }) = effect
                {
                    note(m.replica, m.broker_epoch);
                }
            }
        }
        for e in &self.fresh {
            note_envelope_epochs(e, table);
        }
    }
}

/// The nonzero broker epochs a message carries, as (broker, epoch).
pub fn envelope_epochs<R>(e: &Envelope<R>) -> Vec<(BrokerId, BrokerEpoch)> {
    let mut notes = Vec::new();
    note_envelope_epochs(e, &mut notes);
    notes
}

/// The nonzero broker epochs a message carries.
fn note_envelope_epochs<R>(e: &Envelope<R>, table: &mut Vec<(BrokerId, BrokerEpoch)>) {
    let mut note = |b: BrokerId, e: BrokerEpoch| {
        if e.0 != 0 {
            table.push((b, e));
        }
    };
    match &e.message {
        Message::Fetch(m) => note(m.replica, m.broker_epoch),
        Message::AlterPartition(m) => {
            for (&b, &e) in &m.broker_epochs {
                note(b, e);
            }
        }
        Message::AlterPartitionResponse(m) => {
            for (&b, &e) in &m.requested_broker_epochs {
                note(b, e);
            }
        }
        Message::LeaderAndIsr(m) => {
            if let Node::Broker(to) = e.to {
                note(to, m.broker_epoch);
            }
        }
        _ => {}
    }
}

impl EpochTable {
    /// This table with the epochs the messages of `network` carry: itself when they add none.
    pub fn with_network<'e>(
        &self,
        network: impl IntoIterator<Item = &'e Envelope<crate::sim::Record>>,
    ) -> std::borrow::Cow<'_, EpochTable> {
        let mut notes = Vec::new();
        for e in network {
            note_envelope_epochs(e, &mut notes);
        }
        self.with(notes.iter().copied())
    }

    /// This table with more (broker, epoch) notes: itself when they add none.
    pub fn with(
        &self,
        notes: impl IntoIterator<Item = (BrokerId, BrokerEpoch)>,
    ) -> std::borrow::Cow<'_, EpochTable> {
        let mut new: Vec<(BrokerId, BrokerEpoch)> = notes
            .into_iter()
            .filter(|n| self.0.binary_search(n).is_err())
            .collect();
        if new.is_empty() {
            return std::borrow::Cow::Borrowed(self);
        }
        new.extend_from_slice(&self.0);
        std::borrow::Cow::Owned(EpochTable::from_notes(new))
    }

    /// The table of these (broker, epoch) notes, in any order, repeats allowed.
    fn from_notes(mut notes: Vec<(BrokerId, BrokerEpoch)>) -> EpochTable {
        notes.sort_unstable();
        notes.dedup();
        EpochTable(notes)
    }
}

/// A small, fast, deterministic hasher (the Fx hash of rustc) for signatures.
struct FxHasher(u64);

impl FxHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}
