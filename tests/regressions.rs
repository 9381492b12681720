//! Schedules that once broke a property under the safe rules, replayed step by step.
//!
//! Each schedule is the shrunk counterexample a property test printed, kept verbatim: every step
//! is found among the enabled actions by its printed name, and every property must hold after
//! every step.

use isr::sim::{Bounds, Cluster};
use isr::{Acks, Config, Property};

/// Replays `steps` (as `sim::Action` prints them), checking every property after each.
fn replay(cfg: &Config, bounds: &Bounds, steps: &[&str]) {
    let mut cluster = Cluster::new(cfg, bounds);
    for (i, step) in steps.iter().enumerate() {
        let actions = cluster.actions(cfg, bounds);
        let action = actions
            .iter()
            .find(|a| a.to_string() == *step)
            .unwrap_or_else(|| panic!("step {}: `{step}` is not enabled", i + 1));
        cluster.apply(cfg, bounds, &action.clone());
        for p in Property::ALL {
            if let Err(v) = cluster.check(p) {
                panic!("step {} ({step}): {v}", i + 1);
            }
        }
    }
}

/// A proposal built on a Fetch by a broker's old incarnation is refused INELIGIBLE_REPLICA; the
/// new incarnation's Fetch triggers a proposal of the same ISR on the same version, which the
/// controller accepts. A duplicate of the old refusal used to match the new proposal (answers
/// were matched by ISR and version only), cancel it, and let the HW rise over the smaller ISR
/// while the controller held the larger: StrongIsr broke at step 22. Answers now also echo the
/// request's broker epochs.
#[test]
fn a_duplicated_refusal_cannot_cancel_a_newer_identical_proposal() {
    let cfg = Config {
        min_insync_replicas: 1,
        ..Config::default()
    };
    let bounds = Bounds {
        replicas: 2,
        records: 3,
        max_leader_epoch: 2,
        clean_crashes: 1,
        unclean_crashes: 0,
        drops: 0,
        duplicates: 3,
        session_expiries: 0,
        controller_failovers: 0,
        acks: Acks::Leader,
        consumer: true,
        background_flush: false,
    };
    let refusal = "Deliver(controller→b0: AlterPartitionResponse c1 INELIGIBLE_REPLICA: b1 is not \
                   alive, or has re-registered since it fetched)";
    replay(
        &cfg,
        &bounds,
        &[
            "LeaderShrinkIsr(b0 drops b1)",
            "FollowerFetch(b1)",
            "CleanShutdown(b1)",
            "Duplicate(b1→b0: Fetch offset=0 e1)",
            "Restart(b1)",
            "Deliver(controller→b0: LeaderAndIsr c1 leader=b0 e1 isr={b0} elr={} v2)",
            "Deliver(b0→controller: AlterPartition isr={b0} e1 v1)",
            "Duplicate(controller→b1: LeaderAndIsr c1 leader=b0 e1 isr={b0} elr={} v2)",
            "Deliver(controller→b1: LeaderAndIsr c1 leader=b0 e1 isr={b0} elr={} v2)",
            "Deliver(b1→b0: Fetch offset=0 e1)",
            "Deliver(b0→controller: AlterPartition isr={b0,b1} e1 v2)",
            "LeaderWrite(b0)",
            "Deliver(b0→b1: FetchResponse e1 from=0 [] hw=0)",
            "Deliver(b1→b0: Fetch offset=0 e1)",
            "Deliver(b0→b1: FetchResponse e1 from=0 [1:e1] hw=0)",
            "Duplicate(controller→b0: AlterPartitionResponse c1 INELIGIBLE_REPLICA: b1 is not alive, \
             or has re-registered since it fetched)",
            "FollowerFetch(b1)",
            refusal,
            "Deliver(b1→b0: Fetch offset=1 e1)",
            "LeaderWrite(b0)",
            "Deliver(b0→controller: AlterPartition isr={b0,b1} e1 v2)",
            refusal,
        ],
    );
}
