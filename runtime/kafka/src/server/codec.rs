//! Decoding request bodies and encoding length-prefixed responses, with typed errors.

use crate::error::KafkaError;
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::ResponseHeader;
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion};

/// Decodes a request body of `version`.
pub fn decode<T: Decodable>(body: &mut Bytes, version: i16) -> Result<T, KafkaError> {
    T::decode(body, version).map_err(|e| KafkaError::Decode {
        what: crate::short_type_name::<T>(),
        version,
        reason: e.to_string(),
    })
}

/// Encodes a whole response frame: length prefix, header of the version `R` requires, body.
pub fn encode<R: Encodable + HeaderVersion>(
    correlation_id: i32,
    version: i16,
    body: &R,
) -> Result<Bytes, KafkaError> {
    let mut buf = BytesMut::new();
    buf.put_i32(0);
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(&mut buf, R::header_version(version))
        .map_err(|e| encode_error("ResponseHeader", version, e))?;
    body.encode(&mut buf, version)
        .map_err(|e| encode_error(crate::short_type_name::<R>(), version, e))?;
    let len = i32::try_from(buf.len() - 4).map_err(|_| {
        encode_error(
            crate::short_type_name::<R>(),
            version,
            "response exceeds 2 GiB",
        )
    })?;
    buf[..4].copy_from_slice(&len.to_be_bytes());
    Ok(buf.freeze())
}

fn encode_error(what: &'static str, version: i16, e: impl std::fmt::Display) -> KafkaError {
    KafkaError::Encode {
        what,
        version,
        reason: e.to_string(),
    }
}
