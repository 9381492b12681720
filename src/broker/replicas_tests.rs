use super::*;
use crate::config::{FlushPolicy, Rules};
use crate::log::MemLog;
use crate::message::{Effect, LeaderAndIsr, Message, PartitionState};
use crate::replica::Timer;
use crate::types::{
    Acks, BrokerEpoch, BrokerId, ControllerEpoch, LeaderEpoch, Node, PartitionEpoch,
};

/// The broker these replicas are on.
const ME: BrokerId = BrokerId(1);
/// The leader of the partitions it follows.
const LEADER: BrokerId = BrokerId(2);

/// Replicas over in-memory logs, each with a number beside it (the driver's payload).
type Hosting = Replicas<MemLog<u64>, u32>;

/// A follower's request waits 10 ticks for its answer; page-cache flushes, so a sole leader's
/// write commits at once.
fn cfg() -> Config {
    Config {
        request_timeout: Tick(10),
        fetch_max_wait: Tick(0),
        hw_checkpoint_interval: Tick(5),
        min_insync_replicas: 1,
        rules: Rules {
            flush: FlushPolicy::PageCache,
            ..Rules::default()
        },
        ..Config::default()
    }
}

fn p(id: u32) -> PartitionId {
    PartitionId(id)
}

/// The controller's order for partition `id`: led by `leader`, this broker in its ISR.
fn order(id: u32, leader: BrokerId) -> Input<u64> {
    let assigned: Vec<BrokerId> = [leader, ME]
        .into_iter()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let state = PartitionState {
        leader: Some(leader),
        isr: assigned.iter().copied().collect(),
        min_insync_replicas: 1,
        assigned,
        leader_epoch: LeaderEpoch(1),
        elr: Default::default(),
        partition_epoch: PartitionEpoch(1),
    };
    Input::Message {
        from: Node::Controller,
        message: Message::LeaderAndIsr(LeaderAndIsr {
            partition: p(id),
            state,
            broker_epoch: BrokerEpoch(1),
            controller_epoch: ControllerEpoch(1),
        }),
    }
}

/// Hosts partition `id` and makes it a follower of [`LEADER`] at `at`: its request goes out
/// then, and its request timer is due `request_timeout` later.
fn follow(replicas: &mut Hosting, id: u32, at: u64) {
    replicas.insert(&cfg(), Replica::new(ME, p(id), MemLog::new()), id);
    let effects = replicas.step(&cfg(), Tick(at), p(id), order(id, LEADER));
    assert!(
        asks_leader(&effects.expect("hosted")),
        "a follower asks its leader at once"
    );
}

/// Whether `effects` send a request to [`LEADER`].
fn asks_leader(effects: &Effects<u64>) -> bool {
    effects
        .iter()
        .any(|e| e.sent().is_some_and(|s| s.to == Node::Broker(LEADER)))
}

/// The partitions a tick stepped, in order.
fn stepped(ticked: &[(PartitionId, Effects<u64>)]) -> Vec<PartitionId> {
    ticked.iter().map(|(partition, _)| *partition).collect()
}

#[test]
fn a_tick_steps_only_the_replicas_whose_timer_is_due() {
    let cfg = cfg();
    let mut replicas = Hosting::new();
    follow(&mut replicas, 0, 0); // due at 10
    follow(&mut replicas, 1, 5); // due at 15
    follow(&mut replicas, 2, 20); // due at 30
    assert_eq!(replicas.due(Tick(12)), [p(0)]);
    let (one, two) = (replicas.get(p(1)).cloned(), replicas.get(p(2)).cloned());

    let ticked = replicas.tick(&cfg, Tick(12));
    assert_eq!(stepped(&ticked), [p(0)]);
    assert!(
        asks_leader(&ticked[0].1),
        "its request timer fired: asked again"
    );
    // A replica stepped at 12 would have taken the time in: these were not stepped.
    assert_eq!(replicas.get(p(1)), one.as_ref());
    assert_eq!(replicas.get(p(2)), two.as_ref());
    // Partition 0 asked again at 12: due at 22 now, after partition 1.
    assert_eq!(replicas.next_timeout(), Some(Tick(15)));
    assert_eq!(replicas.due(Tick(30)), [p(1), p(0), p(2)]);
}

#[test]
fn next_timeout_is_the_earliest_deadline_of_any_replica() {
    let mut replicas = Hosting::new();
    assert_eq!(replicas.next_timeout(), None, "nothing hosted");
    replicas.insert(&cfg(), Replica::new(ME, p(5), MemLog::new()), 5);
    assert_eq!(
        replicas.next_timeout(),
        None,
        "a replica without a role has no timer"
    );
    follow(&mut replicas, 2, 3); // due at 13
    assert_eq!(replicas.next_timeout(), Some(Tick(13)));
    follow(&mut replicas, 0, 7); // due at 17
    assert_eq!(replicas.next_timeout(), Some(Tick(13)));
    follow(&mut replicas, 1, 1); // due at 11
    assert_eq!(replicas.next_timeout(), Some(Tick(11)));
}

#[test]
fn a_step_reschedules_its_replica() {
    let cfg = cfg();
    let mut replicas = Hosting::new();
    follow(&mut replicas, 0, 0); // due at 10
                                 // Its request is fired early, at 8: the next is due at 18, not 10.
    let early = replicas.step(&cfg, Tick(8), p(0), Input::Timeout(Timer::Request));
    assert!(asks_leader(&early.expect("hosted")));
    assert_eq!(replicas.next_timeout(), Some(Tick(18)));
    let before = replicas.get(p(0)).cloned();
    assert!(replicas.tick(&cfg, Tick(10)).is_empty(), "not ticked early");
    assert_eq!(replicas.get(p(0)), before.as_ref());
    assert_eq!(stepped(&replicas.tick(&cfg, Tick(18))), [p(0)]);

    // Stopped, it has no timer left: it leaves the queue.
    replicas.step(&cfg, Tick(19), p(0), Input::Stop { clean: true });
    assert_eq!(replicas.next_timeout(), None);
    assert!(replicas.due(Tick(u64::MAX)).is_empty());
}

#[test]
fn removing_a_replica_unschedules_it() {
    let cfg = cfg();
    let mut replicas = Hosting::new();
    follow(&mut replicas, 0, 0); // due at 10
    follow(&mut replicas, 1, 5); // due at 15
    let (replica, beside) = replicas.remove(p(0)).expect("hosted");
    assert_eq!((replica.partition(), beside), (p(0), 0));
    assert_eq!(replicas.next_timeout(), Some(Tick(15)));
    assert!(replicas.tick(&cfg, Tick(12)).is_empty());
    assert_eq!(replicas.due(Tick(100)), [p(1)]);
    assert_eq!(replicas.step(&cfg, Tick(12), p(0), Input::Tick), None);
    assert!(replicas.get(p(0)).is_none());
    assert!(replicas.remove(p(0)).is_none());
}

#[test]
fn a_replica_hosted_again_replaces_the_old_one_and_its_deadline() {
    let mut replicas = Hosting::new();
    follow(&mut replicas, 0, 0); // due at 10
    let fresh = Replica::new(ME, p(0), MemLog::new());
    let (old, beside) = replicas.insert(&cfg(), fresh, 7).expect("replaced");
    assert!(old.leader().is_some(), "the follower is the one replaced");
    assert_eq!(beside, 0);
    assert_eq!(
        replicas.next_timeout(),
        None,
        "the new one has no role, so no timer"
    );
    assert!(replicas.due(Tick(u64::MAX)).is_empty());
}

/// The driver's fsync is a change made outside a step: through `update`, it starts the high
/// watermark checkpoint's timer (the checkpoint waits for the flushed offset), and the queue
/// knows.
#[test]
fn a_change_through_update_reschedules_its_replica() {
    let cfg = cfg();
    let mut replicas = Hosting::new();
    replicas.insert(&cfg, Replica::new(ME, p(0), MemLog::new()), 0);
    replicas.step(&cfg, Tick(0), p(0), order(0, ME));
    let write = Input::Write {
        id: 1,
        records: vec![42],
        acks: Acks::Leader,
        producer: None,
    };
    replicas.step(&cfg, Tick(1), p(0), write);
    let leader = replicas.get(p(0)).expect("hosted");
    assert_eq!(
        leader.high_watermark().0,
        1,
        "committed at once, alone in the ISR"
    );
    assert_eq!(
        replicas.next_timeout(),
        None,
        "nothing flushed: nothing to checkpoint"
    );

    let flushed = replicas.update(&cfg, p(0), |replica, beside| {
        replica.log_mut().flush();
        *beside += 1;
        replica.log().flushed_offset()
    });
    assert_eq!(flushed.map(|o| o.0), Some(1));
    assert_eq!(replicas.get_mut(p(0)).map(|(_, beside)| *beside), Some(1));
    let due = replicas
        .next_timeout()
        .expect("the checkpoint's timer runs");
    let ticked = replicas.tick(&cfg, due);
    assert_eq!(stepped(&ticked), [p(0)]);
    assert!(ticked[0]
        .1
        .iter()
        .any(|e| matches!(e, Effect::CheckpointHighWatermark { offset, .. } if offset.0 == 1)));
    assert_eq!(replicas.next_timeout(), None, "checkpointed: idle again");
    assert_eq!(replicas.update(&cfg, p(9), |_, _| ()), None, "not hosted");
}

#[test]
fn an_offline_replica_is_never_stepped_nor_scheduled_but_stays_readable() {
    let cfg = cfg();
    let mut replicas = Hosting::new();
    follow(&mut replicas, 0, 0); // due at 10
    follow(&mut replicas, 1, 5); // due at 15
    assert!(replicas.take_offline(p(0)));
    assert!(replicas.is_offline(p(0)) && !replicas.is_offline(p(1)));
    assert_eq!(replicas.next_timeout(), Some(Tick(15)));
    let before = replicas.get(p(0)).cloned();
    assert_eq!(replicas.step(&cfg, Tick(11), p(0), Input::Tick), None);
    assert_eq!(stepped(&replicas.tick(&cfg, Tick(100))), [p(1)]);
    assert_eq!(replicas.get(p(0)), before.as_ref(), "never stepped");
    // A change the driver makes still happens, and does not put it back in the queue.
    assert_eq!(replicas.update(&cfg, p(0), |_, beside| *beside), Some(0));
    assert!(!replicas.due(Tick(u64::MAX)).contains(&p(0)));
    let listed: Vec<(PartitionId, u32)> = replicas.iter().map(|(p, _, b)| (p, *b)).collect();
    assert_eq!(
        listed,
        [(p(0), 0), (p(1), 1)],
        "still hosted, in partition order"
    );
    assert!(!replicas.take_offline(p(9)), "not hosted");
}
