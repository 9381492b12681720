//! The replica's one entry point, input by input: what each does, and what waits for what.

use super::*;
use crate::config::{FlushPolicy, Rules};
use crate::error::{AlterPartitionError, EpochError, ReadError, WriteError};
use crate::log::MemLog;
use crate::message::{
    AlterPartitionRequest, AlterPartitionResponse, Envelope, FetchRequest, FetchResponse,
    LeaderAndIsr, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, PartitionState,
};
use crate::producers::{Admission, ProducerBatch};
use crate::types::{Acks, LeaderEpoch};

type R = Replica<MemLog<u64>>;

#[path = "log_start_tests.rs"]
mod log_start;

fn page_cache() -> Config {
    with_rules(Rules {
        flush: FlushPolicy::PageCache,
        ..Rules::default()
    })
}

/// Page cache, with a leader holding a Fetch that finds nothing for up to `wait` ticks, even
/// one whose answer would be news to its follower.
fn holding(wait: u64) -> Config {
    Config {
        fetch_max_wait: Tick(wait),
        high_watermark_wait: Tick(wait),
        ..page_cache()
    }
}

/// The safe configuration, then the same with controller fencing off (rule 11).
fn with_and_without_controller_fencing() -> [Config; 2] {
    let unfenced = with_rules(Rules {
        controller_fencing: false,
        ..Rules::default()
    });
    [Config::default(), unfenced]
}

/// The default configuration under `rules`.
fn with_rules(rules: Rules) -> Config {
    Config {
        rules,
        ..Config::default()
    }
}

fn acknowledged(effects: &Effects<u64>) -> Vec<ProduceId> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Acknowledge { id, .. } => Some(*id),
            _ => None,
        })
        .collect()
}

fn sent(effects: &Effects<u64>) -> Vec<&Message<u64>> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Send(Envelope { message, .. }) => Some(message),
            _ => None,
        })
        .collect()
}

/// The controller's order for partition 0 over b1 and b2: `leader` leads epoch `epoch` with ISR
/// `isr`, at partition epoch `version`, from controller `controller`.
fn order(leader: u32, epoch: u32, version: u32, isr: &[u32], controller: u32) -> Input<u64> {
    order_over(&[1, 2], leader, epoch, version, isr, controller)
}

/// [`order`] for a partition assigned to `assigned`.
fn order_over(
    assigned: &[u32],
    leader: u32,
    epoch: u32,
    version: u32,
    isr: &[u32],
    controller: u32,
) -> Input<u64> {
    Input::Message {
        from: Node::Controller,
        message: Message::LeaderAndIsr(LeaderAndIsr {
            partition: PartitionId(0),
            state: PartitionState {
                assigned: assigned.iter().map(|&b| BrokerId(b)).collect(),
                leader: Some(BrokerId(leader)),
                leader_epoch: LeaderEpoch(epoch),
                isr: isr.iter().map(|&b| BrokerId(b)).collect(),
                elr: Default::default(),
                partition_epoch: PartitionEpoch(version),
                min_insync_replicas: 1,
            },
            broker_epoch: BrokerEpoch(1),
            controller_epoch: ControllerEpoch(controller),
        }),
    }
}

/// Broker `id` as told by [`order`] that b1 leads epoch 1 with b1 and b2 in the ISR.
fn replica(cfg: &Config, id: u32) -> R {
    let mut r = Replica::new(BrokerId(id), PartitionId(0), MemLog::default());
    r.step(cfg, Tick(0), order(1, 1, 1, &[1, 2], 1));
    r
}

fn write(r: &mut R, cfg: &Config, id: ProduceId, records: Vec<u64>, acks: Acks) -> Effects<u64> {
    r.step(
        cfg,
        Tick(0),
        Input::Write {
            id,
            records,
            acks,
            producer: None,
        },
    )
}

fn fetch_from_b2(offset: u64) -> Input<u64> {
    fetch_from_b2_incarnation(2, offset)
}

/// A Fetch from b2 as registered with broker epoch `broker_epoch`.
fn fetch_from_b2_incarnation(broker_epoch: u64, offset: u64) -> Input<u64> {
    fetch_from_b2_in(1, broker_epoch, offset)
}

/// A Fetch from b2 in leader epoch `leader_epoch`, as registered with broker epoch
/// `broker_epoch`.
fn fetch_from_b2_in(leader_epoch: u32, broker_epoch: u64, offset: u64) -> Input<u64> {
    fetch_from(2, leader_epoch, broker_epoch, offset)
}

/// A Fetch from `follower` in leader epoch `leader_epoch`, as registered with broker epoch
/// `broker_epoch`.
fn fetch_from(follower: u32, leader_epoch: u32, broker_epoch: u64, offset: u64) -> Input<u64> {
    Input::Message {
        from: Node::Broker(BrokerId(follower)),
        message: Message::Fetch(FetchRequest {
            partition: PartitionId(0),
            replica: BrokerId(follower),
            broker_epoch: BrokerEpoch(broker_epoch),
            current_leader_epoch: LeaderEpoch(leader_epoch),
            fetch_offset: Offset(offset),
            high_watermark: Offset(0),
            log_start_offset: Offset(0),
        }),
    }
}

/// b1's answer, as leader of `epoch`, to a Fetch at `fetch_offset`: `entries`, high watermark 0.
fn records_from_b1(epoch: u32, fetch_offset: u64, entries: Vec<Entry<u64>>) -> Input<u64> {
    Input::Message {
        from: Node::Broker(BrokerId(1)),
        message: Message::FetchResponse(FetchResponse {
            partition: PartitionId(0),
            leader_epoch: LeaderEpoch(epoch),
            fetch_offset: Offset(fetch_offset),
            result: Ok(crate::message::FetchedRecords {
                entries,
                high_watermark: Offset(0),
            }),
            log_start_offset: Offset(0),
            first_boundary: Offset(0),
        }),
    }
}

/// b1's answer, as leader of `epoch`, to an OffsetForLeaderEpoch about `requested`: the
/// largest epoch up to it that b1 knows, and where that epoch ends.
fn epoch_end_from_b1(epoch: u32, requested: u32, end: Option<(LeaderEpoch, Offset)>) -> Input<u64> {
    Input::Message {
        from: Node::Broker(BrokerId(1)),
        message: Message::OffsetForLeaderEpochResponse(OffsetForLeaderEpochResponse {
            partition: PartitionId(0),
            leader_epoch: LeaderEpoch(epoch),
            requested_epoch: LeaderEpoch(requested),
            result: Ok(end),
        }),
    }
}

/// `follower`'s OffsetForLeaderEpoch in leader epoch `epoch`, about epoch `requested`.
fn epoch_end_request_from(follower: u32, epoch: u32, requested: u32) -> Input<u64> {
    Input::Message {
        from: Node::Broker(BrokerId(follower)),
        message: Message::OffsetForLeaderEpoch(OffsetForLeaderEpochRequest {
            partition: PartitionId(0),
            replica: BrokerId(follower),
            current_leader_epoch: LeaderEpoch(epoch),
            requested_epoch: LeaderEpoch(requested),
        }),
    }
}

/// `input` (a LeaderAndIsr or a Fetch of the helpers above) about partition `partition`
/// instead of partition 0.
fn in_partition(input: Input<u64>, partition: u32) -> Input<u64> {
    let Input::Message { from, message } = input else {
        return input;
    };
    let partition = PartitionId(partition);
    let message = match message {
        Message::LeaderAndIsr(l) => Message::LeaderAndIsr(LeaderAndIsr { partition, ..l }),
        Message::Fetch(f) => Message::Fetch(FetchRequest { partition, ..f }),
        other => other,
    };
    Input::Message { from, message }
}

/// Controller `controller`'s refusal of `req` with `error`, echoing what it asked.
fn refusal(req: &AlterPartitionRequest, controller: u32, error: AlterPartitionError) -> Input<u64> {
    Input::Message {
        from: Node::Controller,
        message: Message::AlterPartitionResponse(AlterPartitionResponse {
            partition: PartitionId(0),
            request_partition_epoch: req.partition_epoch,
            requested_isr: req.new_isr.clone(),
            requested_broker_epochs: req.broker_epochs.clone(),
            controller_epoch: ControllerEpoch(controller),
            result: Err(error),
        }),
    }
}

/// Whether `effects` send one message, a Fetch in leader epoch `epoch`.
fn sends_one_fetch_in(effects: &Effects<u64>, epoch: u32) -> bool {
    matches!(sent(effects)[..], [Message::Fetch(f)] if f.current_leader_epoch == LeaderEpoch(epoch))
}

/// Whether `r` would discard `input`, a message, as dead (`Replica::ignores_forever`).
fn dead(r: &R, cfg: &Config, input: &Input<u64>) -> bool {
    let Input::Message { from, message } = input else {
        panic!("not a message: {input:?}")
    };
    r.ignores_forever(cfg, *from, message)
}

/// The driver's flush: the log made durable, then the replica told.
fn flush(r: &mut R, cfg: &Config) -> Effects<u64> {
    r.log_mut().flush();
    let flushed = r.log().flushed_offset();
    r.step(cfg, Tick(0), Input::Flushed(flushed))
}

/// Producer 9's batch of one record with sequence number `sequence`, in producer epoch `epoch`.
fn batch(epoch: i16, sequence: i32) -> ProducerBatch {
    ProducerBatch {
        producer_id: 9,
        producer_epoch: epoch,
        first_sequence: sequence,
        last_sequence: sequence,
    }
}

/// An idempotent producer's write of `record` as `stamp`.
fn stamped_write(id: ProduceId, record: u64, stamp: ProducerBatch, acks: Acks) -> Input<u64> {
    Input::Write {
        id,
        records: vec![record],
        acks,
        producer: Some(stamp),
    }
}

#[test]
fn a_retry_of_a_stored_batch_is_acknowledged_with_its_offsets_and_appends_nothing() {
    let cfg = page_cache();
    let mut r = replica(&cfg, 1);
    let first = r.step(&cfg, Tick(0), stamped_write(1, 7, batch(0, 0), Acks::All));
    assert!(acknowledged(&first).is_empty(), "not committed yet");
    // The producer, never answered, retries the same batch.
    let retry = |id| stamped_write(id, 7, batch(0, 0), Acks::All);
    assert!(r.step(&cfg, Tick(0), retry(2)).is_empty());
    assert_eq!(r.log_end_offset(), Offset(1), "nothing appended");
    let effects = r.step(&cfg, Tick(1), fetch_from_b2(1));
    assert_eq!(acknowledged(&effects), vec![1, 2]);
    // Once committed, a later retry is answered at once, with the first attempt's offset.
    assert_eq!(
        r.step(&cfg, Tick(1), retry(3)),
        vec![Effect::Acknowledge {
            partition: PartitionId(0),
            id: 3,
            base_offset: Offset(0),
        }]
    );
}

#[test]
fn an_idempotent_write_out_of_sequence_or_fenced_or_of_two_batches_stores_nothing() {
    let cfg = page_cache();
    let mut r = replica(&cfg, 1);
    r.step(
        &cfg,
        Tick(0),
        stamped_write(1, 7, batch(3, 0), Acks::Leader),
    );
    let refused = |r: &mut R, input| match &r.step(&cfg, Tick(0), input)[..] {
        [Effect::FailWrite { error, .. }] => *error,
        other => panic!("not refused: {other:?}"),
    };
    assert_eq!(
        refused(&mut r, stamped_write(2, 8, batch(3, 2), Acks::Leader)),
        WriteError::OutOfOrderSequence {
            producer_id: 9,
            expected: 1,
            got: 2
        }
    );
    assert_eq!(
        refused(&mut r, stamped_write(3, 8, batch(2, 1), Acks::Leader)),
        WriteError::InvalidProducerEpoch {
            producer_id: 9,
            epoch: 2,
            current: 3
        }
    );
    let two = Input::Write {
        id: 4,
        records: vec![8, 9],
        acks: Acks::Leader,
        producer: Some(batch(3, 1)),
    };
    assert_eq!(refused(&mut r, two), WriteError::NotOneBatch { count: 2 });
    assert_eq!(r.log_end_offset(), Offset(1), "nothing refused was stored");
    let mut follower = replica(&cfg, 2);
    assert_eq!(
        refused(
            &mut follower,
            stamped_write(5, 8, batch(3, 1), Acks::Leader)
        ),
        WriteError::NotLeader
    );
}

/// Rule 14: a follower keeps the producer state of what it replicates, so as leader it answers
/// the retry of a batch its predecessor appended and never answered, instead of storing it
/// again. A replica that knew only the batches it took as leader stores it twice.
#[test]
fn a_new_leader_answers_a_retry_its_predecessor_appended_unless_producer_state_is_off() {
    for (producer_state, end) in [(true, 1), (false, 2)] {
        let cfg = with_rules(Rules {
            producer_state,
            ..Rules::default()
        });
        let mut follower = replica(&cfg, 2);
        let stamped = Entry {
            epoch: LeaderEpoch(1),
            record: 7,
            producer: Some(batch(0, 0)),
        };
        follower.step(&cfg, Tick(0), records_from_b1(1, 0, vec![stamped]));
        flush(&mut follower, &cfg);
        follower.step(&cfg, Tick(0), order(2, 2, 2, &[2], 1));
        assert!(follower.is_leader());
        follower.step(
            &cfg,
            Tick(0),
            stamped_write(1, 7, batch(0, 0), Acks::Leader),
        );
        flush(&mut follower, &cfg);
        assert_eq!(
            follower.log_end_offset(),
            Offset(end),
            "producer-state={producer_state}"
        );
    }
}

/// The producer state is the log's: rebuilt on restart, and after a truncation that removes a
/// producer's latest batch, its earlier one is the latest again.
#[test]
fn the_producer_state_follows_the_log_through_truncation_and_restart() {
    let cfg = Config::default();
    let mut log: MemLog<u64> = MemLog::default();
    let entries: Vec<_> = (0..3i32)
        .map(|i| Entry {
            epoch: LeaderEpoch(1),
            record: u64::from(i.unsigned_abs()),
            producer: Some(batch(0, i)),
        })
        .collect();
    log.append(&entries);
    log.flush();
    let mut r = Replica::new(BrokerId(1), PartitionId(0), log);
    assert_eq!(r.producers(), &Producers::from_log(r.log()));
    let mut effects = Vec::new();
    r.truncate_to(&cfg, Offset(2), &mut effects);
    assert_eq!(r.producers(), &Producers::from_log(r.log()));
    assert_eq!(r.producers().admit(&batch(0, 2)), Ok(Admission::Append));
    r.step(&cfg, Tick(0), Input::Stop { clean: true });
    r.step(&cfg, Tick(0), Input::Restart);
    assert_eq!(
        r.producers().admit(&batch(0, 1)),
        Ok(Admission::Duplicate {
            base_offset: Offset(1),
            end_offset: Offset(2)
        })
    );
}

#[test]
fn under_flush_always_answers_and_progress_wait_for_the_flush() {
    let cfg = Config::default();
    let mut leader = replica(&cfg, 1);
    // acks=1: appended, but answered only once durable; the leader asks for the flush.
    let effects = write(&mut leader, &cfg, 1, vec![7], Acks::Leader);
    assert!(acknowledged(&effects).is_empty());
    assert_eq!(leader.held().len(), 1);
    assert!(!leader.holds_request(), "an answer waits, not a request");
    assert!(effects.contains(&Effect::Flush {
        partition: PartitionId(0),
        up_to: Offset(1)
    }));
    // An acks=all write too; a follower fetch proves b2 holds both, yet the HW cannot pass
    // what the leader itself has not made durable.
    write(&mut leader, &cfg, 2, vec![8], Acks::All);
    let effects = leader.step(&cfg, Tick(0), fetch_from_b2(2));
    assert!(acknowledged(&effects).is_empty());
    assert_eq!(leader.high_watermark(), Offset(0));
    let effects = flush(&mut leader, &cfg);
    assert_eq!(acknowledged(&effects), vec![1, 2]);
    assert_eq!(leader.high_watermark(), Offset(2));

    // A follower's next Fetch reports its log end offset: it leaves only once durable.
    let mut follower = replica(&cfg, 2);
    let answer = records_from_b1(
        1,
        0,
        vec![Entry {
            epoch: LeaderEpoch(1),
            record: 7,
            producer: None,
        }],
    );
    let effects = follower.step(&cfg, Tick(0), answer);
    assert!(sent(&effects).is_empty(), "{effects:?}");
    assert_eq!(follower.held().len(), 1);
    assert!(follower.holds_request());
    let effects = flush(&mut follower, &cfg);
    assert!(matches!(sent(&effects)[..], [Message::Fetch(f)] if f.fetch_offset == Offset(1)));
}

/// Each acks=all write is answered once, when the high watermark passes it: one passed is
/// answered and forgotten, one not yet passed waits for the next advance.
#[test]
fn each_acks_all_write_is_acknowledged_once_when_the_high_watermark_passes_it() {
    let cfg = page_cache();
    let mut leader = replica(&cfg, 1);
    write(&mut leader, &cfg, 1, vec![7], Acks::All);
    write(&mut leader, &cfg, 2, vec![8], Acks::All);
    let effects = leader.step(&cfg, Tick(0), fetch_from_b2(1));
    assert_eq!(acknowledged(&effects), vec![1]);
    let effects = leader.step(&cfg, Tick(0), fetch_from_b2(2));
    assert_eq!(acknowledged(&effects), vec![2]);
    assert!(leader
        .leader_state()
        .expect("leads")
        .pending_writes
        .is_empty());
}

/// A consumer's read: a leader answers with committed records only, from the offset asked up
/// to the high watermark; an offset above the high watermark is out of range, and a follower
/// refuses (consumers read from the leader).
#[test]
fn a_read_gets_committed_records_from_a_leader_and_nothing_elsewhere() {
    let cfg = page_cache();
    let mut leader = replica(&cfg, 1);
    write(&mut leader, &cfg, 1, vec![7, 8], Acks::Leader);
    leader.step(&cfg, Tick(0), fetch_from_b2(1));
    assert_eq!(leader.high_watermark(), Offset(1));
    let read = |r: &mut R, from| {
        let effects = r.step(
            &cfg,
            Tick(0),
            Input::Read {
                id: 9,
                from: Offset(from),
                max_entries: 10,
                max_bytes: 10,
            },
        );
        match &effects[..] {
            [Effect::Read { id: 9, result, .. }] => result
                .clone()
                .map(|a| a.entries.into_iter().map(|e| e.record).collect::<Vec<_>>()),
            _ => panic!("one answer: {effects:?}"),
        }
    };
    assert_eq!(read(&mut leader, 0), Ok(vec![7]));
    assert_eq!(read(&mut leader, 1), Ok(vec![]));
    assert_eq!(read(&mut leader, 2), Err(ReadError::OffsetOutOfRange));
    let mut follower = replica(&cfg, 2);
    assert_eq!(read(&mut follower, 0), Err(ReadError::NotLeader));
}

#[test]
fn under_page_cache_nothing_waits() {
    let cfg = page_cache();
    let mut leader = replica(&cfg, 1);
    let effects = write(&mut leader, &cfg, 1, vec![7], Acks::Leader);
    assert_eq!(acknowledged(&effects), vec![1]);
    assert!(!effects.iter().any(|e| matches!(e, Effect::Flush { .. })));
    let effects = leader.step(&cfg, Tick(0), fetch_from_b2(1));
    assert_eq!(leader.high_watermark(), Offset(1), "{effects:?}");
}

#[test]
fn a_follower_asks_again_when_its_request_times_out_and_soon_after_an_error() {
    let cfg = page_cache();
    let mut follower = replica(&cfg, 2);
    // Nothing within request_timeout: nothing sent; at it, the Fetch again.
    assert!(sent(&follower.step(&cfg, Tick(9), Input::Tick)).is_empty());
    assert_eq!(follower.next_timeout(&cfg), Some(Tick(10)));
    let effects = follower.step(&cfg, Tick(10), Input::Tick);
    assert!(matches!(sent(&effects)[..], [Message::Fetch(_)]));
    // An error answer brings the retry forward to retry_backoff from now.
    let error = Input::Message {
        from: Node::Broker(BrokerId(1)),
        message: Message::FetchResponse(FetchResponse {
            partition: PartitionId(0),
            leader_epoch: LeaderEpoch(0),
            fetch_offset: Offset(0),
            result: Err(EpochError::UnknownLeaderEpoch),
            log_start_offset: Offset(0),
            first_boundary: Offset(0),
        }),
    };
    follower.step(&cfg, Tick(12), error);
    assert_eq!(follower.next_timeout(&cfg), Some(Tick(13)));
    assert!(matches!(
        sent(&follower.step(&cfg, Tick(13), Input::Tick))[..],
        [Message::Fetch(_)]
    ));
}

/// A broker that hosts no replica of the partition yet (the controller's order reached the
/// follower first) refuses the follower's requests, Fetch and OffsetForLeaderEpoch, so that the
/// follower asks again after `retry_backoff` instead of waiting out a held Fetch's wait.
#[test]
fn a_request_to_a_broker_without_the_replica_is_refused_and_asked_again_soon() {
    let cfg = holding(100);
    let mut follower = replica(&cfg, 2);
    let effects = follower.step(&cfg, Tick(110), Input::Tick);
    let [Effect::Send(fetch)] = &effects[..] else {
        panic!("one Fetch expected: {effects:?}");
    };
    let refusal = fetch
        .refused_without_replica(BrokerId(1))
        .expect("a Fetch is refused");
    assert_eq!(refusal.to, Node::Broker(BrokerId(2)));
    assert!(matches!(
        &refusal.message,
        Message::FetchResponse(r) if r.result == Err(EpochError::NotLeader)
    ));
    follower.step(
        &cfg,
        Tick(111),
        Input::Message {
            from: refusal.from,
            message: refusal.message,
        },
    );
    assert_eq!(follower.next_timeout(&cfg), Some(Tick(112)));
    // OffsetForLeaderEpoch too; nothing else is a follower's request.
    let Input::Message { from, message } = epoch_end_request_from(2, 1, 1) else {
        unreachable!()
    };
    let request = Envelope {
        from,
        to: Node::Broker(BrokerId(1)),
        message,
    };
    assert!(matches!(
        request.refused_without_replica(BrokerId(1)).map(|e| e.message),
        Some(Message::OffsetForLeaderEpochResponse(r)) if r.result == Err(EpochError::NotLeader)
    ));
    let Input::Message { message, .. } = order(1, 1, 1, &[1, 2], 1) else {
        unreachable!()
    };
    let order = Envelope {
        from: Node::Controller,
        to: Node::Broker(BrokerId(1)),
        message,
    };
    assert_eq!(order.refused_without_replica(BrokerId(1)), None);
}

/// Rule 4 on the leader's side: a Fetch from a follower that knows a newer epoch (its leader
/// has not heard of its own re-election yet) or only an older one is refused with the error
/// that says which, and its progress is not counted in this epoch.
#[test]
fn a_fetch_in_another_leader_epoch_is_refused_and_not_counted() {
    let cfg = page_cache();
    let mut leader = replica(&cfg, 1);
    write(&mut leader, &cfg, 1, vec![7], Acks::Leader);
    for (epoch, error) in [
        (2, EpochError::UnknownLeaderEpoch),
        (0, EpochError::FencedLeaderEpoch),
    ] {
        let effects = leader.step(&cfg, Tick(0), fetch_from_b2_in(epoch, 2, 1));
        assert!(
            matches!(&sent(&effects)[..], [Message::FetchResponse(r)] if r.result == Err(error)),
            "epoch {epoch}: {effects:?}"
        );
        assert_eq!(leader.high_watermark(), Offset(0), "epoch {epoch}");
    }
}

/// A request of an older leader epoch, or of the epoch of a replica that follows another
/// broker, is refused now and forever (with epoch and controller fencing), so a driver may
/// discard it: its answer would be an error, which the follower ignores. A request of the
/// leader's own epoch, or of an epoch the replica has not heard of, is not, and neither is
/// any without epoch fencing, when a later leader would serve it.
#[test]
fn a_request_of_an_epoch_the_replica_never_leads_is_dead() {
    let unfenced = with_rules(Rules {
        epoch_fencing: false,
        ..Rules::default()
    });
    let dead = |r: &R, cfg: &Config, epoch: u32| {
        let fetch = dead(r, cfg, &fetch_from_b2_in(epoch, 2, 0));
        let reconcile = dead(r, cfg, &epoch_end_request_from(2, epoch, epoch));
        assert_eq!(fetch, reconcile, "either request of epoch {epoch}");
        fetch
    };
    for cfg in [Config::default(), unfenced] {
        let fenced = cfg.rules.epoch_fencing;
        let mut r = replica(&cfg, 1);
        assert_eq!(
            [dead(&r, &cfg, 0), dead(&r, &cfg, 1), dead(&r, &cfg, 2)],
            [fenced, false, false],
            "the leader of epoch 1"
        );
        r.step(&cfg, Tick(0), order(2, 2, 2, &[1, 2], 1));
        assert_eq!(
            [dead(&r, &cfg, 1), dead(&r, &cfg, 2), dead(&r, &cfg, 3)],
            [fenced, fenced, false],
            "a follower of b2 in epoch 2"
        );
    }
}

#[test]
fn a_fetch_that_finds_nothing_is_held_until_data_comes_or_it_waited_long_enough() {
    let cfg = holding(2);
    let mut leader = replica(&cfg, 1);
    assert!(sent(&leader.step(&cfg, Tick(0), fetch_from_b2(0))).is_empty());
    // The same follower's Fetch again (a retry) replaces the one held: one answer, not two.
    assert!(sent(&leader.step(&cfg, Tick(0), fetch_from_b2(0))).is_empty());
    // Data comes: the held fetch is answered with it.
    let effects = write(&mut leader, &cfg, 1, vec![7], Acks::Leader);
    assert!(matches!(
        sent(&effects)[..],
        [Message::FetchResponse(FetchResponse { result: Ok(f), .. })] if f.entries.len() == 1
    ));
    // Nothing comes: answered empty once the wait is over.
    assert!(sent(&leader.step(&cfg, Tick(3), fetch_from_b2(1))).is_empty());
    assert!(sent(&leader.step(&cfg, Tick(4), Input::Tick)).is_empty());
    let effects = leader.step(&cfg, Tick(5), Input::Tick);
    assert!(matches!(
        sent(&effects)[..],
        [Message::FetchResponse(FetchResponse { result: Ok(f), .. })] if f.entries.is_empty()
    ));
}

/// Held fetches of partitions parked together are answered spread over the second half of
/// `fetch_max_wait`, by partition, not all at once.
#[test]
fn held_fetches_of_different_partitions_wait_out_at_different_times() {
    let cfg = holding(100);
    let held_until = |partition: u32| {
        let mut leader = Replica::new(BrokerId(1), PartitionId(partition), MemLog::default());
        leader.step(
            &cfg,
            Tick(0),
            in_partition(order(1, 1, 1, &[1, 2], 1), partition),
        );
        let fetch = in_partition(fetch_from_b2(0), partition);
        assert!(sent(&leader.step(&cfg, Tick(0), fetch)).is_empty());
        leader.next_timeout(&cfg).expect("the held fetch's wait")
    };
    let untils: BTreeSet<Tick> = (0..51).map(held_until).collect();
    assert_eq!(untils.len(), 51, "each its own: {untils:?}");
    assert_eq!(untils.first(), Some(&Tick(50)));
    assert_eq!(untils.last(), Some(&Tick(100)));
}

/// `fetch` from a follower that has heard high watermark `hw`.
fn knowing(hw: u64, fetch: Input<u64>) -> Input<u64> {
    match fetch {
        Input::Message {
            from,
            message: Message::Fetch(f),
        } => Input::Message {
            from,
            message: Message::Fetch(FetchRequest {
                high_watermark: Offset(hw),
                ..f
            }),
        },
        other => other,
    }
}

/// A Fetch that finds nothing new is held `fetch_max_wait`, unless its answer would tell its
/// follower a high watermark it has not heard: then only `high_watermark_wait`. Without that,
/// a follower whose Fetch proved the last record replicated (so moved the high watermark)
/// heard of it only with the next record or once the long wait ran out, minutes on a real
/// cluster; a held Fetch the high watermark moves past is cut short the same way.
#[test]
fn a_follower_hears_a_high_watermark_that_moved_after_its_answer_within_the_short_wait() {
    let cfg = Config {
        high_watermark_wait: Tick(5),
        min_insync_replicas: 1,
        ..holding(100)
    };
    let answered_hw = |effects: &Effects<u64>| -> Vec<(BrokerId, u64)> {
        effects
            .iter()
            .filter_map(|e| match e {
                Effect::Send(Envelope {
                    to: Node::Broker(to),
                    message: Message::FetchResponse(r),
                    ..
                }) => Some((*to, r.result.as_ref().ok()?.high_watermark.0)),
                _ => None,
            })
            .collect()
    };
    let held = |leader: &R| -> Vec<(BrokerId, u64)> {
        let l = leader.leader_state().expect("leading");
        l.parked.iter().map(|(b, p)| (*b, p.until.0)).collect()
    };
    let mut leader = R::new(BrokerId(1), PartitionId(0), MemLog::default());
    leader.step(
        &cfg,
        Tick(0),
        order_over(&[1, 2, 3], 1, 1, 1, &[1, 2, 3], 1),
    );
    write(&mut leader, &cfg, 1, vec![7], Acks::All);
    leader.step(&cfg, Tick(0), fetch_from(2, 1, 2, 0));
    leader.step(&cfg, Tick(0), fetch_from(3, 1, 3, 0));
    // b2 has the record; the high watermark waits for b3. b2 knows it (0): held long.
    assert!(answered_hw(&leader.step(&cfg, Tick(1), fetch_from(2, 1, 2, 1))).is_empty());
    assert_eq!(held(&leader), [(BrokerId(2), 101)]);
    // b3's Fetch moves it to 1: news to both, so both are held only the short wait.
    let effects = leader.step(&cfg, Tick(2), fetch_from(3, 1, 3, 1));
    assert_eq!(acknowledged(&effects), [1]);
    assert!(answered_hw(&effects).is_empty());
    assert_eq!(held(&leader), [(BrokerId(2), 7), (BrokerId(3), 7)]);
    let effects = leader.step(&cfg, Tick(7), Input::Tick);
    assert_eq!(answered_hw(&effects), [(BrokerId(2), 1), (BrokerId(3), 1)]);
    // Their next fetches, knowing it, are held the whole wait again.
    assert!(
        answered_hw(&leader.step(&cfg, Tick(7), knowing(1, fetch_from(2, 1, 2, 1)))).is_empty()
    );
    assert!(
        answered_hw(&leader.step(&cfg, Tick(7), knowing(1, fetch_from(3, 1, 3, 1)))).is_empty()
    );
    assert_eq!(held(&leader), [(BrokerId(2), 107), (BrokerId(3), 107)]);
    // A follower restarted from an older checkpoint (high watermark 0) hears it soon too.
    leader.step(&cfg, Tick(8), fetch_from(2, 1, 4, 1));
    assert_eq!(held(&leader), [(BrokerId(2), 13), (BrokerId(3), 107)]);
}

/// A follower whose Fetch the leader holds is caught up for as long as it is held, however
/// much longer than `replica_lag_max` that is, and still caught up when data ends the wait:
/// a leader may hold idle followers' fetches long (an idle partition then costs nothing) without
/// dropping them from the ISR. Once the fetch is answered, the lag timer runs again.
#[test]
fn a_follower_whose_fetch_is_held_never_lags_out() {
    let cfg = holding(100);
    let shrinks = |effects: &Effects<u64>| matches!(&sent(effects)[..], [Message::AlterPartition(a)] if a.new_isr == [BrokerId(1)].into());
    let mut leader = replica(&cfg, 1);
    assert!(sent(&leader.step(&cfg, Tick(1), fetch_from_b2(0))).is_empty());
    // Held: only the wait's end is due, long after replica_lag_max (30).
    assert_eq!(leader.next_timeout(&cfg), Some(Tick(101)));
    assert!(!shrinks(&leader.step(&cfg, Tick(80), Input::Tick)));
    // Data at 80 answers it; the follower counts as caught up until then.
    let effects = write(&mut leader, &cfg, 1, vec![7], Acks::Leader);
    assert!(matches!(sent(&effects)[..], [Message::FetchResponse(_)]));
    assert!(!shrinks(&leader.step(&cfg, Tick(110), Input::Tick)));
    // It never fetches again: it leaves replica_lag_max after it was last caught up.
    assert!(shrinks(&leader.step(&cfg, Tick(111), Input::Tick)));
}

/// An expansion refused because the joining follower re-registered since its fetch: the held
/// fetches are answered at once, so that the follower's next fetch, as its new incarnation, can
/// prove it caught up without waiting out `fetch_max_wait`.
#[test]
fn a_refused_rejoin_answers_the_held_fetch_so_the_new_incarnation_fetches_again() {
    let cfg = holding(100);
    let mut leader = Replica::new(BrokerId(1), PartitionId(0), MemLog::default());
    leader.step(&cfg, Tick(0), order(1, 1, 1, &[1], 1));
    let effects = leader.step(&cfg, Tick(1), fetch_from_b2(0));
    let [Message::AlterPartition(join)] = sent(&effects)[..] else {
        panic!("a proposal to add b2, its fetch held: {effects:?}");
    };
    let join = join.clone();
    let effects = leader.step(
        &cfg,
        Tick(2),
        refusal(
            &join,
            1,
            AlterPartitionError::IneligibleReplicas(BTreeSet::from([BrokerId(2)])),
        ),
    );
    assert!(
        sent(&effects)
            .iter()
            .any(|m| matches!(m, Message::FetchResponse(r) if r.result.is_ok())),
        "the held fetch answered: {effects:?}"
    );
}

/// A follower waits for its Fetch's answer `fetch_max_wait` longer than for an
/// OffsetForLeaderEpoch's, since the leader may hold a Fetch that long.
#[test]
fn a_follower_waits_longer_for_a_fetch_the_leader_may_hold() {
    let cfg = holding(50);
    let follower = replica(&cfg, 2);
    assert_eq!(follower.next_timeout(&cfg), Some(Tick(60)));
    // A follower with a log of its own asks where the leader's epoch ends first.
    let mut log = MemLog::default();
    log.append(&[Entry {
        epoch: LeaderEpoch(1),
        record: 7,
        producer: None,
    }]);
    let mut reconciling = Replica::new(BrokerId(2), PartitionId(0), log);
    reconciling.step(&cfg, Tick(0), order(1, 2, 1, &[1, 2], 1));
    assert!(
        matches!(reconciling.role(), Role::Follower(f) if matches!(f.phase, FollowerPhase::Reconciling { .. }))
    );
    assert_eq!(reconciling.next_timeout(&cfg), Some(Tick(10)));
}

/// Followers whose held fetches are answered together join the ISR in one proposal: answered
/// one by one, whichever came first would be proposed, and broker names would decide which.
#[test]
fn followers_caught_up_in_held_fetches_join_the_isr_in_one_proposal() {
    let cfg = holding(2);
    let proposals = |effects: &Effects<u64>| -> Vec<AlterPartitionRequest> {
        sent(effects)
            .into_iter()
            .filter_map(|m| match m {
                Message::AlterPartition(a) => Some(a.clone()),
                _ => None,
            })
            .collect()
    };
    let mut leader = R::new(BrokerId(1), PartitionId(0), MemLog::default());
    leader.step(&cfg, Tick(0), order_over(&[1, 2, 3], 1, 1, 1, &[1], 1));
    // b2 catches up first: proposed at once. b3's fetch waits behind that proposal.
    let effects = leader.step(&cfg, Tick(0), fetch_from(2, 1, 2, 0));
    let [first] = &proposals(&effects)[..] else {
        panic!("one proposal: {effects:?}");
    };
    assert_eq!(first.new_isr, [BrokerId(1), BrokerId(2)].into());
    assert!(proposals(&leader.step(&cfg, Tick(0), fetch_from(3, 1, 3, 0))).is_empty());
    // The controller's order settles the proposal the other way; the held fetches are then
    // answered together, and both followers are proposed in one change.
    leader.step(&cfg, Tick(1), order_over(&[1, 2, 3], 1, 1, 2, &[1], 1));
    let effects = leader.step(&cfg, Tick(3), Input::Tick);
    let [both] = &proposals(&effects)[..] else {
        panic!("one proposal: {effects:?}");
    };
    assert_eq!(both.new_isr, [BrokerId(1), BrokerId(2), BrokerId(3)].into());
    assert_eq!(
        both.broker_epochs,
        [(BrokerId(2), BrokerEpoch(2)), (BrokerId(3), BrokerEpoch(3))].into()
    );
    assert_eq!(
        sent(&effects).len(),
        3,
        "two answers and the proposal: {effects:?}"
    );
}

/// A follower that caught up while another's expansion was out (its fetch held, since one
/// proposal goes at a time) is proposed as soon as the controller accepts the first, not when
/// its held fetch is next answered, up to `fetch_max_wait` later: at 100,000 partitions the
/// wait made the cluster take minutes to get every follower back into the ISR.
#[test]
fn a_follower_held_behind_an_accepted_expansion_is_proposed_at_once() {
    let cfg = holding(600);
    let mut leader = R::new(BrokerId(1), PartitionId(0), MemLog::default());
    leader.step(&cfg, Tick(0), order_over(&[1, 2, 3], 1, 1, 1, &[1], 1));
    let effects = leader.step(&cfg, Tick(0), fetch_from(2, 1, 2, 0));
    let [Message::AlterPartition(first)] = sent(&effects)[..] else {
        panic!("b2 proposed: {effects:?}");
    };
    let first = first.clone();
    // b3 catches up behind it: held, not proposed.
    assert!(sent(&leader.step(&cfg, Tick(0), fetch_from(3, 1, 3, 0))).is_empty());
    let accepted = Input::Message {
        from: Node::Controller,
        message: Message::AlterPartitionResponse(AlterPartitionResponse {
            partition: PartitionId(0),
            request_partition_epoch: first.partition_epoch,
            requested_isr: first.new_isr.clone(),
            requested_broker_epochs: first.broker_epochs.clone(),
            controller_epoch: ControllerEpoch(1),
            result: Ok(PartitionState {
                assigned: vec![BrokerId(1), BrokerId(2), BrokerId(3)],
                leader: Some(BrokerId(1)),
                leader_epoch: LeaderEpoch(1),
                isr: first.new_isr.clone(),
                elr: BTreeSet::new(),
                partition_epoch: PartitionEpoch(first.partition_epoch.0 + 1),
                min_insync_replicas: 2,
            }),
        }),
    };
    let effects = leader.step(&cfg, Tick(1), accepted);
    let [Message::AlterPartition(next)] = sent(&effects)[..] else {
        panic!("b3 proposed at once, its fetch still held: {effects:?}");
    };
    assert_eq!(next.new_isr, [BrokerId(1), BrokerId(2), BrokerId(3)].into());
    assert_eq!(
        next.partition_epoch,
        PartitionEpoch(first.partition_epoch.0 + 1)
    );
}

#[test]
fn a_lagging_follower_is_proposed_out_and_an_unanswered_proposal_is_sent_again() {
    let cfg = page_cache();
    let mut leader = replica(&cfg, 1);
    // b2 never fetches: after replica_lag_max (30 ticks) it lags, and leaves on the tick after.
    assert!(sent(&leader.step(&cfg, Tick(30), Input::Tick)).is_empty());
    let effects = leader.step(&cfg, Tick(31), Input::Tick);
    let [Message::AlterPartition(first)] = sent(&effects)[..] else {
        panic!("a proposal: {effects:?}");
    };
    let first = first.clone();
    assert_eq!(first.new_isr, [BrokerId(1)].into());
    // Unanswered for alter_partition_timeout: the same proposal again.
    assert!(sent(&leader.step(&cfg, Tick(40), Input::Tick)).is_empty());
    let effects = leader.step(&cfg, Tick(41), Input::Tick);
    assert!(matches!(sent(&effects)[..], [Message::AlterPartition(again)] if *again == first));
}

/// Kafka's caught-up rule under steady writes: the LEO moves on every tick, so no fetch ever
/// reaches the LEO of its moment. A follower whose every fetch reaches the LEO of its previous
/// fetch (one round trip behind) stays in the ISR; one that falls two rounds behind lags out
/// after `replica_lag_max` as before.
#[test]
fn steady_writes_never_shrink_the_isr_of_a_follower_fetching_every_round() {
    let cfg = page_cache();
    for (rounds_behind, shrinks_at) in [(1, None), (2, Some(31))] {
        let mut leader = replica(&cfg, 1);
        let mut shrunk = None;
        for t in 1..=100u64 {
            write(&mut leader, &cfg, t, vec![t], Acks::Leader);
            let fetch_offset = t.saturating_sub(rounds_behind);
            leader.step(&cfg, Tick(t), fetch_from_b2(fetch_offset));
            let effects = leader.step(&cfg, Tick(t), Input::Tick);
            if shrunk.is_none()
                && matches!(&sent(&effects)[..], [Message::AlterPartition(a)] if a.new_isr == [BrokerId(1)].into())
            {
                shrunk = Some(t);
            }
        }
        assert_eq!(shrunk, shrinks_at, "{rounds_behind} rounds behind");
    }
}

/// The lag timer runs from the last Fetch that reached the leader's log end (or, by Kafka's
/// rule, the log end of the follower's previous fetch): a follower that fetches but stays behind
/// lags all the same, one that caught up starts a new interval.
#[test]
fn only_a_fetch_at_the_log_end_restarts_the_lag_timer() {
    let cfg = page_cache();
    for (fetch_offset, proposed_at) in [(0, 31), (1, 51)] {
        let mut leader = replica(&cfg, 1);
        write(&mut leader, &cfg, 1, vec![7], Acks::Leader);
        leader.step(&cfg, Tick(20), fetch_from_b2(fetch_offset));
        let proposal = |effects: &Effects<u64>| matches!(&sent(effects)[..], [Message::AlterPartition(a)] if a.new_isr == [BrokerId(1)].into());
        assert!(
            !proposal(&leader.step(&cfg, Tick(proposed_at - 1), Input::Tick)),
            "fetched at {fetch_offset}"
        );
        assert!(
            proposal(&leader.step(&cfg, Tick(proposed_at), Input::Tick)),
            "fetched at {fetch_offset}"
        );
    }
}

/// A Fetch beyond the leader's log end (a follower that has not reconciled) is refused with
/// OffsetOutOfRange, which sends the follower to reconcile, and counts nothing.
#[test]
fn a_fetch_beyond_the_log_end_is_out_of_range_and_not_counted() {
    let cfg = page_cache();
    let mut leader = replica(&cfg, 1);
    write(&mut leader, &cfg, 1, vec![7], Acks::Leader);
    let effects = leader.step(&cfg, Tick(0), fetch_from_b2(3));
    assert!(
        matches!(&sent(&effects)[..], [Message::FetchResponse(r)] if r.result == Err(EpochError::OffsetOutOfRange)),
        "{effects:?}"
    );
    assert_eq!(leader.high_watermark(), Offset(0));
}

#[test]
fn the_checkpoint_follows_the_durable_high_watermark_at_most_every_interval() {
    let cfg = Config {
        hw_checkpoint_interval: Tick(10),
        ..page_cache()
    };
    let checkpoints = |effects: &Effects<u64>| -> Vec<Offset> {
        effects
            .iter()
            .filter_map(|e| match e {
                Effect::CheckpointHighWatermark { offset, .. } => Some(*offset),
                _ => None,
            })
            .collect()
    };
    let mut leader = replica(&cfg, 1);
    write(&mut leader, &cfg, 1, vec![7, 8], Acks::Leader);
    leader.step(&cfg, Tick(1), fetch_from_b2(2));
    assert_eq!(leader.high_watermark(), Offset(2));
    // Not durable yet, and not due yet: no checkpoint.
    assert!(checkpoints(&leader.step(&cfg, Tick(5), Input::Tick)).is_empty());
    assert!(checkpoints(&flush(&mut leader, &cfg)).is_empty(), "not due");
    assert_eq!(
        checkpoints(&leader.step(&cfg, Tick(10), Input::Tick)),
        [Offset(2)]
    );
    assert_eq!(leader.hw_checkpoint(), Offset(2));
    // The interval runs from that checkpoint: a flush right after the next commit is not due.
    write(&mut leader, &cfg, 2, vec![9], Acks::Leader);
    leader.step(&cfg, Tick(11), fetch_from_b2(3));
    assert!(checkpoints(&flush(&mut leader, &cfg)).is_empty(), "not due");
    assert_eq!(
        checkpoints(&leader.step(&cfg, Tick(20), Input::Tick)),
        [Offset(3)]
    );
}

#[test]
fn fetch_answers_keep_to_the_byte_limit_but_carry_one_entry_at_least() {
    let cfg = Config {
        fetch_max_bytes: 2,
        ..page_cache()
    };
    let mut leader = replica(&cfg, 1);
    write(&mut leader, &cfg, 1, vec![1, 2, 3], Acks::Leader);
    let effects = leader.step(&cfg, Tick(0), fetch_from_b2(0));
    assert!(matches!(
        sent(&effects)[..],
        [Message::FetchResponse(FetchResponse { result: Ok(f), .. })] if f.entries.len() == 2
    ));
    let cfg = Config {
        fetch_max_bytes: 0,
        ..cfg
    };
    let effects = leader.step(&cfg, Tick(0), fetch_from_b2(0));
    assert!(matches!(
        sent(&effects)[..],
        [Message::FetchResponse(FetchResponse { result: Ok(f), .. })] if f.entries.len() == 1
    ));
}

fn cached_isr(r: &R) -> Vec<BrokerId> {
    r.leader_state()
        .expect("leads")
        .isr
        .iter()
        .copied()
        .collect()
}

#[test]
fn an_order_from_a_deposed_controller_is_ignored_once_its_successor_was_heard() {
    for cfg in with_and_without_controller_fencing() {
        let mut r = replica(&cfg, 1);
        // The successor's announcement: the same state, in controller epoch 2.
        r.step(&cfg, Tick(1), order(1, 1, 1, &[1, 2], 2));
        assert_eq!(r.controller_epoch(), ControllerEpoch(2));
        // The zombie's order drops b2 from the ISR at a newer partition epoch.
        r.step(&cfg, Tick(2), order(1, 1, 2, &[1], 1));
        let expected = if cfg.rules.controller_fencing {
            vec![BrokerId(1), BrokerId(2)]
        } else {
            vec![BrokerId(1)]
        };
        assert_eq!(
            cached_isr(&r),
            expected,
            "{:?}",
            cfg.rules.unsafe_switches()
        );
    }
}

/// A follower keeps no ISR: with controller fencing, an ISR change of the term it follows in
/// changes nothing of it, not even the partition epoch it notes, and the order is dead for it
/// (a driver may discard it). A new term's order still takes effect. Without fencing a zombie
/// may name another leader in the same epoch, so the follower notes the partition epoch, and
/// an older order of its term is then stale.
#[test]
fn a_follower_takes_no_note_of_an_isr_change_in_its_term_under_controller_fencing() {
    for cfg in with_and_without_controller_fencing() {
        let mut r = replica(&cfg, 2);
        let fenced = cfg.rules.controller_fencing;
        let shrink = order(1, 1, 2, &[1], 1);
        assert_eq!(dead(&r, &cfg, &shrink), fenced);
        let before = r.clone();
        let effects = r.step(&cfg, Tick(0), shrink);
        assert!(effects.is_empty(), "{effects:?}");
        if fenced {
            assert_eq!(r, before);
        } else {
            assert_eq!(r.partition_epoch(), PartitionEpoch(2));
            assert!(
                dead(&r, &cfg, &order(1, 1, 1, &[1, 2], 1)),
                "older than the one noted"
            );
        }
        // The next term's order: b2 now leads.
        r.step(&cfg, Tick(2), order(2, 2, 3, &[2], 1));
        assert!(r.is_leader());
        assert_eq!(r.partition_epoch(), PartitionEpoch(3));
    }
}

#[test]
fn a_proposal_survives_a_deposed_controllers_answers() {
    let cfg = Config::default();
    let mut r = replica(&cfg, 1);
    r.step(&cfg, Tick(1), order(1, 1, 1, &[1, 2], 2));
    let effects = r.step(&cfg, Tick(1), Input::Timeout(Timer::Lag(BrokerId(2))));
    let [Message::AlterPartition(req)] = sent(&effects)[..] else {
        panic!("an AlterPartition: {effects:?}");
    };
    let req = req.clone();
    assert_eq!(req.controller_epoch, ControllerEpoch(2));
    let refused_by = |controller, error| refusal(&req, controller, error);
    let pending = |r: &R| r.leader_state().expect("leads").proposed_isr.clone();
    // The zombie (controller 1) refuses; the leader heard controller 2, so it ignores it,
    // whether the zombie judged on its stale view or saw it is deposed (NOT_CONTROLLER).
    let not_controller = AlterPartitionError::NotController {
        request: ControllerEpoch(2),
        current: ControllerEpoch(1),
    };
    for error in [AlterPartitionError::NotLeader, not_controller] {
        r.step(&cfg, Tick(1), refused_by(1, error));
        assert_eq!(pending(&r), Some(req.new_isr.clone()));
    }
    // The current controller's NOT_LEADER keeps it pending too: a duplicate of a proposal it
    // accepted is refused so once the leader is fenced, so the controller may hold the
    // proposed ISR, and the HW stays over the maximal ISR until the LeaderAndIsr that follows
    // says which. Only the next request waits for it.
    r.step(&cfg, Tick(1), refused_by(2, AlterPartitionError::NotLeader));
    assert_eq!(pending(&r), Some(req.new_isr.clone()));
    assert!(r.leader_state().expect("leads").proposal_sent.is_none());
}

#[test]
fn reconciliation_asks_at_once_and_truncates_where_the_logs_part() {
    let cfg = page_cache();
    let mut r = Replica::new(BrokerId(2), PartitionId(0), MemLog::default());
    r.step(&cfg, Tick(0), order(2, 1, 1, &[1, 2], 1));
    write(&mut r, &cfg, 1, vec![7, 8], Acks::Leader);
    // b1 leads epoch 2: b2 asks where epoch 1 ends, at once.
    let effects = r.step(&cfg, Tick(0), order(1, 2, 2, &[1, 2], 1));
    assert!(matches!(
        sent(&effects)[..],
        [Message::OffsetForLeaderEpoch(_)]
    ));
    let answer = epoch_end_from_b1(2, 1, Some((LeaderEpoch(1), Offset(1))));
    let effects = r.step(&cfg, Tick(0), answer);
    assert_eq!(r.log_end_offset(), Offset(1));
    assert!(effects.contains(&Effect::Truncated {
        partition: PartitionId(0),
        from: Offset(2),
        to: Offset(1)
    }));
    assert!(matches!(sent(&effects)[..], [Message::Fetch(f)] if f.fetch_offset == Offset(1)));
}

/// One request out at a time: a follower told of a new epoch by the leader it already follows,
/// while its Fetch is out, sends nothing new; the answer to that Fetch, which it can no longer
/// use, sends the next request. Sending at once (two mutants of `become_follower`'s guard)
/// passed every other test and the suite: an extra request breaks no safety property.
#[test]
fn a_follower_told_of_a_new_epoch_waits_for_the_answer_to_its_request_out() {
    let cfg = page_cache();
    let mut r = replica(&cfg, 2);
    let effects = r.step(&cfg, Tick(0), order(1, 2, 2, &[1, 2], 1));
    assert!(
        sent(&effects).is_empty(),
        "its Fetch of epoch 1 is still out"
    );
    let answer = records_from_b1(1, 0, Vec::new());
    assert!(!dead(&r, &cfg, &answer), "the answer it waits for");
    let effects = r.step(&cfg, Tick(0), answer);
    assert!(sends_one_fetch_in(&effects, 2), "{effects:?}");
}

/// A follower that followed another broker in between and came back sent afresh: the answer to
/// the request it sent this leader in the earlier term is not the answer to its request out, so
/// it sends nothing more, and the answer is dead for it (a driver may discard it). An answer of
/// the term of its request out that it cannot use (a duplicate) still sends the next.
#[test]
fn an_answer_from_before_the_request_out_sends_nothing() {
    let cfg = page_cache();
    let over = |leader, epoch| order_over(&[1, 2, 3], leader, epoch, epoch, &[1, 2, 3], 1);
    let mut r = R::new(BrokerId(2), PartitionId(0), MemLog::default());
    for (leader, epoch) in [(1, 1), (3, 2), (1, 3)] {
        let effects = r.step(&cfg, Tick(0), over(leader, epoch));
        assert!(
            sends_one_fetch_in(&effects, epoch),
            "a fresh request to b{leader} in epoch {epoch}: {effects:?}"
        );
    }
    let old = records_from_b1(1, 0, Vec::new());
    assert!(dead(&r, &cfg, &old));
    assert!(dead(&r, &cfg, &epoch_end_from_b1(1, 1, None)));
    assert!(!dead(&r, &cfg, &epoch_end_from_b1(3, 1, None)));
    assert!(r.step(&cfg, Tick(0), old).is_empty());
    let duplicate = r.step(&cfg, Tick(0), records_from_b1(3, 5, Vec::new()));
    assert!(sends_one_fetch_in(&duplicate, 3), "{duplicate:?}");
}

/// An epoch error answer is dead for a follower whatever its state: it only retries, on its
/// timer. An OffsetOutOfRange answer from its leader is not: it restarts reconciliation.
#[test]
fn an_epoch_error_answer_is_dead_and_an_out_of_range_one_is_not() {
    let cfg = page_cache();
    let r = replica(&cfg, 2);
    let answer = |error| Input::Message {
        from: Node::Broker(BrokerId(1)),
        message: Message::FetchResponse(FetchResponse {
            partition: PartitionId(0),
            leader_epoch: LeaderEpoch(1),
            fetch_offset: Offset(0),
            result: Err(error),
            log_start_offset: Offset(0),
            first_boundary: Offset(0),
        }),
    };
    assert!(dead(&r, &cfg, &answer(EpochError::FencedLeaderEpoch)));
    assert!(dead(&r, &cfg, &answer(EpochError::NotLeader)));
    assert!(!dead(&r, &cfg, &answer(EpochError::OffsetOutOfRange)));
}

/// An answer of a replica's own epoch from a broker it does not follow in that epoch is dead:
/// an epoch has one leader, so it can follow that broker only in a later one. Not so for a
/// replica that follows nobody: it may have restarted, and its registration may make it
/// follow that broker in this very epoch. Requests of that epoch are dead for it either way:
/// it never leads it.
#[test]
fn answers_from_a_broker_not_followed_in_the_epoch_are_dead_unless_restarted() {
    let cfg = page_cache();
    let mut r = replica(&cfg, 2);
    let entry = Entry {
        epoch: LeaderEpoch(1),
        record: 7,
        producer: None,
    };
    r.step(&cfg, Tick(0), records_from_b1(1, 0, vec![entry]));
    r.step(&cfg, Tick(0), Input::Stop { clean: true });
    r.step(&cfg, Tick(0), Input::Restart);
    assert_eq!(r.leader_epoch(), LeaderEpoch(1));
    assert!(
        !dead(&r, &cfg, &records_from_b1(1, 1, Vec::new())),
        "restarted"
    );
    assert!(
        dead(&r, &cfg, &fetch_from(3, 1, 3, 0)),
        "never leads epoch 1"
    );
    r.step(
        &cfg,
        Tick(0),
        order_over(&[1, 2, 3], 3, 2, 2, &[1, 2, 3], 1),
    );
    assert!(
        dead(&r, &cfg, &records_from_b1(2, 1, Vec::new())),
        "follows b3"
    );
}

/// A leader that the controller elects again in a new epoch without having stepped down (its
/// session expired, and its re-registration elected it) starts the new term as any new leader
/// does: its epoch starts at its LEO (rule 6 reads that), what it learned of its followers in
/// the old term is forgotten (rule 5 counts only fetches of the current epoch), and the writes
/// it held are refused. Keeping the old term's leader state passed every other test and the
/// suite, whose presets with session expiries are bug presets.
#[test]
fn a_leader_elected_again_in_a_new_epoch_starts_its_term_afresh() {
    let cfg = page_cache();
    let mut r = replica(&cfg, 1);
    write(&mut r, &cfg, 1, vec![7], Acks::Leader);
    r.step(&cfg, Tick(0), fetch_from_b2(1));
    let held = write(&mut r, &cfg, 2, vec![8], Acks::All);
    assert!(
        acknowledged(&held).is_empty(),
        "b2 has not fetched offset 1 yet"
    );
    let effects = r.step(&cfg, Tick(0), order(1, 2, 2, &[1, 2], 1));
    assert!(effects.contains(&Effect::FailWrite {
        partition: PartitionId(0),
        id: 2,
        error: WriteError::NotLeader,
    }));
    let l = r.leader_state().expect("b1 still leads");
    assert_eq!(l.epoch_start_offset, Offset(2));
    assert_eq!(l.followers[&BrokerId(2)].log_end_offset, None);
}

/// A leader's term is settled once its HW reaches the start of its epoch: until then a record
/// its predecessor committed may lie above its HW (here offset 1, which b2 holds too), and a
/// group coordinator loading the offsets acknowledged before it would miss it. A follower is
/// never settled.
#[test]
fn a_new_leaders_term_is_settled_once_its_high_watermark_reaches_the_epoch_start() {
    let cfg = page_cache();
    let mut r = replica(&cfg, 1);
    assert!(
        r.has_high_watermark_reached_current_epoch(),
        "an empty log: the epoch starts at 0"
    );
    write(&mut r, &cfg, 1, vec![7, 8], Acks::Leader);
    r.step(&cfg, Tick(0), fetch_from_b2(1));
    assert_eq!(r.high_watermark(), Offset(1));
    assert!(
        r.has_high_watermark_reached_current_epoch(),
        "its own records above the HW are not its predecessor's"
    );
    r.step(&cfg, Tick(0), order(1, 2, 2, &[1, 2], 1));
    assert!(
        !r.has_high_watermark_reached_current_epoch(),
        "epoch 2 starts at 2, the HW is 1"
    );
    r.step(&cfg, Tick(0), fetch_from_b2_in(2, 2, 2));
    assert_eq!(r.high_watermark(), Offset(2));
    assert!(r.has_high_watermark_reached_current_epoch());
    assert!(
        !replica(&cfg, 2).has_high_watermark_reached_current_epoch(),
        "a follower"
    );
}

/// What a replica reports of where it stands, which drivers read (the runtime's metadata and
/// logs, a model's renaming): the partition it replicates, and the epochs of the order it acts
/// on. A restart forgets the epochs, since the controller tells them again. Nothing in the core
/// reads these accessors back, so only a test of them fails when they lie.
#[test]
fn a_replica_reports_the_partition_and_the_epochs_it_acts_on_until_it_restarts() {
    let cfg = Config::default();
    let other = R::new(BrokerId(2), PartitionId(5), MemLog::default());
    assert_eq!(other.partition(), PartitionId(5));
    let mut r = replica(&cfg, 2);
    r.step(&cfg, Tick(0), order(1, 2, 4, &[1, 2], 3));
    assert_eq!(r.partition(), PartitionId(0));
    assert_eq!(r.leader_epoch(), LeaderEpoch(2));
    assert_eq!(r.partition_epoch(), PartitionEpoch(4));
    assert_eq!(r.broker_epoch(), BrokerEpoch(1));
    assert_eq!(r.controller_epoch(), ControllerEpoch(3));
    r.step(&cfg, Tick(0), Input::Stop { clean: true });
    r.step(&cfg, Tick(0), Input::Restart);
    assert_eq!(r.partition_epoch(), PartitionEpoch(0));
    assert_eq!(r.broker_epoch(), BrokerEpoch(0));
    assert_eq!(r.controller_epoch(), ControllerEpoch(0));
}

/// The drivers' debug check of a replica reports what it finds broken: a replica whose high
/// watermark is above its log end (which no input can make) is not consistent.
#[test]
fn the_local_check_reports_a_high_watermark_above_the_log_end() {
    let cfg = Config::default();
    let mut r = replica(&cfg, 2);
    assert_eq!(r.check_local(), Ok(()));
    r.high_watermark = Offset(1);
    assert!(
        matches!(r.check_local(), Err(crate::invariants::Violation::Replica { replica, .. }) if replica == BrokerId(2)),
        "{:?}",
        r.check_local()
    );
}

/// A truncation below the high watermark checkpoint lowers the checkpoint at once: a restart
/// starts from it, and would count as committed whatever the log holds there next. A truncation
/// to the checkpoint leaves it, and writes nothing (a checkpoint also restarts the interval).
#[test]
fn a_truncation_below_the_checkpoint_lowers_it_and_one_to_it_writes_nothing() {
    let cfg = Config::default();
    let mut r = replica(&cfg, 2);
    let entry = |record| Entry {
        epoch: LeaderEpoch(1),
        record,
        producer: None,
    };
    r.log_mut().append(&[entry(7), entry(8), entry(9)]);
    r.high_watermark = Offset(2);
    r.hw_checkpoint = Offset(2);
    let written = |effects: &Effects<u64>| {
        effects
            .iter()
            .filter(|e| matches!(e, Effect::CheckpointHighWatermark { .. }))
            .count()
    };
    let mut effects = Vec::new();
    r.truncate_to(&cfg, Offset(2), &mut effects);
    assert_eq!((r.hw_checkpoint(), written(&effects)), (Offset(2), 0));
    let mut effects = Vec::new();
    r.truncate_to(&cfg, Offset(1), &mut effects);
    assert_eq!(r.hw_checkpoint(), Offset(1));
    assert!(effects.contains(&Effect::CheckpointHighWatermark {
        partition: PartitionId(0),
        offset: Offset(1)
    }));
}

/// KIP-279's rounds: an answer about an older epoch than the one asked for truncates to the end
/// of what both logs may share of it, and the follower asks again about its new latest epoch
/// until the answer is about that very epoch. One round would leave b2's record of epoch 1 under
/// b1's of epoch 2 at offset 0. A mutant that fetched after the first round passed every other
/// test and the suite: the divergence needs four leader epochs (one each for the epoch both
/// logs share, the leader's, the follower's, and the leader's current), and the presets stop
/// at three.
#[test]
fn reconciliation_asks_again_until_the_answer_is_about_the_epoch_asked_for() {
    let cfg = page_cache();
    let mut r = Replica::new(BrokerId(2), PartitionId(0), MemLog::default());
    r.step(&cfg, Tick(0), order(2, 1, 1, &[1, 2], 1));
    write(&mut r, &cfg, 1, vec![7], Acks::Leader);
    r.step(&cfg, Tick(0), order(2, 3, 2, &[2], 1));
    write(&mut r, &cfg, 2, vec![8], Acks::Leader);
    // b2 holds 0:e1 and 1:e3; b1, which holds 0:e2 only, leads epoch 4.
    let effects = r.step(&cfg, Tick(0), order(1, 4, 3, &[1], 1));
    assert!(matches!(
        sent(&effects)[..],
        [Message::OffsetForLeaderEpoch(q)] if q.requested_epoch == LeaderEpoch(3)
    ));
    let answer = |requested: u32, result| epoch_end_from_b1(4, requested, result);
    // b1's largest epoch up to 3 is 2, ending at 1; b2's own epochs up to 2 end at 1 too.
    let effects = r.step(&cfg, Tick(0), answer(3, Some((LeaderEpoch(2), Offset(1)))));
    assert_eq!(r.log_end_offset(), Offset(1));
    assert!(matches!(
        sent(&effects)[..],
        [Message::OffsetForLeaderEpoch(q)] if q.requested_epoch == LeaderEpoch(1)
    ));
    // b1 has nothing of epoch 1 or older: b2 keeps nothing, and fetches from the start.
    let effects = r.step(&cfg, Tick(0), answer(1, None));
    assert_eq!(r.log_end_offset(), Offset(0));
    assert!(matches!(sent(&effects)[..], [Message::Fetch(f)] if f.fetch_offset == Offset(0)));
}

/// A late refusal of the same ISR proposed at an earlier partition epoch is not about the
/// proposal pending now: it is ignored, and the proposal stays.
#[test]
fn a_refusal_of_an_earlier_version_of_the_same_proposal_is_ignored() {
    let cfg = page_cache();
    let mut leader = replica(&cfg, 1);
    let shrink = Input::Timeout(Timer::Lag(BrokerId(2)));
    let effects = leader.step(&cfg, Tick(0), shrink.clone());
    let [Message::AlterPartition(first)] = sent(&effects)[..] else {
        panic!("a proposal: {effects:?}");
    };
    let ineligible = AlterPartitionError::IneligibleReplicas([BrokerId(2)].into());
    let refused = refusal(first, 1, ineligible);
    leader.step(&cfg, Tick(0), refused.clone());
    assert_eq!(leader.leader_state().expect("leads").proposed_isr, None);
    // The partition moves to version 2 with the same ISR, and b2 lags again.
    leader.step(&cfg, Tick(0), order(1, 1, 2, &[1, 2], 1));
    let effects = leader.step(&cfg, Tick(0), shrink);
    assert!(
        matches!(sent(&effects)[..], [Message::AlterPartition(again)] if again.partition_epoch == PartitionEpoch(2) && again.new_isr == first.new_isr),
        "{effects:?}"
    );
    leader.step(&cfg, Tick(0), refused);
    assert_eq!(
        leader.leader_state().expect("leads").proposed_isr,
        Some([BrokerId(1)].into())
    );
}

/// Two followers lag at once: the tick that finds both proposes one of them out, and the
/// second lag timer, due in the same tick, waits for that proposal to settle (one change
/// pending at a time) instead of replacing it.
#[test]
fn two_followers_lagging_at_once_are_proposed_out_one_at_a_time() {
    let cfg = page_cache();
    let mut leader = R::new(BrokerId(1), PartitionId(0), MemLog::default());
    leader.step(
        &cfg,
        Tick(0),
        order_over(&[1, 2, 3], 1, 1, 1, &[1, 2, 3], 1),
    );
    let effects = leader.step(&cfg, Tick(31), Input::Tick);
    let proposals: Vec<_> = sent(&effects)
        .into_iter()
        .filter_map(|m| match m {
            Message::AlterPartition(a) => Some(a.new_isr.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        proposals,
        [[BrokerId(1), BrokerId(3)].into()],
        "{effects:?}"
    );
    assert_eq!(
        leader.leader_state().expect("leads").proposed_isr,
        Some([BrokerId(1), BrokerId(3)].into())
    );
}

/// Found by the random schedules (a 22-step counterexample under the safe rules): a proposal
/// built on a Fetch by a broker's old incarnation is refused INELIGIBLE_REPLICA; the new
/// incarnation's Fetch triggers a proposal of the same ISR on the same version, which the
/// controller accepts. A duplicate of the old refusal used to match the new proposal (answers
/// were matched by ISR and version only), cancel it, and let the HW rise over the smaller ISR
/// while the controller held the larger (StrongIsr). Answers echo the request's broker epochs.
#[test]
fn a_duplicated_refusal_cannot_cancel_a_newer_identical_proposal() {
    let cfg = page_cache();
    let mut leader = replica(&cfg, 1);
    leader.step(&cfg, Tick(0), Input::Timeout(Timer::Lag(BrokerId(2))));
    leader.step(&cfg, Tick(0), order(1, 1, 2, &[1], 1));
    let fetch_as = |epoch| fetch_from_b2_incarnation(epoch, 0);
    let proposal = |effects: &Effects<u64>| {
        let mut proposals = sent(effects).into_iter().filter_map(|m| match m {
            Message::AlterPartition(req) => Some(req.clone()),
            _ => None,
        });
        proposals
            .next()
            .unwrap_or_else(|| panic!("a proposal: {effects:?}"))
    };
    let refused = |req| {
        refusal(
            req,
            1,
            AlterPartitionError::IneligibleReplicas(BTreeSet::from([BrokerId(2)])),
        )
    };
    // A Fetch of b2's old incarnation (epoch 2) proposes b2 back; the controller refuses.
    let old = proposal(&leader.step(&cfg, Tick(0), fetch_as(2)));
    leader.step(&cfg, Tick(0), refused(&old));
    // The new incarnation (epoch 3) fetches: the same ISR, the same version, other epochs.
    let new = proposal(&leader.step(&cfg, Tick(0), fetch_as(3)));
    assert_eq!(
        (&new.new_isr, new.partition_epoch),
        (&old.new_isr, old.partition_epoch)
    );
    // A late duplicate of the old refusal must not cancel the new proposal.
    leader.step(&cfg, Tick(0), refused(&old));
    assert_eq!(
        leader.leader_state().expect("leads").proposed_isr,
        Some(new.new_isr.clone())
    );
}

#[test]
fn a_fetch_from_an_earlier_incarnation_of_the_follower_is_refused() {
    let cfg = page_cache();
    let mut leader = replica(&cfg, 1);
    write(&mut leader, &cfg, 1, vec![7, 8], Acks::Leader);
    // b2 restarted with an empty log and registered again (epoch 3), and fetches from 0; then
    // a Fetch its previous incarnation (epoch 2) sent before the crash arrives.
    leader.step(&cfg, Tick(0), fetch_from_b2_incarnation(3, 0));
    let stale = fetch_from_b2_incarnation(2, 2);
    assert!(
        dead(&leader, &cfg, &stale),
        "refused for the rest of the term"
    );
    let effects = leader.step(&cfg, Tick(0), stale);
    assert!(
        matches!(
            sent(&effects)[..],
            [Message::FetchResponse(FetchResponse {
                result: Err(EpochError::StaleBrokerEpoch),
                ..
            })]
        ),
        "{effects:?}"
    );
    // Counting it would credit b2 with records it lost, and commit them over an ISR where only
    // the leader holds them.
    assert_eq!(leader.high_watermark(), Offset(0));
    // The new incarnation's own fetches are not dead.
    assert!(!dead(&leader, &cfg, &fetch_from_b2_incarnation(3, 2)));
}

/// A log on a disk that fills up: once full, it takes nothing more, as the disk log does after
/// an ENOSPC.
#[derive(Clone, Debug, Default)]
struct FillingLog {
    records: MemLog<u64>,
    full: bool,
}

impl Log for FillingLog {
    type Record = u64;
    fn log_start_offset(&self) -> Offset {
        self.records.log_start_offset()
    }
    fn log_end_offset(&self) -> Offset {
        self.records.log_end_offset()
    }
    fn flushed_offset(&self) -> Offset {
        self.records.flushed_offset()
    }
    fn entry(&self, offset: Offset) -> Option<Entry<u64>> {
        self.records.entry(offset)
    }
    fn read(&self, from: Offset, until: Offset, max: usize) -> Vec<Entry<u64>> {
        self.records.read(from, until, max)
    }
    fn append(&mut self, entries: &[Entry<u64>]) {
        if !self.full {
            self.records.append(entries);
        }
    }
    fn truncate_to(&mut self, offset: Offset) {
        self.records.truncate_to(offset);
    }
    fn advance_log_start(&mut self, offset: Offset) {
        self.records.advance_log_start(offset);
    }
    fn flush(&mut self) {
        self.records.flush();
    }
    fn lose_unflushed(&mut self) {
        self.records.lose_unflushed();
    }
}

#[test]
fn a_write_the_log_did_not_take_is_refused_never_acknowledged() {
    // A leader alone in its ISR commits a write as soon as it holds it: the case where an
    // append that silently took nothing would be acknowledged at once.
    for (cfg, acks) in [
        (page_cache(), Acks::All),
        (page_cache(), Acks::Leader),
        (Config::default(), Acks::Leader),
    ] {
        let mut r = Replica::new(BrokerId(1), PartitionId(0), FillingLog::default());
        r.step(&cfg, Tick(0), order(1, 1, 1, &[1], 1));
        let write = |id| Input::Write {
            id,
            records: vec![7],
            acks,
            producer: None,
        };
        r.step(&cfg, Tick(0), write(1));
        r.log_mut().flush();
        let flushed = r.log().flushed_offset();
        r.step(&cfg, Tick(0), Input::Flushed(flushed));
        assert_eq!(
            r.high_watermark(),
            Offset(1),
            "{acks:?}: the first write is committed"
        );

        // Re-elected in epoch 2, b1's next write is the first of its epoch: an epoch cache
        // that recorded what the log did not take would start epoch 2 at an offset no entry
        // holds (`check_local` below).
        r.step(&cfg, Tick(0), order(1, 2, 2, &[1], 1));
        r.log_mut().full = true;
        let effects = r.step(&cfg, Tick(1), write(2));
        assert_eq!(
            effects,
            vec![Effect::FailWrite {
                partition: PartitionId(0),
                id: 2,
                error: WriteError::LogFailed,
            }],
            "{acks:?}"
        );
        assert_eq!(r.log_end_offset(), Offset(1));
        assert_eq!(r.check_local(), Ok(()));
    }
    // Rule 13 off: the end offset read from the log after the append that took nothing is the
    // base offset, at the high watermark, and the write is acknowledged at once.
    let mut cfg = page_cache();
    cfg.rules.append_check = false;
    let mut r = Replica::new(BrokerId(1), PartitionId(0), FillingLog::default());
    r.step(&cfg, Tick(0), order(1, 1, 1, &[1], 1));
    r.log_mut().full = true;
    let write = Input::Write {
        id: 3,
        records: vec![9],
        acks: Acks::All,
        producer: None,
    };
    assert_eq!(acknowledged(&r.step(&cfg, Tick(0), write)), vec![3]);
    assert_eq!(r.log_end_offset(), Offset(0), "acknowledged, held nowhere");
}
