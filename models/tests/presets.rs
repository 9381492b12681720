//! The presets show what they promise: each bug preset fails its expected property with a
//! shortest counterexample of pinned length, the safe presets hold exhaustively with a pinned
//! state count, and symmetry reduction changes no verdict. Run in release: some of these
//! explore hundreds of thousands of states.

use isr::sim::Bounds;
use isr::{Acks, Config, Property, Rules, Tick};
use isr_models::check::{run, symmetry_pays, Run, Search};
use isr_models::presets::{Outcome, Preset, CLOCKED_LAG_MAX, CLOCKED_TIMEOUT, PRESETS};
use isr_models::shortest::shortest_path;
use isr_models::{Check, IsrModel};

fn check_preset(p: &Preset) -> Run {
    let search = if p.exhaustive {
        Search::Dfs
    } else {
        Search::Bfs
    };
    run(
        &p.model(),
        |c| p.expected(c),
        p.stop_at(),
        search,
        symmetry_pays(&p.bounds),
        2,
        |_| {},
    )
}

/// The checks whose verdict differs from the expectation.
fn mismatches(r: &Run) -> Vec<String> {
    r.verdicts
        .iter()
        .filter(|v| !v.as_expected())
        .map(|v| {
            format!(
                "{}: expected {:?}, found {:?}",
                v.check, v.expected, v.found
            )
        })
        .collect()
}

fn failing(r: &Run) -> Vec<(Check, usize)> {
    r.verdicts
        .iter()
        .filter(|v| v.found == Some(Outcome::Fails))
        .filter_map(|v| v.counterexample.as_ref().map(|t| (v.check, t.len())))
        .collect()
}

/// Each bug preset: the expected property fails, and its shortest counterexample has as many
/// steps as the preset says ([`Preset::steps`], which `isr-check list` prints; the BFS finds
/// the shortest, so the number is stable).
fn bug(name: &str, property: Property) {
    let p = Preset::find(name).expect("preset exists");
    assert!(!p.exhaustive);
    let at = p
        .fails
        .iter()
        .position(|&f| f == property)
        .expect("an expected failure");
    let length = p.steps[at].full as usize;
    let r = check_preset(p);
    assert!(r.as_expected(), "{name}: {:?}", mismatches(&r));
    let got = failing(&r)
        .into_iter()
        .find(|(c, _)| *c == Check::Always(property))
        .map(|(_, len)| len);
    assert_eq!(got, Some(length), "{name}: shortest counterexample length");
}

#[test]
fn hw_truncation_loses_a_committed_record() {
    bug(
        "hw-truncation",
        Property::CommittedRecordsSurviveLeaderFailure,
    );
}

#[test]
fn kip101_lets_logs_diverge() {
    bug("kip101", Property::StrongIsr);
}

#[test]
fn kip279_lets_a_stale_fetch_response_diverge_the_logs() {
    bug("kip279", Property::LogMatching);
}

#[test]
fn kafka_7128_elects_an_empty_replica() {
    bug("kafka-7128", Property::CommittedRecordsSurviveLeaderFailure);
}

#[test]
fn confirmed_isr_hw_loses_a_committed_record() {
    bug(
        "confirmed-isr-hw",
        Property::CommittedRecordsSurviveLeaderFailure,
    );
}

#[test]
fn unclean_election_loses_a_committed_record() {
    bug(
        "unclean-election",
        Property::CommittedRecordsSurviveLeaderFailure,
    );
}

#[test]
fn kafka_6082_a_zombie_controller_splits_the_brain() {
    bug("kafka-6082", Property::CommittedRecordsSurviveLeaderFailure);
}

#[test]
fn jepsen_2013_loses_an_acknowledged_record() {
    bug(
        "jepsen-2013",
        Property::CommittedRecordsSurviveLeaderFailure,
    );
}

#[test]
fn last_replica_standing_loses_a_committed_record() {
    bug(
        "last-replica-standing",
        Property::CommittedRecordsSurviveLeaderFailure,
    );
}

#[test]
fn disk_full_acknowledges_a_write_no_replica_holds() {
    bug("disk-full", Property::AcknowledgedOnMinIsr);
    bug("disk-full", Property::CommittedRecordsSurviveLeaderFailure);
}

/// Without strict min ISR a leader alone in its ISR commits and acknowledges: the ELR keeps it
/// the only electable replica, so nothing committed is lost at `safe`'s bounds, and only
/// AcknowledgedOnMinIsr says what the rule is for.
#[test]
fn kafka_4485_drops_a_follower_that_fetches_every_round() {
    bug("kafka-4485", Property::FollowersFetchingEveryRoundStayInIsr);
}

/// The clocked presets' lag is as short as Kafka's caught-up rule allows: with one tick less,
/// a follower that fetches every round, one round trip behind a steady producer, leaves the
/// ISR under the rule too. So the clock is checked to the tick: a timer that fires a tick
/// early, or a caught-up time a round older than Kafka's, fails `safe-clock`.
#[test]
fn safe_clock_with_a_tick_less_lag_drops_a_follower_fetching_every_round() {
    let failed = failing_under("safe-clock", |cfg| Config {
        replica_lag_max: Tick(CLOCKED_LAG_MAX.0 - 1),
        ..cfg
    });
    let property = Check::Always(Property::FollowersFetchingEveryRoundStayInIsr);
    assert_eq!(failed, [(property, 13)]);
}

/// The clocked presets' request timeout is as short as a timely answer allows: with one tick
/// less, a follower's request timer comes due before an answer that is on time, and it asks
/// again for nothing. A request timer that forgets a held Fetch's wait fails the same way.
#[test]
fn safe_clock_with_a_tick_shorter_timeout_retries_a_timely_request() {
    let failed = failing_under("safe-clock", |cfg| Config {
        request_timeout: Tick(CLOCKED_TIMEOUT.0 - 1),
        ..cfg
    });
    // The needless retries also cost a follower its place: a leader counts the second Fetch
    // from the same offset as the follower's previous one, one round later.
    let retried = Check::Always(Property::TimelyRequestsAreNotRetried);
    let left = Check::Always(Property::FollowersFetchingEveryRoundStayInIsr);
    assert_eq!(failed, [(left, 23), (retried, 9)]);
}

/// Preset `name`'s bounds under the configuration `change` makes of its own, explored
/// exhaustively with nothing asserted: every property that fails, with its shortest
/// counterexample's length.
fn failing_under(name: &str, change: impl FnOnce(Config) -> Config) -> Vec<(Check, usize)> {
    let p = Preset::find(name).expect("preset exists");
    let model = IsrModel::new(change(p.config()), p.bounds.clone(), p.isr_changes);
    failing(&run(&model, |_| None, None, Search::Dfs, true, 2, |_| {}))
}

#[test]
fn without_strict_min_isr_only_acknowledged_on_min_isr_fails() {
    let failed = failing_under("safe", |cfg| Config {
        rules: Rules {
            strict_min_isr: false,
            ..cfg.rules
        },
        ..cfg
    });
    assert_eq!(failed, [(Check::Always(Property::AcknowledgedOnMinIsr), 7)]);
}

/// At min ISR 3 of 3 replicas, an ISR of one grows back to two with a member of the ELR: the
/// controller must take it out of the ELR as it joins the ISR. `kip966` at its CI bounds never
/// gets there (at min ISR 2 that expansion empties the ELR), so a controller that kept the
/// member in both failed nothing; here ControllerStateIsConsistent does, in 7 steps.
#[test]
fn kip966_at_min_isr_three_rejoins_from_the_elr_consistently() {
    let failed = failing_under("kip966", |cfg| Config {
        min_insync_replicas: 3,
        ..cfg
    });
    assert_eq!(failed, [(Check::Always(Property::WeakIsr), 9)]);
}

/// A follower that is out of the ISR while the leader commits catches up one record per
/// Fetch, and its HW is capped by its own LEO (the answers carry the leader's higher HW). No
/// preset reaches that at its bounds (`safe-records` never commits past an out-of-sync
/// follower at min ISR 2 of 2; `safe-divergence` fetches two records at once), so a follower
/// that took the leader's HW uncapped failed nothing; here LogMatching and
/// ReplicasAreConsistent do, in 8 steps (measured by planting it).
#[test]
fn safe_divergence_one_record_per_fetch_caps_the_follower_hw() {
    let p = Preset::find("safe-divergence").expect("preset exists");
    let cfg = Config {
        fetch_max_entries: 1,
        ..p.config()
    };
    let model = IsrModel::new(cfg, p.bounds.clone(), p.isr_changes);
    let r = dfs(&model, |c| p.expected(c));
    // Every property holds and every guard is reached, as the preset expects.
    assert!(r.as_expected(), "{:?}", mismatches(&r));
}

/// A small exhaustive run of a safe preset's rules: every verdict as expected, and the number
/// of distinct states pinned (a change to the core or the model that changes it is deliberate).
/// An exhaustive depth-first run of `model` on two threads, without symmetry reduction,
/// expecting `expected` of each check.
fn dfs(model: &IsrModel, expected: impl Fn(Check) -> Option<Outcome>) -> Run {
    run(model, expected, None, Search::Dfs, false, 2, |_| {})
}

fn small(name: &str) -> (IsrModel, Preset) {
    let p = Preset::find(name).expect("preset exists").clone();
    let bounds = Bounds {
        replicas: 2,
        records: 1,
        max_leader_epoch: 2,
        clean_crashes: 1,
        unclean_crashes: 0,
        ..p.bounds.clone()
    };
    let model = IsrModel::new(p.config(), bounds, 2);
    (model, p)
}

#[test]
fn safe_holds_exhaustively_at_a_small_bound() {
    let (model, _) = small("safe");
    let r = dfs(&model, |_| Some(Outcome::Holds));
    assert!(r.as_expected(), "{:?}", mismatches(&r));
    assert_eq!(r.unique, SAFE_SMALL_UNIQUE);
}

/// Pinned so that any change to the model's state space is noticed and explained. History:
/// 8,523 before the sim discarded messages their receiver ignores forever
/// (`Replica::ignores_forever`); 3,093 since; 3,175 since any candidate may win an election
/// (with two brokers, a registration that fences a stale leader may now elect the other one);
/// 8,554 since timers, retries, held requests and flushes are the core's and actions of the
/// model (spec/protocol.md §6: a flush completing is a step of its own, and a follower has one
/// request out at a time); 11,217 since `safe` has leaders hold Fetches that find nothing new
/// (`fetch_wait`: `FetchWaitExpired` and the answer when data arrives are steps); 10,568 since
/// a follower's request of an epoch its receiver never leads is discarded (it is refused
/// forever); 9,761 since an answer from an epoch older than a follower's and its request out is
/// discarded (it is no longer taken for the answer to a request sent since); 8,939 since a
/// Fetch of an incarnation older than one the leader counted is discarded; 8,769 since requests
/// of an epoch to a replica that does not lead it, and answers of an epoch from a broker the
/// receiver does not follow in it, are discarded; 8,823 since a leader remembers each
/// follower's previous fetch (Kafka's caught-up rule); 8,835 since a leader proposes the
/// followers whose Fetch it holds as soon as the controller answers its previous proposal;
/// 9,282 since a Fetch carries the follower's high watermark and log start (a leader holds one
/// it has news for only briefly, so two fetches that differ in them are two messages); 9,207
/// since a stopped replica forgets its memory at the stop, not at its restart.
const SAFE_SMALL_UNIQUE: usize = 9_207;

/// The clocked safe protocol at a smaller bound (three records, the clock to tick 8), every
/// verdict as `safe-clock` expects and the state count pinned: time, the messages sent this
/// tick and the timers' deadlines are all state.
#[test]
fn safe_clock_holds_exhaustively_at_a_small_bound() {
    let p = Preset::find("safe-clock").expect("preset exists");
    let bounds = Bounds {
        records: 3,
        clock: 8,
        ..p.bounds.clone()
    };
    let model = IsrModel::new(p.config(), bounds, p.isr_changes);
    let r = dfs(&model, |c| p.expected(c));
    assert!(r.as_expected(), "{:?}", mismatches(&r));
    assert_eq!(r.unique, SAFE_CLOCK_SMALL_UNIQUE);
}

const SAFE_CLOCK_SMALL_UNIQUE: usize = 27_858;

/// The safe protocol through a controller failover: the old controller runs on as a zombie
/// beside its successor, and the store refuses its steps (rule 11).
#[test]
fn safe_holds_through_a_controller_failover_at_a_small_bound() {
    let (mut model, _) = small("safe");
    model.bounds.controller_failovers = 1;
    let r = dfs(&model, |_| Some(Outcome::Holds));
    assert!(r.as_expected(), "{:?}", mismatches(&r));
    assert_eq!(r.unique, SAFE_FAILOVER_SMALL_UNIQUE);
}

/// Pinned like `SAFE_SMALL_UNIQUE`: 51,962 before the core's timers and flushes were actions,
/// 151,863 before `safe`'s fetch waits, 206,233 before a follower took no note of the ISR
/// changes of its term (with fencing, the controller's announcement of a fenced follower is
/// nothing to the other follower), 202,092 before requests refused forever were discarded,
/// 190,503 before outlived answers were, 175,562 before fetches of older incarnations were,
/// 159,878 before requests and answers of an epoch that neither end leads were, 157,860 before
/// a leader remembered each follower's previous fetch (Kafka's caught-up rule), 158,578 before
/// a stale AlterPartition answer from a controller newer than the leader heard of was kept
/// (it teaches the leader that controller's epoch: found by `proptest_dead_messages_are_inert`),
/// 167,170 before a leader proposed the followers whose Fetch it holds as soon as the
/// controller answers its previous proposal, 167,511 before a Fetch carried the follower's
/// high watermark and log start, 177,004 before a stopped replica forgot its memory at the stop.
const SAFE_FAILOVER_SMALL_UNIQUE: usize = 172_214;

#[test]
fn kip966_fails_only_weak_isr_at_a_small_bound() {
    let (mut model, p) = small("kip966");
    model.bounds.clean_crashes = 0;
    model.bounds.unclean_crashes = 1;
    // Fencing, the unclean restart leaving the ELR, and the rejoin: three ISR changes.
    model.max_isr_changes = 3;
    let r = dfs(&model, |c| p.expected(c));
    assert!(r.as_expected(), "{:?}", mismatches(&r));
    assert_eq!(r.unique, KIP966_SMALL_UNIQUE);
}

/// Pinned like `SAFE_SMALL_UNIQUE`: 50,611 before dead messages were discarded, 6,486 after;
/// 6,558 since a leader keeps its pending proposal's broker epochs (AlterPartition answers are
/// matched on them); 8,927 since the core's timers and flushes are actions; 8,283 since requests
/// refused forever are discarded; 7,584 since outlived answers are; 6,790 since fetches of
/// older incarnations are; 6,844 since a leader remembers each follower's previous fetch;
/// 7,009 since a Fetch carries the follower's high watermark and log start; 6,910 since a
/// stopped replica forgets its memory at the stop.
const KIP966_SMALL_UNIQUE: usize = 6910;

#[test]
fn renaming_brokers_twice_by_inverse_permutations_is_the_identity() {
    let p = Preset::find("jepsen-2013").expect("preset exists");
    let model = p.model();
    let trace = shortest_path(&model, false, |c| {
        c.check(Property::CommittedRecordsSurviveLeaderFailure)
            .is_err()
    })
    .expect("jepsen-2013 fails");
    for (_, state) in &trace.steps {
        let there = state.permute_brokers(&[2, 0, 1]);
        assert_eq!(&there.permute_brokers(&[1, 2, 0]), state);
        for property in Property::ALL {
            assert_eq!(there.check(property).is_ok(), state.check(property).is_ok());
        }
    }
}

#[test]
fn every_preset_is_well_formed() {
    for p in PRESETS {
        let rules: Rules = p.rules();
        assert_eq!(rules.unsafe_switches().len(), p.rules.len(), "{}", p.name);
        assert!(p.min_insync_replicas as u32 <= p.bounds.replicas);
        assert!(p.exhaustive || !p.fails.is_empty(), "{}", p.name);
        assert_eq!(
            p.steps.len(),
            p.fails.len(),
            "{}: one Steps per failure",
            p.name
        );
        let cfg: Config = p.config();
        assert_eq!(cfg.validate(), Ok(()), "{}", p.name);
    }
    assert_eq!(Acks::All, Preset::find("safe").unwrap().bounds.acks);
}

/// The suite in a test: every preset at its CI bounds comes to its expected verdicts (what
/// `isr-check suite` prints as a table). It makes the suite part of the test step of mutation
/// testing (checker/mutants.sh).
#[test]
fn every_preset_is_as_expected_at_its_bounds() {
    for p in PRESETS {
        let r = check_preset(p);
        assert!(r.as_expected(), "{}: {:?}", p.name, mismatches(&r));
        let pinned: Vec<(Check, usize)> = p
            .fails
            .iter()
            .zip(p.steps)
            .map(|(&f, s)| (Check::Always(f), s.full as usize))
            .collect();
        let mut found: Vec<(Check, usize)> = failing(&r)
            .into_iter()
            .filter(|(c, _)| p.fails.iter().any(|&f| Check::Always(f) == *c))
            .collect();
        found.sort_by_key(|&(c, _)| p.fails.iter().position(|&f| Check::Always(f) == c));
        assert_eq!(found, pinned, "{}: shortest counterexamples", p.name);
    }
}
