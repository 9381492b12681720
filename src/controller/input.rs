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
    Message { from: Node, message: Message<R> },
    /// Time passed: fence every broker whose session expired, then elect where needed (the
    /// preferred candidates).
    Tick,
    /// `ControllerShrinkIsr`: `broker`'s session expired (a model checker, which has no clock,
    /// lets any session expire at any moment).
    Expire(BrokerId),
    /// `ControllerElectLeader`: elect `leader`, one of the candidates, for `partition`.
    Elect {
        partition: PartitionId,
        leader: BrokerId,
    },
    /// A broker's registration that elects `elects` where it elects and it is a candidate (the
    /// preferred candidate with `None`, as for a registration message).
    Register {
        broker: BrokerId,
        clean_shutdown: bool,
        elects: Option<BrokerId>,
    },
    /// A broker about to stop asks to be fenced now (Kafka's controlled shutdown).
    ControlledShutdown(BrokerId),
    /// A broker opened a session with this controller: it is told the state of its partitions.
    SessionOpened(BrokerId),
}
