//! Every change of a group through one entry, [`Group::step`]: the input a coordinator hands
//! it and the output it gets back, owned and serializable, so that a driver can record them
//! (the runtime's traces: `trace::Event::Group`) and a replay can check that each answer the
//! coordinator gave was the core's, from the same state, at the same time.

use super::{Caller, Entered, Group, GroupError, Join, Joined, StoredGroup, Synced};
use crate::config::Rules;
use crate::types::Tick;
use serde::{Deserialize, Serialize};

/// A member's identity as a request names it: [`Caller`], owned.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// The member id the request names.
    pub member_id: String,
    /// `group.instance.id`, from the versions of the request that carry it.
    pub instance_id: Option<String>,
    /// The generation the request names (-1 outside group membership).
    pub generation: i32,
}

impl Identity {
    /// The identity `caller` names.
    pub fn of(caller: Caller<'_>) -> Identity {
        Identity {
            member_id: caller.member_id.to_owned(),
            instance_id: caller.instance_id.map(str::to_owned),
            generation: caller.generation,
        }
    }

    /// This identity as the group's methods take it.
    pub fn caller(&self) -> Caller<'_> {
        Caller {
            member_id: &self.member_id,
            instance_id: self.instance_id.as_deref(),
            generation: self.generation,
        }
    }
}

/// What a coordinator hands a group: a request, the outcome of storing a generation, or the
/// passing of time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Input {
    /// JoinGroup ([`Group::join`]).
    Join(Join),
    /// A waiting join asks for its answer ([`Group::joined`]).
    Joined {
        /// The member id the join waits as.
        member_id: String,
    },
    /// SyncGroup ([`Group::sync`]).
    Sync {
        /// Who syncs.
        caller: Identity,
        /// The protocol type and name the request names (v5), if any.
        protocol: Option<(String, String)>,
        /// The leader's assignment, member by member (empty from the others).
        assignments: Vec<(String, Vec<u8>)>,
    },
    /// How storing a generation ended ([`Group::stored_result`]).
    Stored {
        /// The generation stored.
        generation: i32,
        /// Whether it was stored.
        stored: bool,
    },
    /// Heartbeat ([`Group::heartbeat`]).
    Heartbeat(Identity),
    /// LeaveGroup of one member ([`Group::leave`]).
    Leave {
        /// The member id named (empty when only the instance id is).
        member_id: String,
        /// The static instance id named, if any.
        instance_id: Option<String>,
    },
    /// An OffsetCommit's generation check ([`Group::may_commit`]).
    Commit(Identity),
    /// Time passes: members whose session ran out are dropped, before the group is described
    /// or deleted.
    Expire,
}

impl Input {
    /// The input's kind, for tables: the request's name, or the event's.
    pub fn kind(&self) -> &'static str {
        match self {
            Input::Join(_) => "JoinGroup",
            Input::Joined { .. } => "JoinGroupAnswer",
            Input::Sync { .. } => "SyncGroup",
            Input::Stored { .. } => "Stored",
            Input::Heartbeat(_) => "Heartbeat",
            Input::Leave { .. } => "LeaveGroup",
            Input::Commit(_) => "OffsetCommit",
            Input::Expire => "Expire",
        }
    }
}

/// What a step gave back, one variant per kind of answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Output {
    /// A join's entry ([`Input::Join`]).
    Entered(Result<Entered, GroupError>),
    /// A waiting join's answer, `None` while the rebalance is not complete ([`Input::Joined`]).
    Joined(Result<Option<Joined>, GroupError>),
    /// A sync's answer ([`Input::Sync`]).
    Synced(Result<Synced, GroupError>),
    /// Every other input: done, or refused.
    Done(Result<(), GroupError>),
}

/// What happened to a group at its coordinator, as a driver records it (the runtime's traces:
/// `trace::Event::Group`): created, loaded, stepped or forgotten.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Change {
    /// Created empty by its first JoinGroup, with `group.initial.rebalance.delay.ms` in ticks.
    Created {
        /// The initial rebalance delay, in ticks.
        initial_delay: u64,
    },
    /// Loaded from its offsets partition by a coordinator taking over
    /// ([`Group::from_stored`]).
    Loaded {
        /// The membership stored there.
        stored: StoredGroup,
        /// The initial rebalance delay, in ticks.
        initial_delay: u64,
    },
    /// Stepped with `input` ([`Group::step`]); `output` is what came back.
    Stepped {
        /// The input.
        input: Input,
        /// What the step gave back.
        output: Output,
    },
    /// Forgotten: deleted, or not stored in the partition a coordinator loaded.
    Forgotten,
}

impl Group {
    /// Hands the group one input at `now`, under `rules` (rule 16 decides commits). A driver
    /// that records what it did records these; the methods it dispatches to are the same
    /// transitions, for drivers that do not.
    pub fn step(&mut self, rules: &Rules, now: Tick, input: &Input) -> Output {
        match input {
            Input::Join(join) => Output::Entered(self.join(join, now)),
            Input::Joined { member_id } => Output::Joined(self.joined(member_id, now)),
            Input::Sync {
                caller,
                protocol,
                assignments,
            } => {
                let protocol = protocol.as_ref().map(|(t, n)| (t.as_str(), n.as_str()));
                Output::Synced(self.sync(caller.caller(), protocol, assignments, now))
            }
            Input::Stored { generation, stored } => {
                self.stored_result(*generation, *stored, now);
                Output::Done(Ok(()))
            }
            Input::Heartbeat(caller) => Output::Done(self.heartbeat(caller.caller(), now)),
            Input::Leave {
                member_id,
                instance_id,
            } => Output::Done(self.leave(member_id, instance_id.as_deref(), now)),
            Input::Commit(caller) => Output::Done(self.may_commit(rules, caller.caller(), now)),
            Input::Expire => {
                self.expire(now);
                Output::Done(Ok(()))
            }
        }
    }
}
