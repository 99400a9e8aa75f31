//! What a Kafka ACL is, as the agent's config and answers spell it: resource and pattern types,
//! operations, permissions, bindings and filters, and their codes on the wire
//! (`org.apache.kafka.common.acl` / `resource`); [`crate::kafka`] sends them.

use std::fmt;

use serde::{Deserialize, Serialize};
use shiqi_ca::protocol::KafkaAcl;

/// What an ACL is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum ResourceType {
    /// A topic.
    Topic,
    /// A consumer group.
    Group,
    /// The cluster itself (the resource name is always `kafka-cluster`).
    Cluster,
    /// A transactional producer id.
    TransactionalId,
    /// A type this build does not know (e.g. `delegation-token`, `user`); only ever read back
    /// from the cluster, never accepted in a config or a request.
    #[serde(skip_deserializing)]
    Unknown,
}

/// How an ACL's resource name matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum PatternType {
    /// The name exactly (`*` means every resource of the type).
    Literal,
    /// Every resource whose name starts with the name.
    Prefixed,
    /// Read back from the cluster only.
    #[serde(skip_deserializing)]
    Unknown,
}

/// What an ACL allows (or denies).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Operation {
    /// Every operation.
    All,
    /// Consume (topic), join and commit (group).
    Read,
    /// Produce (topic, transactional id). Since Kafka 3.0 WRITE on any topic also grants
    /// idempotent production (KIP-679).
    Write,
    /// Create topics.
    Create,
    /// Delete topics, records, groups.
    Delete,
    /// Create partitions (topic), alter ACLs (cluster).
    Alter,
    /// See metadata, offsets, group state.
    Describe,
    /// Inter-broker requests (cluster).
    ClusterAction,
    /// Read configs.
    DescribeConfigs,
    /// Change configs.
    AlterConfigs,
    /// Idempotent production (cluster; implied by topic WRITE since Kafka 3.0).
    IdempotentWrite,
    /// Read back from the cluster only (e.g. `create-tokens`, which this build does not name).
    #[serde(skip_deserializing)]
    Unknown,
}

/// Allow or deny.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Permission {
    /// Grants the operation.
    Allow,
    /// Forbids it, whatever else allows it.
    Deny,
    /// Read back from the cluster only.
    #[serde(skip_deserializing)]
    Unknown,
}

/// One ACL: `principal` may (or may not) do `operation` on the matching resources from `host`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub(crate) struct AclBinding {
    /// The resource type.
    pub(crate) resource: ResourceType,
    /// The resource name or prefix.
    pub(crate) name: String,
    /// How `name` matches.
    pub(crate) pattern: PatternType,
    /// `User:NAME` (the brokers map a client certificate's `CN=NAME` to `User:NAME`).
    pub(crate) principal: String,
    /// The client host, `*` for any.
    pub(crate) host: String,
    /// The operation.
    pub(crate) operation: Operation,
    /// Allow or deny.
    pub(crate) permission: Permission,
}

/// Which ACLs to describe or delete; `None` matches anything in that field.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct AclFilter {
    /// The resource type.
    pub(crate) resource: Option<ResourceType>,
    /// The exact resource name (or prefix, for prefixed ACLs).
    pub(crate) name: Option<String>,
    /// The pattern type.
    pub(crate) pattern: Option<PatternType>,
    /// The principal, e.g. `User:saige`.
    pub(crate) principal: Option<String>,
    /// The host.
    pub(crate) host: Option<String>,
    /// The operation.
    pub(crate) operation: Option<Operation>,
    /// The permission.
    pub(crate) permission: Option<Permission>,
}

/// Each enum's wire code (Kafka's `code()`), and back; `Unknown` is 0, which no request sends.
macro_rules! wire_codes {
    ($t:ty { $($variant:ident = $code:literal),* $(,)? }) => {
        impl $t {
            /// The code Kafka's requests carry (0 for `Unknown`).
            pub(crate) fn wire(self) -> i8 {
                match self {
                    $(Self::$variant => $code,)*
                    Self::Unknown => 0,
                }
            }

            /// What a reply's code means; a code this build does not know is `Unknown`.
            pub(crate) fn from_wire(code: i8) -> Self {
                match code {
                    $($code => Self::$variant,)*
                    _ => Self::Unknown,
                }
            }
        }
    };
}

wire_codes!(ResourceType { Topic = 2, Group = 3, Cluster = 4, TransactionalId = 5 });
wire_codes!(PatternType { Literal = 3, Prefixed = 4 });
wire_codes!(Operation {
    All = 2,
    Read = 3,
    Write = 4,
    Create = 5,
    Delete = 6,
    Alter = 7,
    Describe = 8,
    ClusterAction = 9,
    DescribeConfigs = 10,
    AlterConfigs = 11,
    IdempotentWrite = 12,
});
wire_codes!(Permission { Deny = 2, Allow = 3 });

impl ResourceType {
    /// The config spelling (`transactional-id`).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Topic => "topic",
            Self::Group => "group",
            Self::Cluster => "cluster",
            Self::TransactionalId => "transactional-id",
            Self::Unknown => "unknown",
        }
    }

    /// The operations Kafka defines for this resource type (Kafka's `AclCommand` table).
    pub(crate) fn operations(self) -> &'static [Operation] {
        use Operation::*;
        match self {
            Self::Topic => &[
                All,
                Read,
                Write,
                Create,
                Delete,
                Alter,
                Describe,
                DescribeConfigs,
                AlterConfigs,
            ],
            Self::Group => &[All, Read, Describe, Delete],
            Self::Cluster => &[
                All,
                Create,
                ClusterAction,
                DescribeConfigs,
                AlterConfigs,
                IdempotentWrite,
                Alter,
                Describe,
            ],
            Self::TransactionalId => &[All, Describe, Write],
            Self::Unknown => &[],
        }
    }
}

impl PatternType {
    /// The config spelling.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Literal => "literal",
            Self::Prefixed => "prefixed",
            Self::Unknown => "unknown",
        }
    }
}

impl Operation {
    /// The config spelling (`describe-configs`).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::All => "all",
            Self::Read => "read",
            Self::Write => "write",
            Self::Create => "create",
            Self::Delete => "delete",
            Self::Alter => "alter",
            Self::Describe => "describe",
            Self::ClusterAction => "cluster-action",
            Self::DescribeConfigs => "describe-configs",
            Self::AlterConfigs => "alter-configs",
            Self::IdempotentWrite => "idempotent-write",
            Self::Unknown => "unknown",
        }
    }
}

impl Permission {
    /// The config spelling.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Deny => "deny",
            Self::Unknown => "unknown",
        }
    }
}

macro_rules! display_as_str {
    ($($t:ty),*) => {$(
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    )*};
}
display_as_str!(ResourceType, PatternType, Operation, Permission);

impl fmt::Display for AclBinding {
    /// `User:saige allow read on prefixed topic app. from *`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {} on {} {} `{}` from {}",
            self.principal,
            self.permission,
            self.operation,
            self.pattern,
            self.resource,
            self.name,
            self.host
        )
    }
}

impl AclBinding {
    /// The wire form for `KafkaUserResponse`.
    pub(crate) fn to_wire(&self) -> KafkaAcl {
        KafkaAcl {
            principal: self.principal.as_str().into(),
            resource: self.resource.as_str().into(),
            pattern: self.pattern.as_str().into(),
            name: self.name.as_str().into(),
            operation: self.operation.as_str().into(),
            permission: self.permission.as_str().into(),
            host: self.host.as_str().into(),
        }
    }
}

impl AclFilter {
    /// Every ACL of one principal.
    pub(crate) fn principal(principal: impl Into<String>) -> Self {
        Self {
            principal: Some(principal.into()),
            ..Self::default()
        }
    }
}
