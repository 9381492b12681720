use super::*;
use crate::log::MemLog;
use crate::message::{Envelope, LeaderAndIsr, Message, PartitionState};
use crate::replica::Replica;
use crate::types::{BrokerEpoch, ControllerEpoch, LeaderEpoch, Node, PartitionEpoch};

const ME: BrokerId = BrokerId(1);
const LEADER: BrokerId = BrokerId(2);

/// Heartbeats every 4 ticks, sessions of 18, a follower's request retried after 10.
fn cfg() -> Config {
    Config {
        heartbeat_interval: Tick(4),
        session_timeout: Tick(18),
        request_timeout: Tick(10),
        fetch_max_wait: Tick(0),
        ..Config::default()
    }
}

/// A broker that hosts partitions 0 and 1, with no role yet.
fn broker() -> Broker<MemLog<u64>> {
    let mut broker = Broker::new(ME, false);
    for id in [0, 1] {
        let replica = Replica::new(ME, PartitionId(id), MemLog::new());
        broker.replicas_mut().insert(&cfg(), replica, ());
    }
    broker
}

/// The controller's order making this broker a follower of [`LEADER`] for partition `id`.
fn follow(id: u32) -> BrokerInput<u64> {
    let state = PartitionState {
        leader: Some(LEADER),
        isr: [ME, LEADER].into(),
        min_insync_replicas: 1,
        assigned: vec![LEADER, ME],
        leader_epoch: LeaderEpoch(1),
        elr: Default::default(),
        partition_epoch: PartitionEpoch(1),
    };
    let message = Message::LeaderAndIsr(LeaderAndIsr {
        partition: PartitionId(id),
        state,
        broker_epoch: BrokerEpoch(1),
        controller_epoch: ControllerEpoch(1),
    });
    BrokerInput::Replica {
        partition: PartitionId(id),
        input: ReplicaInput::Message {
            from: Node::Controller,
            message,
        },
    }
}

/// What the effects are, in order: `R` a registration, `H` a heartbeat, `p0` a message from
/// partition 0's replica, ...
fn kinds(effects: &[BrokerEffect<u64>]) -> Vec<String> {
    effects
        .iter()
        .map(|effect| match effect {
            BrokerEffect::Session(SessionEffect::Send(Envelope { message, .. })) => match message {
                Message::BrokerRegistration { .. } => "R".into(),
                Message::BrokerHeartbeat { .. } => "H".into(),
                other => format!("{other:?}"),
            },
            BrokerEffect::Replica(ReplicaEffect::Send(Envelope { to, message, .. }))
                if *to == Node::Broker(LEADER) =>
            {
                format!("p{}", message.partition().map_or(u32::MAX, |p| p.0))
            }
            other => format!("{other:?}"),
        })
        .collect()
}

#[test]
fn a_broker_routes_session_inputs_to_its_session_and_replica_inputs_to_their_replica() {
    let cfg = cfg();
    let mut broker = broker();
    let replicas = broker.replicas().clone();
    let opened = broker.step(
        &cfg,
        Tick(0),
        BrokerInput::Session(SessionInput::SessionOpened),
    );
    assert_eq!(kinds(&opened), ["R"]);
    assert!(broker.session().is_open());
    for id in [0, 1] {
        assert_eq!(
            broker.replicas().get(PartitionId(id)),
            replicas.get(PartitionId(id)),
            "no replica stepped"
        );
    }

    let session = broker.session().clone();
    assert_eq!(kinds(&broker.step(&cfg, Tick(1), follow(1))), ["p1"]);
    assert_eq!(broker.session(), &session, "the session was not stepped");
    assert_eq!(
        broker
            .replicas()
            .get(PartitionId(1))
            .and_then(Replica::leader),
        Some(LEADER)
    );
    assert_eq!(
        broker.replicas().get(PartitionId(0)),
        replicas.get(PartitionId(0)),
        "only the replica it was for"
    );
    assert!(
        broker.step(&cfg, Tick(1), follow(7)).is_empty(),
        "a partition not hosted: nothing"
    );
}

#[test]
fn next_timeout_is_the_earlier_of_the_sessions_and_the_replicas() {
    let cfg = cfg();
    let mut broker = broker();
    assert_eq!(
        broker.next_timeout(&cfg),
        None,
        "no session, no replica with a role"
    );
    broker.step(&cfg, Tick(0), follow(0)); // its request due at 10
    assert_eq!(broker.next_timeout(&cfg), Some(Tick(10)));
    broker.step(
        &cfg,
        Tick(3),
        BrokerInput::Session(SessionInput::SessionOpened),
    );
    assert_eq!(
        broker.next_timeout(&cfg),
        Some(Tick(3)),
        "a heartbeat at once"
    );
    assert_eq!(kinds(&broker.step(&cfg, Tick(3), BrokerInput::Tick)), ["H"]);
    assert_eq!(broker.next_timeout(&cfg), Some(Tick(7)));
    broker.step(&cfg, Tick(7), BrokerInput::Tick);
    assert_eq!(
        broker.next_timeout(&cfg),
        Some(Tick(10)),
        "the replica's before the session's 11"
    );
}

#[test]
fn a_tick_steps_the_session_first_then_only_the_replicas_due() {
    let cfg = cfg();
    let mut broker = broker();
    broker.step(&cfg, Tick(0), follow(0)); // due at 10
    broker.step(&cfg, Tick(5), follow(1)); // due at 15
    broker.step(
        &cfg,
        Tick(10),
        BrokerInput::Session(SessionInput::SessionOpened),
    );
    let one = broker.replicas().get(PartitionId(1)).cloned();
    assert_eq!(
        kinds(&broker.step(&cfg, Tick(12), BrokerInput::Tick)),
        ["H", "p0"]
    );
    assert_eq!(
        broker.replicas().get(PartitionId(1)),
        one.as_ref(),
        "not due: not stepped"
    );
}

#[test]
fn a_broker_taken_apart_and_put_back_together_keeps_both_halves() {
    let cfg = cfg();
    let mut broker = broker();
    broker.step(&cfg, Tick(0), follow(0)); // due at 10
    broker.step(
        &cfg,
        Tick(2),
        BrokerInput::Session(SessionInput::SessionOpened),
    );
    let (mut session, mut replicas) = broker.into_parts();
    // Each half driven on its own, as on two threads.
    session.step::<u64>(&cfg, Tick(2), SessionInput::Tick); // next heartbeat at 6
    assert_eq!(stepped(&replicas.tick(&cfg, Tick(10))), [PartitionId(0)]); // next at 20
    let broker = Broker::from_parts(session, replicas);
    assert!(broker.session().is_open());
    assert_eq!(broker.next_timeout(&cfg), Some(Tick(6)));
}

fn stepped(ticked: &[(PartitionId, crate::Effects<u64>)]) -> Vec<PartitionId> {
    ticked.iter().map(|(partition, _)| *partition).collect()
}
