//! The consumer group's properties (spec/properties.md): pure functions over what a driver
//! saw of a group — the records its members processed, where they would resume, the commits
//! acknowledged to them, and the records of its offsets partition.

use super::Violation;
use crate::log::{Entry, Log};
use crate::types::{BrokerId, Offset};
use std::collections::BTreeSet;

/// What a record of a group's offsets partition says, as far as the properties care.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OffsetsRecord {
    /// An offset commit made in `generation`.
    Commit {
        /// The committing member's generation.
        generation: i32,
    },
    /// The group's membership in `generation`, stored before any member learns its
    /// assignment.
    Group {
        /// The generation stored.
        generation: i32,
    },
}

/// **ConsumerResumesWithoutLoss** (the seed's guarantee): wherever the group would resume —
/// a member's position in the partition it owns, the position its coordinator would hand the
/// partition's next owner — every committed record below it was processed by some member, so
/// a crash, a rebalance or a coordinator failover skips nothing. Records below `deleted_below`
/// (the partition's log start: DeleteRecords or retention took them, rule 17) are not the
/// group's to lose: a member below the log start resumes there, as Kafka's consumers do with
/// `auto.offset.reset=earliest`. A member that read the gap compaction left of a record counts
/// as having processed it: a later committed record of its key supersedes it
/// (**CleanedRecordsAreSuperseded**), and the member reads that one in turn.
pub fn consumer_resumes_without_loss<L: Log>(
    committed: &BTreeSet<(Offset, Entry<L::Record>)>,
    processed: &BTreeSet<(Offset, Entry<L::Record>)>,
    resume_points: impl IntoIterator<Item = Offset>,
    deleted_below: Offset,
) -> Result<(), Violation>
where
    L::Record: Ord,
{
    let Some(furthest) = resume_points.into_iter().max() else {
        return Ok(());
    };
    let read = |(offset, entry): &(Offset, Entry<L::Record>)| {
        processed.contains(&(*offset, entry.clone()))
            || processed.contains(&(*offset, super::cleaned::<L>(entry)))
    };
    match committed
        .iter()
        .find(|record| record.0 >= deleted_below && record.0 < furthest && !read(record))
    {
        Some((offset, _)) => Err(Violation::SkippedRecord {
            offset: *offset,
            resume: furthest,
        }),
        None => Ok(()),
    }
}

/// **AcknowledgedCommitsSurvive**: the position the group's coordinator holds is never behind
/// the last commit acknowledged to a consumer — no coordinator failover loses or moves back an
/// acknowledged commit. `coordinator` is the serving coordinator with its position, if one
/// serves.
pub fn acknowledged_commits_survive(
    acknowledged: Option<Offset>,
    coordinator: Option<(BrokerId, Option<Offset>)>,
) -> Result<(), Violation> {
    match (acknowledged, coordinator) {
        (Some(acked), Some((broker, held))) if held.is_none_or(|h| h < acked) => {
            Err(Violation::CommitMovedBack {
                coordinator: broker,
                held,
                acknowledged: acked,
            })
        }
        _ => Ok(()),
    }
}

/// **FencedMembersCannotCommit**: no replica of the offsets partition holds a commit of a
/// generation older than one stored before it — a member the group has moved past cannot
/// commit over its successors. `records` are the replica's, in offset order.
pub fn fenced_members_cannot_commit(
    replica: BrokerId,
    records: impl IntoIterator<Item = (Offset, OffsetsRecord)>,
) -> Result<(), Violation> {
    let mut stored = None;
    for (offset, record) in records {
        match record {
            OffsetsRecord::Group { generation } => stored = Some(generation),
            OffsetsRecord::Commit { generation } => {
                if let Some(group) = stored.filter(|&g| generation < g) {
                    return Err(Violation::FencedCommit {
                        replica,
                        offset,
                        generation,
                        group,
                    });
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::MemLog;
    use crate::types::LeaderEpoch;

    fn at(offset: u64, record: u8) -> (Offset, Entry<u8>) {
        let entry = Entry {
            epoch: LeaderEpoch(1),
            record,
            producer: None,
        };
        (Offset(offset), entry)
    }

    #[test]
    fn a_member_that_read_a_records_gap_processed_it() {
        let committed: BTreeSet<_> = [at(0, 1), at(1, 2)].into();
        let gap = <MemLog<u8> as Log>::cleaned(&1);
        let processed: BTreeSet<_> = [at(0, gap), at(1, 2)].into();
        assert_eq!(
            consumer_resumes_without_loss::<MemLog<u8>>(
                &committed,
                &processed,
                [Offset(2)],
                Offset(0)
            ),
            Ok(())
        );
        let other_gap: BTreeSet<_> = [at(0, <MemLog<u8> as Log>::cleaned(&3)), at(1, 2)].into();
        assert!(
            consumer_resumes_without_loss::<MemLog<u8>>(
                &committed,
                &other_gap,
                [Offset(2)],
                Offset(0)
            )
            .is_err(),
            "the gap of another record is not this one's"
        );
    }

    #[test]
    fn a_resume_point_past_an_unprocessed_committed_record_is_a_loss() {
        let committed: BTreeSet<_> = [at(0, 1), at(1, 2)].into();
        let processed: BTreeSet<_> = [at(0, 1)].into();
        let start = Offset(0);
        assert_eq!(
            consumer_resumes_without_loss::<MemLog<u8>>(&committed, &processed, [Offset(1)], start),
            Ok(())
        );
        assert_eq!(
            consumer_resumes_without_loss::<MemLog<u8>>(
                &committed,
                &processed,
                [Offset(1), Offset(2)],
                start
            ),
            Err(Violation::SkippedRecord {
                offset: Offset(1),
                resume: Offset(2)
            })
        );
        // A record processed at the same offset is another record if it differs (a read
        // above the HW, since truncated): the committed one was not processed.
        let other: BTreeSet<_> = [at(0, 1), at(1, 9)].into();
        assert!(consumer_resumes_without_loss::<MemLog<u8>>(
            &committed,
            &other,
            [Offset(2)],
            start
        )
        .is_err());
    }

    #[test]
    fn a_record_deleted_before_anyone_processed_it_is_not_a_loss_but_one_above_the_log_start_is() {
        let committed: BTreeSet<_> = [at(0, 1), at(1, 2), at(2, 3)].into();
        let processed: BTreeSet<_> = [at(1, 2)].into();
        // DeleteRecords took offset 0; the member reset to 1 and processed it.
        assert_eq!(
            consumer_resumes_without_loss::<MemLog<u8>>(
                &committed,
                &processed,
                [Offset(2)],
                Offset(1)
            ),
            Ok(())
        );
        // Not deleted, offset 0 was skipped.
        assert!(consumer_resumes_without_loss::<MemLog<u8>>(
            &committed,
            &processed,
            [Offset(2)],
            Offset(0)
        )
        .is_err());
        // Deleted up to 1 only: offset 2, unprocessed, below the resume point 3, is a loss.
        assert!(consumer_resumes_without_loss::<MemLog<u8>>(
            &committed,
            &processed,
            [Offset(3)],
            Offset(1)
        )
        .is_err());
    }

    #[test]
    fn a_coordinator_behind_an_acknowledged_commit_breaks_it() {
        let b = BrokerId(1);
        assert_eq!(
            acknowledged_commits_survive(Some(Offset(2)), Some((b, Some(Offset(2))))),
            Ok(())
        );
        assert_eq!(acknowledged_commits_survive(Some(Offset(2)), None), Ok(()));
        assert_eq!(acknowledged_commits_survive(None, Some((b, None))), Ok(()));
        assert!(acknowledged_commits_survive(Some(Offset(2)), Some((b, Some(Offset(1))))).is_err());
        assert!(acknowledged_commits_survive(Some(Offset(1)), Some((b, None))).is_err());
    }

    #[test]
    fn a_commit_of_an_older_generation_after_a_newer_one_is_stored_is_fenced() {
        use OffsetsRecord::*;
        let b = BrokerId(0);
        let fine = [
            Group { generation: 1 },
            Commit { generation: 1 },
            Group { generation: 2 },
            Commit { generation: 2 },
        ];
        let numbered = |r: &[OffsetsRecord]| {
            r.iter()
                .enumerate()
                .map(|(o, r)| (Offset(o as u64), *r))
                .collect::<Vec<_>>()
        };
        assert_eq!(fenced_members_cannot_commit(b, numbered(&fine)), Ok(()));
        let zombie = [
            Group { generation: 1 },
            Group { generation: 2 },
            Commit { generation: 1 },
        ];
        assert_eq!(
            fenced_members_cannot_commit(b, numbered(&zombie)),
            Err(Violation::FencedCommit {
                replica: b,
                offset: Offset(2),
                generation: 1,
                group: 2
            })
        );
    }
}
