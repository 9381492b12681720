//! Kafka error codes this layer answers by itself (the backend's are in `BackendError::code`).

/// INVALID_REQUIRED_ACKS: acks other than 0, 1 and -1.
pub const INVALID_REQUIRED_ACKS: i16 = 21;
/// INVALID_REQUEST: a request this broker understands but will not serve as asked.
pub const INVALID_REQUEST: i16 = 42;
/// INVALID_RECORD: a produce carrying other than exactly one batch for a partition.
pub const INVALID_RECORD: i16 = 87;
/// Transactions are not offered. FindCoordinator for a transactional id (and InitProducerId
/// naming one) is answered TRANSACTIONAL_ID_AUTHORIZATION_FAILED, the one answer that every
/// client treats as fatal there (librdkafka retries any other error of a transaction
/// coordinator lookup until its timeout; the Java client and kafka-python fail on it too),
/// with [`TRANSACTIONS_UNSUPPORTED_MESSAGE`] saying why.
pub const TRANSACTIONS_UNSUPPORTED: i16 = 53;
pub const TRANSACTIONS_UNSUPPORTED_MESSAGE: &str =
    "transactions are not supported by isr; use an idempotent producer (enable.idempotence) instead";
