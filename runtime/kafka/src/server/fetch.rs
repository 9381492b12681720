//! Fetch and ListOffsets: reading committed data; DeleteRecords: moving where it starts.

use super::{codes, topic_ids};
use crate::backend::{Backend, BackendError, FetchedData, ListedOffset, OffsetSpec};
use bytes::BytesMut;
use isr::Offset;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{
    DeleteRecordsRequest, DeleteRecordsResponse, FetchRequest, FetchResponse, ListOffsetsRequest,
    ListOffsetsResponse,
};
use std::time::Duration;
use tokio::time::Instant;

/// Longest wait honoured, whatever the client asks: a connection's later requests queue
/// behind a waiting fetch.
const MAX_WAIT: Duration = Duration::from_secs(10);
/// ListOffsets timestamps with a special meaning.
const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
/// KIP-734 (v7): the record with the largest timestamp.
const MAX_TIMESTAMP: i64 = -3;
/// KIP-405 (v8): the first offset in local storage; without tiered storage, the log start.
const EARLIEST_LOCAL: i64 = -4;
/// KIP-1005 (v9): the last offset in tiered storage; without it, none (Kafka answers -1).
const LATEST_TIERED: i64 = -5;
/// Fetch v13 (KIP-516) names each topic by its id instead of its name, in requests and answers.
const TOPICS_BY_ID: i16 = 13;

fn to_i64(o: Offset) -> i64 {
    i64::try_from(o.0).unwrap_or(i64::MAX)
}

/// The name of each requested topic, in request order: as named before v13; from v13 the
/// topic its id names (UNKNOWN_TOPIC_ID if none), looked up once per request rather than on
/// every pass of a waiting fetch.
async fn names<B: Backend>(
    backend: &B,
    request: &FetchRequest,
    version: i16,
) -> Vec<Result<String, BackendError>> {
    let mut names = Vec::with_capacity(request.topics.len());
    for topic in &request.topics {
        names.push(match version >= TOPICS_BY_ID {
            true => topic_ids::name_of(backend, topic.topic_id.into()).await,
            false => Ok(topic.topic.0.as_str().to_owned()),
        });
    }
    names
}

/// One fetch pass over every requested partition (each topic by its name in `names`), within
/// the response's byte budget. Each topic is answered as it was asked, by name before v13 and
/// by id from v13 (the encoder writes only the one its version has).
async fn read_all<B: Backend>(
    backend: &B,
    request: &FetchRequest,
    names: &[Result<String, BackendError>],
) -> (Vec<FetchableTopicResponse>, usize, bool) {
    let mut budget = usize::try_from(request.max_bytes).unwrap_or(0);
    let mut total = 0;
    let mut failed = false;
    let mut topics = Vec::with_capacity(request.topics.len());
    for (topic, name) in request.topics.iter().zip(names) {
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for p in &topic.partitions {
            let limit = usize::try_from(p.partition_max_bytes)
                .unwrap_or(0)
                .min(budget);
            let read = match (
                name,
                u32::try_from(p.partition),
                u64::try_from(p.fetch_offset),
            ) {
                (Err(e), ..) => Err(e.clone()),
                (Ok(name), Ok(partition), Ok(offset)) => {
                    let max = u32::try_from(limit).unwrap_or(u32::MAX);
                    backend.fetch(name, partition, Offset(offset), max).await
                }
                (_, Err(_), _) => Err(BackendError::UnknownTopicOrPartition),
                (.., Err(_)) => Err(BackendError::OffsetOutOfRange),
            };
            let answer = PartitionData::default().with_partition_index(p.partition);
            partitions.push(match read {
                Ok(data) => {
                    let size: usize = data.batches.iter().map(|b| b.len()).sum();
                    total += size;
                    budget = budget.saturating_sub(size);
                    filled(answer, data)
                }
                Err(e) => {
                    failed = true;
                    answer.with_error_code(e.code()).with_high_watermark(-1)
                }
            });
        }
        topics.push(
            FetchableTopicResponse::default()
                .with_topic(topic.topic.clone())
                .with_topic_id(topic.topic_id)
                .with_partitions(partitions),
        );
    }
    (topics, total, failed)
}

fn filled(answer: PartitionData, data: FetchedData) -> PartitionData {
    let mut records = BytesMut::with_capacity(data.batches.iter().map(|b| b.len()).sum());
    for b in &data.batches {
        records.extend_from_slice(b);
    }
    answer
        .with_high_watermark(to_i64(data.high_watermark))
        // No transactions: the last stable offset is the high watermark.
        .with_last_stable_offset(to_i64(data.high_watermark))
        .with_log_start_offset(to_i64(data.log_start_offset))
        .with_records(Some(records.freeze()))
}

/// Answers once `min_bytes` are available, a partition fails, or `max_wait_ms` passes,
/// reading again whenever the backend signals a commit.
/// Fetch sessions are not offered: the answer's session id is 0, so clients send full
/// fetches, which this broker serves statelessly (and `forgotten_topics_data`, by name or by
/// id, which only an incremental fetch in a session carries, is never read).
pub async fn fetch<B: Backend>(backend: &B, request: FetchRequest, version: i16) -> FetchResponse {
    let wait = Duration::from_millis(u64::try_from(request.max_wait_ms).unwrap_or(0)).min(MAX_WAIT);
    let deadline = Instant::now() + wait;
    let min_bytes = usize::try_from(request.min_bytes).unwrap_or(0).max(1);
    let names = names(backend, &request, version).await;
    loop {
        // Created before reading, so that a commit landing during the read still wakes us.
        let changed = backend.committed_changed();
        let (topics, total, failed) = read_all(backend, &request, &names).await;
        if total >= min_bytes || failed || Instant::now() >= deadline {
            return FetchResponse::default().with_responses(topics);
        }
        // Past the deadline, one last read answers with whatever is there.
        let _ = tokio::time::timeout_at(deadline, changed).await;
    }
}

/// DeleteRecords (KIP-107): each partition's log start moves to the offset asked for (the
/// high watermark for -1), answered with the new log start as the low watermark. An offset
/// beyond the high watermark, or below -1, is OFFSET_OUT_OF_RANGE and deletes nothing.
pub async fn delete_records<B: Backend>(
    backend: &B,
    request: DeleteRecordsRequest,
) -> DeleteRecordsResponse {
    let mut topics = Vec::with_capacity(request.topics.len());
    for topic in request.topics {
        let name = topic.name.0.as_str();
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for p in &topic.partitions {
            let answer = DeleteRecordsPartitionResult::default()
                .with_partition_index(p.partition_index)
                .with_low_watermark(-1);
            let before = match p.offset {
                -1 => Ok(None),
                o => u64::try_from(o)
                    .map(|o| Some(Offset(o)))
                    .map_err(|_| BackendError::OffsetOutOfRange.code()),
            };
            let result = match (before, u32::try_from(p.partition_index)) {
                (Err(code), _) => Err(code),
                (_, Err(_)) => Err(BackendError::UnknownTopicOrPartition.code()),
                (Ok(before), Ok(partition)) => backend
                    .delete_records(name, partition, before)
                    .await
                    .map_err(|e| e.code()),
            };
            partitions.push(match result {
                Ok(start) => answer.with_low_watermark(to_i64(start)),
                Err(code) => answer.with_error_code(code),
            });
        }
        topics.push(
            DeleteRecordsTopicResult::default()
                .with_name(topic.name)
                .with_partitions(partitions),
        );
    }
    DeleteRecordsResponse::default().with_topics(topics)
}

/// What a ListOffsets timestamp asks for; `Ok(None)` for the latest tiered offset, which a
/// broker without tiered storage answers with none.
fn offset_spec(timestamp: i64) -> Result<Option<OffsetSpec>, i16> {
    match timestamp {
        LATEST => Ok(Some(OffsetSpec::Latest)),
        EARLIEST | EARLIEST_LOCAL => Ok(Some(OffsetSpec::Earliest)),
        MAX_TIMESTAMP => Ok(Some(OffsetSpec::MaxTimestamp)),
        LATEST_TIERED => Ok(None),
        t if t >= 0 => Ok(Some(OffsetSpec::Timestamp(t))),
        _ => Err(codes::INVALID_REQUEST),
    }
}

/// ListOffsets: the earliest, latest or max-timestamp offset, or the first offset at or after
/// a timestamp (`offsets_for_times`), of committed records. No matching record is answered
/// with offset and timestamp -1, as Kafka does.
pub async fn list_offsets<B: Backend>(
    backend: &B,
    request: ListOffsetsRequest,
    version: i16,
) -> ListOffsetsResponse {
    let mut topics = Vec::with_capacity(request.topics.len());
    for topic in request.topics {
        let name = topic.name.0.as_str();
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for p in &topic.partitions {
            let answer = ListOffsetsPartitionResponse::default()
                .with_partition_index(p.partition_index)
                .with_timestamp(-1)
                .with_offset(-1);
            let result = match (offset_spec(p.timestamp), u32::try_from(p.partition_index)) {
                (Err(code), _) => Err(code),
                (_, Err(_)) => Err(BackendError::UnknownTopicOrPartition.code()),
                (Ok(None), _) => Ok(None),
                (Ok(Some(spec)), Ok(partition)) => backend
                    .list_offsets(name, partition, spec)
                    .await
                    .map_err(|e| e.code()),
            };
            partitions.push(match result {
                Ok(Some(ListedOffset {
                    offset,
                    timestamp,
                    leader_epoch,
                })) => {
                    let answer = answer.with_offset(to_i64(offset)).with_timestamp(timestamp);
                    // Leader epochs are answered from v4 on.
                    match leader_epoch {
                        Some(e) if version >= 4 => {
                            answer.with_leader_epoch(i32::try_from(e.0).unwrap_or(i32::MAX))
                        }
                        _ => answer,
                    }
                }
                Ok(None) => answer,
                Err(code) => answer.with_error_code(code),
            });
        }
        topics.push(
            ListOffsetsTopicResponse::default()
                .with_name(topic.name)
                .with_partitions(partitions),
        );
    }
    ListOffsetsResponse::default().with_topics(topics)
}
