//! Frames on the wire: a big-endian u32 length, then a version byte, then the postcard encoding
//! of a [`Frame`]. The version lets a later generation change the encoding while old peers
//! refuse it cleanly instead of misreading it (4: brokers' listeners, users and ACLs; 5: entries
//! carry their idempotent producer's stamp; 6: group offsets no longer go to the controller; 7: envelopes travel in batches;
//! 8: metadata views and deltas carry topic ids; 9: a Fetch carries its follower's high watermark
//! and log start).

use super::Frame;
use std::io;
use thiserror::Error;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

pub const VERSION: u8 = 9;
/// A frame above this is refused: a Fetch answer holds at most `fetch_max_entries` batches of at
/// most a few MiB, and a wrong length must not make a process allocate gigabytes.
pub const MAX_FRAME: usize = 64 << 20;

#[derive(Debug, Error)]
pub enum FrameError {
    #[error("connection: {0}")]
    Io(#[from] io::Error),
    #[error("frame of {0} bytes exceeds the limit of {MAX_FRAME}")]
    TooLarge(usize),
    #[error("empty frame")]
    Empty,
    #[error("unknown frame version {0} (this build speaks {VERSION})")]
    UnknownVersion(u8),
    #[error("malformed frame: {0}")]
    Malformed(#[from] postcard::Error),
}

/// Encodes a frame, length prefix included.
pub fn encode(frame: &Frame) -> Result<Vec<u8>, FrameError> {
    let mut out = vec![0, 0, 0, 0, VERSION];
    out = postcard::to_extend(frame, out)?;
    let len = out.len() - 4;
    if len > MAX_FRAME {
        return Err(FrameError::TooLarge(len));
    }
    out[..4].copy_from_slice(&(len as u32).to_be_bytes());
    Ok(out)
}

/// Reads the next frame; `Ok(None)` when the peer closed the connection between frames.
pub async fn read<R: AsyncRead + Unpin>(reader: &mut R) -> Result<Option<Frame>, FrameError> {
    let mut prefix = [0u8; 4];
    match reader.read_exact(&mut prefix).await {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    let len = u32::from_be_bytes(prefix) as usize;
    if len > MAX_FRAME {
        return Err(FrameError::TooLarge(len));
    }
    if len == 0 {
        return Err(FrameError::Empty);
    }
    // Beyond the first MiB, grow with the bytes that arrive: a peer announcing 64 MiB and
    // sending nothing must not make this process hold 64 MiB.
    let mut body = Vec::with_capacity(len.min(1 << 20));
    (&mut *reader)
        .take(len as u64)
        .read_to_end(&mut body)
        .await?;
    if body.len() < len {
        return Err(FrameError::Io(io::ErrorKind::UnexpectedEof.into()));
    }
    decode(&body).map(Some)
}

/// Decodes a frame's body: what follows its length prefix (the version byte, then postcard).
pub fn decode(body: &[u8]) -> Result<Frame, FrameError> {
    match body.split_first() {
        None => Err(FrameError::Empty),
        Some((&VERSION, rest)) => Ok(postcard::from_bytes(rest)?),
        Some((&other, _)) => Err(FrameError::UnknownVersion(other)),
    }
}

pub async fn write<W: AsyncWrite + Unpin>(writer: &mut W, frame: &Frame) -> Result<(), FrameError> {
    writer.write_all(&encode(frame)?).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Peer;

    #[tokio::test]
    async fn frames_round_trip_and_bad_ones_are_typed_errors() {
        let frame = Frame::Hello(Peer::Client);
        let bytes = encode(&frame).expect("encode");
        assert_eq!(read(&mut &bytes[..]).await.ok().flatten(), Some(frame));
        assert!(read(&mut &[][..]).await.expect("eof").is_none());

        // A peer of the generation before, or after, is refused, not misread.
        for other in [VERSION - 1, VERSION + 1] {
            let mut wrong_version = bytes.clone();
            wrong_version[4] = other;
            assert!(matches!(
                read(&mut &wrong_version[..]).await,
                Err(FrameError::UnknownVersion(v)) if v == other
            ));
        }
        let huge = [0xff, 0xff, 0xff, 0xff];
        assert!(matches!(
            read(&mut &huge[..]).await,
            Err(FrameError::TooLarge(_))
        ));
        let garbage = [0, 0, 0, 3, VERSION, 0xff, 0xff];
        assert!(matches!(
            read(&mut &garbage[..]).await,
            Err(FrameError::Malformed(_))
        ));
    }
}
