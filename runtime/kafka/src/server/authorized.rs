//! Authorized operations (KIP-430): what a request may ask to learn of a resource besides its
//! description — Metadata v8+ of each topic (and, v8–10, of the cluster), DescribeCluster of
//! the cluster, DescribeGroups v3+ of each group — as Kafka's bitfield, bit `n` set when the
//! caller may perform the operation of code `n`. Each operation the resource type supports is
//! asked of the caller's authorizer, so with ACLs off every one is set.

use crate::auth::acl::{Operation, ResourceType};
use crate::backend::Backend;

/// What Kafka answers when the request did not ask (kafka-protocol's default too).
pub const NOT_ASKED: i32 = i32::MIN;

/// The operations Kafka lists for each resource type.
fn supported(resource: ResourceType) -> &'static [Operation] {
    use Operation::*;
    match resource {
        ResourceType::Topic => &[
            Read,
            Write,
            Create,
            Delete,
            Alter,
            Describe,
            DescribeConfigs,
            AlterConfigs,
        ],
        ResourceType::Cluster => &[
            Create,
            Alter,
            Describe,
            ClusterAction,
            DescribeConfigs,
            AlterConfigs,
            IdempotentWrite,
        ],
        ResourceType::Group => &[Read, Describe, Delete],
        ResourceType::TransactionalId => &[Describe, Write],
    }
}

/// The caller's authorized operations on `name` of type `resource`, as Kafka's bitfield.
pub fn operations<B: Backend>(backend: &B, resource: ResourceType, name: &str) -> i32 {
    supported(resource)
        .iter()
        .filter(|&&op| backend.authorize(op, resource, name).is_ok())
        .fold(0, |bits, op| bits | 1 << op.code())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kafka's own bitfields for each resource with no authorizer (every operation allowed).
    #[test]
    fn the_supported_operations_make_kafkas_bitfields() {
        let bits = |r| supported(r).iter().fold(0, |b, op| b | 1 << op.code());
        assert_eq!(bits(ResourceType::Topic), 0xDF8);
        assert_eq!(bits(ResourceType::Cluster), 0x1FA0);
        assert_eq!(bits(ResourceType::Group), 0x148);
    }
}
