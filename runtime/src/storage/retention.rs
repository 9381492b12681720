//! The retention policy: where a log may start, by the age and size of its segments (Kafka's
//! `retention.ms` and `retention.bytes`). Only whole segments go, oldest first, never the
//! active one; the core then moves the log start there, but never past the replica's high
//! watermark (rule 17, [`isr::ReplicaInput::Retain`]).

use super::segment::Segment;
use isr::Offset;
use isr_kafka::configs::LogRetention;

/// The first offset retention keeps in a log of `segments` (oldest first, the last one
/// active) at `now_ms`: the base of the first segment that neither rule deletes, or `None`
/// when both keep the oldest. A segment goes by time when its newest record is older than
/// `retention_ms` (a segment without timestamps never does), by size while the log without
/// it is still at least `retention_bytes`. As Kafka does, deletion stops at the first
/// segment that neither rule deletes.
pub fn retention_point(
    segments: &[&Segment],
    policy: &LogRetention,
    now_ms: i64,
) -> Option<Offset> {
    let spans: Vec<(u64, u64, Option<i64>)> = segments
        .iter()
        .map(|s| (s.base, s.size(), s.times.largest()))
        .collect();
    point(&spans, policy, now_ms)
}

/// [`retention_point`] over each segment's (base offset, size in bytes, largest timestamp).
fn point(spans: &[(u64, u64, Option<i64>)], policy: &LogRetention, now_ms: i64) -> Option<Offset> {
    let mut remaining: u64 = spans.iter().map(|&(_, size, _)| size).sum();
    let mut keep = None;
    // The active segment (the last) is never deleted: the next one's base is the point.
    for (i, &(_, size, largest)) in spans.iter().enumerate().take(spans.len().saturating_sub(1)) {
        let expired = policy.retention_ms >= 0
            && largest.is_some_and(|t| now_ms.saturating_sub(t) > policy.retention_ms);
        let oversized = u64::try_from(policy.retention_bytes)
            .is_ok_and(|limit| remaining.saturating_sub(size) >= limit);
        if !expired && !oversized {
            break;
        }
        remaining -= size;
        keep = Some(Offset(spans[i + 1].0));
    }
    keep
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(retention_ms: i64, retention_bytes: i64) -> LogRetention {
        LogRetention {
            retention_ms,
            retention_bytes,
            segment_bytes: 1 << 20,
            segment_ms: 1000,
            delete: true,
            compact: false,
            delete_retention_ms: 0,
            min_cleanable_dirty_ratio: 0.5,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            flush_ms: i64::MAX,
        }
    }

    /// Three closed segments and an active one: bases 0, 10, 20, 30; 100 bytes each; newest
    /// records at 1,000, 2,000, 3,000 and 4,000 ms.
    const LOG: &[(u64, u64, Option<i64>)] = &[
        (0, 100, Some(1000)),
        (10, 100, Some(2000)),
        (20, 100, Some(3000)),
        (30, 100, Some(4000)),
    ];

    #[test]
    fn time_deletes_the_expired_segments_but_never_the_active_one() {
        assert_eq!(point(LOG, &policy(500, -1), 2200), Some(Offset(10)));
        assert_eq!(point(LOG, &policy(500, -1), 3600), Some(Offset(30)));
        // Everything expired: the active segment stays.
        assert_eq!(point(LOG, &policy(500, -1), 99_000), Some(Offset(30)));
        assert_eq!(point(LOG, &policy(500, -1), 1200), None);
        assert_eq!(
            point(LOG, &policy(-1, -1), 99_000),
            None,
            "-1: never by time"
        );
    }

    #[test]
    fn size_deletes_the_oldest_while_what_is_left_is_large_enough() {
        assert_eq!(point(LOG, &policy(-1, 250), 0), Some(Offset(10)));
        assert_eq!(point(LOG, &policy(-1, 200), 0), Some(Offset(20)));
        assert_eq!(point(LOG, &policy(-1, 0), 0), Some(Offset(30)));
        assert_eq!(point(LOG, &policy(-1, 400), 0), None);
    }

    #[test]
    fn deletion_stops_at_the_first_segment_no_rule_deletes() {
        // The second segment holds a record newer than the third's: it keeps the third too.
        let log = &[
            (0, 100, Some(1000)),
            (10, 100, Some(9000)),
            (20, 100, Some(1000)),
            (30, 100, None),
        ];
        assert_eq!(point(log, &policy(500, -1), 5000), Some(Offset(10)));
        // A segment without timestamps is not deleted by time.
        let untimed = &[(0, 100, None), (10, 100, None)];
        assert_eq!(point(untimed, &policy(0, -1), 5000), None);
        assert_eq!(point(&[], &policy(0, 0), 5000), None);
    }
}
