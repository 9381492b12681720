//! Everything that can happen to the controller, as one type: the input of
//! [`crate::Controller::step`].

use crate::message::Message;
use crate::types::{BrokerId, Node, PartitionId};
use serde::{Deserialize, Serialize};

/// One input to the controller. A driver feeds them one at a time, each with the time it
/// happened at, and carries out the effects each step returns, in order — after committing the
/// controller's new state to its store (rule 11, [`crate::Controller::admitted_by_store`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Input<R> {
    /// A message from a broker: a registration (which elects the preferred candidate where it
    /// elects), a heartbeat, an AlterPartition.
    Message {
        /// The sender; a registration, heartbeat or AlterPartition that speaks for another
        /// broker than its sender is ignored.
        from: Node,
        /// What it sent.
        message: Message<R>,
    },
    /// Time passed: fence every broker whose session expired, then elect where needed (the
    /// preferred candidates).
    Tick,
    /// `ControllerShrinkIsr`: `broker`'s session expired. A model's hook (feature `sim`): a
    /// model checker, which has no clock, lets any session expire at any moment; a deployment's
    /// sessions expire by [`Input::Tick`].
    #[cfg(feature = "sim")]
    Expire(BrokerId),
    /// `ControllerElectLeader`: elect `leader`, one of the candidates, for `partition`. A
    /// model's hook (feature `sim`), so that every candidate's election is explored; a
    /// deployment's controller elects the preferred candidate by itself.
    #[cfg(feature = "sim")]
    Elect {
        /// The leaderless partition.
        partition: PartitionId,
        /// The candidate to elect ([`crate::Controller::election_candidates`]); anyone else
        /// changes nothing.
        leader: BrokerId,
    },
    /// A broker's registration that elects, in each partition it leaves leaderless, the leader
    /// `elects` names for it where that one is a candidate, and the preferred candidate
    /// elsewhere (everywhere with `elects` empty, as for a registration message).
    Register {
        /// The broker registering, as a new incarnation (a new broker epoch).
        broker: BrokerId,
        /// Whether its last run stopped cleanly (KIP-966): if not, with ELR, it leaves every
        /// ELR, since it may have lost records.
        clean_shutdown: bool,
        /// The leader to elect in a partition, for the partitions left leaderless where it is
        /// a candidate ([`crate::Controller::registration_candidates`]): the model checker
        /// chooses one per partition, so its every combination is explored.
        elects: Vec<(PartitionId, BrokerId)>,
    },
    /// A broker about to stop asks to be fenced now (Kafka's controlled shutdown).
    ControlledShutdown(BrokerId),
    /// A broker opened a session with this controller: it is told the state of its partitions.
    SessionOpened(BrokerId),
}
