//! The engine's states, and what makes a step cheap.
//!
//! Most states of a cluster differ from many others only in their messages in flight: at the
//! anchor's bounds a group of nodes (brokers, controllers, history, budgets) is held by some
//! thirty states. So a state here is the nodes, behind an [`Arc`] that every state holding the
//! same nodes shares, and the messages in flight, each shared too. What depends on the nodes
//! alone is computed once per group: the enabled actions that name no message ([`Menu`]), the
//! bound, the verdicts, the symmetry candidates, the broker epochs. And each step is run through
//! the core once per (nodes, action): the nodes remember where it led and what it sent, so the
//! next state with the same nodes takes the step from there and only carries out its network
//! part ([`carry`]). A remembered step holds its target weakly, so memory stays bounded by the
//! states a search holds (and the worker's cache of recent nodes); a target that was dropped is
//! stepped to again.
//!
//! Nodes and messages are told apart by their 64-bit fingerprints, as states are (as stateright
//! and TLC do).

use crate::symmetry::{candidates, fingerprint, is_identity, renaming};
use crate::{Check, IsrModel};
use isr::message::Envelope;
use isr::permute::{envelope_epochs, EpochTable, RenameBrokers};
use isr::sim::{carry, Action, Choice, Cluster, InFlight, Menu, Record, ReplicaId};
use isr::{BrokerEpoch, BrokerId};
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// Everything of a state but its messages in flight (a [`Cluster`] with an empty network), with
/// what a search needs of it, each computed once.
pub struct Nodes {
    pub cluster: Cluster,
    /// Fingerprint of `cluster`.
    pub fp: u64,
    menu: OnceLock<Menu>,
    /// Within the model's bounds ([`IsrModel::within`]).
    pub within: bool,
    verdicts: OnceLock<u64>,
    candidates: OnceLock<Vec<&'static [u32]>>,
    epochs: OnceLock<EpochTable>,
    /// The steps taken from these nodes so far.
    steps: Mutex<Vec<Step>>,
    /// Fingerprints of these nodes renamed, so far.
    renamed: Mutex<Vec<Renamed>>,
}

impl Nodes {
    fn new(model: &IsrModel, cluster: Cluster, fp: u64) -> Nodes {
        debug_assert!(cluster.network.is_empty());
        Nodes {
            fp,
            menu: OnceLock::new(),
            within: model.within(&cluster),
            cluster,
            verdicts: OnceLock::new(),
            candidates: OnceLock::new(),
            epochs: OnceLock::new(),
            steps: Mutex::new(Vec::new()),
            renamed: Mutex::new(Vec::new()),
        }
    }

    /// Bit `i` set when check `i` of `checks` is discovered here: an `always` property
    /// violated, a `sometimes` guard reached. Neither reads the network.
    pub fn verdicts(&self, checks: &[Check]) -> u64 {
        *self.verdicts.get_or_init(|| {
            checks
                .iter()
                .enumerate()
                .filter(|(_, c)| match c {
                    Check::Always(p) => self.cluster.check(*p).is_err(),
                    Check::Sometimes(g) => g.reached(&self.cluster),
                })
                .fold(0, |bits, (i, _)| bits | 1 << i)
        })
    }

    /// The enabled actions that name no message (computed when first asked: a successor may
    /// never be expanded, if it was visited before).
    pub fn menu(&self, model: &IsrModel) -> &Menu {
        self.menu
            .get_or_init(|| self.cluster.menu(&model.cfg, &model.bounds))
    }

    fn candidates(&self) -> &[&'static [u32]] {
        self.candidates.get_or_init(|| candidates(&self.cluster))
    }

    /// The broker epochs held outside the network.
    fn epochs(&self) -> &EpochTable {
        self.epochs.get_or_init(|| self.cluster.broker_epochs())
    }
}

/// A message in flight, shared between the states that hold it, with its fingerprint.
#[derive(Clone)]
pub struct Msg {
    fp: u64,
    data: Arc<MsgData>,
}

struct MsgData {
    envelope: Envelope<Record>,
    /// The broker epochs it carries.
    epochs: Vec<(BrokerId, BrokerEpoch)>,
    /// Fingerprints of it renamed, so far.
    renamed: Mutex<Vec<Renamed>>,
}

impl Msg {
    fn fp(&self) -> u64 {
        self.fp
    }
}

impl InFlight for Msg {
    fn envelope(&self) -> &Envelope<Record> {
        &self.data.envelope
    }

    fn same(&self, other: &Self) -> bool {
        self.fp == other.fp
    }
}

/// A state: the nodes and the messages in flight, sorted by fingerprint (so copies of one
/// message are next to each other, as [`Menu::choices`] needs).
#[derive(Clone)]
pub struct State {
    pub nodes: Arc<Nodes>,
    pub network: Vec<Msg>,
}

impl State {
    /// The enabled actions (in the order of [`Cluster::actions`] but for the messages').
    pub fn choices(&self, model: &IsrModel) -> Vec<Choice> {
        self.nodes.menu(model).choices(&self.network)
    }

    /// The action a choice stands for.
    pub fn action(&self, model: &IsrModel, choice: Choice) -> Action {
        choice.action(self.nodes.menu(model), &self.network)
    }

    /// The cluster this state is.
    pub fn cluster(&self) -> Cluster {
        let mut c = self.nodes.cluster.clone();
        c.network = self.network.iter().map(|m| m.envelope().clone()).collect();
        c.network.sort_unstable();
        c
    }
}

/// A step remembered by the nodes it was taken from.
struct Step {
    what: What,
    to: Weak<Nodes>,
    /// The replicas the step changed, as bits of their index in [`Cluster::replicas`].
    changed: u64,
    closed: Option<BrokerId>,
    sent: Vec<Msg>,
}

/// An action in terms of the nodes it is taken from: a menu entry, a fetch, or an action on a
/// message (which one is [`Choice`]'s variant, the message by fingerprint).
#[derive(Clone, Copy, PartialEq, Eq)]
enum What {
    Listed(usize),
    Fetch(ReplicaId),
    Resend(ReplicaId),
    Deliver(u64),
    Drop(u64),
    Duplicate(u64),
    ZombieDeliver(u64),
    Tick,
}

impl What {
    fn of(choice: Choice, state: &State) -> What {
        let fp = |i: usize| state.network[i].fp;
        match choice {
            Choice::Listed(i) => What::Listed(i),
            Choice::Fetch(b) => What::Fetch(b),
            Choice::Resend(b) => What::Resend(b),
            Choice::Deliver(i) => What::Deliver(fp(i)),
            Choice::Drop(i) => What::Drop(fp(i)),
            Choice::Duplicate(i) => What::Duplicate(fp(i)),
            Choice::ZombieDeliver(i) => What::ZombieDeliver(fp(i)),
            Choice::Tick => What::Tick,
        }
    }
}

/// A strong 64-bit mix (splitmix64's finaliser).
pub fn mix(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The fingerprint of a state from its nodes' and its messages': the messages are a multiset,
/// combined by a sum of mixed fingerprints, so no order is needed.
fn combine(nodes: u64, messages: impl Iterator<Item = u64>) -> u64 {
    let network = messages.fold(0u64, |sum, m| sum.wrapping_add(mix(m)));
    mix(nodes ^ mix(network ^ 0x9e37_79b9_7f4a_7c15))
}

/// A fingerprint of something renamed, by which permutation, with which epoch table.
struct Renamed {
    perm: &'static [u32],
    epochs: EpochTable,
    fp: u64,
}

/// The fingerprint of something renamed, remembered in `memo`, or computed by `compute`.
fn renamed(
    memo: &Mutex<Vec<Renamed>>,
    perm: &'static [u32],
    epochs: &EpochTable,
    compute: impl FnOnce() -> u64,
) -> u64 {
    let found = lock(memo)
        .iter()
        .find(|r| std::ptr::eq(r.perm, perm) && r.epochs == *epochs)
        .map(|r| r.fp);
    found.unwrap_or_else(|| {
        let fp = compute();
        lock(memo).push(Renamed {
            perm,
            epochs: epochs.clone(),
            fp,
        });
        fp
    })
}

/// Slots of the worker's direct-mapped caches.
const INTERNED: usize = 1 << 16;

/// A search thread's caches: nodes and messages met lately, so that equal ones share one
/// allocation (and what is remembered with it), and recent nodes stay alive for the steps
/// that lead to them. Direct-mapped: a new entry replaces the old one in its slot.
pub struct Worker<'m> {
    pub model: &'m IsrModel,
    nodes: Vec<Option<Arc<Nodes>>>,
    msgs: Vec<Option<Msg>>,
}

impl<'m> Worker<'m> {
    /// A search thread's worker.
    pub fn new(model: &'m IsrModel) -> Self {
        Self::sized(model, INTERNED)
    }

    /// A worker with small caches, to replay a path.
    pub fn small(model: &'m IsrModel) -> Self {
        Self::sized(model, 64)
    }

    fn sized(model: &'m IsrModel, interned: usize) -> Self {
        Worker {
            model,
            nodes: (0..interned).map(|_| None).collect(),
            msgs: (0..interned).map(|_| None).collect(),
        }
    }

    /// The initial state.
    pub fn initial(&mut self) -> State {
        self.state_of(&self.model.initial())
    }

    /// The state of a cluster.
    pub fn state_of(&mut self, cluster: &Cluster) -> State {
        let mut nodes = cluster.clone();
        let network = std::mem::take(&mut nodes.network);
        let mut network: Vec<Msg> = network.into_iter().map(|e| self.intern_msg(e)).collect();
        network.sort_unstable_by_key(Msg::fp);
        State {
            nodes: self.intern_nodes(nodes),
            network,
        }
    }

    fn intern_nodes(&mut self, cluster: Cluster) -> Arc<Nodes> {
        let fp = fingerprint(&cluster);
        let n = self.nodes.len();
        let slot = &mut self.nodes[fp as usize % n];
        if let Some(n) = slot.as_ref().filter(|n| n.fp == fp) {
            return n.clone();
        }
        let n = Arc::new(Nodes::new(self.model, cluster, fp));
        *slot = Some(n.clone());
        n
    }

    fn intern_msg(&mut self, envelope: Envelope<Record>) -> Msg {
        let fp = fingerprint(&envelope);
        let n = self.msgs.len();
        let slot = &mut self.msgs[fp as usize % n];
        if let Some(m) = slot.as_ref().filter(|m| m.fp == fp) {
            return m.clone();
        }
        let m = Msg {
            fp,
            data: Arc::new(MsgData {
                epochs: envelope_epochs(&envelope),
                envelope,
                renamed: Mutex::new(Vec::new()),
            }),
        };
        *slot = Some(m.clone());
        m
    }

    /// The state after `choice`, one of `state.choices()`.
    pub fn step(&mut self, state: &State, choice: Choice) -> State {
        let what = What::of(choice, state);
        let mut network = state.network.clone();
        if let (true, Some(i)) = (takes_message(choice), choice.message()) {
            network.remove(i);
        }
        if let Some(to) = self.remembered(state, what, &mut network) {
            return State { nodes: to, network };
        }
        let action = state.action(self.model, choice);
        let mut cluster = state.nodes.cluster.clone();
        let traffic = cluster.act(&self.model.cfg, &self.model.bounds, &action);
        let changed = share_unchanged(&state.nodes.cluster, &mut cluster);
        let to = self.intern_nodes(cluster);
        let sent: Vec<Msg> = traffic
            .sent
            .into_iter()
            .map(|e| self.intern_msg(e))
            .collect();
        let step = Step {
            what,
            to: Arc::downgrade(&to),
            changed,
            closed: traffic.closed,
            sent,
        };
        self.carry(&to, &step, &mut network);
        let mut steps = lock(&state.nodes.steps);
        match steps.iter_mut().find(|s| s.what == what) {
            Some(old) => *old = step,
            None => steps.push(step),
        }
        State { nodes: to, network }
    }

    /// The step `what` from the state's nodes as remembered, carried out on `network`; `None`
    /// when it was not taken before, or its target has since been dropped.
    fn remembered(&self, state: &State, what: What, network: &mut Vec<Msg>) -> Option<Arc<Nodes>> {
        let steps = lock(&state.nodes.steps);
        let step = steps.iter().find(|s| s.what == what)?;
        let to = step.to.upgrade()?;
        self.carry(&to, step, network);
        Some(to)
    }

    fn carry(&self, to: &Nodes, step: &Step, network: &mut Vec<Msg>) {
        carry(
            &self.model.cfg,
            &self.model.bounds,
            &to.cluster.replicas,
            network,
            step.closed,
            step.sent.iter().cloned(),
            |at| step.changed & 1 << at != 0,
        );
        network.sort_unstable_by_key(Msg::fp);
    }

    /// The fingerprint of `state`, or with `symmetry` of its class of broker renamings: the
    /// smallest over the renamings of [`crate::symmetry::candidates`] (with broker epochs
    /// ranked), as [`crate::symmetry::canonicalize`] picks its representative. A renaming that
    /// changes nothing costs nothing; the others' fingerprints are cached per nodes and per
    /// message.
    pub fn fingerprint(&mut self, state: &State, symmetry: bool) -> u64 {
        let plain = || combine(state.nodes.fp, state.network.iter().map(Msg::fp));
        if !symmetry {
            return plain();
        }
        let nodes = &state.nodes;
        let epochs = nodes.epochs().with(
            state
                .network
                .iter()
                .flat_map(|m| m.data.epochs.iter().copied()),
        );
        let mut best = u64::MAX;
        for &perm in nodes.candidates() {
            let fp = if is_identity(perm) && nodes.cluster.epochs_are_ranked(&epochs) {
                plain()
            } else {
                let n = renamed(&nodes.renamed, perm, &epochs, || {
                    let mut c = nodes.cluster.clone();
                    c.rename_brokers(&renaming(perm, &epochs));
                    fingerprint(&c)
                });
                let msgs = state.network.iter().map(|m| {
                    renamed(&m.data.renamed, perm, &epochs, || {
                        let mut e = m.envelope().clone();
                        e.rename_brokers(&renaming(perm, &epochs));
                        fingerprint(&e)
                    })
                });
                combine(n, msgs)
            };
            best = best.min(fp);
        }
        best
    }
}

/// Makes `after` share with `before` every replica and controller a step copied (copy on
/// write) but left equal, so sharing survives steps that change little; returns the replicas
/// that changed, as bits of their index.
fn share_unchanged(before: &Cluster, after: &mut Cluster) -> u64 {
    fn share<T: PartialEq>(before: &Arc<T>, after: &mut Arc<T>) -> bool {
        if Arc::ptr_eq(before, after) {
            return false;
        }
        if before == after {
            *after = before.clone();
            return false;
        }
        true
    }
    share(&before.controller, &mut after.controller);
    for (b, a) in before.history.iter().zip(after.history.iter_mut()) {
        share(b, a);
    }
    for (b, a) in before.zombie.iter().zip(after.zombie.iter_mut()) {
        share(b, a);
    }
    for (b, a) in before.stale_store.iter().zip(after.stale_store.iter_mut()) {
        share(b, a);
    }
    let mut changed = 0;
    for (i, (b, a)) in before
        .replicas
        .iter()
        .zip(after.replicas.iter_mut())
        .enumerate()
    {
        if share(b, a) {
            changed |= 1 << i;
        }
    }
    changed
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether the action of `choice` takes its message off the network.
fn takes_message(choice: Choice) -> bool {
    matches!(
        choice,
        Choice::Deliver(_) | Choice::Drop(_) | Choice::ZombieDeliver(_)
    )
}
