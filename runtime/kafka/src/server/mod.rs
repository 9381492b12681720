//! Serves one Kafka client connection: framing, header decoding, authentication, dispatch,
//! authorization, responses.
//!
//! Requests on a connection are answered one at a time and in order, as Kafka clients expect
//! (they match responses by correlation id but librdkafka also relies on ordering). Anything
//! this layer cannot parse closes the connection; errors a client can act on are answered with
//! Kafka error codes by the handlers. On a SASL listener a connection is served nothing but
//! ApiVersions, SaslHandshake and SaslAuthenticate until it has logged in ([`sasl`]); every
//! request after that goes through the authorizer ([`access`]).

mod access;
mod admin;
mod authorized;
mod codec;
mod codes;
mod configs;
mod fetch;
mod groups;
mod membership;
mod metadata;
mod produce;
mod sasl;
mod security;
mod topic_ids;

use crate::backend::Backend;
use crate::error::KafkaError;
use crate::versions;
use access::Authorized;
use bytes::Bytes;
use codec::{decode, encode};
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, RequestHeader};
use kafka_protocol::protocol::Decodable;
use sasl::Session;
pub use sasl::{ConnectionInfo, SASL_AUTHENTICATION_FAILED};
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};

/// Largest request accepted, as Kafka's default `socket.request.max.bytes`: a bigger length
/// prefix is garbage or abuse, and allocating it would let one client exhaust memory.
pub const MAX_FRAME_BYTES: usize = 100 * 1024 * 1024;

/// Serves Kafka requests on `stream` until the client closes it.
///
/// `prefix` holds bytes the caller already read from the stream (for instance the 4-byte
/// length the runtime peeked at to tell Kafka traffic from its own); they are parsed as if
/// still unread. `info` says which listener the connection reached and from where. Returns
/// `Ok` when the client closes between requests, and an error for any i/o failure, malformed
/// frame or failed login, after which the connection is dropped.
pub async fn serve_connection<B, S>(
    stream: S,
    prefix: Bytes,
    backend: Arc<B>,
    info: ConnectionInfo,
) -> Result<(), KafkaError>
where
    B: Backend,
    S: AsyncRead + AsyncWrite + Send + Unpin,
{
    let (reader, mut writer) = tokio::io::split(stream);
    let mut reader = BufReader::new(std::io::Cursor::new(prefix).chain(reader));
    let mut session = Session::new(info);
    loop {
        let mut len = [0u8; 4];
        match reader.read_exact(&mut len).await {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e.into()),
        }
        let len = i32::from_be_bytes(len);
        let size = usize::try_from(len)
            .ok()
            .filter(|&n| n <= MAX_FRAME_BYTES)
            .ok_or(KafkaError::FrameSize(i64::from(len)))?;
        // Grow with the bytes that actually arrive: a client announcing 100 MiB and sending
        // nothing must not make the broker hold 100 MiB.
        let mut frame = Vec::new();
        (&mut reader)
            .take(size as u64)
            .read_to_end(&mut frame)
            .await?;
        if frame.len() < size {
            return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof).into());
        }
        let response = if session.expects_raw_token() {
            let users = backend.authorizer().state;
            session.raw_token(&frame, &users).await
        } else {
            handle(&backend, &mut session, Bytes::from(frame)).await?
        };
        if let Some(response) = response {
            writer.write_all(&response).await?;
        }
        if let Some(why) = session.closing.take() {
            writer.flush().await?;
            linger(&mut reader).await;
            // close_notify on TLS; the refusal is already out, so a failure changes nothing.
            let _ = writer.shutdown().await;
            return Err(why);
        }
    }
}

/// Lets a refused client read its answer before the connection closes: waits until it closes
/// (discarding anything it still sends) or [`REFUSAL_LINGER`] passes.
///
/// Closing at once puts the refusal and the end of the stream in the same read for a client,
/// and some clients then drop the connection without looking at what they read (kafka-python
/// 3.0 does: its reader sees the end of the stream and discards the bytes that came with it),
/// so they report a lost connection, and retry, instead of the refused login. Kafka delays the
/// close likewise (`connection.failed.authentication.delay.ms`).
async fn linger<R: AsyncRead + Unpin>(reader: &mut R) {
    let _ = tokio::time::timeout(
        REFUSAL_LINGER,
        tokio::io::copy(reader, &mut tokio::io::sink()),
    )
    .await;
}

/// The longest a refused connection stays open for its client to read the refusal.
const REFUSAL_LINGER: std::time::Duration = std::time::Duration::from_secs(1);

/// Answers one request frame; `None` when the client expects no answer (produce, acks=0).
async fn handle<B: Backend>(
    backend: &Arc<B>,
    session: &mut Session,
    mut frame: Bytes,
) -> Result<Option<Bytes>, KafkaError> {
    // Every header version starts with api key, api version and correlation id.
    let Some(head) = frame.get(..8) else {
        return Err(KafkaError::ShortRequest(frame.len()));
    };
    let key = i16::from_be_bytes([head[0], head[1]]);
    let version = i16::from_be_bytes([head[2], head[3]]);
    let correlation_id = i32::from_be_bytes([head[4], head[5], head[6], head[7]]);
    let api = ApiKey::try_from(key).map_err(|_| KafkaError::Unsupported { key, version })?;
    if !versions::supports(api, version) {
        if api == ApiKey::ApiVersions {
            let answer = versions::unsupported_api_versions();
            return encode(correlation_id, 0, &answer).map(Some);
        }
        return Err(KafkaError::Unsupported { key, version });
    }
    let header_version = api.request_header_version(version);
    let header =
        RequestHeader::decode(&mut frame, header_version).map_err(|e| KafkaError::Decode {
            what: "RequestHeader",
            version: header_version,
            reason: e.to_string(),
        })?;
    crate::guard::check_request(api, version, &frame).map_err(|e| KafkaError::Decode {
        what: "request body",
        version,
        reason: e.to_string(),
    })?;
    let body = &mut frame;
    let cid = correlation_id;
    let answer = match api {
        ApiKey::ApiVersions => {
            decode::<ApiVersionsRequest>(body, version)?;
            encode(cid, version, &versions::api_versions())?
        }
        ApiKey::SaslHandshake => {
            let request = decode(body, version)?;
            encode(cid, version, &session.handshake(request, version))?
        }
        ApiKey::SaslAuthenticate => {
            let request = decode(body, version)?;
            let users = backend.authorizer().state;
            encode(cid, version, &session.authenticate(request, &users).await)?
        }
        _ => {
            let Some(access) = session.access(backend.authorizer()) else {
                return Err(KafkaError::Unauthenticated(format!(
                    "{api:?} before SASL authentication: only ApiVersions, SaslHandshake and \
                     SaslAuthenticate are served until the client has logged in"
                )));
            };
            let authorized = Arc::new(Authorized {
                inner: Arc::clone(backend),
                access,
            });
            let client = header.client_id.as_ref().map_or("", |c| c.as_str());
            match serve(&authorized, api, version, cid, client, body).await? {
                Some(answer) => answer,
                None => return Ok(None),
            }
        }
    };
    Ok(Some(answer))
}

/// Serves an authenticated request through `backend`, which authorizes it; `None` when the
/// client expects no answer.
async fn serve<B: Backend>(
    backend: &Arc<B>,
    api: ApiKey,
    version: i16,
    cid: i32,
    client: &str,
    body: &mut Bytes,
) -> Result<Option<Bytes>, KafkaError> {
    let answer = match api {
        ApiKey::Metadata => {
            let request = decode(body, version)?;
            let answer = metadata::metadata(&**backend, request, version).await;
            encode(cid, version, &answer)?
        }
        ApiKey::FindCoordinator => {
            let request = decode(body, version)?;
            let answer = metadata::find_coordinator(&**backend, request, version).await;
            encode(cid, version, &answer)?
        }
        ApiKey::CreateTopics => {
            let request = decode(body, version)?;
            let answer = admin::create_topics(&**backend, request, version).await;
            encode(cid, version, &answer)?
        }
        ApiKey::DeleteTopics => {
            let request = decode(body, version)?;
            let answer = admin::delete_topics(&**backend, request, version).await;
            encode(cid, version, &answer)?
        }
        ApiKey::CreatePartitions => {
            let request = decode(body, version)?;
            let answer = admin::create_partitions(&**backend, request).await;
            encode(cid, version, &answer)?
        }
        ApiKey::DescribeConfigs => {
            let request = decode(body, version)?;
            let answer = configs::describe_configs(&**backend, request, version).await;
            encode(cid, version, &answer)?
        }
        ApiKey::AlterConfigs => {
            let request = decode(body, version)?;
            let answer = configs::alter_configs(&**backend, request).await;
            encode(cid, version, &answer)?
        }
        ApiKey::IncrementalAlterConfigs => {
            let request = decode(body, version)?;
            let answer = configs::incremental_alter_configs(&**backend, request).await;
            encode(cid, version, &answer)?
        }
        ApiKey::DescribeCluster => {
            let request = decode(body, version)?;
            let answer = metadata::describe_cluster(&**backend, request, version).await;
            encode(cid, version, &answer)?
        }
        ApiKey::ListGroups => {
            let request = decode(body, version)?;
            encode(
                cid,
                version,
                &groups::list_groups(&**backend, request).await,
            )?
        }
        ApiKey::DescribeGroups => {
            let request = decode(body, version)?;
            let answer = groups::describe_groups(&**backend, request).await;
            encode(cid, version, &answer)?
        }
        ApiKey::DeleteGroups => {
            let request = decode(body, version)?;
            let answer = groups::delete_groups(&**backend, request).await;
            encode(cid, version, &answer)?
        }
        ApiKey::OffsetDelete => {
            let request = decode(body, version)?;
            let answer = groups::offset_delete(&**backend, request).await;
            encode(cid, version, &answer)?
        }
        ApiKey::InitProducerId => {
            let request = decode(body, version)?;
            encode(
                cid,
                version,
                &admin::init_producer_id(&**backend, request).await,
            )?
        }
        ApiKey::Produce => {
            let request: kafka_protocol::messages::ProduceRequest = decode(body, version)?;
            let silent = request.acks == 0;
            let answer = produce::produce(backend, request).await;
            if silent {
                return Ok(None);
            }
            encode(cid, version, &answer)?
        }
        ApiKey::Fetch => {
            let request = decode(body, version)?;
            encode(
                cid,
                version,
                &fetch::fetch(&**backend, request, version).await,
            )?
        }
        ApiKey::ListOffsets => {
            let request = decode(body, version)?;
            let answer = fetch::list_offsets(&**backend, request, version).await;
            encode(cid, version, &answer)?
        }
        ApiKey::DeleteRecords => {
            let request = decode(body, version)?;
            encode(
                cid,
                version,
                &fetch::delete_records(&**backend, request).await,
            )?
        }
        ApiKey::OffsetCommit => {
            let request = decode(body, version)?;
            encode(
                cid,
                version,
                &groups::offset_commit(&**backend, request).await,
            )?
        }
        ApiKey::JoinGroup => {
            let request = decode(body, version)?;
            let answer = membership::join_group(&**backend, request, version, client).await;
            encode(cid, version, &answer)?
        }
        ApiKey::SyncGroup => {
            let request = decode(body, version)?;
            encode(
                cid,
                version,
                &membership::sync_group(&**backend, request).await,
            )?
        }
        ApiKey::Heartbeat => {
            let request = decode(body, version)?;
            encode(
                cid,
                version,
                &membership::heartbeat(&**backend, request).await,
            )?
        }
        ApiKey::LeaveGroup => {
            let request = decode(body, version)?;
            encode(
                cid,
                version,
                &membership::leave_group(&**backend, request, version).await,
            )?
        }
        ApiKey::OffsetFetch => {
            let request = decode(body, version)?;
            encode(
                cid,
                version,
                &groups::offset_fetch(&**backend, request).await,
            )?
        }
        ApiKey::DescribeAcls => {
            let request = decode(body, version)?;
            encode(
                cid,
                version,
                &security::describe_acls(&**backend, request).await,
            )?
        }
        ApiKey::CreateAcls => {
            let request = decode(body, version)?;
            encode(
                cid,
                version,
                &security::create_acls(&**backend, request).await,
            )?
        }
        ApiKey::DeleteAcls => {
            let request = decode(body, version)?;
            encode(
                cid,
                version,
                &security::delete_acls(&**backend, request).await,
            )?
        }
        ApiKey::DescribeUserScramCredentials => {
            let request = decode(body, version)?;
            let answer = security::describe_user_scram_credentials(&**backend, request).await;
            encode(cid, version, &answer)?
        }
        ApiKey::AlterUserScramCredentials => {
            let request = decode(body, version)?;
            let answer = security::alter_user_scram_credentials(&**backend, request).await;
            encode(cid, version, &answer)?
        }
        _ => {
            return Err(KafkaError::Unsupported {
                key: api as i16,
                version,
            })
        }
    };
    Ok(Some(answer))
}
