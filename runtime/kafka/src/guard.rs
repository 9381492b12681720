//! A bounds walk over request bodies before kafka-protocol decodes them.
//!
//! kafka-protocol's decoders preallocate every array from the count on the wire
//! (`Vec::with_capacity(n)`): a 4-byte Metadata request claiming 2^31 topics asks for hundreds
//! of gigabytes, and a failed allocation aborts the whole broker rather than failing the
//! decode. So each body is first walked against the shape of its request (fields per
//! version, as kafka-protocol 0.18 decodes them) and refused if any array count, string or
//! byte length exceeds the bytes that remain. A count can never legitimately exceed them:
//! every element takes at least one byte.

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

/// A field present in versions `from..=to`.
#[derive(Clone, Copy)]
struct F {
    from: i16,
    to: i16,
    t: T,
}

const fn all(t: T) -> F {
    F {
        from: 0,
        to: i16::MAX,
        t,
    }
}
const fn since(from: i16, t: T) -> F {
    F {
        from,
        to: i16::MAX,
        t,
    }
}
const fn until(to: i16, t: T) -> F {
    F { from: 0, to, t }
}
const fn between(from: i16, to: i16, t: T) -> F {
    F { from, to, t }
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

fn shape(api: ApiKey) -> Option<&'static [F]> {
    Some(match api {
        ApiKey::Produce => PRODUCE,
        ApiKey::Fetch => FETCH,
        ApiKey::ListOffsets => LIST_OFFSETS,
        ApiKey::Metadata => METADATA,
        ApiKey::OffsetCommit => OFFSET_COMMIT,
        ApiKey::OffsetFetch => OFFSET_FETCH,
        ApiKey::FindCoordinator => FIND_COORDINATOR,
        ApiKey::ApiVersions => API_VERSIONS,
        ApiKey::CreateTopics => CREATE_TOPICS,
        ApiKey::InitProducerId => INIT_PRODUCER_ID,
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
    #[error("no request shape is known for this API")]
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
        for f in fields.iter().filter(|f| (f.from..=f.to).contains(&version)) {
            self.value(f.t)?;
        }
        if self.flexible {
            // Tagged fields are length-delimited: skipping them checks their bounds.
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
                self.uvarint("tag")?;
                let size = self.uvarint("tagged field size")?;
                self.skip(size, "tagged field")?;
            }
        }
        Ok(())
    }
}

/// Checks that `body` (the request after its header) stays within its own bounds.
pub fn check(api: ApiKey, version: i16, body: &[u8]) -> Result<(), GuardError> {
    let fields = shape(api).ok_or(GuardError::UnknownShape)?;
    let flexible = api.request_header_version(version) >= 2;
    Walk {
        buf: body,
        at: 0,
        version,
        flexible,
    }
    .fields(fields)
}
