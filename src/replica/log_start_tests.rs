//! The log start offset at one replica: DeleteRecords, retention, and a follower taking its
//! leader's log start from Fetch answers (rule 17).

use super::*;
use crate::message::FetchedRecords;

/// b1, leading epoch 1 alone in its ISR, with `n` committed records.
fn leader_with(cfg: &Config, n: u64) -> R {
    let mut r = Replica::new(BrokerId(1), PartitionId(0), MemLog::default());
    r.step(cfg, Tick(0), order(1, 1, 1, &[1], 1));
    write(&mut r, cfg, 1, (0..n).collect(), Acks::All);
    assert_eq!(
        r.high_watermark(),
        Offset(n),
        "alone in its ISR, it commits at once"
    );
    r
}

fn deleted(effects: &Effects<u64>) -> Option<Result<Offset, ReadError>> {
    effects.iter().find_map(|e| match e {
        Effect::RecordsDeleted { result, .. } => Some(*result),
        _ => None,
    })
}

#[test]
fn delete_records_moves_the_log_start_up_to_the_high_watermark_and_no_further() {
    let cfg = page_cache();
    let mut r = leader_with(&cfg, 3);
    let delete = |r: &mut R, before| {
        r.step(
            &cfg,
            Tick(1),
            Input::DeleteRecords {
                id: 7,
                before: Offset(before),
            },
        )
    };
    assert_eq!(
        deleted(&delete(&mut r, 4)),
        Some(Err(ReadError::OffsetOutOfRange))
    );
    assert_eq!(
        r.log().log_start_offset(),
        Offset(0),
        "refused: nothing deleted"
    );
    assert_eq!(deleted(&delete(&mut r, 2)), Some(Ok(Offset(2))));
    assert_eq!(r.log().log_start_offset(), Offset(2));
    assert_eq!(r.entry(Offset(1)), None);
    assert_eq!(r.epoch_cache().entries(), &[(LeaderEpoch(1), Offset(2))]);
    // At or below the log start, nothing moves, and the answer says where it is.
    assert_eq!(deleted(&delete(&mut r, 1)), Some(Ok(Offset(2))));
    // A consumer below it is refused.
    let read = r.step(
        &cfg,
        Tick(1),
        Input::Read {
            id: 1,
            from: Offset(1),
            max_entries: 9,
            max_bytes: 9,
        },
    );
    assert!(matches!(
        &read[..],
        [Effect::Read {
            result: Err(ReadError::OffsetOutOfRange),
            ..
        }]
    ));
    r.check_local().expect("consistent");

    // Rule 17 off: up to the LEO, past the high watermark.
    let unsafe_cfg = with_rules(Rules {
        flush: FlushPolicy::PageCache,
        log_start_within_hw: false,
        ..Rules::default()
    });
    let mut r = leader_with(&unsafe_cfg, 3);
    write(&mut r, &unsafe_cfg, 2, vec![9], Acks::All);
    let past = r.step(
        &unsafe_cfg,
        Tick(1),
        Input::DeleteRecords {
            id: 8,
            before: Offset(4),
        },
    );
    assert_eq!(deleted(&past), Some(Ok(Offset(4))));
}

#[test]
fn retention_stops_at_the_high_watermark_and_a_follower_is_refused_delete_records() {
    let cfg = page_cache();
    let mut r = leader_with(&cfg, 3);
    r.step(&cfg, Tick(1), Input::Retain { before: Offset(9) });
    assert_eq!(r.log().log_start_offset(), Offset(3), "capped at the HW");

    let mut f = Replica::new(BrokerId(2), PartitionId(0), MemLog::default());
    f.step(&cfg, Tick(0), order(1, 1, 1, &[1, 2], 1));
    let refused = f.step(
        &cfg,
        Tick(1),
        Input::DeleteRecords {
            id: 1,
            before: Offset(0),
        },
    );
    assert_eq!(deleted(&refused), Some(Err(ReadError::NotLeader)));
}

/// b1's answer to b2's Fetch at `fetch_offset`.
fn answer(
    fetch_offset: u64,
    result: Result<FetchedRecords<u64>, EpochError>,
    log_start: u64,
) -> Input<u64> {
    Input::Message {
        from: Node::Broker(BrokerId(1)),
        message: Message::FetchResponse(FetchResponse {
            partition: PartitionId(0),
            leader_epoch: LeaderEpoch(1),
            fetch_offset: Offset(fetch_offset),
            result,
            log_start_offset: Offset(log_start),
            first_boundary: Offset(log_start),
        }),
    }
}

fn fetches_from(effects: &Effects<u64>) -> Vec<Offset> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Send(env) => match &env.message {
                Message::Fetch(FetchRequest { fetch_offset, .. }) => Some(*fetch_offset),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

#[test]
fn a_follower_follows_its_leaders_log_start_up_to_its_own_high_watermark() {
    let cfg = page_cache();
    let mut f = Replica::new(BrokerId(2), PartitionId(0), MemLog::default());
    f.step(&cfg, Tick(0), order(1, 1, 1, &[1, 2], 1));
    let entries = (0..4).map(|v| Entry::new(LeaderEpoch(1), v)).collect();
    let fetched = FetchedRecords {
        entries,
        high_watermark: Offset(2),
    };
    f.step(&cfg, Tick(1), answer(0, Ok(fetched), 3));
    assert_eq!(f.high_watermark(), Offset(2));
    assert_eq!(
        f.log().log_start_offset(),
        Offset(2),
        "the leader's 3, capped at its own HW"
    );
    // A later answer with an older HW (a held Fetch's) leaves the HW at the log start.
    let stale = FetchedRecords {
        entries: Vec::new(),
        high_watermark: Offset(1),
    };
    f.step(&cfg, Tick(2), answer(4, Ok(stale), 2));
    assert_eq!(f.high_watermark(), Offset(2));
    f.check_local().expect("consistent");
}

#[test]
fn a_follower_below_its_leaders_log_start_starts_afresh_there() {
    let cfg = page_cache();
    let mut f = Replica::new(BrokerId(2), PartitionId(0), MemLog::default());
    f.step(&cfg, Tick(0), order(1, 1, 1, &[1], 1));
    let effects = f.step(
        &cfg,
        Tick(1),
        answer(0, Err(EpochError::OffsetOutOfRange), 5),
    );
    assert_eq!(f.log().log_start_offset(), Offset(5));
    assert_eq!(f.log_end_offset(), Offset(5));
    assert_eq!(
        f.high_watermark(),
        Offset(5),
        "what lies below is committed"
    );
    assert_eq!(
        fetches_from(&effects),
        vec![Offset(5)],
        "it fetches on from there"
    );
    f.check_local().expect("consistent");
}

/// `input` for a replica of the models' records (`u8`, which have keys): the orders and Fetches
/// these tests send carry no records.
fn keyed(input: Input<u64>) -> Input<u8> {
    match input {
        Input::Message {
            from,
            message: Message::LeaderAndIsr(order),
        } => Input::Message {
            from,
            message: Message::LeaderAndIsr(order),
        },
        Input::Message {
            from,
            message: Message::Fetch(fetch),
        } => Input::Message {
            from,
            message: Message::Fetch(fetch),
        },
        other => panic!("not an order or a Fetch: {other:?}"),
    }
}

/// Compaction at a leader whose HW is 2 over records 1, 2, 3, 4 at offsets 0 to 3 (records
/// `2k - 1` and `2k` share key `k`): only record 1 goes, since record 4, which supersedes
/// record 3, is not committed (rule 18); with the rule off both go. Offsets and epochs stay.
#[test]
fn compaction_removes_only_what_a_committed_record_supersedes() {
    let run = |rules: Rules| {
        let cfg = with_rules(Rules {
            flush: FlushPolicy::PageCache,
            ..rules
        });
        let mut r = Replica::new(BrokerId(1), PartitionId(0), MemLog::<u8>::default());
        r.step(&cfg, Tick(0), keyed(order(1, 1, 1, &[1, 2], 1)));
        let write = Input::Write {
            id: 1,
            records: vec![1, 2, 3, 4],
            acks: Acks::All,
            producer: None,
        };
        r.step(&cfg, Tick(0), write);
        r.step(&cfg, Tick(0), keyed(fetch_from_b2(2)));
        assert_eq!(r.high_watermark(), Offset(2));
        r.step(&cfg, Tick(1), Input::Compact);
        assert_eq!(r.log_end_offset(), Offset(4), "offsets stay");
        r.log()
            .entries()
            .map(|e| (e.epoch.0, e.record))
            .collect::<Vec<_>>()
    };
    let gap = |record: u8| <MemLog<u8> as Log>::cleaned(&record);
    assert_eq!(
        run(Rules::default()),
        vec![(1, gap(1)), (1, 2), (1, 3), (1, 4)]
    );
    assert_eq!(
        run(Rules {
            compact_within_hw: false,
            ..Rules::default()
        }),
        vec![(1, gap(1)), (1, 2), (1, gap(3)), (1, 4)]
    );
    assert!(crate::log::is_gap::<MemLog<u8>>(&gap(1)));
    assert!(!crate::log::is_gap::<MemLog<u8>>(&1));
}
