//! `isr produce`: one record per input line, acknowledged one at a time.

use super::cluster::{Cluster, Route};
use super::error::{malformed, ClientError};
use super::records::{self, Outgoing};
use bytes::Bytes;
use isr::Acks;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use std::io::Write;
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// How long the leader may wait for the ISR before answering REQUEST_TIMED_OUT.
pub const PRODUCE_TIMEOUT_MS: i32 = 30_000;

#[derive(Clone, Debug, clap::Args)]
pub struct ProduceArgs {
    /// A broker to start from: HOST:PORT, or several separated by commas.
    #[arg(long)]
    pub bootstrap: String,
    pub topic: String,
    /// Partition to write to (default 0, or chosen from --key).
    #[arg(long, conflicts_with = "key")]
    pub partition: Option<u32>,
    /// Key of every record; picks the partition as Kafka's Java client does (murmur2).
    #[arg(long)]
    pub key: Option<String>,
    /// 0 (no answer), 1 (leader appended) or all (committed by the ISR).
    #[arg(long, default_value = "all")]
    pub acks: Acks,
}

/// Reads records from stdin, printing `PARTITION OFFSET` per acknowledged one to stdout.
pub async fn run(args: ProduceArgs) -> Result<(), ClientError> {
    let stdin = tokio::io::BufReader::new(tokio::io::stdin());
    run_with(args, stdin, &mut std::io::stdout().lock()).await
}

pub async fn run_with(
    args: ProduceArgs,
    input: impl AsyncBufRead + Unpin,
    out: &mut impl Write,
) -> Result<(), ClientError> {
    let mut cluster = Cluster::connect(&args.bootstrap).await?;
    let count = partition_count(&mut cluster, &args.topic).await?;
    let partition = match (&args.key, args.partition) {
        (Some(key), _) => key_partition(key.as_bytes(), count),
        (None, p) => p.unwrap_or(0),
    };
    if partition >= count {
        return Err(ClientError::NoSuchPartition {
            topic: args.topic,
            partition,
        });
    }
    let key = args.key.map(Bytes::from);
    let mut lines = input.lines();
    while let Some(line) = lines.next_line().await.map_err(ClientError::Input)? {
        let record = Outgoing {
            key: key.clone(),
            value: Bytes::from(line),
        };
        let batch = records::encode(&[record], records::now_ms())?;
        let request = request(&args.topic, partition, args.acks, batch);
        let offset = send(&mut cluster, &args.topic, partition, args.acks, &request).await?;
        if let Some(offset) = offset {
            writeln!(out, "{partition} {offset}").map_err(ClientError::Output)?;
            out.flush().map_err(ClientError::Output)?;
        }
    }
    Ok(())
}

/// The topic's partition count, waiting briefly for a just-created topic to appear.
pub async fn partition_count(cluster: &mut Cluster, topic: &str) -> Result<u32, ClientError> {
    for _ in 0..20 {
        if let Some(t) = cluster.topic(topic) {
            return u32::try_from(t.partitions.len())
                .map_err(|_| ClientError::Usage(format!("topic {topic} has too many partitions")));
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        cluster.refresh().await?;
    }
    Err(ClientError::Kafka {
        code: kafka_protocol::error::ResponseError::UnknownTopicOrPartition.code(),
        message: format!("topic {topic} does not exist"),
    })
}

/// A produce request carrying one batch for one partition.
pub fn request(topic: &str, partition: u32, acks: Acks, batch: Bytes) -> ProduceRequest {
    let acks = match acks {
        Acks::None => 0,
        Acks::Leader => 1,
        Acks::All => -1,
    };
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(PRODUCE_TIMEOUT_MS)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(i32::try_from(partition).unwrap_or(i32::MAX))
                .with_records(Some(batch))])])
}

/// Sends a produce to the partition's leader, following leader changes; returns the base
/// offset, or `None` with acks=0. A refusal (NOT_ENOUGH_REPLICAS, ...) is an error.
pub async fn send(
    cluster: &mut Cluster,
    topic: &str,
    partition: u32,
    acks: Acks,
    request: &ProduceRequest,
) -> Result<Option<i64>, ClientError> {
    let route = Route::Leader(topic, partition);
    if acks == Acks::None {
        return cluster.send_unanswered(route, request).await.map(|_| None);
    }
    cluster
        .send(route, request, |addr, answer: ProduceResponse| {
            base_offset(addr, &answer).map(Some)
        })
        .await
}

/// The base offset a Produce answer (from `addr`) gives its one partition's batch, or the
/// broker's refusal.
pub fn base_offset(addr: &str, answer: &ProduceResponse) -> Result<i64, ClientError> {
    let p = answer
        .responses
        .first()
        .and_then(|t| t.partition_responses.first())
        .ok_or_else(|| malformed(addr, "produce answer names no partition"))?;
    let message = p.error_message.as_ref().map(|m| m.as_str());
    match ClientError::from_code(p.error_code, message) {
        Some(e) => Err(e),
        None => Ok(p.base_offset),
    }
}

/// The partition of a keyed record as in Kafka's Java client: positive murmur2 modulo the
/// partition count, so keyed data lands where other Kafka tools expect it.
pub fn key_partition(key: &[u8], partitions: u32) -> u32 {
    (murmur2(key) & 0x7fff_ffff) % partitions.max(1)
}

/// Kafka's murmur2 (seed 0x9747b28c), as in `org.apache.kafka.common.utils.Utils`.
fn murmur2(data: &[u8]) -> u32 {
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let mut h: u32 = 0x9747_b28c ^ (data.len() as u32);
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let rest = chunks.remainder();
    if rest.len() >= 3 {
        h ^= u32::from(rest[2]) << 16;
    }
    if rest.len() >= 2 {
        h ^= u32::from(rest[1]) << 8;
    }
    if !rest.is_empty() {
        h ^= u32::from(rest[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h
}

#[cfg(test)]
mod tests {
    use super::murmur2;

    #[test]
    fn murmur2_matches_kafkas_test_vectors() {
        assert_eq!(murmur2(b"21") as i32, -973932308);
        assert_eq!(murmur2(b"foobar") as i32, -790332482);
        assert_eq!(murmur2(b"a-little-bit-long-string") as i32, -985981536);
        assert_eq!(murmur2(b"a-little-bit-longer-string") as i32, -1486304829);
        assert_eq!(
            murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8") as i32,
            -58897971
        );
        assert_eq!(murmur2(b"abc") as i32, 479470107);
    }
}
