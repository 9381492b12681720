//! Kafka error codes this layer answers by itself (the backend's are in `BackendError::code`).

/// INVALID_REQUIRED_ACKS: acks other than 0, 1 and -1.
pub const INVALID_REQUIRED_ACKS: i16 = 21;
/// INVALID_REQUEST: a request this broker understands but will not serve as asked.
pub const INVALID_REQUEST: i16 = 42;
/// INVALID_RECORD: a produce carrying other than exactly one batch for a partition.
pub const INVALID_RECORD: i16 = 87;
/// Transactions are not offered: answered as INVALID_REQUEST, which clients treat as fatal,
/// so that they fail fast instead of retrying a coordinator lookup forever.
pub const TRANSACTIONS_UNSUPPORTED: i16 = INVALID_REQUEST;
