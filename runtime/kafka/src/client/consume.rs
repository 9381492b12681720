//! `isr consume`: prints `OFFSET VALUE` per record of one partition.

use super::cluster::{Cluster, Route};
use super::error::{malformed, ClientError};
use super::records::{self, Incoming};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::{
    BrokerId, FetchRequest, FetchResponse, GroupId, ListOffsetsRequest, ListOffsetsResponse,
    OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use std::io::Write;

/// Long-poll wait per fetch: short enough for prompt exit with --max, long enough to idle.
const FETCH_WAIT_MS: i32 = 500;
/// Bytes asked per fetch.
pub const FETCH_BYTES: i32 = 1024 * 1024;

#[derive(Clone, Debug, clap::Args)]
pub struct ConsumeArgs {
    /// A broker to start from: HOST:PORT, or several separated by commas.
    #[arg(long)]
    pub bootstrap: String,
    pub topic: String,
    #[arg(long, default_value_t = 0)]
    pub partition: u32,
    /// Start at the first retained record (default: only new records).
    #[arg(long, conflicts_with = "offset")]
    pub from_beginning: bool,
    /// Start at this offset.
    #[arg(long)]
    pub offset: Option<u64>,
    /// Consumer group: resume from its committed offset, and commit what was printed.
    #[arg(long)]
    pub group: Option<String>,
    /// Stop after this many records (default: run until interrupted).
    #[arg(long)]
    pub max: Option<u64>,
    /// Stop at the end of the partition: once every record committed so far (up to the high
    /// watermark as the last fetch saw it) is printed, like `kcat -e`.
    #[arg(long)]
    pub until_end: bool,
}

/// Where to start reading.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Start {
    Earliest,
    Latest,
    At(i64),
}

/// Consumes to stdout.
pub async fn run(args: ConsumeArgs) -> Result<(), ClientError> {
    run_with(args, &mut std::io::stdout().lock()).await
}

pub async fn run_with(args: ConsumeArgs, out: &mut impl Write) -> Result<(), ClientError> {
    let mut cluster = Cluster::connect(&args.bootstrap).await?;
    let (topic, partition) = (args.topic.as_str(), args.partition);
    let committed = match &args.group {
        Some(group) => committed(&mut cluster, group, topic, partition).await?,
        None => None,
    };
    let start = match (committed, args.offset, args.from_beginning) {
        (Some(o), _, _) => Start::At(o),
        (None, Some(o), _) => Start::At(i64::try_from(o).unwrap_or(i64::MAX)),
        (None, None, true) => Start::Earliest,
        (None, None, false) => Start::Latest,
    };
    let mut next = resolve(&mut cluster, topic, partition, start).await?;
    let mut printed = 0u64;
    while args.max.is_none_or(|max| printed < max) {
        let (batch, high_watermark, end) = fetch(&mut cluster, topic, partition, next).await?;
        let before = next;
        let mut stopped = false;
        for r in &batch {
            if r.offset < next {
                continue;
            }
            if args.max.is_some_and(|max| printed >= max) {
                stopped = true;
                break;
            }
            let value = r
                .value
                .as_deref()
                .map(String::from_utf8_lossy)
                .unwrap_or_default();
            writeln!(out, "{} {value}", r.offset).map_err(ClientError::Output)?;
            next = r.offset + 1;
            printed += 1;
        }
        // Past what the cleaner removed at the end of what came back.
        if let (Some(end), false) = (end, stopped) {
            next = next.max(end);
        }
        out.flush().map_err(ClientError::Output)?;
        if let (Some(group), true) = (&args.group, next > before) {
            commit(&mut cluster, group, topic, partition, next).await?;
        }
        if args.until_end && next >= high_watermark {
            break;
        }
    }
    Ok(())
}

/// The group's committed offset for the partition, if any.
pub async fn committed(
    cluster: &mut Cluster,
    group: &str,
    topic: &str,
    partition: u32,
) -> Result<Option<i64>, ClientError> {
    let request = offset_fetch_request(group, topic, partition);
    cluster
        .send(
            Route::Coordinator(group),
            &request,
            |_, answer: OffsetFetchResponse| committed_offset(&answer),
        )
        .await
}

/// The committed offset an OffsetFetch answer gives for its one partition (`None`: none yet).
pub fn committed_offset(answer: &OffsetFetchResponse) -> Result<Option<i64>, ClientError> {
    if let Some(e) = ClientError::from_code(answer.error_code, None) {
        return Err(e);
    }
    match answer.topics.first().and_then(|t| t.partitions.first()) {
        Some(p) => match ClientError::from_code(p.error_code, None) {
            Some(e) => Err(e),
            None => Ok(Some(p.committed_offset).filter(|&o| o >= 0)),
        },
        None => Ok(None),
    }
}

/// Records the group's position in the partition: the next offset it will read.
pub async fn commit(
    cluster: &mut Cluster,
    group: &str,
    topic: &str,
    partition: u32,
    next: i64,
) -> Result<(), ClientError> {
    // No group membership: manual assignment commits with generation -1.
    let request = commit_request(group, (-1, ""), topic, partition, next);
    cluster
        .send(
            Route::Coordinator(group),
            &request,
            |_, answer: OffsetCommitResponse| commit_result(&answer),
        )
        .await
}

/// Whether an OffsetCommit answer took the commit of its one partition.
pub fn commit_result(answer: &OffsetCommitResponse) -> Result<(), ClientError> {
    let code = answer
        .topics
        .first()
        .and_then(|t| t.partitions.first())
        .map_or(0, |p| p.error_code);
    ClientError::from_code(code, None).map_or(Ok(()), Err)
}

/// An OffsetFetch for one partition of a group.
pub fn offset_fetch_request(group: &str, topic: &str, partition: u32) -> OffsetFetchRequest {
    OffsetFetchRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_owned())))
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(name(topic))
            .with_partition_indexes(vec![index(partition)])]))
}

/// An OffsetCommit of `next` (the next offset to read) for one partition, by a group member of
/// `(generation, member id)`, or `(-1, "")` for a consumer that assigns itself partitions.
pub fn commit_request(
    group: &str,
    (generation, member): (i32, &str),
    topic: &str,
    partition: u32,
    next: i64,
) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_owned())))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(StrBytes::from_string(member.to_owned()))
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(index(partition))
                .with_committed_offset(next)])])
}

/// A Fetch of one partition from `offset`, long-polling up to `max_wait_ms`.
pub fn fetch_request(topic: &str, partition: u32, offset: i64, max_wait_ms: i32) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(FETCH_BYTES)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(name(topic))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(index(partition))
                .with_fetch_offset(offset)
                .with_partition_max_bytes(FETCH_BYTES)])])
}

fn name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_owned()))
}

fn index(partition: u32) -> i32 {
    i32::try_from(partition).unwrap_or(i32::MAX)
}

/// ListOffsets' timestamp for the earliest offset (the log start).
pub const EARLIEST: i64 = -2;
/// ListOffsets' timestamp for the latest offset (the high watermark).
pub const LATEST: i64 = -1;

/// A ListOffsets of one partition at `timestamp` ([`EARLIEST`], [`LATEST`] or a time).
pub fn list_offsets_request(topic: &str, partition: u32, timestamp: i64) -> ListOffsetsRequest {
    ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(index(partition))
                .with_timestamp(timestamp)])])
}

/// The offset a ListOffsets answer of one partition gives, or its error.
pub fn listed_offset(addr: &str, answer: ListOffsetsResponse) -> Result<i64, ClientError> {
    let p = answer
        .topics
        .first()
        .and_then(|t| t.partitions.first())
        .ok_or_else(|| malformed(addr, "ListOffsets answer names no partition"))?;
    match ClientError::from_code(p.error_code, None) {
        Some(e) => Err(e),
        None => Ok(p.offset),
    }
}

/// Turns a start position into an offset (ListOffsets for earliest and latest).
pub async fn resolve(
    cluster: &mut Cluster,
    topic: &str,
    partition: u32,
    start: Start,
) -> Result<i64, ClientError> {
    let timestamp = match start {
        Start::At(o) => return Ok(o),
        Start::Earliest => EARLIEST,
        Start::Latest => LATEST,
    };
    let request = list_offsets_request(topic, partition, timestamp);
    cluster
        .send(Route::Leader(topic, partition), &request, listed_offset)
        .await
}

/// One fetch from the leader at `offset`: the records it returned (possibly none after the
/// long-poll wait), the high watermark, and where the batches returned end (past records a
/// compacted topic's cleaner removed: where to fetch from next), following leader changes.
pub async fn fetch(
    cluster: &mut Cluster,
    topic: &str,
    partition: u32,
    offset: i64,
) -> Result<(Vec<Incoming>, i64, Option<i64>), ClientError> {
    let request = fetch_request(topic, partition, offset, FETCH_WAIT_MS);
    let data = cluster
        .send(Route::Leader(topic, partition), &request, fetched_records)
        .await?;
    let (data, high_watermark) = data;
    let end = records::end_offset(&data);
    let records = records::decode(data).map_err(|reason| ClientError::Records {
        topic: topic.to_owned(),
        partition,
        offset,
        reason,
    })?;
    Ok((records, high_watermark, end))
}

/// The record batches a Fetch answer (from `addr`) carries for its one partition, still
/// encoded (see [`records::decode`]), and the partition's high watermark.
pub fn fetched_records(
    addr: &str,
    answer: FetchResponse,
) -> Result<(bytes::Bytes, i64), ClientError> {
    if let Some(e) = ClientError::from_code(answer.error_code, None) {
        return Err(e);
    }
    let p = answer
        .responses
        .into_iter()
        .next()
        .and_then(|t| t.partitions.into_iter().next())
        .ok_or_else(|| malformed(addr, "Fetch answer names no partition"))?;
    match ClientError::from_code(p.error_code, None) {
        Some(e) => Err(e),
        None => Ok((p.records.unwrap_or_default(), p.high_watermark)),
    }
}
