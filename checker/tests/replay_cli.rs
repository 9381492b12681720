//! `isr-check replay`: a trace that is a behaviour of the protocol is accepted; one with an
//! acknowledgement dropped is rejected with the diverging step and exit status 1; a file that is
//! not a trace is refused with exit status 2. The trace is written here by driving the core as
//! a broker and a controller would (runtime/tests/trace_replay.rs records real processes).

mod common;

use common::isr_check;
use isr::trace::{records, Digest, Event};
use isr::{
    Acks, BrokerId, Config, Controller, ControllerEffect, ControllerEffects, ControllerInput,
    Effect, Effects, Entry, Log, Message, Node, PartitionId, Replica, ReplicaInput, Tick,
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

/// A broker's replica of partition 0, over the records these runs write.
type Led = Replica<isr::MemLog<u64>>;

/// The configuration of every process in these runs.
fn config() -> Config {
    Config {
        min_insync_replicas: 1,
        ..Config::default()
    }
}

/// A process's first line.
fn process(node: Node) -> Event {
    Event::Process {
        node,
        config: config(),
        started: 1,
    }
}

fn controller_digests(effects: &ControllerEffects<u64>) -> ControllerEffects<Digest> {
    effects
        .iter()
        .map(|e| records::controller_effect(e, &digest))
        .collect()
}

/// The messages among a controller's `effects`.
fn sends(effects: ControllerEffects<u64>) -> impl Iterator<Item = isr::Envelope<u64>> {
    effects.into_iter().filter_map(ControllerEffect::into_sent)
}

/// Steps `controller` with `input` at `now` and records the step in its trace `ctl`.
fn controller_step(
    controller: &mut Controller,
    ctl: &mut Vec<Event>,
    now: Tick,
    input: ControllerInput<u64>,
) -> ControllerEffects<u64> {
    let effects = controller.step(&config(), now, input.clone());
    ctl.push(Event::Controller {
        now,
        input: records::controller_input(&input, &digest),
        effects: controller_digests(&effects),
    });
    effects
}

/// The controller taking office, `brokers` registering and partition 0 created over them: the
/// controller, its trace, and the orders it sent.
fn controller_over(brokers: &[BrokerId]) -> (Controller, Vec<Event>, ControllerEffects<u64>) {
    let mut controller = Controller::new();
    // Taking office: the state it starts from.
    let mut ctl = vec![
        process(Node::Controller),
        Event::ControllerState {
            state: controller.clone(),
            effects: Vec::new(),
        },
    ];
    for &broker in brokers {
        let register = ControllerInput::Message {
            from: Node::Broker(broker),
            message: Message::BrokerRegistration {
                broker,
                clean_shutdown: false,
            },
        };
        controller_step(&mut controller, &mut ctl, Tick(1), register);
    }
    let order = controller
        .create_partition::<u64>(PartitionId(0), brokers.to_vec(), 1)
        .expect("partition");
    ctl.push(Event::ControllerState {
        state: controller.clone(),
        effects: controller_digests(&order),
    });
    (controller, ctl, order)
}

/// Broker `b`'s replica of partition 0, recovered empty, and its trace so far.
fn broker(b: BrokerId) -> (Led, Vec<Event>) {
    let replica = Replica::recover(b, PartitionId(0), isr::MemLog::new(), isr::Offset(0));
    let open = Event::Open {
        partition: PartitionId(0),
        hw_checkpoint: isr::Offset(0),
        entries: Vec::new(),
        log_start: isr::Offset(0),
        first_offset: None,
    };
    (replica, vec![process(Node::Broker(b)), open])
}

/// Steps `replica` with `input` at `now` as a driver does (flushing its log before telling it
/// `Flushed`) and records the step in its trace.
fn step(
    replica: &mut Led,
    trace: &mut Vec<Event>,
    now: Tick,
    input: ReplicaInput<u64>,
) -> Effects<u64> {
    if matches!(input, ReplicaInput::Flushed(_)) {
        replica.log_mut().flush();
    }
    let effects = replica.step(&config(), now, input.clone());
    trace.push(Event::Replica {
        partition: PartitionId(0),
        now,
        input: records::replica_input(&input, &digest),
        effects: digests(&effects),
        log_end: None,
    });
    effects
}

/// Entries as a trace holds them.
fn digested(entries: &[Entry<u64>]) -> Vec<Entry<Digest>> {
    entries
        .iter()
        .map(|e| Entry {
            epoch: e.epoch,
            record: digest(&e.record),
            producer: None,
        })
        .collect()
}

/// A controller and one broker, leading partition 0 alone, which takes two acks=all writes:
/// the controller's trace, the broker's, and the broker's replica.
fn run() -> (Vec<Event>, Vec<Event>, Led) {
    let (_, ctl, order) = controller_over(&[BrokerId(1)]);
    let (mut replica, mut trace) = broker(BrokerId(1));
    let mut inputs: Vec<ReplicaInput<u64>> = sends(order)
        .map(|env| ReplicaInput::Message {
            from: env.from,
            message: env.message,
        })
        .collect();
    for (id, record) in [(1, 7), (2, 8)] {
        inputs.push(ReplicaInput::Write {
            id,
            records: vec![record],
            acks: Acks::All,
            producer: None,
        });
        inputs.push(ReplicaInput::Flushed(isr::Offset(id)));
    }
    for input in inputs {
        step(&mut replica, &mut trace, Tick(2), input);
    }
    (ctl, trace, replica)
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
    let (ctl, broker, _) = run();
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
    let (ctl, mut broker, _) = run();
    if let Event::Open { entries, .. } = &mut broker[1] {
        entries.push(isr::Entry {
            epoch: isr::LeaderEpoch(1),
            record: Digest {
                width: 0,
                size: 1,
                checksum: 0,
            },
            producer: None,
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

/// The next incarnation of the broker whose trace is `first`, recovering `entries` of
/// partition 0.
fn restarted(first: &[Event], entries: Vec<Entry<Digest>>) -> Vec<Event> {
    let Some(Event::Process { node, config, .. }) = first.first() else {
        panic!("a trace starts with its process");
    };
    vec![
        Event::Process {
            node: *node,
            config: *config,
            started: 2,
        },
        Event::Open {
            partition: PartitionId(0),
            hw_checkpoint: isr::Offset(0),
            entries,
            log_start: isr::Offset(0),
            first_offset: None,
        },
    ]
}

/// `isr-check replay` of `traces`, each written to the file it names: its exit status and
/// what it printed.
fn replay_files(traces: &[(&str, &[Event])]) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let paths: Vec<String> = traces
        .iter()
        .map(|(name, events)| write(dir.path(), name, events))
        .collect();
    let mut args = vec!["replay"];
    args.extend(paths.iter().map(String::as_str));
    let out = isr_check(&args);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// The runtime writes a step's line after the step, so a kill in between leaves on disk what
/// that step appended and no line for it: a restart may recover one write the broker led
/// past its trace (at its leader epoch), and nothing else.
#[test]
fn a_restart_recovers_a_prefix_or_one_step_the_kill_cut_from_the_trace() {
    let (ctl, broker, mut replica) = run();
    // The replay's verdict on broker 1's two incarnations, `first` then `second`.
    let replay_restart = |first: &[Event], second: &[Event]| {
        replay_files(&[
            ("controller.jsonl", &ctl),
            ("broker-1-1.jsonl", first),
            ("broker-1-2.jsonl", second),
        ])
    };
    let held = digested(
        &replica
            .log()
            .read(isr::Offset(0), replica.log_end_offset(), usize::MAX),
    );
    assert_eq!(held.len(), 2);
    let epoch = replica.leader_epoch();
    let with = |extra: Entry<Digest>| {
        let mut entries = held.clone();
        entries.push(extra);
        entries
    };
    let record = |epoch, r: u64| Entry {
        epoch,
        record: digest(&r),
        producer: None,
    };

    // A prefix: the unflushed tail lost; or a write it led, whose line the kill cut off.
    for entries in [held[..1].to_vec(), held.clone(), with(record(epoch, 9))] {
        let n = entries.len();
        let (code, stdout) = replay_restart(&broker, &restarted(&broker, entries));
        assert_eq!(code, Some(0), "{n} entries: {stdout}");
    }

    // Entries it never held, at the end or instead of one it held.
    let later = isr::LeaderEpoch(epoch.0 + 1);
    let (code, stdout) = replay_restart(&broker, &restarted(&broker, with(record(later, 9))));
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout.contains("broker-1-2.jsonl line 2: b1 recovered 3 entries of p0, 1 past the 2 it held before it was killed, which neither a write it led nor a Fetch answer sent to it holds"),
        "{stdout}"
    );
    let mut replaced = held.clone();
    replaced[1] = record(epoch, 9);
    let (code, stdout) = replay_restart(&broker, &restarted(&broker, replaced));
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout.contains("b1 recovered 2 entries of p0 that are not a prefix of the 2 it held"),
        "{stdout}"
    );

    // After a clean stop no step follows, so nothing may be recovered past the trace.
    let mut stopped = broker.clone();
    step(
        &mut replica,
        &mut stopped,
        Tick(3),
        ReplicaInput::Stop { clean: true },
    );
    let (code, _) = replay_restart(&stopped, &restarted(&stopped, held.clone()));
    assert_eq!(code, Some(0));
    let (code, stdout) = replay_restart(&stopped, &restarted(&stopped, with(record(epoch, 9))));
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout.contains("b1 recovered 3 entries of p0 that are not a prefix of the 2 it held"),
        "{stdout}"
    );
}

/// Two brokers driven over the core, b1 leading partition 0 and b2 following, until b1 has
/// sent b2 a Fetch answer with records that b2 has not taken (the kill's moment): the
/// controller's trace, b1's, b2's, and the records on their way.
fn follower_run() -> (Vec<Event>, Vec<Event>, Vec<Event>, Vec<Entry<Digest>>) {
    let (b1, b2) = (BrokerId(1), BrokerId(2));
    let (mut controller, mut ctl, order) = controller_over(&[b1, b2]);
    let mut brokers: std::collections::BTreeMap<BrokerId, (Led, Vec<Event>)> =
        [b1, b2].into_iter().map(|b| (b, broker(b))).collect();
    let mut queue: std::collections::VecDeque<isr::Envelope<u64>> = sends(order).collect();
    // Steps broker `b` with `input` and carries out its flushes (flush=always).
    let mut deliver =
        |b: BrokerId,
         input: ReplicaInput<u64>,
         queue: &mut std::collections::VecDeque<isr::Envelope<u64>>| {
            let (replica, trace) = brokers.get_mut(&b).expect("broker");
            let mut inputs = vec![input];
            while let Some(input) = inputs.pop() {
                for effect in step(replica, trace, Tick(2), input) {
                    match effect {
                        Effect::Send(env) => queue.push_back(env),
                        Effect::Flush { up_to, .. } => inputs.push(ReplicaInput::Flushed(up_to)),
                        _ => {}
                    }
                }
            }
        };
    // The write comes once the orders are taken and b2 fetches (an answer without records
    // sends the next Fetch at once: the exchange never runs dry).
    for delivered in 0.. {
        assert!(delivered < 100, "b1 never answered b2 with the record");
        if delivered == 20 {
            let write = ReplicaInput::Write {
                id: 1,
                records: vec![7],
                acks: Acks::Leader,
                producer: None,
            };
            deliver(b1, write, &mut queue);
        }
        let env = queue.pop_front().expect("the exchange never runs dry");
        if let Message::FetchResponse(r) = &env.message {
            if let Some(fetched) = r.result.as_ref().ok().filter(|f| !f.entries.is_empty()) {
                let (t1, t2) = (brokers[&b1].1.clone(), brokers[&b2].1.clone());
                return (ctl, t1, t2, digested(&fetched.entries));
            }
        }
        let from = env.from;
        match env.to {
            Node::Broker(b) => {
                let message = env.message;
                deliver(b, ReplicaInput::Message { from, message }, &mut queue);
            }
            Node::Controller => {
                let input = ControllerInput::Message {
                    from,
                    message: env.message,
                };
                queue.extend(sends(controller_step(
                    &mut controller,
                    &mut ctl,
                    Tick(2),
                    input,
                )));
            }
        }
    }
    unreachable!("the loop returns or fails")
}

/// A follower killed as a Fetch answer arrives may recover its records past its trace (the
/// leader's trace sent them), and no other records.
#[test]
fn a_follower_may_recover_the_records_of_a_fetch_answer_sent_to_it() {
    let (ctl, b1, b2, fetched) = follower_run();
    let replay = |entries: Vec<Entry<Digest>>| {
        replay_files(&[
            ("controller.jsonl", &ctl),
            ("broker-1.jsonl", &b1),
            ("broker-2-1.jsonl", &b2),
            ("broker-2-2.jsonl", &restarted(&b2, entries)),
        ])
    };
    let (code, stdout) = replay(fetched.clone());
    assert_eq!(code, Some(0), "{stdout}");
    let mut other = fetched.clone();
    other[0].record = digest(&9);
    let (code, stdout) = replay(other);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout.contains("b2 recovered 1 entries of p0, 1 past the 0 it held before it was killed"),
        "{stdout}"
    );
}
