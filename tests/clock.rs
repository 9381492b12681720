//! The simulated cluster's clock ([`Bounds::clock`]): time is part of the state, timers fire
//! only by the tick and only when the core's deadlines say, and a tick waits for every message
//! sent before the previous one, so each arrives within a tick of being sent.

use isr::sim::{clocked, Action, Bounds, Cluster, CLOCKED_LAG_MAX};
use isr::{Config, Message, Property, Tick};

/// Two brokers, b0 leading, a clock to tick 10, the clocked timings: a follower may lag
/// [`CLOCKED_LAG_MAX`] (4) ticks, and leaders hold a Fetch that finds nothing new for two.
fn clocked_cluster() -> (Config, Bounds) {
    let mut cfg = Config {
        fetch_max_wait: Tick(1),
        ..Config::default()
    };
    clocked(&mut cfg);
    assert_eq!(
        (cfg.replica_lag_max, cfg.fetch_max_wait),
        (CLOCKED_LAG_MAX, Tick(2))
    );
    let bounds = Bounds {
        replicas: 2,
        records: 2,
        clean_crashes: 1,
        consumer: false,
        clock: 10,
        ..Bounds::default()
    };
    (cfg, bounds)
}

fn step(c: &mut Cluster, cfg: &Config, bounds: &Bounds, action: &Action) {
    assert!(
        c.actions(cfg, bounds).contains(action),
        "{action} is not enabled"
    );
    c.apply(cfg, bounds, action);
}

/// Delivers the only message in flight.
fn deliver(c: &mut Cluster, cfg: &Config, bounds: &Bounds) {
    assert_eq!(c.network.len(), 1, "{:?}", c.network);
    let e = c.network[0].clone();
    step(c, cfg, bounds, &Action::Deliver(e));
}

fn is_timer(a: &Action) -> bool {
    matches!(
        a,
        Action::FollowerFetch(_)
            | Action::LeaderShrinkIsr { .. }
            | Action::LeaderRetryAlterPartition(_)
            | Action::FetchWaitExpired(_)
    )
}

#[test]
fn with_a_clock_timers_fire_only_by_the_tick_and_a_tick_waits_for_old_messages() {
    let (cfg, bounds) = clocked_cluster();
    let mut c = Cluster::new(&cfg, &bounds);
    assert!(c.clocked && c.timely());
    // The follower's first Fetch was sent before any tick: time waits for it.
    assert!(!c.actions(&cfg, &bounds).contains(&Action::Tick));
    deliver(&mut c, &cfg, &bounds);
    // The leader holds it (nothing new): nothing is in flight, so time may pass, and no timer
    // is an action of its own.
    assert!(c.network.is_empty());
    let actions = c.actions(&cfg, &bounds);
    assert!(actions.contains(&Action::Tick));
    assert!(!actions.iter().any(is_timer), "{actions:?}");
    // Two ticks: the held Fetch's wait runs out at the second, and the tick answers it.
    step(&mut c, &cfg, &bounds, &Action::Tick);
    assert_eq!((c.now, c.network.len()), (Tick(1), 0));
    step(&mut c, &cfg, &bounds, &Action::Tick);
    assert_eq!(c.now, Tick(2));
    assert!(
        matches!(&c.network[..], [e] if matches!(e.message, Message::FetchResponse(_))),
        "{:?}",
        c.network
    );
    // Sent in this tick, the answer may wait for the next; not for the one after.
    step(&mut c, &cfg, &bounds, &Action::Tick);
    assert_eq!(c.network.len(), 1);
    assert!(!c.actions(&cfg, &bounds).contains(&Action::Tick));
    deliver(&mut c, &cfg, &bounds);
    assert!(c.actions(&cfg, &bounds).contains(&Action::Tick));
}

#[test]
fn a_follower_that_stops_fetching_leaves_the_isr_when_its_lag_runs_out_not_before() {
    let (cfg, bounds) = clocked_cluster();
    let mut c = Cluster::new(&cfg, &bounds);
    // The leader writes; the follower's Fetch from offset 0 is answered with the record.
    step(
        &mut c,
        &cfg,
        &bounds,
        &Action::LeaderWrite(isr::BrokerId(0).into()),
    );
    step(
        &mut c,
        &cfg,
        &bounds,
        &Action::Flush(isr::BrokerId(0).into()),
    );
    deliver(&mut c, &cfg, &bounds);
    // The follower never gets the answer: it is lost, which ends the run's timeliness (the
    // property no longer speaks), and the leader's lag timer decides alone.
    let answer = c.network[0].clone();
    let bounds = Bounds { drops: 1, ..bounds };
    step(&mut c, &cfg, &bounds, &Action::Drop(answer));
    assert!(!c.timely());
    let leader = |c: &Cluster| c.replicas[0].leader_state().cloned().expect("b0 leads");
    // Caught up as of tick 0; the timer fires once more than `replica_lag_max` ticks passed.
    for now in 1..=4 {
        step(&mut c, &cfg, &bounds, &Action::Tick);
        assert_eq!(c.now, Tick(now));
        assert_eq!(leader(&c).proposed_isr(), None, "at tick {now}");
    }
    step(&mut c, &cfg, &bounds, &Action::Tick);
    let proposed = leader(&c).proposed_isr().cloned();
    assert_eq!(proposed, Some([isr::BrokerId(0)].into()));
    // Had the run been timely, that is what the property forbids.
    let mut timely = c.clone();
    timely.drops = 0;
    assert!(timely
        .check(Property::FollowersFetchingEveryRoundStayInIsr)
        .is_err());
    assert!(c
        .check(Property::FollowersFetchingEveryRoundStayInIsr)
        .is_ok());
}

#[test]
fn without_a_clock_there_is_no_tick_and_timers_are_actions() {
    let (cfg, bounds) = clocked_cluster();
    let bounds = Bounds { clock: 0, ..bounds };
    let mut c = Cluster::new(&cfg, &bounds);
    deliver(&mut c, &cfg, &bounds);
    let actions = c.actions(&cfg, &bounds);
    assert!(!actions.contains(&Action::Tick));
    assert!(actions.iter().any(is_timer), "{actions:?}");
    assert!(!c.timely());
    assert_eq!(c.now, Tick(0));
}
