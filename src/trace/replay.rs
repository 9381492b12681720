//! The replay: the traces of one run merged into an order consistent with causality, and each
//! step re-executed on the core, which must return the recorded effects, with every property
//! holding after every step.
//!
//! **The merge.** Each process's steps keep their order. A step that receives a message may
//! come only after a step, in any trace, that sent that message and whose message no earlier
//! receive took (messages are matched by sender, receiver and content; identical messages are
//! interchangeable). Every other step — a tick, a producer's write, a flush, a registration or
//! heartbeat, which the runtime sends outside the core — may come at any time. A broker's
//! incarnations (ordered by their start) follow each other: one starts on what the one before
//! left on disk, after it stopped (`Replayer::check_recovery` says what it may find there). A
//! step that can never come, because the message it receives was never sent or was received
//! already, is the divergence. Since taking a step that may come never stops another from
//! coming, the merge is greedy: each process runs until it waits for a message, and then the
//! next one does.
//!
//! **The check.** This is the model's semantics: a delivery is enabled when the message is in
//! flight, and a node's step is a transition of the core from its current state. On top of the
//! recorded effects matching, every property of [`crate::invariants`] and every replica's local
//! invariants are checked on the partition a step touched — after each step that can reshape
//! it (a change of role, epoch or ISR, a truncation, a stop) and otherwise after every
//! [`CHECK_EVERY`] steps, and at the end — over the replicas of each broker's current
//! incarnation and the controller with the highest epoch, with a history of what was committed,
//! acknowledged to an acks=all producer, and read.
//!
//! **Groups.** A coordinator's consumer groups are re-executed too: each group change of a
//! process is applied to that process's copy of the group ([`crate::group::Group::step`]),
//! which must give the recorded answer, and each load point it was given must be the one the
//! core computes from the replayed replica of the offsets partition at that moment (rule 15).
//! A group step receives no message, so it may come at any time after the process's previous
//! step.

use super::cleanings::Cleanings;
use super::{Digest, DigestLog, Event};
use crate::config::Config;
use crate::controller::{Controller, Effect as ControllerEffect, Input as ControllerInput};
use crate::group::{self, Change as GroupChange, Group};
use crate::invariants::{self, ClusterView, History, Property};
use crate::log::{Entry, Log};
use crate::message::{Effect, Effects, Envelope, Message};
use crate::replica::{Input as ReplicaInput, Replica};
use crate::types::{Acks, BrokerId, Node, Offset, PartitionId, Tick};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// One process's trace: a name to cite it by (its file) and its events, in order.
#[derive(Clone, Debug)]
pub struct Trace {
    /// What to cite it by in a divergence: its file name, usually.
    pub name: String,
    /// Its events, one per line, the [`Event::Process`] line first.
    pub events: Vec<Event>,
}

impl Trace {
    /// A trace from its text, one event per line (blank lines skipped), each parsed by `parse`
    /// (`serde_json::from_str` for the JSON lines the runtime writes; the core parses nothing
    /// itself). The first line that does not parse is the error, with its number.
    ///
    /// Every line is written whole, newline included, before the step's effects are carried
    /// out; but a kill can still cut that write short (Linux stops a write to a file between
    /// pages when the process is killed). So a last line without its newline is a step whose
    /// effects never left the process, the same as a step killed before its line: it is
    /// dropped, not an error.
    pub fn parse<E: std::fmt::Display>(
        name: impl Into<String>,
        text: &str,
        parse: impl Fn(&str) -> Result<Event, E>,
    ) -> Result<Trace, String> {
        let name = name.into();
        let whole = match text.rfind('\n') {
            Some(end) => &text[..=end],
            None => "",
        };
        let mut events = Vec::new();
        for (i, line) in whole.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let event = parse(line)
                .map_err(|e| format!("{name} line {}: not a trace event: {e}", i + 1))?;
            events.push(event);
        }
        Ok(Trace { name, events })
    }
}

/// A replay that went through: how many steps, over how many traces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Accepted {
    /// The steps replayed: every event of every trace but their `Process` lines.
    pub steps: usize,
    /// The traces merged: one per process of the run.
    pub traces: usize,
}

/// The first step that is not a behaviour of the protocol.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Divergence {
    /// Which trace and event (0-based) diverged, if one event is to blame.
    pub at: Option<(usize, usize)>,
    /// Steps accepted before it.
    pub steps: usize,
    /// What went wrong, citing the trace's name and line where one is to blame.
    pub why: String,
}

/// A step taken: which trace and event, and the partition it was about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Applied {
    /// The trace's index in the slice given to [`Replayer::new`].
    pub trace: usize,
    /// The event's index in that trace (0-based; event 0 is its `Process` line).
    pub event: usize,
    /// The partition a replica step or recovery was about; `None` for a controller's events.
    pub partition: Option<PartitionId>,
}

/// What a write asked for, kept until it is answered: its acks, and the offsets it spans
/// (known for a retry; for a write, its records' total width).
#[derive(Clone, Copy, Debug)]
struct Write {
    acks: Acks,
    width: u64,
}

struct Process {
    node: Node,
    config: Config,
    started: u64,
    /// The next event to take.
    next: usize,
    replicas: BTreeMap<PartitionId, Replica<DigestLog>>,
    controller: Option<Controller>,
    writes: BTreeMap<(PartitionId, u64), Write>,
    reads: BTreeMap<(PartitionId, u64), Offset>,
    /// The consumer groups its coordinator holds.
    groups: BTreeMap<String, Group>,
}

/// The replay in progress. [`Replayer::step`] takes one step at a time, so that a caller can
/// show the state around a divergence; [`replay`] runs it to the end.
pub struct Replayer<'t> {
    traces: &'t [Trace],
    processes: Vec<Process>,
    /// Messages sent and not yet received, by (sender, receiver), oldest first.
    in_flight: BTreeMap<(Node, Node), Vec<Message<Digest>>>,
    /// Each broker's current incarnation: the latest process of it that has started.
    current: BTreeMap<BrokerId, usize>,
    histories: BTreeMap<PartitionId, History<Digest>>,
    /// Per (process, partition): the high watermark up to which its leader's log was recorded
    /// as committed.
    observed_hw: BTreeMap<(usize, PartitionId), Offset>,
    /// Steps of each partition since its properties were last checked.
    unchecked: BTreeMap<PartitionId, usize>,
    /// What the cleanings installed so far replaced.
    cleanings: Cleanings,
    /// The process whose turn it is.
    turn: usize,
    steps: usize,
}

/// Replays `traces` to the end.
pub fn replay(traces: &[Trace]) -> Result<Accepted, Divergence> {
    let mut replayer = Replayer::new(traces)?;
    while replayer.step()?.is_some() {}
    Ok(Accepted {
        steps: replayer.steps,
        traces: traces.len(),
    })
}

impl<'t> Replayer<'t> {
    /// Reads each trace's first line, which must say which process wrote it.
    pub fn new(traces: &'t [Trace]) -> Result<Replayer<'t>, Divergence> {
        let mut processes = Vec::new();
        for (i, trace) in traces.iter().enumerate() {
            if let Some(e) = trace.events.iter().position(|e| !plausible(e)) {
                return Err(Divergence {
                    at: Some((i, e)),
                    steps: 0,
                    why: format!(
                        "{} line {}: a record spans no offsets, or more than a Kafka batch can",
                        trace.name,
                        e + 1
                    ),
                });
            }
            match trace.events.first() {
                Some(Event::Process {
                    node,
                    config,
                    started,
                }) => processes.push(Process {
                    node: *node,
                    config: *config,
                    started: *started,
                    next: 1,
                    replicas: BTreeMap::new(),
                    controller: None,
                    writes: BTreeMap::new(),
                    reads: BTreeMap::new(),
                    groups: BTreeMap::new(),
                }),
                _ => {
                    return Err(Divergence {
                        at: Some((i, 0)),
                        steps: 0,
                        why: format!(
                            "{}: the first line must say which process wrote it",
                            trace.name
                        ),
                    })
                }
            }
        }
        Ok(Replayer {
            traces,
            processes,
            in_flight: BTreeMap::new(),
            current: BTreeMap::new(),
            histories: BTreeMap::new(),
            observed_hw: BTreeMap::new(),
            unchecked: BTreeMap::new(),
            cleanings: Cleanings::default(),
            turn: 0,
            steps: 0,
        })
    }

    /// Steps accepted so far.
    pub fn steps(&self) -> usize {
        self.steps
    }

    /// The next step in a causal order: `None` once every trace is replayed.
    pub fn step(&mut self) -> Result<Option<Applied>, Divergence> {
        let n = self.processes.len();
        for k in 0..n {
            let p = (self.turn + k) % n;
            if self.ready(p) {
                self.turn = p;
                let event = self.processes[p].next;
                let partition = self.apply(p)?;
                self.processes[p].next += 1;
                self.steps += 1;
                return Ok(Some(Applied {
                    trace: p,
                    event,
                    partition,
                }));
            }
        }
        match (0..n).find(|&p| !self.exhausted(p)) {
            None => {
                // The end state, on every partition not checked since its last step.
                let due: Vec<PartitionId> = self
                    .unchecked
                    .iter()
                    .filter(|(_, &n)| n > 0)
                    .map(|(&partition, _)| partition)
                    .collect();
                for partition in due {
                    self.unchecked.insert(partition, 0);
                    if let Err(why) = self.properties(partition) {
                        return Err(Divergence {
                            at: None,
                            steps: self.steps,
                            why: format!("at the end of the run: {why}"),
                        });
                    }
                }
                Ok(None)
            }
            Some(_) => Err(self.blocked()),
        }
    }

    /// The replicas of `partition` on each broker's current incarnation.
    pub fn replicas(&self, partition: PartitionId) -> Vec<&Replica<DigestLog>> {
        self.current
            .values()
            .filter_map(|&p| self.processes[p].replicas.get(&partition))
            .collect()
    }

    /// The controller with the highest epoch, if one has taken office.
    pub fn controller(&self) -> Option<&Controller> {
        self.processes
            .iter()
            .filter_map(|p| p.controller.as_ref())
            .max_by_key(|c| c.epoch())
    }

    fn exhausted(&self, p: usize) -> bool {
        self.processes[p].next >= self.traces[p].events.len()
    }

    /// Whether process `p`'s next event may come now.
    fn ready(&self, p: usize) -> bool {
        if self.exhausted(p) || !self.may_start(p) {
            return false;
        }
        match self.awaited(p) {
            Some((from, message)) => self.sent(from, self.processes[p].node, message),
            None => true,
        }
    }

    /// The message process `p`'s next event receives, with its sender, unless it can come at
    /// any time (it receives nothing, or what the runtime sends outside the core). A recovery
    /// that holds a Fetch answer's records past the trace receives that answer.
    fn awaited(&self, p: usize) -> Option<(Node, &'t Message<Digest>)> {
        match self.traces[p].events.get(self.processes[p].next)? {
            Event::Replica {
                input: ReplicaInput::Message { from, message },
                ..
            } => Some((*from, message)),
            Event::Controller {
                input: ControllerInput::Message { from, message },
                ..
            } if !from_outside_the_core(message) => Some((*from, message)),
            Event::Open {
                partition, entries, ..
            } => self.fetch_answer_recovered(p, *partition, entries),
            _ => None,
        }
    }

    /// A broker's incarnation starts once every earlier one has stopped.
    fn may_start(&self, p: usize) -> bool {
        let me = &self.processes[p];
        me.next > 1
            || !matches!(me.node, Node::Broker(_))
            || self.processes.iter().enumerate().all(|(q, other)| {
                q == p || other.node != me.node || other.started > me.started || self.exhausted(q)
            })
    }

    fn sent(&self, from: Node, to: Node, message: &Message<Digest>) -> bool {
        self.in_flight
            .get(&(from, to))
            .is_some_and(|m| m.contains(message))
    }

    fn receive(&mut self, from: Node, to: Node, message: &Message<Digest>) {
        if let Some(queue) = self.in_flight.get_mut(&(from, to)) {
            if let Some(i) = queue.iter().position(|m| m == message) {
                queue.remove(i);
            }
        }
    }

    /// Why no process can go on. A step that receives a message no trace ever sent is to
    /// blame; otherwise every waiting step waits for a message that is sent only after it,
    /// directly or through others (a receive recorded before its send): all of them are named.
    fn blocked(&self) -> Divergence {
        let waiting: Vec<(usize, Node, Node, &Message<Digest>)> = (0..self.processes.len())
            .filter(|&p| !self.exhausted(p) && self.may_start(p))
            .filter_map(|p| {
                let (from, message) = self.awaited(p)?;
                Some((p, from, self.processes[p].node, message))
            })
            .collect();
        let never_sent = waiting
            .iter()
            .find(|(_, from, to, message)| !self.ever_sent(*from, *to, message));
        if let Some((p, from, to, message)) = never_sent {
            let why = format!(
                "{to} receives {} from {from}, which no trace sent",
                message.kind()
            );
            return self.diverged(*p, self.processes[*p].next, why);
        }
        let Some(&(first, ..)) = waiting.first() else {
            return Divergence {
                at: None,
                steps: self.steps,
                why: "no trace can go on".into(),
            };
        };
        let mut why = "no causal order: each remaining step receives a message sent only after it"
            .to_string();
        for (p, from, to, message) in &waiting {
            let _ = write!(
                why,
                "\n  {} line {}: {to} receives {} from {from}",
                self.traces[*p].name,
                self.processes[*p].next + 1,
                message.kind()
            );
        }
        Divergence {
            at: Some((first, self.processes[first].next)),
            steps: self.steps,
            why,
        }
    }

    /// Whether any trace sends `message` from `from` to `to`, at any point.
    fn ever_sent(&self, from: Node, to: Node, message: &Message<Digest>) -> bool {
        let is_it =
            |env: &Envelope<Digest>| env.from == from && env.to == to && env.message == *message;
        self.traces.iter().flat_map(|t| &t.events).any(|e| match e {
            Event::Replica { effects, .. } => effects.iter().filter_map(Effect::sent).any(is_it),
            Event::Controller { effects, .. } | Event::ControllerState { effects, .. } => {
                effects.iter().filter_map(ControllerEffect::sent).any(is_it)
            }
            _ => false,
        })
    }

    fn diverged(&self, p: usize, event: usize, why: String) -> Divergence {
        Divergence {
            at: Some((p, event)),
            steps: self.steps,
            why: format!("{} line {}: {why}", self.traces[p].name, event + 1),
        }
    }

    /// Takes process `p`'s next event; the partition it touched.
    fn apply(&mut self, p: usize) -> Result<Option<PartitionId>, Divergence> {
        let traces = self.traces;
        let event = self.processes[p].next;
        if self.processes[p].next == 1 {
            if let Node::Broker(b) = self.processes[p].node {
                self.current.insert(b, p);
            }
        }
        match &traces[p].events[event] {
            Event::Process { .. } => Err(self.diverged(p, event, "a second Process line".into())),
            Event::Open {
                partition,
                hw_checkpoint,
                entries,
                log_start,
                first_offset,
            } => {
                self.open(
                    p,
                    event,
                    *partition,
                    *hw_checkpoint,
                    (*log_start, *first_offset, entries),
                )?;
                Ok(Some(*partition))
            }
            Event::Replica {
                partition,
                now,
                input,
                effects,
                log_end,
            } => {
                if let (Some(end), Some(replica)) =
                    (log_end, self.processes[p].replicas.get_mut(partition))
                {
                    replica.log_mut().fail_at(*end);
                }
                self.replica_step(p, event, *partition, *now, input, effects)?;
                let due = self.unchecked.entry(*partition).or_default();
                *due += 1;
                if reshapes(input, effects) || *due >= CHECK_EVERY {
                    self.check(p, event, *partition)?;
                }
                Ok(Some(*partition))
            }
            Event::Controller {
                now,
                input,
                effects,
            } => {
                let me = self.processes[p].node;
                let cfg = self.processes[p].config;
                let Some(controller) = self.processes[p].controller.as_mut() else {
                    return Err(self.diverged(
                        p,
                        event,
                        "a controller step before it took office".into(),
                    ));
                };
                let got = controller.step(&cfg, *now, input.clone());
                if let ControllerInput::Message { from, message } = input {
                    self.receive(*from, me, message);
                }
                self.compare(p, event, &got, effects)?;
                self.send(got.iter().filter_map(ControllerEffect::sent));
                if !got.is_empty() {
                    let partitions: Vec<PartitionId> = self.histories.keys().copied().collect();
                    for partition in partitions {
                        self.check(p, event, partition)?;
                    }
                }
                Ok(None)
            }
            Event::ControllerState { state, effects } => {
                self.processes[p].controller = Some(state.clone());
                self.send(effects.iter().filter_map(ControllerEffect::sent));
                Ok(None)
            }
            Event::Group { group, now, change } => {
                self.group_change(p, event, group, *now, change)?;
                Ok(None)
            }
            Event::Cleaned {
                partition,
                from,
                entries,
            } => {
                let installed = match self.processes[p].replicas.get_mut(partition) {
                    Some(replica) => replica.log_mut().install_cleaned(*from, entries),
                    None => Err(format!("{partition}, which the process does not host")),
                };
                let (replaced, cleaned) = installed.map_err(|why| {
                    self.diverged(p, event, format!("a cleaning of {partition}: {why}"))
                })?;
                self.cleanings.record(*partition, &replaced, &cleaned);
                self.check(p, event, *partition)?;
                Ok(Some(*partition))
            }
            Event::LoadPoint {
                partition,
                load_point,
            } => {
                let process = &self.processes[p];
                let Some(replica) = process.replicas.get(partition) else {
                    let why =
                        format!("a load point of {partition}, which the process does not host");
                    return Err(self.diverged(p, event, why));
                };
                let replayed = group::load_point(&process.config.rules, replica);
                if replayed != *load_point {
                    let shown =
                        |o: Option<Offset>| o.map_or("not yet".into(), |o| format!("up to {o}"));
                    let why = format!(
                        "the coordinator was told it may load {partition} {}; the core says {}",
                        shown(*load_point),
                        shown(replayed)
                    );
                    return Err(self.diverged(p, event, why));
                }
                Ok(Some(*partition))
            }
        }
    }

    /// Applies one change of a group at process `p`'s coordinator; a step must give back what
    /// the coordinator recorded.
    fn group_change(
        &mut self,
        p: usize,
        event: usize,
        name: &str,
        now: Tick,
        change: &GroupChange,
    ) -> Result<(), Divergence> {
        let rules = self.processes[p].config.rules;
        let groups = &mut self.processes[p].groups;
        let why = match change {
            GroupChange::Created { initial_delay } => {
                if groups.contains_key(name) {
                    format!("group {name} created again")
                } else {
                    let created = Group::default().with_initial_delay(*initial_delay);
                    groups.insert(name.to_owned(), created);
                    return Ok(());
                }
            }
            GroupChange::Loaded {
                stored,
                initial_delay,
            } => {
                let loaded = Group::from_stored(stored.clone(), now);
                groups.insert(name.to_owned(), loaded.with_initial_delay(*initial_delay));
                return Ok(());
            }
            GroupChange::Forgotten => {
                groups.remove(name);
                return Ok(());
            }
            GroupChange::Stepped { input, output } => match groups.get_mut(name) {
                None => format!("a step of group {name}, which the coordinator does not hold"),
                Some(g) => {
                    let got = g.step(&rules, now, input);
                    if got == *output {
                        return Ok(());
                    }
                    format!(
                        "group {name}: the core's answer differs from the recorded one\n  \
                         replayed: {got:?}\n  recorded: {output:?}"
                    )
                }
            },
        };
        Err(self.diverged(p, event, why))
    }

    fn open(
        &mut self,
        p: usize,
        event: usize,
        partition: PartitionId,
        hw_checkpoint: Offset,
        (log_start, first_offset, entries): (Offset, Option<Offset>, &[Entry<Digest>]),
    ) -> Result<(), Divergence> {
        let Node::Broker(me) = self.processes[p].node else {
            return Err(self.diverged(p, event, "a controller opened a replica".into()));
        };
        if self.processes[p].replicas.contains_key(&partition) {
            return Err(self.diverged(p, event, format!("{partition} opened twice")));
        }
        let log = DigestLog::recovered(log_start, first_offset, entries);
        self.check_recovery(p, event, partition, (log_start, entries, &log))?;
        self.processes[p].replicas.insert(
            partition,
            Replica::recover(me, partition, log, hw_checkpoint),
        );
        self.histories.entry(partition).or_default();
        Ok(())
    }

    /// The replica of `partition` that broker process `p`'s previous incarnation held at the
    /// end of its trace, if it had one.
    fn predecessor(&self, p: usize, partition: PartitionId) -> Option<&Replica<DigestLog>> {
        let me = &self.processes[p];
        self.processes
            .iter()
            .enumerate()
            .filter(|(q, other)| *q != p && other.node == me.node && other.started < me.started)
            .max_by_key(|(_, other)| other.started)
            .and_then(|(_, other)| other.replicas.get(&partition))
    }

    /// The entries broker process `p` recovered of `partition` past the log its previous
    /// incarnation held, if they extend that log and that replica was still online (a clean
    /// stop or a failed disk ends its steps): the appends of a step whose line the kill cut off.
    fn past_the_trace<'e>(
        &self,
        p: usize,
        partition: PartitionId,
        entries: &'e [Entry<Digest>],
    ) -> Option<(&Replica<DigestLog>, &'e [Entry<Digest>])> {
        let before = self.predecessor(p, partition)?;
        let held = before.log().entries().count();
        let extends =
            entries.len() > held && before.log().entries().zip(entries).all(|(a, b)| a == b);
        (extends && before.is_online()).then(|| (before, &entries[held..]))
    }

    /// The Fetch answer, sent in any trace, that holds what broker process `p` recovered of
    /// `partition` past its previous incarnation's trace as a follower, with its sender — one
    /// in flight if there is one: that recovery receives it, so it comes after the answer is
    /// sent, like a delivery.
    fn fetch_answer_recovered(
        &self,
        p: usize,
        partition: PartitionId,
        entries: &[Entry<Digest>],
    ) -> Option<(Node, &'t Message<Digest>)> {
        let (before, extra) = self.past_the_trace(p, partition, entries)?;
        if before.is_leader() {
            return None;
        }
        let (me, end) = (self.processes[p].node, before.log_end_offset());
        let answers: Vec<(Node, &'t Message<Digest>)> = self
            .traces
            .iter()
            .flat_map(|t| &t.events)
            .filter_map(|e| match e {
                Event::Replica { effects, .. } => Some(effects),
                _ => None,
            })
            .flatten()
            .filter_map(|effect| match effect {
                Effect::Send(env) if env.to == me => match &env.message {
                    Message::FetchResponse(r)
                        if r.partition == partition
                            && r.fetch_offset == end
                            && r.result
                                .as_ref()
                                .is_ok_and(|f| f.entries.starts_with(extra)) =>
                    {
                        Some((env.from, &env.message))
                    }
                    _ => None,
                },
                _ => None,
            })
            .collect();
        let in_flight = answers
            .iter()
            .find(|(from, message)| self.sent(*from, me, message));
        in_flight.or(answers.first()).copied()
    }

    /// Checks what broker process `p`'s disk gave back for `partition` against what the
    /// incarnation before held at the end of its trace.
    ///
    /// The recovered log is a prefix of the one held (a crash loses an unflushed tail), or,
    /// when the incarnation before was killed with the replica still online, that log and the
    /// entries of one more step: the runtime writes a step's line after the step, so a kill
    /// in between leaves the step's appends on disk and no line. Nothing else saw that step
    /// (its effects are carried out after the line), so it is a crash after an append that
    /// kept it (spec/protocol.md §7). Two steps append: a write the replica led, at its leader epoch, and
    /// a follower's Fetch answer from its log end, which its leader's trace sent; the extra
    /// entries must be one of those, and that answer is received here.
    fn check_recovery(
        &mut self,
        p: usize,
        event: usize,
        partition: PartitionId,
        (log_start, entries, recovered): (Offset, &[Entry<Digest>], &DigestLog),
    ) -> Result<(), Divergence> {
        let me = self.processes[p].node;
        let Some(before) = self.predecessor(p, partition) else {
            return Ok(());
        };
        // The log start is durable before anything below it goes, and moves only in steps.
        let held_start = before.log().log_start_offset();
        if held_start != log_start {
            return Err(self.diverged(
                p,
                event,
                format!("{me} recovered {partition} from log start {log_start}, but its log started at {held_start} when it stopped"),
            ));
        }
        let held = before.log().entries().count();
        let prefix =
            entries.len() <= held && before.log().entries().zip(entries).all(|(a, b)| a == b);
        if prefix || self.cleaned_prefix(partition, before.log(), recovered) {
            return Ok(());
        }
        let Some((before, extra)) = self.past_the_trace(p, partition, entries) else {
            return Err(self.diverged(
                p,
                event,
                format!(
                    "{me} recovered {} entries of {partition} that are not a prefix of the {held} it held before it stopped",
                    entries.len()
                ),
            ));
        };
        let appended = if before.is_leader() {
            let epoch = before.leader_epoch();
            extra.iter().all(|e| e.epoch == epoch)
        } else {
            match self.fetch_answer_recovered(p, partition, entries) {
                Some((from, message)) if self.sent(from, me, message) => {
                    self.receive(from, me, message);
                    true
                }
                _ => false,
            }
        };
        if !appended {
            return Err(self.diverged(
                p,
                event,
                format!(
                    "{me} recovered {} entries of {partition}, {} past the {held} it held before it was killed, which neither a write it led nor a Fetch answer sent to it holds",
                    entries.len(),
                    extra.len()
                ),
            ));
        }
        Ok(())
    }

    /// Whether `recovered` is a prefix of `held` once both are as they were before any
    /// cleaning: a kill between a cleaning's renames and its line in the trace leaves a log
    /// cleaned on disk that the trace does not say was, and one just before the renames, the
    /// other way round.
    fn cleaned_prefix(
        &self,
        partition: PartitionId,
        held: &DigestLog,
        recovered: &DigestLog,
    ) -> bool {
        if !self.cleanings.any(partition) {
            return false;
        }
        let held = self.cleanings.uncleaned(partition, held);
        let recovered = self.cleanings.uncleaned(partition, recovered);
        let (held, recovered) = (held.based_entries(), recovered.based_entries());
        recovered.len() <= held.len() && held.iter().zip(recovered).all(|(a, b)| a == b)
    }

    fn replica_step(
        &mut self,
        p: usize,
        event: usize,
        partition: PartitionId,
        now: Tick,
        input: &ReplicaInput<Digest>,
        effects: &Effects<Digest>,
    ) -> Result<(), Divergence> {
        let me = self.processes[p].node;
        let cfg = self.processes[p].config;
        let Some(replica) = self.processes[p].replicas.get_mut(&partition) else {
            return Err(self.diverged(
                p,
                event,
                format!("a step of {partition} before it was opened"),
            ));
        };
        // What the driver did to the log before stepping: a flush before telling it, and
        // before a clean stop.
        match input {
            ReplicaInput::Flushed(offset) => {
                replica.log_mut().flush();
                let flushed = replica.log().flushed_offset();
                if *offset != flushed {
                    return Err(self.diverged(
                        p,
                        event,
                        format!("flushed to {offset}, but the replayed log ends at {flushed}"),
                    ));
                }
            }
            ReplicaInput::Stop { clean: true } => replica.log_mut().flush(),
            _ => {}
        }
        let before = matches!(
            input,
            ReplicaInput::Message {
                message: Message::OffsetForLeaderEpochResponse(_),
                ..
            }
        )
        .then(|| replica.clone());
        let got = replica.step(&cfg, now, input.clone());
        if let (
            Some(before),
            ReplicaInput::Message {
                from: Node::Broker(from),
                message: Message::OffsetForLeaderEpochResponse(answer),
            },
        ) = (&before, input)
        {
            if !invariants::round_progressed(before, *from, answer, replica) {
                let why = format!("ReconciliationProgresses: {me} acted on an OffsetForLeaderEpoch answer and asks about the same epoch again");
                return Err(self.diverged(p, event, why));
            }
        }
        let process = &mut self.processes[p];
        match input {
            ReplicaInput::Write {
                id, records, acks, ..
            } => {
                let width = records.iter().map(|r| r.width).sum();
                process
                    .writes
                    .insert((partition, *id), Write { acks: *acks, width });
            }
            ReplicaInput::Read { id, from, .. } => {
                process.reads.insert((partition, *id), *from);
            }
            ReplicaInput::Message { from, message } => self.receive(*from, me, message),
            _ => {}
        }
        self.compare(p, event, &got, effects)?;
        self.send(got.iter().filter_map(Effect::sent));
        self.observe(p, partition, &got);
        Ok(())
    }

    fn compare<E: PartialEq + std::fmt::Debug>(
        &self,
        p: usize,
        event: usize,
        got: &[E],
        recorded: &[E],
    ) -> Result<(), Divergence> {
        if got == recorded {
            return Ok(());
        }
        let mut why = "the core's effects differ from the recorded ones".to_string();
        let _ = write!(why, "\n  replayed: {got:?}\n  recorded: {recorded:?}");
        Err(self.diverged(p, event, why))
    }

    fn send<'a>(&mut self, envelopes: impl Iterator<Item = &'a Envelope<Digest>>) {
        for envelope in envelopes {
            self.in_flight
                .entry((envelope.from, envelope.to))
                .or_default()
                .push(envelope.message.clone());
        }
    }

    /// Adds to the history what the step committed, acknowledged and handed a consumer.
    /// Commits are taken incrementally, entry by entry, from the HW this leader had at its
    /// last step: [`History::observe_commits`] walks every offset below every leader's HW at
    /// every step, which over a long run of batches spanning many offsets would cost more than
    /// the replay itself.
    fn observe(&mut self, p: usize, partition: PartitionId, effects: &Effects<Digest>) {
        let process = &mut self.processes[p];
        let Some(replica) = process.replicas.get(&partition) else {
            return;
        };
        let history = self.histories.entry(partition).or_default();
        let cleanings = &self.cleanings;
        // The entries from `from` to `until`, as they were before any cleaning: what the
        // properties compare.
        let span = |from: Offset, until: Offset| {
            let mut out = Vec::new();
            let mut o = from;
            while o < until {
                let Some(e) = replica.entry(o) else { break };
                let width = e.record.width.max(1);
                let original = cleanings.original(partition, &(o.0, e));
                out.extend(original.into_iter().map(|(base, e)| (Offset(base), e)));
                o = Offset(o.0 + width);
            }
            out
        };
        if replica.is_leader() {
            let seen = self.observed_hw.entry((p, partition)).or_default();
            if replica.high_watermark() > *seen {
                history
                    .committed
                    .extend(span(*seen, replica.high_watermark()));
                *seen = replica.high_watermark();
            }
        }
        for effect in effects {
            match effect {
                Effect::Acknowledge {
                    id, base_offset, ..
                } => {
                    if let Some(w) = process.writes.remove(&(partition, *id)) {
                        if w.acks == Acks::All {
                            let until = Offset(base_offset.0 + w.width);
                            history.acknowledged.extend(span(*base_offset, until));
                        }
                    }
                }
                Effect::FailWrite { id, .. } => {
                    process.writes.remove(&(partition, *id));
                }
                Effect::Read { id, result, .. } => {
                    let from = process.reads.remove(&(partition, *id));
                    if let (Some(from), Ok(answer)) = (from, result) {
                        let first = replica.log().base_of(from).unwrap_or(from);
                        let until = answer
                            .entries
                            .iter()
                            .fold(first, |o, e| Offset(o.0 + e.record.width));
                        history.consumed.extend(span(first, until));
                    }
                }
                _ => {}
            }
        }
    }

    /// Every property on `partition` after a step of process `p`.
    fn check(&mut self, p: usize, event: usize, partition: PartitionId) -> Result<(), Divergence> {
        self.unchecked.insert(partition, 0);
        self.properties(partition)
            .map_err(|why| self.diverged(p, event, why))
    }

    /// Every property of `partition` now; without a controller to judge by, each replica's
    /// local invariants (the property ReplicasAreConsistent, which the others come with).
    fn properties(&self, partition: PartitionId) -> Result<(), String> {
        let mut replicas = self.replicas(partition);
        // Judged on the logs as they were before any cleaning (see `super::cleanings`).
        let uncleaned: Vec<Replica<DigestLog>>;
        if self.cleanings.any(partition) {
            uncleaned = replicas
                .iter()
                .map(|r| {
                    let mut copy = (*r).clone();
                    *copy.log_mut() = self.cleanings.uncleaned(partition, r.log());
                    copy
                })
                .collect();
            replicas = uncleaned.iter().collect();
        }
        let (Some(controller), Some(history)) = (self.controller(), self.histories.get(&partition))
        else {
            return replicas
                .iter()
                .try_for_each(|r| r.check_local())
                .map_err(|v| v.to_string());
        };
        // Every process runs the same rules; the flush policy is the brokers'.
        let flush = self
            .processes
            .iter()
            .find(|p| matches!(p.node, Node::Broker(_)))
            .map_or(crate::config::FlushPolicy::Always, |p| p.config.rules.flush);
        let view = ClusterView {
            partition,
            controller,
            replicas,
            history,
            flush,
            stalled_reconciliation: None,
            timely: false,
            timely_retry: None,
        };
        for property in Property::ALL {
            property.check(&view).map_err(|v| v.to_string())?;
        }
        Ok(())
    }
}

/// Properties are checked after every step that can reshape a partition ([`reshapes`]), and
/// otherwise after every this many steps of a partition, and at the end: checking them
/// compares the replicas' logs below the high watermark, which after every fetch of a long run
/// would cost more than everything else.
const CHECK_EVERY: usize = 16;

/// Whether a replica step can change what the properties compare other than by replication
/// moving forward: a change of role, epoch or ISR, a reconciliation answer, a truncation, a
/// stop or restart.
fn reshapes(input: &ReplicaInput<Digest>, effects: &Effects<Digest>) -> bool {
    let message = match input {
        ReplicaInput::Message { message, .. } => {
            !matches!(message, Message::Fetch(_) | Message::FetchResponse(_))
        }
        ReplicaInput::Stop { .. } | ReplicaInput::Restart => true,
        _ => false,
    };
    message
        || effects.iter().any(|e| match e {
            Effect::Truncated { .. } => true,
            Effect::Send(env) => matches!(env.message, Message::AlterPartition(_)),
            _ => false,
        })
}

/// Whether every record of `event` spans between 1 and 2^31 offsets, as a Kafka batch does
/// (its record count is an i32): a record of width 0 would never move an offset forward.
fn plausible(event: &Event) -> bool {
    let ok = std::cell::Cell::new(true);
    let check = |d: &Digest| {
        if d.width == 0 || d.width > 1 << 31 {
            ok.set(false);
        }
    };
    let effects = |effects: &Effects<Digest>| {
        for e in effects {
            super::records::effect(e, &check);
        }
    };
    let controller_effects = |effects: &[ControllerEffect<Digest>]| {
        for e in effects {
            super::records::controller_effect(e, &check);
        }
    };
    match event {
        Event::Open { entries, .. } | Event::Cleaned { entries, .. } => {
            entries.iter().for_each(|e| check(&e.record))
        }
        Event::Replica {
            input, effects: e, ..
        } => {
            super::records::replica_input(input, &check);
            effects(e);
        }
        Event::Controller {
            input, effects: e, ..
        } => {
            super::records::controller_input(input, &check);
            controller_effects(e);
        }
        Event::ControllerState { effects: e, .. } => controller_effects(e),
        Event::Process { .. } | Event::Group { .. } | Event::LoadPoint { .. } => {}
    }
    ok.get()
}

/// Messages a broker's runtime sends the controller itself, not through its replicas' effects:
/// its registration and its heartbeats. They may arrive at any time.
fn from_outside_the_core(message: &Message<Digest>) -> bool {
    matches!(
        message,
        Message::BrokerRegistration { .. } | Message::BrokerHeartbeat { .. }
    )
}
