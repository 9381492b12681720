//! Random schedules over the simulated cluster, generated and shrunk by quickcheck.
//!
//! The same driver as `sim_proptest.rs` (see `common`), fed by a second generator: quickcheck
//! draws its knobs and choices differently and shrinks by removing chunks of the schedule, so
//! the two frameworks explore and minimise in different ways. Counts are set explicitly.

mod common;

use common::{run_counted, seed, Knobs, Protocol, Stats};
use quickcheck::{Arbitrary, Gen, QuickCheck, TestResult};
use std::sync::Mutex;
use std::time::Instant;

/// Schedules per protocol variant.
const SAFE_TESTS: u64 = 15_000;
const KIP966_TESTS: u64 = 15_000;
/// The longest schedule, in steps.
const MAX_STEPS: usize = 300;

/// A schedule: knobs, then one choice per step.
#[derive(Clone, Debug)]
struct Schedule {
    knobs: Knobs,
    choices: Vec<u16>,
}

/// A number in `lo..=hi`.
fn pick(g: &mut Gen, lo: u16, hi: u16) -> u16 {
    lo + u16::arbitrary(g) % (hi - lo + 1)
}

impl Arbitrary for Schedule {
    fn arbitrary(g: &mut Gen) -> Self {
        let knobs = Knobs {
            replicas: u32::from(pick(g, 2, 4)),
            partitions: u32::from(pick(g, 1, 2)),
            min_isr: usize::from(pick(g, 1, 3)),
            acks_all: bool::arbitrary(g),
            records: pick(g, 1, 4) as u8,
            max_leader_epoch: u32::from(pick(g, 2, 5)),
            clean_crashes: pick(g, 0, 2) as u8,
            unclean_crashes: pick(g, 0, 2) as u8,
            drops: pick(g, 0, 3) as u8,
            duplicates: pick(g, 0, 3) as u8,
            session_expiries: pick(g, 0, 2) as u8,
            controller_failovers: pick(g, 0, 2) as u8,
            disk_failures: pick(g, 0, 1) as u8,
            deletes: pick(g, 0, 2) as u8,
            compactions: pick(g, 0, 2) as u8,
            clock: if bool::arbitrary(g) {
                pick(g, 4, 12) as u8
            } else {
                0
            },
            atomic: pick(g, 0, 3) == 0,
            consumer: bool::arbitrary(g),
            background_flush: bool::arbitrary(g),
            producer_retries: bool::arbitrary(g).then(|| pick(g, 0, 2) as u8),
            consumers: pick(g, 0, 2) as u8,
            slow_broker: bool::arbitrary(g).then(|| u32::from(pick(g, 0, 3))),
            slow_steps: pick(g, 0, MAX_STEPS as u16),
        };
        let len = usize::from(pick(g, 0, MAX_STEPS as u16));
        let choices = (0..len).map(|_| u16::arbitrary(g)).collect();
        Schedule { knobs, choices }
    }

    /// Shrinks the knobs first (no held-back broker, fewer brokers), then the schedule (fewer,
    /// smaller choices) under the same knobs.
    fn shrink(&self) -> Box<dyn Iterator<Item = Self>> {
        let mut simpler = Vec::new();
        if self.knobs.slow_broker.is_some() {
            simpler.push(Knobs {
                slow_broker: None,
                ..self.knobs.clone()
            });
        }
        if self.knobs.consumers > 0 {
            simpler.push(Knobs {
                consumers: 0,
                ..self.knobs.clone()
            });
        }
        if self.knobs.partitions > 1 {
            simpler.push(Knobs {
                partitions: 1,
                ..self.knobs.clone()
            });
        }
        if self.knobs.replicas > 2 {
            simpler.push(Knobs {
                replicas: self.knobs.replicas - 1,
                ..self.knobs.clone()
            });
        }
        let choices = self.choices.clone();
        let knobs = self.knobs.clone();
        Box::new(
            simpler
                .into_iter()
                .map(move |knobs| Schedule {
                    knobs,
                    choices: choices.clone(),
                })
                .chain(self.choices.shrink().map(move |choices| Schedule {
                    knobs: knobs.clone(),
                    choices,
                })),
        )
    }
}

static SAFE_STATS: Stats = Stats::new();
static KIP966_STATS: Stats = Stats::new();
/// The report of the last failing schedule: after shrinking, the minimal one (quickcheck stops
/// at the last candidate that still failed).
static LAST_FAILURE: Mutex<Option<String>> = Mutex::new(None);

fn property(stats: &Stats, protocol: Protocol, s: &Schedule) -> TestResult {
    match run_counted(stats, protocol, &s.knobs, &s.choices) {
        Ok(()) => TestResult::passed(),
        Err(report) => {
            *LAST_FAILURE.lock().unwrap() = Some(report.clone());
            TestResult::error(report)
        }
    }
}

fn safe_property(s: Schedule) -> TestResult {
    property(&SAFE_STATS, Protocol::Safe, &s)
}

fn kip966_property(s: Schedule) -> TestResult {
    property(&KIP966_STATS, Protocol::Kip966, &s)
}

fn check(stats: &Stats, f: fn(Schedule) -> TestResult, tests: u64, name: &str) {
    let started = Instant::now();
    let seed = seed();
    let mut runner = QuickCheck::new();
    if let Some(seed) = seed {
        // quickcheck's default generator size.
        runner = runner.rng(Gen::from_size_and_seed(100, seed));
    }
    let result = runner
        .tests(tests)
        .max_tests(tests)
        .min_tests_passed(tests)
        .quicktest(f);
    let ran = stats.report(&format!("{name} (seed {seed:?})"), started);
    match result {
        Ok(passed) => assert_eq!(passed, tests, "{name}: {passed} of {tests} passed"),
        Err(_) => panic!(
            "{name} (ISR_TEST_SEED={seed:?}): shrunk failing schedule:{}",
            LAST_FAILURE.lock().unwrap().clone().unwrap_or_default()
        ),
    }
    stats.assert_not_vacuous(name);
    assert!(ran >= tests);
}

/// The safe protocol keeps every property after every step.
#[test]
fn quickcheck_safe_protocol_keeps_every_property() {
    check(&SAFE_STATS, safe_property, SAFE_TESTS, "quickcheck safe");
}

/// KIP-966 keeps every property but WeakIsr, with at most one unclean crash.
#[test]
fn quickcheck_kip966_keeps_every_property_but_weak_isr() {
    check(
        &KIP966_STATS,
        kip966_property,
        KIP966_TESTS,
        "quickcheck kip966",
    );
}
