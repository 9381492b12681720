//! The atomic-step model (`--model atomic`, [`isr::sim::Bounds::atomic`]): every preset comes
//! to its verdicts there too, each bug it shows with a shortest counterexample of pinned
//! length ([`isr_models::presets::Steps`]), and between its steps only requests wait. Run in
//! release.

mod common;

use common::Walk;
use isr::message::Message;
use isr::{FlushPolicy, Log};
use isr_models::check::{run, symmetry_pays, Search};
use isr_models::presets::{Outcome, Preset, PRESETS};
use isr_models::Check;

/// Every preset in the atomic model at its CI bounds: the safe presets hold as they do in the
/// full model; a bug preset fails its property in the pinned number of steps, or, where only
/// the full model shows its bug, the property holds over the whole atomic state space.
#[test]
fn every_preset_in_the_atomic_model_is_as_pinned() {
    for p in PRESETS {
        let search = if p.stop_at_in(true).is_some() {
            Search::Bfs
        } else {
            Search::Dfs
        };
        let r = run(
            &p.atomic_model(),
            |c| p.expected_in(c, true),
            p.stop_at_in(true),
            search,
            symmetry_pays(&p.bounds),
            2,
            |_| {},
        );
        assert!(r.as_expected(), "{}: not as expected", p.name);
        for (&f, steps) in p.fails.iter().zip(p.steps) {
            let v = r
                .verdicts
                .iter()
                .find(|v| v.check == Check::Always(f))
                .expect("a verdict for every property");
            match steps.atomic {
                Ok(n) => {
                    let len = v.counterexample.as_ref().map(|t| t.len());
                    assert_eq!(len, Some(n as usize), "{}: {f} in the atomic model", p.name);
                }
                Err(_) => assert_eq!(v.found, Some(Outcome::Holds), "{}: {f}", p.name),
            }
        }
    }
}

/// An atomic step runs to quiescence: after any step of any preset's atomic model, the
/// messages in flight are requests only (followers' Fetch and OffsetForLeaderEpoch, the
/// controller's LeaderAndIsr), and under `flush=always` every running replica's log is flushed.
#[test]
fn an_atomic_step_leaves_only_requests_in_flight_and_every_log_flushed() {
    let mut walk = Walk(0x5eed_a70c);
    let mut in_flight = 0;
    for p in PRESETS {
        let model = p.atomic_model();
        let always = model.cfg.rules.flush == FlushPolicy::Always;
        walk.walks(&model, 40, 40, |c| {
            for e in &c.network {
                assert!(
                    matches!(
                        e.message,
                        Message::Fetch(_)
                            | Message::OffsetForLeaderEpoch(_)
                            | Message::LeaderAndIsr(_)
                    ),
                    "{}: {e:?} in flight between atomic steps",
                    p.name
                );
            }
            for r in c.replicas.iter().filter(|r| r.is_online() && always) {
                assert_eq!(r.log().flushed_offset(), r.log_end_offset(), "{}", p.name);
            }
            in_flight += c.network.len();
        });
    }
    // The walks did meet requests in flight: the check above looked at something.
    assert!(in_flight > 0);
}

/// The full model is the same preset without the cascade: its messages between steps include
/// answers, which the atomic model never leaves in flight.
#[test]
fn the_full_model_leaves_answers_in_flight() {
    let p = Preset::find("safe").expect("preset exists");
    let mut walk = Walk(7);
    let mut answers = 0;
    walk.walks(&p.model(), 40, 40, |c| {
        answers += c
            .network
            .iter()
            .filter(|e| matches!(e.message, Message::FetchResponse(_)))
            .count();
    });
    assert!(answers > 0);
}
