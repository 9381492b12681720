//! Trace validation on a real cluster: the traces of a run with a leader's failover replay as a
//! behaviour of the protocol, and the same traces, corrupted, are rejected — an acknowledgement
//! dropped, two deliveries swapped, a record's leader epoch changed.

mod common;

use common::{kafka, TestCluster};
use isr::trace::{replay, Event, Trace};
use isr::{Effect, Message, Node, Offset, ReplicaInput};
use std::time::Duration;

const TOPIC: &str = "traced";

/// A run: writes, the leader killed, writes to the new leader, the old one back in the ISR.
fn traced_run() -> Vec<Trace> {
    let mut cluster = TestCluster::start(3);
    cluster.create_topic(TOPIC, 1, 2);
    let (victim, address) = cluster.leader(TOPIC, 0).expect("leader");
    let before: Vec<String> = (0..20).map(|i| format!("before-{i}")).collect();
    assert_eq!(kafka::produce(&address, TOPIC, 0, &before), Ok(0));
    cluster.kill(victim);
    cluster.wait_for(Duration::from_secs(20), "a new leader", |s| {
        TestCluster::partition(s, TOPIC, 0)["leader"]
            .as_u64()
            .is_some_and(|l| l != u64::from(victim))
    });
    let (_, address) = cluster.leader(TOPIC, 0).expect("new leader");
    let after: Vec<String> = (0..20).map(|i| format!("after-{i}")).collect();
    assert_eq!(kafka::produce(&address, TOPIC, 0, &after), Ok(20));
    cluster.restart(victim);
    cluster.wait_for(Duration::from_secs(30), "the old leader in the ISR", |s| {
        TestCluster::partition(s, TOPIC, 0)["isr"]
            .as_array()
            .is_some_and(|isr| isr.len() == 3)
    });
    cluster.stop_and_read_traces()
}

/// The first event of `traces` (trace, index) that `select` picks.
fn find(traces: &[Trace], select: impl Fn(&Event) -> bool) -> (usize, usize) {
    traces
        .iter()
        .enumerate()
        .find_map(|(t, trace)| trace.events.iter().position(&select).map(|e| (t, e)))
        .expect("an event to corrupt")
}

/// The fetch offset of a Fetch answer with records that `event` delivers, if it is one.
fn records_delivered(event: &Event) -> Option<Offset> {
    match event {
        Event::Replica {
            input:
                ReplicaInput::Message {
                    message: Message::FetchResponse(r),
                    ..
                },
            ..
        } if r.result.as_ref().is_ok_and(|f| !f.entries.is_empty()) => Some(r.fetch_offset),
        _ => None,
    }
}

#[test]
fn a_run_replays_and_corrupted_traces_are_rejected() {
    let traces = traced_run();
    let accepted = replay(&traces).expect("the run replays");
    // Every line after each process's first was replayed (how many depends on the run's timing).
    let lines: usize = traces.iter().map(|t| t.events.len() - 1).sum();
    assert_eq!(accepted.steps, lines, "{accepted:?}");
    assert_eq!(accepted.traces, 5, "a controller and four broker processes");

    // An acknowledgement dropped: the core acknowledges the write, the trace does not.
    let mut dropped = traces.clone();
    let acked = |e: &Event| {
        matches!(e, Event::Replica { effects, .. }
            if effects.iter().any(|e| matches!(e, Effect::Acknowledge { .. })))
    };
    let (t, e) = find(&dropped, acked);
    if let Event::Replica { effects, .. } = &mut dropped[t].events[e] {
        effects.retain(|e| !matches!(e, Effect::Acknowledge { .. }));
    }
    let d = replay(&dropped).expect_err("a dropped acknowledgement");
    assert_eq!(d.at, Some((t, e)), "{}", d.why);
    assert!(d.why.contains("effects differ"), "{}", d.why);

    // Two deliveries swapped: a follower takes a Fetch answer with records before an earlier
    // one, which it could not have been sent yet: it answers a Fetch from further on, which the
    // follower sent only once it had the earlier answer's records. (Answers to the same offset
    // would not do: a follower may ask twice from one offset, its request timer fired when a
    // connection opened, and either answer could then come first.)
    let mut swapped = traces.clone();
    let (t, delivered) = swapped
        .iter()
        .enumerate()
        .find_map(|(t, trace)| {
            let at: Vec<(usize, Offset)> = (0..trace.events.len())
                .filter_map(|e| records_delivered(&trace.events[e]).map(|o| (e, o)))
                .collect();
            let (first, from) = *at.first()?;
            let (later, _) = at.iter().find(|(_, o)| *o > from)?;
            Some((t, [first, *later]))
        })
        .expect("a follower that was sent records from two offsets");
    swapped[t].events.swap(delivered[0], delivered[1]);
    let d = replay(&swapped).expect_err("swapped deliveries");
    let step = format!("{} line {}", swapped[t].name, delivered[0] + 1);
    assert!(
        d.why.contains("no causal order") && d.why.contains(&step),
        "{step}: {}",
        d.why
    );

    // A record's leader epoch changed on its way to a follower: no leader sent that.
    let mut changed = traces.clone();
    let (t, e) = find(&changed, |e| records_delivered(e).is_some());
    if let Event::Replica {
        input:
            ReplicaInput::Message {
                message: Message::FetchResponse(r),
                ..
            },
        ..
    } = &mut changed[t].events[e]
    {
        if let Ok(fetched) = &mut r.result {
            fetched.entries[0].epoch.0 += 1;
        }
    }
    let d = replay(&changed).expect_err("a changed epoch");
    assert_eq!(d.at, Some((t, e)), "{}", d.why);
    assert!(d.why.contains("which no trace sent"), "{}", d.why);
    // The trace names who sent what: the follower and the leader.
    assert!(matches!(
        changed[t].events[0],
        Event::Process {
            node: Node::Broker(_),
            ..
        }
    ));
}
