//! A coordinator's consumer groups in a trace, replayed on the core: each recorded group change
//! is re-executed ([`isr::group::Group::step`]) and must give the recorded answer, and each load
//! point must be the one the core computes from the replayed replica (rule 15). A coordinator
//! that answered otherwise than the core (a fenced member's commit accepted, a group loaded
//! before its partition allowed it) is a divergence.

use isr::group::{Change, Entered, Group, GroupError, Identity, Input, Join, Output, Synced};
use isr::trace::{replay, Event, Trace};
use isr::{BrokerId, Config, Node, Offset, PartitionId, Rules, Tick};

const GROUP: &str = "readers";

fn join(member_id: &str) -> Join {
    Join {
        member_id: member_id.into(),
        instance_id: None,
        client_id: "c".into(),
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), b"sub".to_vec())],
        session_timeout: 10,
        rebalance_timeout: 5,
        member_id_required: false,
    }
}

fn member(member_id: &str, generation: i32) -> Identity {
    Identity {
        member_id: member_id.into(),
        instance_id: None,
        generation,
    }
}

/// A coordinator as the runtime's: a group it steps and every change it records.
struct Coordinator {
    group: Group,
    events: Vec<Event>,
}

impl Coordinator {
    fn new() -> Coordinator {
        let process = Event::Process {
            node: Node::Broker(BrokerId(1)),
            config: Config::default(),
            started: 0,
        };
        let created = Event::Group {
            group: GROUP.into(),
            now: Tick(0),
            change: Change::Created { initial_delay: 0 },
        };
        Coordinator {
            group: Group::default(),
            events: vec![process, created],
        }
    }

    fn step(&mut self, now: u64, input: Input) -> Output {
        let output = self.group.step(&Rules::default(), Tick(now), &input);
        self.events.push(Event::Group {
            group: GROUP.into(),
            now: Tick(now),
            change: Change::Stepped {
                input,
                output: output.clone(),
            },
        });
        output
    }

    /// One member joins, syncs and its generation is stored; then a second member joins, so
    /// the first's generation is left behind: the first member's id.
    fn two_generations(&mut self) -> String {
        let Output::Entered(Ok(Entered::Waiting(a))) = self.step(0, Input::Join(join(""))) else {
            panic!("the first member waits for its rebalance");
        };
        let joined = self.step(
            0,
            Input::Joined {
                member_id: a.clone(),
            },
        );
        assert!(matches!(joined, Output::Joined(Ok(Some(_)))), "{joined:?}");
        let sync = Input::Sync {
            caller: member(&a, 1),
            protocol: None,
            assignments: vec![(a.clone(), b"p0".to_vec())],
        };
        assert!(matches!(
            self.step(1, sync),
            Output::Synced(Ok(Synced::Store(_)))
        ));
        let stored = Input::Stored {
            generation: 1,
            stored: true,
        };
        self.step(1, stored);
        assert_eq!(
            self.step(2, Input::Commit(member(&a, 1))),
            Output::Done(Ok(()))
        );
        self.step(3, Input::Join(join("")));
        self.step(3, Input::Join(join(&a)));
        a
    }

    fn trace(self) -> Vec<Trace> {
        vec![Trace {
            name: "broker-1.jsonl".into(),
            events: self.events,
        }]
    }
}

#[test]
fn a_coordinators_group_changes_replay_on_the_core() {
    let mut c = Coordinator::new();
    let a = c.two_generations();
    assert_eq!(
        c.step(4, Input::Commit(member(&a, 1))),
        Output::Done(Err(GroupError::IllegalGeneration)),
        "generation 1 is behind the group"
    );
    c.step(20, Input::Expire);
    let steps = c.events.len() - 1;
    let accepted = replay(&c.trace()).expect("the coordinator's answers are the core's");
    assert_eq!(accepted.steps, steps);
}

#[test]
fn a_fenced_members_commit_accepted_by_the_coordinator_diverges() {
    let mut c = Coordinator::new();
    let a = c.two_generations();
    // A coordinator that let a zombie of generation 1 commit, as rule 16 off would.
    c.events.push(Event::Group {
        group: GROUP.into(),
        now: Tick(4),
        change: Change::Stepped {
            input: Input::Commit(member(&a, 1)),
            output: Output::Done(Ok(())),
        },
    });
    let at = c.events.len();
    let d = replay(&c.trace()).expect_err("the core refuses that commit");
    assert!(
        d.why
            .starts_with(&format!("broker-1.jsonl line {at}: group {GROUP}:"))
            && d.why.contains("IllegalGeneration"),
        "{}",
        d.why
    );
}

#[test]
fn a_step_of_a_group_the_coordinator_never_held_diverges() {
    let mut c = Coordinator::new();
    c.events.push(Event::Group {
        group: "other".into(),
        now: Tick(0),
        change: Change::Stepped {
            input: Input::Heartbeat(member("m", 1)),
            output: Output::Done(Err(GroupError::UnknownMember)),
        },
    });
    let d = replay(&c.trace()).expect_err("no such group");
    assert!(
        d.why
            .contains("group other, which the coordinator does not hold"),
        "{}",
        d.why
    );
    // Loaded first, the same step replays.
    let mut c = Coordinator::new();
    let load = Event::Group {
        group: "other".into(),
        now: Tick(0),
        change: Change::Loaded {
            stored: isr::group::StoredGroup::default(),
            initial_delay: 0,
        },
    };
    let step = Event::Group {
        group: "other".into(),
        now: Tick(0),
        change: Change::Stepped {
            input: Input::Heartbeat(member("m", 1)),
            output: Output::Done(Err(GroupError::UnknownMember)),
        },
    };
    c.events.extend([load, step]);
    replay(&c.trace()).expect("an empty loaded group knows no member");
}

#[test]
fn a_load_point_the_core_did_not_give_diverges() {
    let partition = PartitionId(7);
    let with_load_point = |load_point| {
        let mut c = Coordinator::new();
        c.events.push(Event::Open {
            partition,
            hw_checkpoint: Offset(0),
            entries: Vec::new(),
            log_start: Offset(0),
            first_offset: None,
        });
        c.events.push(Event::LoadPoint {
            partition,
            load_point,
        });
        replay(&c.trace())
    };
    // A replica just recovered leads nothing: the core says not yet.
    with_load_point(None).expect("not yet, as the core says");
    let d = with_load_point(Some(Offset(0))).expect_err("loaded before leading");
    assert!(
        d.why.contains("may load p7 up to 0; the core says not yet"),
        "{}",
        d.why
    );
    let mut c = Coordinator::new();
    c.events.push(Event::LoadPoint {
        partition,
        load_point: None,
    });
    let d = replay(&c.trace()).expect_err("no replica of p7");
    assert!(
        d.why.contains("which the process does not host"),
        "{}",
        d.why
    );
}
