//! `isr-check replay`: a trace that is a behaviour of the protocol is accepted; one with an
//! acknowledgement dropped is rejected with the diverging step and exit status 1; a file that is
//! not a trace is refused with exit status 2. The trace is written here by driving the core as
//! a broker and a controller would (runtime/tests/trace_replay.rs records real processes).

mod common;

use common::isr_check;
use isr::trace::{records, Digest, Event};
use isr::{
    Acks, BrokerId, Config, Controller, ControllerInput, Effect, Effects, Log, Message, Node,
    PartitionId, Replica, ReplicaInput, Tick,
};
use std::path::Path;

fn digest(r: &u64) -> Digest {
    Digest {
        width: 1,
        size: 8,
        checksum: *r as u32,
    }
}

fn digests(effects: &Effects<u64>) -> Effects<Digest> {
    effects
        .iter()
        .map(|e| records::effect(e, &digest))
        .collect()
}

/// A controller and one broker, leading partition 0 alone, which takes two acks=all writes:
/// the controller's trace and the broker's.
fn run() -> (Vec<Event>, Vec<Event>) {
    let cfg = Config {
        min_insync_replicas: 1,
        ..Config::default()
    };
    let (b1, p0) = (BrokerId(1), PartitionId(0));
    let process = |node| Event::Process {
        node,
        config: cfg,
        started: 1,
    };
    let mut controller = Controller::new();
    // Taking office: the state it starts from.
    let mut ctl = vec![
        process(Node::Controller),
        Event::ControllerState {
            state: controller.clone(),
            effects: Vec::new(),
        },
    ];
    let register = ControllerInput::Message {
        from: Node::Broker(b1),
        message: Message::BrokerRegistration {
            broker: b1,
            clean_shutdown: false,
        },
    };
    let effects = controller.step(&cfg, Tick(1), register.clone());
    ctl.push(Event::Controller {
        now: Tick(1),
        input: records::controller_input(&register, &digest),
        effects: digests(&effects),
    });
    let order = controller
        .create_partition::<u64>(p0, vec![b1], 1)
        .expect("partition");
    ctl.push(Event::ControllerState {
        state: controller.clone(),
        effects: digests(&order),
    });

    let mut replica = Replica::recover(b1, p0, isr::MemLog::<u64>::new(), isr::Offset(0));
    let mut broker = vec![
        process(Node::Broker(b1)),
        Event::Open {
            partition: p0,
            hw_checkpoint: isr::Offset(0),
            entries: Vec::new(),
        },
    ];
    let mut inputs: Vec<ReplicaInput<u64>> = order
        .iter()
        .filter_map(|e| match e {
            Effect::Send(env) => Some(ReplicaInput::Message {
                from: env.from,
                message: env.message.clone(),
            }),
            _ => None,
        })
        .collect();
    for (id, record) in [(1, 7), (2, 8)] {
        inputs.push(ReplicaInput::Write {
            id,
            records: vec![record],
            acks: Acks::All,
        });
        inputs.push(ReplicaInput::Flushed(isr::Offset(id)));
    }
    for input in inputs {
        if matches!(input, ReplicaInput::Flushed(_)) {
            replica.log_mut().flush();
        }
        let effects = replica.step(&cfg, Tick(2), input.clone());
        broker.push(Event::Replica {
            partition: p0,
            now: Tick(2),
            input: records::replica_input(&input, &digest),
            effects: digests(&effects),
            log_end: None,
        });
    }
    (ctl, broker)
}

fn write(dir: &Path, name: &str, events: &[Event]) -> String {
    let text: Vec<String> = events
        .iter()
        .map(|e| serde_json::to_string(e).expect("JSON"))
        .collect();
    let path = dir.join(name);
    std::fs::write(&path, text.join("\n") + "\n").expect("trace");
    path.to_string_lossy().into_owned()
}

#[test]
fn a_behaviour_is_accepted_and_a_dropped_acknowledgement_rejected() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ctl, broker) = run();
    let c = write(dir.path(), "controller.jsonl", &ctl);
    let b = write(dir.path(), "broker-1.jsonl", &broker);

    let out = isr_check(&["replay", &c, &b]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    let steps = ctl.len() + broker.len() - 2;
    assert!(
        stdout.starts_with(&format!("accepted {steps} steps\n")),
        "{stdout}"
    );
    // A directory stands for its traces.
    let out = isr_check(&["replay", &dir.path().to_string_lossy()]);
    assert!(out.status.success());

    let mut dropped = broker.clone();
    let at = dropped
        .iter()
        .position(|e| matches!(e, Event::Replica { effects, .. } if effects.iter().any(|e| matches!(e, Effect::Acknowledge { .. }))))
        .expect("an acknowledgement");
    if let Event::Replica { effects, .. } = &mut dropped[at] {
        effects.retain(|e| !matches!(e, Effect::Acknowledge { .. }));
    }
    let b = write(dir.path(), "broker-1.jsonl", &dropped);
    let out = isr_check(&["replay", &c, &b]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "DIVERGES: broker-1.jsonl line {}: the core's effects differ",
            at + 1
        )),
        "{stdout}"
    );
    // The steps before it, as counterexamples show them.
    assert!(stdout.contains("Write(#1, 1 records, All)"), "{stdout}");
    assert!(stdout.contains("  b1  leader"), "{stdout}");
}

#[test]
fn a_record_spanning_no_offsets_is_rejected_before_it_can_stall_the_replay() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ctl, mut broker) = run();
    if let Event::Open { entries, .. } = &mut broker[1] {
        entries.push(isr::Entry {
            epoch: isr::LeaderEpoch(1),
            record: Digest {
                width: 0,
                size: 1,
                checksum: 0,
            },
        });
    }
    let c = write(dir.path(), "controller.jsonl", &ctl);
    let b = write(dir.path(), "broker-1.jsonl", &broker);
    let out = isr_check(&["replay", &c, &b]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("broker-1.jsonl line 2: a record spans no offsets"),
        "{stdout}"
    );
}

#[test]
fn what_is_not_a_trace_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, "{\"Process\": 1}\n").expect("file");
    let out = isr_check(&["replay", &bad.to_string_lossy()]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("bad.jsonl line 1: not a trace event"),
        "{stderr}"
    );
    let out = isr_check(&["replay", &dir.path().join("missing").to_string_lossy()]);
    assert_eq!(out.status.code(), Some(2));
}
