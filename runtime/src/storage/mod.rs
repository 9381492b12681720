//! A broker's storage: per partition, a directory of segment files of Kafka record batches (the
//! core's [`isr::Log`]), a high watermark checkpoint and a leader epoch checkpoint.

pub mod batch;
pub mod checkpoint;
pub mod cleaner;
mod disk_log;
pub mod faults;
mod handles;
mod partition_dir;
pub mod retention;
pub(crate) mod segment;

pub use disk_log::{sync_dir, DiskLog, DEFAULT_SEGMENT_BYTES, LOG_START};
pub use partition_dir::{OpenError, PartitionDir};
pub use segment::SUFFIX as SEGMENT_SUFFIX;
