//! The retention pass on the replica thread: each hosted partition rolls its active segment
//! by its topic's `segment.bytes` and `segment.ms`, and the core moves its log start to where
//! the topic's `retention.ms` and `retention.bytes` let it (never past the replica's high
//! watermark: the core caps it, rule 17). Leaders and followers apply the policy to their own
//! segments, as Kafka's brokers do; followers also follow their leader's log start.

use super::Host;
use crate::storage::retention::retention_point;
use isr::{Log, PartitionId, ReplicaInput};
use isr_kafka::configs::LogRetention;

impl Host {
    pub(super) fn on_retention(&mut self, policies: &[(PartitionId, LogRetention)], now_ms: i64) {
        for &(partition, policy) in policies {
            let Ok(h) = self.hosted(partition) else {
                continue;
            };
            let log = h.replica.log_mut();
            let segment_ms = (policy.segment_ms >= 0).then_some(policy.segment_ms);
            log.set_rolling(policy.segment_bytes, segment_ms);
            let segments: Vec<_> = log.segments().collect();
            let point = retention_point(&segments, &policy, now_ms);
            if let Some(before) = point.filter(|&p| p > log.log_start_offset()) {
                self.step(partition, ReplicaInput::Retain { before });
            }
        }
    }
}
