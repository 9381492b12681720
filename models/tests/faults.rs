//! Power lost while a cleanly stopped broker is down changes nothing, so the model needs no
//! action for it (spec/protocol.md, section 3.7): a clean shutdown flushed the log and
//! checkpointed the HW, and nothing reaches a stopped replica, so what an unclean crash takes
//! is already nothing.

mod common;

use common::Walk;
use isr::sim::Bounds;
use isr::Acks;
use isr_models::presets::Preset;
use isr_models::IsrModel;

#[test]
fn power_loss_while_a_cleanly_stopped_broker_is_down_changes_nothing() {
    let bounds = Bounds {
        partitions: 1,
        replicas: 3,
        records: 3,
        max_leader_epoch: 4,
        clean_crashes: 2,
        unclean_crashes: 1,
        drops: 0,
        duplicates: 0,
        session_expiries: 0,
        controller_failovers: 0,
        disk_failures: 0,
        deletes: 0,
        compactions: 0,
        acks: Acks::All,
        consumer: true,
        background_flush: false,
        keep_dead: false,
        idempotent: false,
        producer_retries: 0,
        consumers: 0,
        commits: 0,
        consumer_failures: 0,
        max_generation: 3,
        audit_dead: false,
        clock: 0,
        atomic: false,
    };
    // Page-cache acknowledgement: running replicas hold unflushed data, stopped ones must not.
    let p = Preset::find("kip966").expect("preset exists");
    let cfg = p.config();
    let model = IsrModel::new(cfg, bounds, 5);
    let mut walk = Walk(0x2545_f491_4f6c_dd1d);
    let mut checked = 0;
    walk.walks(&model, 300, 60, |c| {
        for (b, r) in c.replicas.iter().enumerate() {
            if !r.is_online() && c.last_stop_clean[b] {
                let mut lost = isr::Replica::clone(r);
                let _ = lost.step(&cfg, isr::Tick(0), isr::ReplicaInput::Stop { clean: false });
                assert_eq!(&lost, &**r, "b{b} lost something after a clean stop");
                checked += 1;
            }
        }
    });
    assert!(checked > 1000, "{checked} stopped replicas looked at");
}
