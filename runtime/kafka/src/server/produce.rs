//! Produce: validate each partition's batch, append it through the backend, report offsets.

use super::codes;
use crate::backend::{Appended, Backend, BackendError};
use crate::batch;
use isr::Acks;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinSet;

/// Why one partition's write was refused before reaching the backend, or by it.
struct Refusal {
    code: i16,
    message: String,
    /// The records at fault, by position in the batch (Produce v8+'s `record_errors`).
    records: Vec<i32>,
}

impl From<BackendError> for Refusal {
    fn from(e: BackendError) -> Self {
        let records = match &e {
            BackendError::InvalidRecord { records, .. } => records.clone(),
            _ => Vec::new(),
        };
        Refusal {
            code: e.code(),
            message: e.detail(),
            records,
        }
    }
}

fn acks(value: i16) -> Option<Acks> {
    match value {
        0 => Some(Acks::None),
        1 => Some(Acks::Leader),
        -1 => Some(Acks::All),
        _ => None,
    }
}

/// Checks that `records` is exactly one valid v2 batch, as Kafka requires of producers.
fn one_batch(records: Option<bytes::Bytes>) -> Result<bytes::Bytes, Refusal> {
    let batches = batch::split(records.unwrap_or_default())
        .map_err(|e| Refusal::from(BackendError::CorruptMessage(e.to_string())))?;
    match <[_; 1]>::try_from(batches) {
        Ok([(b, _)]) => Ok(b),
        Err(v) => Err(Refusal {
            code: codes::INVALID_RECORD,
            message: format!(
                "a produce must carry exactly one record batch per partition, not {}",
                v.len()
            ),
            records: Vec::new(),
        }),
    }
}

/// Appends every partition's batch concurrently (so that acks=all waits overlap rather than
/// add up) and answers in request order.
pub async fn produce<B: Backend>(backend: &Arc<B>, request: ProduceRequest) -> ProduceResponse {
    let raw_acks = request.acks;
    let acks = acks(raw_acks);
    let timeout = Duration::from_millis(u64::try_from(request.timeout_ms).unwrap_or(0));
    let mut tasks = JoinSet::new();
    let mut shape = Vec::with_capacity(request.topic_data.len());
    for (t, topic) in request.topic_data.into_iter().enumerate() {
        let name = topic.name.0.as_str().to_owned();
        let mut indexes = Vec::with_capacity(topic.partition_data.len());
        for (p, data) in topic.partition_data.into_iter().enumerate() {
            indexes.push(data.index);
            let backend = Arc::clone(backend);
            let name = name.clone();
            tasks.spawn(async move {
                let outcome = async {
                    let acks = acks.ok_or(Refusal {
                        code: codes::INVALID_REQUIRED_ACKS,
                        message: format!("acks={raw_acks}: must be 0, 1 or -1 (all)"),
                        records: Vec::new(),
                    })?;
                    // An illegal name is refused at once (INVALID_TOPIC_EXCEPTION is not
                    // retriable), where an unknown topic would be retried until a timeout.
                    crate::names::check_topic(&name).map_err(Refusal::from)?;
                    crate::names::check_not_internal(&name, "write to").map_err(Refusal::from)?;
                    let partition = u32::try_from(data.index)
                        .map_err(|_| Refusal::from(BackendError::UnknownTopicOrPartition))?;
                    let batch = one_batch(data.records)?;
                    let append = backend.produce(&name, partition, acks, batch);
                    match tokio::time::timeout(timeout, append).await {
                        Ok(result) => result.map_err(Refusal::from),
                        Err(_) => Err(Refusal::from(BackendError::RequestTimedOut)),
                    }
                }
                .await;
                (t, p, outcome)
            });
        }
        shape.push((topic.name, indexes));
    }
    let mut outcomes: Vec<Vec<Option<Result<Appended, Refusal>>>> = shape
        .iter()
        .map(|(_, indexes)| indexes.iter().map(|_| None).collect())
        .collect();
    while let Some(joined) = tasks.join_next().await {
        // A panicking backend loses only that partition's answer (reported below).
        if let Ok((t, p, outcome)) = joined {
            outcomes[t][p] = Some(outcome);
        }
    }
    let responses = shape
        .into_iter()
        .zip(outcomes)
        .map(|((name, indexes), outcomes)| topic_response(name, indexes, outcomes))
        .collect();
    ProduceResponse::default().with_responses(responses)
}

fn topic_response(
    name: TopicName,
    indexes: Vec<i32>,
    outcomes: Vec<Option<Result<Appended, Refusal>>>,
) -> TopicProduceResponse {
    let partitions = indexes
        .into_iter()
        .zip(outcomes)
        .map(|(index, outcome)| {
            let answer = PartitionProduceResponse::default().with_index(index);
            match outcome {
                Some(Ok(appended)) => answer
                    .with_base_offset(i64::try_from(appended.base_offset.0).unwrap_or(i64::MAX))
                    .with_log_append_time_ms(appended.log_append_time.unwrap_or(-1)),
                Some(Err(refusal)) => {
                    let message = StrBytes::from_string(refusal.message);
                    // Each record at fault is named with the batch's reason (Kafka's clients
                    // fail those records with it, and the others of the batch as refused
                    // alongside them).
                    let record_errors = refusal
                        .records
                        .into_iter()
                        .map(|i| {
                            BatchIndexAndErrorMessage::default()
                                .with_batch_index(i)
                                .with_batch_index_error_message(Some(message.clone()))
                        })
                        .collect();
                    answer
                        .with_base_offset(-1)
                        .with_error_code(refusal.code)
                        .with_record_errors(record_errors)
                        .with_error_message(Some(message))
                }
                None => {
                    let e = BackendError::Internal("the append task failed".into());
                    answer
                        .with_base_offset(-1)
                        .with_error_code(e.code())
                        .with_error_message(Some(StrBytes::from_string(e.detail())))
                }
            }
        })
        .collect();
    TopicProduceResponse::default()
        .with_name(name)
        .with_partition_responses(partitions)
}
