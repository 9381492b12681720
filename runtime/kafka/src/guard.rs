//! A bounds walk over message bodies before kafka-protocol decodes them.
//!
//! kafka-protocol's decoders preallocate every array from the count on the wire
//! (`Vec::with_capacity(n)`): a 4-byte Metadata request claiming 2^31 topics asks for hundreds
//! of gigabytes, and a failed allocation aborts the whole process rather than failing the
//! decode. So the server walks each request body, and the client each response body, against
//! the shape of its message (fields per version, as kafka-protocol 0.18 decodes them) and
//! refuses it if any array count, string or byte length exceeds the bytes that remain. A
//! count can never legitimately exceed them: every element takes at least one byte.

use kafka_protocol::messages::ApiKey;

/// The wire type of a field.
#[derive(Clone, Copy)]
enum T {
    I8,
    I16,
    I32,
    I64,
    Uuid,
    /// String, nullable or not (compact in flexible versions).
    Str,
    /// Bytes or records, nullable or not (compact in flexible versions).
    Bytes,
    /// Array of structs (nullable or not).
    Structs(&'static [F]),
    /// Array of int32.
    I32s,
    /// Array of strings.
    Strs,
}

/// A field present in versions `from..=to`; a tagged field (flexible versions only) when
/// `tag` is set, which the decoder reads in place and so must be walked too.
#[derive(Clone, Copy)]
struct F {
    from: i16,
    to: i16,
    t: T,
    tag: Option<i64>,
}

const fn all(t: T) -> F {
    between(0, i16::MAX, t)
}
const fn since(from: i16, t: T) -> F {
    between(from, i16::MAX, t)
}
const fn until(to: i16, t: T) -> F {
    between(0, to, t)
}
const fn between(from: i16, to: i16, t: T) -> F {
    F {
        from,
        to,
        t,
        tag: None,
    }
}
const fn tagged(tag: i64, t: T) -> F {
    F {
        from: 0,
        to: i16::MAX,
        t,
        tag: Some(tag),
    }
}

use T::*;

const PRODUCE: &[F] = &[
    all(Str),
    all(I16),
    all(I32),
    all(Structs(&[
        until(12, Str),
        since(13, Uuid),
        all(Structs(&[all(I32), all(Bytes)])),
    ])),
];

const FETCH: &[F] = &[
    until(14, I32),
    all(I32),
    all(I32),
    all(I32),
    all(I8),
    since(7, I32),
    since(7, I32),
    all(Structs(&[
        until(12, Str),
        since(13, Uuid),
        all(Structs(&[
            all(I32),
            since(9, I32),
            all(I64),
            since(12, I32),
            since(5, I64),
            all(I32),
        ])),
    ])),
    since(7, Structs(&[until(12, Str), since(13, Uuid), all(I32s)])),
    since(11, Str),
];

const LIST_OFFSETS: &[F] = &[
    all(I32),
    since(2, I8),
    all(Structs(&[
        all(Str),
        all(Structs(&[all(I32), since(4, I32), all(I64)])),
    ])),
    since(10, I32),
];

const DELETE_RECORDS: &[F] = &[
    all(Structs(&[all(Str), all(Structs(&[all(I32), all(I64)]))])),
    all(I32),
];

const METADATA: &[F] = &[
    all(Structs(&[since(10, Uuid), all(Str)])),
    since(4, I8),
    between(8, 10, I8),
    since(8, I8),
];

const OFFSET_COMMIT: &[F] = &[
    all(Str),
    all(I32),
    all(Str),
    since(7, Str),
    until(4, I64),
    all(Structs(&[
        all(Str),
        all(Structs(&[all(I32), all(I64), since(6, I32), all(Str)])),
    ])),
];

const OFFSET_FETCH: &[F] = &[
    until(7, Str),
    until(7, Structs(&[all(Str), all(I32s)])),
    since(
        8,
        Structs(&[
            all(Str),
            since(9, Str),
            since(9, I32),
            all(Structs(&[all(Str), all(I32s)])),
        ]),
    ),
    since(7, I8),
];

const FIND_COORDINATOR: &[F] = &[until(3, Str), since(1, I8), since(4, Strs)];

const API_VERSIONS: &[F] = &[since(3, Str), since(3, Str)];

const CREATE_TOPICS: &[F] = &[
    all(Structs(&[
        all(Str),
        all(I32),
        all(I16),
        all(Structs(&[all(I32), all(I32s)])),
        all(Structs(&[all(Str), all(Str)])),
    ])),
    all(I32),
    all(I8),
];

const INIT_PRODUCER_ID: &[F] = &[all(Str), all(I32), since(3, I64), since(3, I16)];

const JOIN_GROUP: &[F] = &[
    all(Str),
    all(I32),
    since(1, I32),
    all(Str),
    since(5, Str),
    all(Str),
    all(Structs(&[all(Str), all(Bytes)])),
    since(8, Str),
];

const SYNC_GROUP: &[F] = &[
    all(Str),
    all(I32),
    all(Str),
    since(3, Str),
    since(5, Str),
    since(5, Str),
    all(Structs(&[all(Str), all(Bytes)])),
];

const HEARTBEAT: &[F] = &[all(Str), all(I32), all(Str), since(3, Str)];

const LEAVE_GROUP: &[F] = &[
    all(Str),
    until(2, Str),
    since(3, Structs(&[all(Str), all(Str), since(5, Str)])),
];

const DELETE_TOPICS: &[F] = &[
    since(6, Structs(&[all(Str), all(Uuid)])),
    until(5, Strs),
    all(I32),
];

const CREATE_PARTITIONS: &[F] = &[
    all(Structs(&[all(Str), all(I32), all(Structs(&[all(I32s)]))])),
    all(I32),
    all(I8),
];

const DESCRIBE_CONFIGS: &[F] = &[
    all(Structs(&[all(I8), all(Str), all(Strs)])),
    all(I8),
    since(3, I8),
];

const ALTER_CONFIGS: &[F] = &[
    all(Structs(&[
        all(I8),
        all(Str),
        all(Structs(&[all(Str), all(Str)])),
    ])),
    all(I8),
];

const INCREMENTAL_ALTER_CONFIGS: &[F] = &[
    all(Structs(&[
        all(I8),
        all(Str),
        all(Structs(&[all(Str), all(I8), all(Str)])),
    ])),
    all(I8),
];

const DESCRIBE_CLUSTER: &[F] = &[all(I8), since(1, I8), since(2, I8)];

const LIST_GROUPS: &[F] = &[since(4, Strs), since(5, Strs)];

const DESCRIBE_GROUPS: &[F] = &[all(Strs), since(3, I8)];

const DELETE_GROUPS: &[F] = &[all(Strs)];

const OFFSET_DELETE: &[F] = &[
    all(Str),
    all(Structs(&[all(Str), all(Structs(&[all(I32)]))])),
];

const API_VERSIONS_RESPONSE: &[F] = &[
    all(I16),
    all(Structs(&[all(I16), all(I16), all(I16)])),
    since(1, I32),
    tagged(0, Structs(&[all(Str), all(I16), all(I16)])),
    tagged(2, Structs(&[all(Str), all(I16), all(I16)])),
];

const METADATA_RESPONSE: &[F] = &[
    since(3, I32),
    all(Structs(&[all(I32), all(Str), all(I32), since(1, Str)])),
    since(2, Str),
    since(1, I32),
    all(Structs(&[
        all(I16),
        all(Str),
        since(10, Uuid),
        since(1, I8),
        all(Structs(&[
            all(I16),
            all(I32),
            all(I32),
            since(7, I32),
            all(I32s),
            all(I32s),
            since(5, I32s),
        ])),
        since(8, I32),
    ])),
    between(8, 10, I32),
    since(13, I16),
];

const PRODUCE_RESPONSE: &[F] = &[
    all(Structs(&[
        until(12, Str),
        since(13, Uuid),
        all(Structs(&[
            all(I32),
            all(I16),
            all(I64),
            all(I64),
            since(5, I64),
            since(8, Structs(&[all(I32), all(Str)])),
            since(8, Str),
        ])),
    ])),
    all(I32),
];

const FETCH_RESPONSE: &[F] = &[
    all(I32),
    since(7, I16),
    since(7, I32),
    all(Structs(&[
        until(12, Str),
        since(13, Uuid),
        all(Structs(&[
            all(I32),
            all(I16),
            all(I64),
            all(I64),
            since(5, I64),
            all(Structs(&[all(I64), all(I64)])),
            since(11, I32),
            all(Bytes),
        ])),
    ])),
];

const DELETE_RECORDS_RESPONSE: &[F] = &[
    all(I32),
    all(Structs(&[
        all(Str),
        all(Structs(&[all(I32), all(I64), all(I16)])),
    ])),
];

const LIST_OFFSETS_RESPONSE: &[F] = &[
    since(2, I32),
    all(Structs(&[
        all(Str),
        all(Structs(&[
            all(I32),
            all(I16),
            all(I64),
            all(I64),
            since(4, I32),
        ])),
    ])),
];

const OFFSET_COMMIT_RESPONSE: &[F] = &[
    since(3, I32),
    all(Structs(&[
        until(9, Str),
        since(10, Uuid),
        all(Structs(&[all(I32), all(I16)])),
    ])),
];

const OFFSET_FETCH_RESPONSE: &[F] = &[
    since(3, I32),
    until(
        7,
        Structs(&[
            all(Str),
            all(Structs(&[
                all(I32),
                all(I64),
                since(5, I32),
                all(Str),
                all(I16),
            ])),
        ]),
    ),
    between(2, 7, I16),
    since(
        8,
        Structs(&[
            all(Str),
            all(Structs(&[
                until(9, Str),
                since(10, Uuid),
                all(Structs(&[all(I32), all(I64), all(I32), all(Str), all(I16)])),
            ])),
            all(I16),
        ]),
    ),
];

const FIND_COORDINATOR_RESPONSE: &[F] = &[
    since(1, I32),
    until(3, I16),
    between(1, 3, Str),
    until(3, I32),
    until(3, Str),
    until(3, I32),
    since(
        4,
        Structs(&[all(Str), all(I32), all(Str), all(I32), all(I16), all(Str)]),
    ),
];

const CREATE_TOPICS_RESPONSE: &[F] = &[
    all(I32),
    all(Structs(&[
        all(Str),
        since(7, Uuid),
        all(I16),
        all(Str),
        since(5, I32),
        since(5, I16),
        since(5, Structs(&[all(Str), all(Str), all(I8), all(I8), all(I8)])),
    ])),
];

const INIT_PRODUCER_ID_RESPONSE: &[F] = &[
    all(I32),
    all(I16),
    all(I64),
    all(I16),
    since(6, I64),
    since(6, I16),
];

const JOIN_GROUP_RESPONSE: &[F] = &[
    since(2, I32),
    all(I16),
    all(I32),
    since(7, Str),
    all(Str),
    all(Str),
    since(9, I8),
    all(Str),
    all(Structs(&[all(Str), since(5, Str), all(Bytes)])),
];

const SYNC_GROUP_RESPONSE: &[F] = &[
    since(1, I32),
    all(I16),
    since(5, Str),
    since(5, Str),
    all(Bytes),
];

const HEARTBEAT_RESPONSE: &[F] = &[since(1, I32), all(I16)];

const LEAVE_GROUP_RESPONSE: &[F] = &[
    since(1, I32),
    all(I16),
    since(3, Structs(&[all(Str), all(Str), all(I16)])),
];

const DELETE_TOPICS_RESPONSE: &[F] = &[
    since(1, I32),
    all(Structs(&[
        all(Str),
        since(6, Uuid),
        all(I16),
        since(5, Str),
    ])),
];

const CREATE_PARTITIONS_RESPONSE: &[F] = &[all(I32), all(Structs(&[all(Str), all(I16), all(Str)]))];

const DESCRIBE_CONFIGS_RESPONSE: &[F] = &[
    all(I32),
    all(Structs(&[
        all(I16),
        all(Str),
        all(I8),
        all(Str),
        all(Structs(&[
            all(Str),
            all(Str),
            all(I8),
            all(I8),
            all(I8),
            all(Structs(&[all(Str), all(Str), all(I8)])),
            since(3, I8),
            since(3, Str),
        ])),
    ])),
];

/// AlterConfigs and IncrementalAlterConfigs answer alike.
const ALTER_CONFIGS_RESPONSE: &[F] = &[
    all(I32),
    all(Structs(&[all(I16), all(Str), all(I8), all(Str)])),
];

const DESCRIBE_CLUSTER_RESPONSE: &[F] = &[
    all(I32),
    all(I16),
    all(Str),
    since(1, I8),
    all(Str),
    all(I32),
    all(Structs(&[
        all(I32),
        all(Str),
        all(I32),
        all(Str),
        since(2, I8),
    ])),
    all(I32),
];

const LIST_GROUPS_RESPONSE: &[F] = &[
    since(1, I32),
    all(I16),
    all(Structs(&[all(Str), all(Str), since(4, Str), since(5, Str)])),
];

const DESCRIBE_GROUPS_RESPONSE: &[F] = &[
    since(1, I32),
    all(Structs(&[
        all(I16),
        since(6, Str),
        all(Str),
        all(Str),
        all(Str),
        all(Str),
        all(Structs(&[
            all(Str),
            since(4, Str),
            all(Str),
            all(Str),
            all(Bytes),
            all(Bytes),
        ])),
        since(3, I32),
    ])),
];

const DELETE_GROUPS_RESPONSE: &[F] = &[all(I32), all(Structs(&[all(Str), all(I16)]))];

const OFFSET_DELETE_RESPONSE: &[F] = &[
    all(I16),
    all(I32),
    all(Structs(&[all(Str), all(Structs(&[all(I32), all(I16)]))])),
];

const SASL_HANDSHAKE: &[F] = &[all(Str)];
const SASL_HANDSHAKE_RESPONSE: &[F] = &[all(I16), all(Strs)];
const SASL_AUTHENTICATE: &[F] = &[all(Bytes)];
const SASL_AUTHENTICATE_RESPONSE: &[F] = &[all(I16), all(Str), all(Bytes), since(1, I64)];

/// An ACL filter (DescribeAcls, DeleteAcls) and an ACL (CreateAcls) have the same shape.
const ACL: &[F] = &[
    all(I8),
    all(Str),
    all(I8),
    all(Str),
    all(Str),
    all(I8),
    all(I8),
];
const DESCRIBE_ACLS: &[F] = ACL;
const DESCRIBE_ACLS_RESPONSE: &[F] = &[
    all(I32),
    all(I16),
    all(Str),
    all(Structs(&[
        all(I8),
        all(Str),
        all(I8),
        all(Structs(&[all(Str), all(Str), all(I8), all(I8)])),
    ])),
];
const CREATE_ACLS: &[F] = &[all(Structs(ACL))];
const CREATE_ACLS_RESPONSE: &[F] = &[all(I32), all(Structs(&[all(I16), all(Str)]))];
const DELETE_ACLS: &[F] = &[all(Structs(ACL))];
const DELETE_ACLS_RESPONSE: &[F] = &[
    all(I32),
    all(Structs(&[
        all(I16),
        all(Str),
        all(Structs(&[
            all(I16),
            all(Str),
            all(I8),
            all(Str),
            all(I8),
            all(Str),
            all(Str),
            all(I8),
            all(I8),
        ])),
    ])),
];

const DESCRIBE_USER_SCRAM_CREDENTIALS: &[F] = &[all(Structs(&[all(Str)]))];
const DESCRIBE_USER_SCRAM_CREDENTIALS_RESPONSE: &[F] = &[
    all(I32),
    all(I16),
    all(Str),
    all(Structs(&[
        all(Str),
        all(I16),
        all(Str),
        all(Structs(&[all(I8), all(I32)])),
    ])),
];
const ALTER_USER_SCRAM_CREDENTIALS: &[F] = &[
    all(Structs(&[all(Str), all(I8)])),
    all(Structs(&[
        all(Str),
        all(I8),
        all(I32),
        all(Bytes),
        all(Bytes),
    ])),
];
const ALTER_USER_SCRAM_CREDENTIALS_RESPONSE: &[F] =
    &[all(I32), all(Structs(&[all(Str), all(I16), all(Str)]))];

fn response_shape(api: ApiKey) -> Option<&'static [F]> {
    Some(match api {
        ApiKey::Produce => PRODUCE_RESPONSE,
        ApiKey::Fetch => FETCH_RESPONSE,
        ApiKey::ListOffsets => LIST_OFFSETS_RESPONSE,
        ApiKey::DeleteRecords => DELETE_RECORDS_RESPONSE,
        ApiKey::Metadata => METADATA_RESPONSE,
        ApiKey::OffsetCommit => OFFSET_COMMIT_RESPONSE,
        ApiKey::OffsetFetch => OFFSET_FETCH_RESPONSE,
        ApiKey::FindCoordinator => FIND_COORDINATOR_RESPONSE,
        ApiKey::ApiVersions => API_VERSIONS_RESPONSE,
        ApiKey::CreateTopics => CREATE_TOPICS_RESPONSE,
        ApiKey::InitProducerId => INIT_PRODUCER_ID_RESPONSE,
        ApiKey::JoinGroup => JOIN_GROUP_RESPONSE,
        ApiKey::SyncGroup => SYNC_GROUP_RESPONSE,
        ApiKey::Heartbeat => HEARTBEAT_RESPONSE,
        ApiKey::LeaveGroup => LEAVE_GROUP_RESPONSE,
        ApiKey::DeleteTopics => DELETE_TOPICS_RESPONSE,
        ApiKey::CreatePartitions => CREATE_PARTITIONS_RESPONSE,
        ApiKey::DescribeConfigs => DESCRIBE_CONFIGS_RESPONSE,
        ApiKey::AlterConfigs | ApiKey::IncrementalAlterConfigs => ALTER_CONFIGS_RESPONSE,
        ApiKey::DescribeCluster => DESCRIBE_CLUSTER_RESPONSE,
        ApiKey::ListGroups => LIST_GROUPS_RESPONSE,
        ApiKey::DescribeGroups => DESCRIBE_GROUPS_RESPONSE,
        ApiKey::DeleteGroups => DELETE_GROUPS_RESPONSE,
        ApiKey::OffsetDelete => OFFSET_DELETE_RESPONSE,
        ApiKey::SaslHandshake => SASL_HANDSHAKE_RESPONSE,
        ApiKey::SaslAuthenticate => SASL_AUTHENTICATE_RESPONSE,
        ApiKey::DescribeAcls => DESCRIBE_ACLS_RESPONSE,
        ApiKey::CreateAcls => CREATE_ACLS_RESPONSE,
        ApiKey::DeleteAcls => DELETE_ACLS_RESPONSE,
        ApiKey::DescribeUserScramCredentials => DESCRIBE_USER_SCRAM_CREDENTIALS_RESPONSE,
        ApiKey::AlterUserScramCredentials => ALTER_USER_SCRAM_CREDENTIALS_RESPONSE,
        _ => return None,
    })
}

fn request_shape(api: ApiKey) -> Option<&'static [F]> {
    Some(match api {
        ApiKey::Produce => PRODUCE,
        ApiKey::Fetch => FETCH,
        ApiKey::ListOffsets => LIST_OFFSETS,
        ApiKey::DeleteRecords => DELETE_RECORDS,
        ApiKey::Metadata => METADATA,
        ApiKey::OffsetCommit => OFFSET_COMMIT,
        ApiKey::OffsetFetch => OFFSET_FETCH,
        ApiKey::FindCoordinator => FIND_COORDINATOR,
        ApiKey::ApiVersions => API_VERSIONS,
        ApiKey::CreateTopics => CREATE_TOPICS,
        ApiKey::InitProducerId => INIT_PRODUCER_ID,
        ApiKey::JoinGroup => JOIN_GROUP,
        ApiKey::SyncGroup => SYNC_GROUP,
        ApiKey::Heartbeat => HEARTBEAT,
        ApiKey::LeaveGroup => LEAVE_GROUP,
        ApiKey::DeleteTopics => DELETE_TOPICS,
        ApiKey::CreatePartitions => CREATE_PARTITIONS,
        ApiKey::DescribeConfigs => DESCRIBE_CONFIGS,
        ApiKey::AlterConfigs => ALTER_CONFIGS,
        ApiKey::IncrementalAlterConfigs => INCREMENTAL_ALTER_CONFIGS,
        ApiKey::DescribeCluster => DESCRIBE_CLUSTER,
        ApiKey::ListGroups => LIST_GROUPS,
        ApiKey::DescribeGroups => DESCRIBE_GROUPS,
        ApiKey::DeleteGroups => DELETE_GROUPS,
        ApiKey::OffsetDelete => OFFSET_DELETE,
        ApiKey::SaslHandshake => SASL_HANDSHAKE,
        ApiKey::SaslAuthenticate => SASL_AUTHENTICATE,
        ApiKey::DescribeAcls => DESCRIBE_ACLS,
        ApiKey::CreateAcls => CREATE_ACLS,
        ApiKey::DeleteAcls => DELETE_ACLS,
        ApiKey::DescribeUserScramCredentials => DESCRIBE_USER_SCRAM_CREDENTIALS,
        ApiKey::AlterUserScramCredentials => ALTER_USER_SCRAM_CREDENTIALS,
        _ => return None,
    })
}

/// Why a body was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GuardError {
    #[error("{what} of {claimed} at byte {at} exceeds the {left} bytes left")]
    Overrun {
        what: &'static str,
        claimed: i64,
        at: usize,
        left: usize,
    },
    #[error("malformed {what} at byte {at}")]
    Malformed { what: &'static str, at: usize },
    #[error("no message shape is known for this API")]
    UnknownShape,
}

struct Walk<'a> {
    buf: &'a [u8],
    at: usize,
    version: i16,
    flexible: bool,
}

impl Walk<'_> {
    fn left(&self) -> usize {
        self.buf.len() - self.at
    }

    fn skip(&mut self, n: i64, what: &'static str) -> Result<(), GuardError> {
        match usize::try_from(n) {
            Ok(n) if n <= self.left() => {
                self.at += n;
                Ok(())
            }
            _ => Err(GuardError::Overrun {
                what,
                claimed: n,
                at: self.at,
                left: self.left(),
            }),
        }
    }

    fn fixed<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], GuardError> {
        let bytes = self
            .buf
            .get(self.at..self.at + N)
            .and_then(|b| <[u8; N]>::try_from(b).ok())
            .ok_or(GuardError::Overrun {
                what,
                claimed: N as i64,
                at: self.at,
                left: self.left(),
            })?;
        self.at += N;
        Ok(bytes)
    }

    fn uvarint(&mut self, what: &'static str) -> Result<i64, GuardError> {
        let mut value: u64 = 0;
        for i in 0..5 {
            let [b] = self.fixed::<1>(what)?;
            value |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(value as i64);
            }
        }
        Err(GuardError::Malformed { what, at: self.at })
    }

    /// A length: compact (unsigned varint, 0 = null) in flexible versions, else `wide`
    /// bytes big-endian with -1 = null. Returns the element or byte count (0 for null).
    fn length(&mut self, wide: usize, what: &'static str) -> Result<i64, GuardError> {
        let n = if self.flexible {
            self.uvarint(what)? - 1
        } else if wide == 2 {
            i64::from(i16::from_be_bytes(self.fixed::<2>(what)?))
        } else {
            i64::from(i32::from_be_bytes(self.fixed::<4>(what)?))
        };
        match n {
            -1 => Ok(0),
            n if n < -1 => Err(GuardError::Malformed { what, at: self.at }),
            n if n as u64 > self.left() as u64 => Err(GuardError::Overrun {
                what,
                claimed: n,
                at: self.at,
                left: self.left(),
            }),
            n => Ok(n),
        }
    }

    fn value(&mut self, t: T) -> Result<(), GuardError> {
        match t {
            I8 => self.skip(1, "int8"),
            I16 => self.skip(2, "int16"),
            I32 => self.skip(4, "int32"),
            I64 => self.skip(8, "int64"),
            Uuid => self.skip(16, "uuid"),
            Str => {
                let n = self.length(2, "string length")?;
                self.skip(n, "string")
            }
            Bytes => {
                let n = self.length(4, "bytes length")?;
                self.skip(n, "bytes")
            }
            I32s => {
                let n = self.length(4, "array count")?;
                self.skip(n.saturating_mul(4), "int32 array")
            }
            Strs => {
                for _ in 0..self.length(4, "array count")? {
                    self.value(Str)?;
                }
                Ok(())
            }
            Structs(fields) => {
                for _ in 0..self.length(4, "array count")? {
                    self.fields(fields)?;
                }
                Ok(())
            }
        }
    }

    fn fields(&mut self, fields: &[F]) -> Result<(), GuardError> {
        let version = self.version;
        let present = |f: &&F| (f.from..=f.to).contains(&version);
        for f in fields.iter().filter(present).filter(|f| f.tag.is_none()) {
            self.value(f.t)?;
        }
        if !self.flexible {
            return Ok(());
        }
        let count = self.uvarint("tagged field count")?;
        if count as u64 > self.left() as u64 {
            return Err(GuardError::Overrun {
                what: "tagged field count",
                claimed: count,
                at: self.at,
                left: self.left(),
            });
        }
        for _ in 0..count {
            let tag = self.uvarint("tag")?;
            let size = self.uvarint("tagged field size")?;
            let start = self.at;
            self.skip(size, "tagged field")?;
            // A known tagged field is decoded in place: walk it within its own bounds.
            if let Some(f) = fields.iter().filter(present).find(|f| f.tag == Some(tag)) {
                Walk {
                    buf: &self.buf[start..self.at],
                    at: 0,
                    version,
                    flexible: true,
                }
                .value(f.t)?;
            }
        }
        Ok(())
    }
}

fn walk(fields: Option<&[F]>, api: ApiKey, version: i16, body: &[u8]) -> Result<(), GuardError> {
    let fields = fields.ok_or(GuardError::UnknownShape)?;
    // Bodies are flexible exactly when the request header is (version 2).
    let flexible = api.request_header_version(version) >= 2;
    Walk {
        buf: body,
        at: 0,
        version,
        flexible,
    }
    .fields(fields)
}

/// Checks that a request `body` (after its header) stays within its own bounds.
pub fn check_request(api: ApiKey, version: i16, body: &[u8]) -> Result<(), GuardError> {
    walk(request_shape(api), api, version, body)
}

/// Checks that a response `body` (after its header) stays within its own bounds.
pub fn check_response(api: ApiKey, version: i16, body: &[u8]) -> Result<(), GuardError> {
    walk(response_shape(api), api, version, body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::messages::api_versions_response::SupportedFeatureKey;
    use kafka_protocol::messages::ApiVersionsResponse;
    use kafka_protocol::protocol::{Encodable, StrBytes};

    fn features(version: i16) -> BytesMut {
        let answer = ApiVersionsResponse::default().with_supported_features(vec![
            SupportedFeatureKey::default()
                .with_name(StrBytes::from_static_str("metadata.version"))
                .with_min_version(1)
                .with_max_version(7),
        ]);
        let mut buf = BytesMut::new();
        answer.encode(&mut buf, version).expect("encode");
        buf
    }

    #[test]
    fn walks_known_tagged_fields() {
        let buf = features(3);
        assert_eq!(check_response(ApiKey::ApiVersions, 3, &buf), Ok(()));
        // The body ends with tag count 1, tag 0, size 23, then the feature array: compact
        // count (n + 1 = 2), name (1 + 16 bytes), two int16, no tags. Claim 2^28 features.
        let at = buf.len() - 23;
        assert_eq!(
            (buf[at - 1], buf[at]),
            (23, 2),
            "tagged field where expected"
        );
        let mut bad = buf.to_vec();
        bad.splice(at..=at, [0x80, 0x80, 0x80, 0x80, 0x01]);
        let size_at = at - 1;
        bad[size_at] += 4;
        assert!(matches!(
            check_response(ApiKey::ApiVersions, 3, &bad),
            Err(GuardError::Overrun { .. })
        ));
    }

    #[test]
    fn refuses_absurd_counts_and_lengths() {
        let huge = [0x7f, 0xff, 0xff, 0xff];
        assert!(check_request(ApiKey::Metadata, 1, &huge).is_err());
        assert!(check_request(ApiKey::Metadata, 12, &[0xff, 0xff, 0xff, 0xff, 0x0f]).is_err());
        assert!(check_request(ApiKey::Produce, 3, &[0, 0]).is_err());
        assert!(check_response(ApiKey::Fetch, 4, &huge).is_err());
        assert_eq!(
            check_request(ApiKey::ElectLeaders, 0, &[]),
            Err(GuardError::UnknownShape)
        );
    }
}
