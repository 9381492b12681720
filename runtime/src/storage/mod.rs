//! A broker's storage: per partition, a directory of segment files of Kafka record batches (the
//! core's [`isr::Log`]), a high watermark checkpoint, a leader epoch checkpoint, and where compaction's cleanings ended.

pub mod batch;
pub mod checkpoint;
mod cleaned_to;
pub mod cleaner;
mod disk_log;
pub mod faults;
mod handles;
pub mod offset_map;
mod partition_dir;
pub mod retention;
pub(crate) mod segment;
pub mod throttle;

pub use cleaned_to::{CleanedTo, CLEANER_CHECKPOINT};
pub use disk_log::{sync_dir, DiskLog, DEFAULT_SEGMENT_BYTES, LOG_START};
pub use partition_dir::{OpenError, PartitionDir};
pub use segment::SUFFIX as SEGMENT_SUFFIX;
