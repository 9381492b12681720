//! Fetch and ListOffsets: reading committed data.

use super::codes;
use crate::backend::{Backend, BackendError, FetchedData, OffsetSpec};
use bytes::BytesMut;
use isr::Offset;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{
    FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse,
};
use std::time::Duration;
use tokio::time::Instant;

/// Longest wait honoured, whatever the client asks: a connection's later requests queue
/// behind a waiting fetch.
const MAX_WAIT: Duration = Duration::from_secs(10);
/// ListOffsets timestamps with a special meaning.
const LATEST: i64 = -1;
const EARLIEST: i64 = -2;

fn to_i64(o: Offset) -> i64 {
    i64::try_from(o.0).unwrap_or(i64::MAX)
}

/// One fetch pass over every requested partition, within the response's byte budget.
async fn read_all<B: Backend>(
    backend: &B,
    request: &FetchRequest,
) -> (Vec<FetchableTopicResponse>, usize, bool) {
    let mut budget = usize::try_from(request.max_bytes).unwrap_or(0);
    let mut total = 0;
    let mut failed = false;
    let mut topics = Vec::with_capacity(request.topics.len());
    for topic in &request.topics {
        let name = topic.topic.0.as_str();
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for p in &topic.partitions {
            let limit = usize::try_from(p.partition_max_bytes)
                .unwrap_or(0)
                .min(budget);
            let read = match (u32::try_from(p.partition), u64::try_from(p.fetch_offset)) {
                (Ok(partition), Ok(offset)) => {
                    let max = u32::try_from(limit).unwrap_or(u32::MAX);
                    backend.fetch(name, partition, Offset(offset), max).await
                }
                (Err(_), _) => Err(BackendError::UnknownTopicOrPartition),
                (_, Err(_)) => Err(BackendError::OffsetOutOfRange),
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
/// fetches, which this broker serves statelessly.
pub async fn fetch<B: Backend>(backend: &B, request: FetchRequest) -> FetchResponse {
    let wait = Duration::from_millis(u64::try_from(request.max_wait_ms).unwrap_or(0)).min(MAX_WAIT);
    let deadline = Instant::now() + wait;
    let min_bytes = usize::try_from(request.min_bytes).unwrap_or(0).max(1);
    loop {
        // Created before reading, so that a commit landing during the read still wakes us.
        let changed = backend.committed_changed();
        let (topics, total, failed) = read_all(backend, &request).await;
        if total >= min_bytes || failed || Instant::now() >= deadline {
            return FetchResponse::default().with_responses(topics);
        }
        // Past the deadline, one last read answers with whatever is there.
        let _ = tokio::time::timeout_at(deadline, changed).await;
    }
}

pub async fn list_offsets<B: Backend>(
    backend: &B,
    request: ListOffsetsRequest,
) -> ListOffsetsResponse {
    let mut topics = Vec::with_capacity(request.topics.len());
    for topic in request.topics {
        let name = topic.name.0.as_str();
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for p in &topic.partitions {
            let answer = ListOffsetsPartitionResponse::default()
                .with_partition_index(p.partition_index)
                .with_timestamp(-1);
            let spec = match p.timestamp {
                LATEST => Ok(OffsetSpec::Latest),
                EARLIEST => Ok(OffsetSpec::Earliest),
                // Lookup by timestamp needs a time index the broker does not keep.
                _ => Err(codes::INVALID_REQUEST),
            };
            let result = match (spec, u32::try_from(p.partition_index)) {
                (Err(code), _) => Err(code),
                (_, Err(_)) => Err(BackendError::UnknownTopicOrPartition.code()),
                (Ok(spec), Ok(partition)) => backend
                    .list_offsets(name, partition, spec)
                    .await
                    .map_err(|e| e.code()),
            };
            partitions.push(match result {
                Ok(offset) => answer.with_offset(to_i64(offset)),
                Err(code) => answer.with_error_code(code).with_offset(-1),
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
