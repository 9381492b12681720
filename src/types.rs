//! Identifiers and counters of the replication protocol.
//!
//! Each is a newtype so that an offset can never be passed where an epoch is expected: the
//! historical bugs this crate reproduces are exactly confusions between such numbers (a high
//! watermark used as a truncation point, an epoch compared against the wrong generation).

use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! newtype {
    ($(#[$doc:meta])* $name:ident($inner:ty), $prefix:literal) => {
        $(#[$doc])*
        #[derive(
            Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
        )]
        #[serde(transparent)]
        pub struct $name(pub $inner);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
    };
}

newtype!(
    /// A broker (and so the replica it hosts for a partition).
    BrokerId(u32), "b"
);
newtype!(
    /// The generation of leadership of a partition, bumped at every election (rule 2).
    LeaderEpoch(u32), "e"
);
newtype!(
    /// The compare-and-set version of a partition's state at the controller (rule 7): bumped at
    /// every change of leader, ISR or ELR.
    PartitionEpoch(u32), "v"
);
newtype!(
    /// A broker's incarnation, assigned by the controller at each registration (KIP-903). A
    /// Fetch sent by an earlier incarnation must not get the new one into the ISR: after an
    /// unclean crash the new incarnation may have lost what the old one had fetched.
    BrokerEpoch(u64), "i"
);
newtype!(
    /// The generation of the controller role, bumped each time a controller is elected through
    /// the store (rule 11, KAFKA-6082). Every decision that leaves a controller carries it, so a
    /// deposed controller that has not noticed yet (a zombie) can be told apart from the current
    /// one.
    ControllerEpoch(u32), "c"
);
newtype!(
    /// A partition of a topic. The runtime maps topic names and partition numbers onto these.
    PartitionId(u32), "p"
);
newtype!(
    /// A position in a partition's log: the first record is at offset 0.
    Offset(u64), ""
);
newtype!(
    /// Logical time. Time enters the core only as ticks passed by the driver, never as a clock.
    Tick(u64), "t"
);

impl Offset {
    /// The offset just after this one.
    pub fn next(self) -> Offset {
        Offset(self.0 + 1)
    }
}

impl LeaderEpoch {
    /// The epoch after this one.
    pub fn next(self) -> LeaderEpoch {
        LeaderEpoch(self.0 + 1)
    }
}

impl ControllerEpoch {
    /// The epoch after this one.
    pub fn next(self) -> ControllerEpoch {
        ControllerEpoch(self.0 + 1)
    }
}

impl PartitionEpoch {
    /// The version after this one.
    pub fn next(self) -> PartitionEpoch {
        PartitionEpoch(self.0 + 1)
    }
}

/// A participant in the protocol: one of the brokers, or the controller.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Node {
    /// The broker with this id, which hosts the partition's replica of that id.
    Broker(BrokerId),
    /// The controller: whichever process holds the controller role. What it sends carries its
    /// [`ControllerEpoch`], which tells a deposed one (a zombie) apart.
    Controller,
}

impl fmt::Display for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Node::Broker(b) => write!(f, "{b}"),
            Node::Controller => write!(f, "controller"),
        }
    }
}

/// The durability a producer asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Acks {
    /// Fire and forget: no acknowledgement at all.
    None,
    /// Acknowledged once the leader has appended the record.
    Leader,
    /// Acknowledged once the record is committed: the high watermark has passed it (rule 9).
    All,
}

impl fmt::Display for Acks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Acks::None => "0",
            Acks::Leader => "1",
            Acks::All => "all",
        })
    }
}

impl std::str::FromStr for Acks {
    type Err = crate::error::ParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "0" => Ok(Acks::None),
            "1" => Ok(Acks::Leader),
            "all" | "-1" => Ok(Acks::All),
            other => Err(crate::error::ParseError::new("acks", other, "0, 1, all")),
        }
    }
}
