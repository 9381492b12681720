//! ACLs as Kafka defines them, and the authorizer that judges requests by them.
//!
//! An ACL allows or denies a principal (`User:alice`, or `User:*` for everyone) from a host (an
//! address, or `*`) one operation on a resource: a topic, group, transactional id or the
//! cluster, named literally (`*` for every name) or by prefix. With ACLs enabled, a request is
//! allowed when some ACL allows it and none denies it; everything else is denied, except for
//! the super users named in the broker's configuration. As in Kafka, Read, Write, Delete and
//! Alter imply Describe, AlterConfigs implies DescribeConfigs, and All is every operation.

use super::SecurityState;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::sync::Arc;

/// The name of the one cluster resource.
pub const CLUSTER_NAME: &str = "kafka-cluster";
/// The principal and host that match everyone and everywhere.
pub const WILDCARD_PRINCIPAL: &str = "User:*";
pub const WILDCARD: &str = "*";

macro_rules! kafka_enum {
    ($(#[$doc:meta])* $name:ident { $($variant:ident = $code:literal, $text:literal;)* }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub enum $name { $($variant),* }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),*];

            /// Kafka's wire code.
            pub fn code(self) -> i8 {
                match self { $($name::$variant => $code),* }
            }

            pub fn from_code(code: i8) -> Option<$name> {
                match code { $($code => Some($name::$variant),)* _ => None }
            }

            /// The name the command line and Kafka's tools use.
            pub fn name(self) -> &'static str {
                match self { $($name::$variant => $text),* }
            }

            /// The value of a name, ignoring letter case, `-` and `_` (`describe-configs`,
            /// `DescribeConfigs`, `DESCRIBE_CONFIGS`).
            pub fn from_name(name: &str) -> Option<$name> {
                let squash = |s: &str| s.replace(['-', '_'], "").to_ascii_lowercase();
                let wanted = squash(name);
                $name::ALL.iter().copied().find(|v| squash(v.name()) == wanted)
            }

            /// Every name, for error messages.
            pub fn names() -> String {
                $name::ALL.iter().map(|v| v.name()).collect::<Vec<_>>().join(", ")
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

kafka_enum!(
    /// What an ACL protects.
    ResourceType {
        Topic = 2, "topic";
        Group = 3, "group";
        Cluster = 4, "cluster";
        TransactionalId = 5, "transactional-id";
    }
);

kafka_enum!(
    /// How an ACL's resource name matches.
    PatternType {
        Literal = 3, "literal";
        Prefixed = 4, "prefixed";
    }
);

kafka_enum!(
    /// An operation on a resource.
    Operation {
        All = 2, "All";
        Read = 3, "Read";
        Write = 4, "Write";
        Create = 5, "Create";
        Delete = 6, "Delete";
        Alter = 7, "Alter";
        Describe = 8, "Describe";
        ClusterAction = 9, "ClusterAction";
        DescribeConfigs = 10, "DescribeConfigs";
        AlterConfigs = 11, "AlterConfigs";
        IdempotentWrite = 12, "IdempotentWrite";
    }
);

kafka_enum!(
    /// Whether an ACL allows or denies.
    Permission {
        Deny = 2, "deny";
        Allow = 3, "allow";
    }
);

/// One ACL.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Acl {
    pub resource_type: ResourceType,
    pub resource_name: String,
    pub pattern: PatternType,
    pub principal: String,
    pub host: String,
    pub operation: Operation,
    pub permission: Permission,
}

impl Acl {
    /// Why Kafka would refuse to create this ACL, if it would.
    pub fn validate(&self) -> Result<(), String> {
        if self.resource_name.is_empty() {
            return Err("the resource name is empty".into());
        }
        if self.resource_type == ResourceType::Cluster && self.resource_name != CLUSTER_NAME {
            return Err(format!(
                "the cluster resource is named {CLUSTER_NAME}, not {}",
                self.resource_name
            ));
        }
        if self.pattern == PatternType::Prefixed && self.resource_name == WILDCARD {
            return Err("a prefixed ACL cannot name *: use a literal * for every name".into());
        }
        match self.principal.split_once(':') {
            Some(("User", name)) if !name.is_empty() => {}
            _ => {
                return Err(format!(
                    "principal {:?} is not User:NAME (or User:*)",
                    self.principal
                ))
            }
        }
        if self.host.is_empty() {
            return Err("the host is empty: name an address, or * for any".into());
        }
        Ok(())
    }

    /// Whether this ACL's resource pattern covers the resource `name`.
    fn covers(&self, name: &str) -> bool {
        match self.pattern {
            PatternType::Literal => self.resource_name == name || self.resource_name == WILDCARD,
            PatternType::Prefixed => name.starts_with(&self.resource_name),
        }
    }

    /// Whether this ACL speaks of `principal` connecting from `host`.
    fn concerns(&self, principal: &str, host: &str) -> bool {
        (self.principal == principal || self.principal == WILDCARD_PRINCIPAL)
            && (self.host == WILDCARD || self.host == host)
    }
}

/// How a filter matches resource patterns (Kafka's PatternTypeFilter).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PatternFilter {
    /// Any pattern type, with the name given exactly.
    Any,
    /// Every ACL that would apply to the named resource: literal ones of that name or `*`,
    /// prefixed ones that are a prefix of it.
    Match,
    Literal,
    Prefixed,
}

impl PatternFilter {
    pub fn code(self) -> i8 {
        match self {
            PatternFilter::Any => 1,
            PatternFilter::Match => 2,
            PatternFilter::Literal => 3,
            PatternFilter::Prefixed => 4,
        }
    }

    pub fn from_code(code: i8) -> Option<PatternFilter> {
        [
            PatternFilter::Any,
            PatternFilter::Match,
            PatternFilter::Literal,
            PatternFilter::Prefixed,
        ]
        .into_iter()
        .find(|p| p.code() == code)
    }
}

/// Selects ACLs (DescribeAcls, DeleteAcls): `None` matches anything.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AclFilter {
    pub resource_type: Option<ResourceType>,
    pub resource_name: Option<String>,
    pub pattern: PatternFilter,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: Option<Operation>,
    pub permission: Option<Permission>,
}

impl AclFilter {
    /// The filter that matches every ACL.
    pub fn any() -> AclFilter {
        AclFilter {
            resource_type: None,
            resource_name: None,
            pattern: PatternFilter::Any,
            principal: None,
            host: None,
            operation: None,
            permission: None,
        }
    }

    pub fn matches(&self, acl: &Acl) -> bool {
        let name = self.resource_name.as_deref();
        let resource = match self.pattern {
            PatternFilter::Any => name.is_none_or(|n| n == acl.resource_name),
            PatternFilter::Match => name.is_none_or(|n| acl.covers(n)),
            PatternFilter::Literal => {
                acl.pattern == PatternType::Literal && name.is_none_or(|n| n == acl.resource_name)
            }
            PatternFilter::Prefixed => {
                acl.pattern == PatternType::Prefixed && name.is_none_or(|n| n == acl.resource_name)
            }
        };
        resource
            && self.resource_type.is_none_or(|t| t == acl.resource_type)
            && self.principal.as_ref().is_none_or(|p| *p == acl.principal)
            && self.host.as_ref().is_none_or(|h| *h == acl.host)
            && self.operation.is_none_or(|o| o == acl.operation)
            && self.permission.is_none_or(|p| p == acl.permission)
    }
}

/// The operations whose Allow also allows `op`.
fn allowing(op: Operation) -> &'static [Operation] {
    use Operation::*;
    match op {
        Describe => &[Describe, All, Read, Write, Delete, Alter],
        DescribeConfigs => &[DescribeConfigs, All, AlterConfigs],
        Read => &[Read, All],
        Write => &[Write, All],
        Create => &[Create, All],
        Delete => &[Delete, All],
        Alter => &[Alter, All],
        AlterConfigs => &[AlterConfigs, All],
        IdempotentWrite => &[IdempotentWrite, All],
        ClusterAction => &[ClusterAction, All],
        All => &[All],
    }
}

/// How a broker authorizes: whether ACLs are enabled, its super users, and the cluster's ACLs
/// as last pushed. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct Authorizer {
    pub enabled: bool,
    pub super_users: Arc<BTreeSet<String>>,
    pub state: Arc<SecurityState>,
}

impl Authorizer {
    /// Whether `principal`, connected from `host`, may do `op` on the resource.
    pub fn allows(
        &self,
        principal: &str,
        host: &str,
        op: Operation,
        resource: ResourceType,
        name: &str,
    ) -> bool {
        if !self.enabled || self.super_users.contains(principal) {
            return true;
        }
        let relevant = || {
            self.state.acls.iter().filter(move |a| {
                a.resource_type == resource && a.concerns(principal, host) && a.covers(name)
            })
        };
        let denied = relevant().any(|a| {
            a.permission == Permission::Deny && (a.operation == op || a.operation == Operation::All)
        });
        !denied
            && relevant()
                .any(|a| a.permission == Permission::Allow && allowing(op).contains(&a.operation))
    }

    /// Whether `principal` may do `op` on some resource of this type: an ACL allows it on
    /// some name and no ACL denies it on every name (Kafka's check for idempotent producers
    /// that may write to any topic).
    pub fn allows_some(
        &self,
        principal: &str,
        host: &str,
        op: Operation,
        resource: ResourceType,
    ) -> bool {
        if !self.enabled || self.super_users.contains(principal) {
            return true;
        }
        let relevant = || {
            self.state
                .acls
                .iter()
                .filter(move |a| a.resource_type == resource && a.concerns(principal, host))
        };
        let denied_everywhere = relevant().any(|a| {
            a.permission == Permission::Deny
                && (a.operation == op || a.operation == Operation::All)
                && a.pattern == PatternType::Literal
                && a.resource_name == WILDCARD
        });
        !denied_everywhere
            && relevant()
                .any(|a| a.permission == Permission::Allow && allowing(op).contains(&a.operation))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(
        resource_type: ResourceType,
        name: &str,
        pattern: PatternType,
        principal: &str,
        operation: Operation,
        permission: Permission,
    ) -> Acl {
        Acl {
            resource_type,
            resource_name: name.into(),
            pattern,
            principal: principal.into(),
            host: WILDCARD.into(),
            operation,
            permission,
        }
    }

    fn authorizer(acls: Vec<Acl>) -> Authorizer {
        Authorizer {
            enabled: true,
            super_users: Arc::new(["User:admin".to_string()].into()),
            state: Arc::new(SecurityState {
                acls: acls.into_iter().collect(),
                ..SecurityState::default()
            }),
        }
    }

    #[test]
    fn default_deny_allow_deny_wins_and_implications() {
        use Operation::*;
        use PatternType::*;
        use Permission::*;
        use ResourceType::*;
        let auth = authorizer(vec![
            acl(Topic, "orders", Literal, "User:alice", Read, Allow),
            acl(Topic, "pay-", Prefixed, "User:alice", Write, Allow),
            acl(Topic, "pay-secret", Literal, "User:alice", All, Deny),
            acl(Topic, "*", Literal, "User:*", Describe, Allow),
            acl(Group, "g", Literal, "User:alice", Read, Allow),
            acl(Topic, "cfg", Literal, "User:bob", AlterConfigs, Allow),
        ]);
        let alice = |op, rt, name| auth.allows("User:alice", "10.0.0.1", op, rt, name);
        assert!(alice(Read, Topic, "orders"));
        assert!(!alice(Write, Topic, "orders"), "default deny");
        assert!(alice(Write, Topic, "pay-in"), "prefixed");
        assert!(!alice(Write, Topic, "pay-secret"), "deny wins");
        assert!(
            !alice(Describe, Topic, "pay-secret"),
            "deny All covers Describe"
        );
        assert!(
            alice(Describe, Topic, "anything"),
            "wildcard name and principal"
        );
        assert!(alice(Read, Group, "g") && !alice(Read, Group, "h"));
        assert!(!alice(Create, Cluster, CLUSTER_NAME));
        assert!(auth.allows("User:bob", "h", DescribeConfigs, Topic, "cfg"));
        assert!(auth.allows("User:bob", "h", Describe, Topic, "x"));
        assert!(!auth.allows("User:bob", "h", Read, Topic, "cfg"));
        assert!(auth.allows("User:admin", "h", Delete, Cluster, CLUSTER_NAME));
        assert!(auth.allows_some("User:alice", "h", Write, Topic));
        assert!(!auth.allows_some("User:bob", "h", Write, Topic));
        let open = Authorizer::default();
        assert!(
            open.allows("User:ANONYMOUS", "h", Delete, Topic, "x"),
            "disabled"
        );
    }

    #[test]
    fn hosts_narrow_and_filters_select() {
        use Operation::*;
        let mut narrow = acl(
            ResourceType::Topic,
            "t",
            PatternType::Literal,
            "User:a",
            Read,
            Permission::Allow,
        );
        narrow.host = "10.0.0.1".into();
        let auth = authorizer(vec![narrow.clone()]);
        assert!(auth.allows("User:a", "10.0.0.1", Read, ResourceType::Topic, "t"));
        assert!(!auth.allows("User:a", "10.0.0.2", Read, ResourceType::Topic, "t"));

        let prefixed = acl(
            ResourceType::Topic,
            "t",
            PatternType::Prefixed,
            "User:a",
            Read,
            Permission::Allow,
        );
        let matching = AclFilter {
            resource_name: Some("topic".into()),
            pattern: PatternFilter::Match,
            ..AclFilter::any()
        };
        assert!(matching.matches(&prefixed) && !matching.matches(&narrow));
        let literal = AclFilter {
            pattern: PatternFilter::Literal,
            ..AclFilter::any()
        };
        assert!(literal.matches(&narrow) && !literal.matches(&prefixed));
        assert!(AclFilter::any().matches(&prefixed));
    }

    #[test]
    fn names_parse_loosely_and_bad_acls_are_refused() {
        assert_eq!(
            Operation::from_name("describe-configs"),
            Some(Operation::DescribeConfigs)
        );
        assert_eq!(
            Operation::from_name("ALTER_CONFIGS"),
            Some(Operation::AlterConfigs)
        );
        assert_eq!(
            ResourceType::from_name("transactional_id"),
            Some(ResourceType::TransactionalId)
        );
        assert_eq!(Operation::from_code(8), Some(Operation::Describe));
        let mut bad = acl(
            ResourceType::Cluster,
            "other",
            PatternType::Literal,
            "User:a",
            Operation::Alter,
            Permission::Allow,
        );
        assert!(bad.validate().is_err());
        bad.resource_name = CLUSTER_NAME.into();
        assert!(bad.validate().is_ok());
        bad.principal = "alice".into();
        assert!(bad.validate().is_err());
    }
}
