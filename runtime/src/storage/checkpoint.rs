//! Small files replaced atomically: checkpoints and metadata.
//!
//! A reader sees the old content or the new, never a mix: the new content goes to a temporary
//! file that is fsynced, renamed over the old one, and the directory is fsynced so the rename
//! itself survives a crash.

use super::disk_log::sync_dir;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum CheckpointError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{path} is not a valid checkpoint: {reason}")]
    Corrupt { path: PathBuf, reason: String },
}

/// How a checkpoint is encoded.
#[derive(Clone, Copy, Debug)]
pub enum Encoding {
    /// Readable by operators; for values whose map keys are strings or numbers.
    Json,
    /// postcard: for values JSON cannot hold (maps keyed by tuples, as the core controller's
    /// group offsets are).
    Binary,
}

impl Encoding {
    fn encode<T: Serialize>(self, value: &T) -> Result<Vec<u8>, String> {
        match self {
            Encoding::Json => serde_json::to_vec_pretty(value).map_err(|e| e.to_string()),
            Encoding::Binary => postcard::to_allocvec(value).map_err(|e| e.to_string()),
        }
    }

    fn decode<T: DeserializeOwned>(self, bytes: &[u8]) -> Result<T, String> {
        match self {
            Encoding::Json => serde_json::from_slice(bytes).map_err(|e| e.to_string()),
            Encoding::Binary => match postcard::take_from_bytes(bytes) {
                Ok((value, [])) => Ok(value),
                Ok((_, rest)) => Err(format!("{} bytes after the value", rest.len())),
                Err(e) => Err(e.to_string()),
            },
        }
    }
}

/// Replaces `path` with `value`, atomically and durably.
pub fn write<T: Serialize>(
    path: &Path,
    value: &T,
    encoding: Encoding,
) -> Result<(), CheckpointError> {
    let io_err = |source| CheckpointError::Io {
        path: path.to_path_buf(),
        source,
    };
    let bytes = encoding
        .encode(value)
        .map_err(|reason| CheckpointError::Corrupt {
            path: path.to_path_buf(),
            reason,
        })?;
    let tmp = path.with_extension("tmp");
    let mut file = fs::File::create(&tmp).map_err(io_err)?;
    file.write_all(&bytes).map_err(io_err)?;
    file.sync_all().map_err(io_err)?;
    fs::rename(&tmp, path).map_err(io_err)?;
    sync_dir(path.parent().unwrap_or(Path::new("."))).map_err(io_err)
}

/// Reads a checkpoint written by [`write`]; `None` if there is none yet.
pub fn read<T: DeserializeOwned>(
    path: &Path,
    encoding: Encoding,
) -> Result<Option<T>, CheckpointError> {
    match fs::read(path) {
        Ok(bytes) => encoding
            .decode(&bytes)
            .map(Some)
            .map_err(|reason| CheckpointError::Corrupt {
                path: path.to_path_buf(),
                reason,
            }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(CheckpointError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_garbage_is_a_typed_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("hw");
        for encoding in [Encoding::Json, Encoding::Binary] {
            assert!(matches!(read::<u64>(&path, encoding), Ok(None)));
            write(&path, &42u64, encoding).expect("write");
            assert!(matches!(read::<u64>(&path, encoding), Ok(Some(42))));
            fs::write(&path, b"{{nope").expect("garble");
            assert!(matches!(
                read::<u64>(&path, encoding),
                Err(CheckpointError::Corrupt { .. })
            ));
            fs::remove_file(&path).expect("remove");
        }
    }

    #[test]
    fn what_json_cannot_hold_the_binary_encoding_can() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("meta");
        let tuple_keys = std::collections::BTreeMap::from([(("g".to_string(), 1u32), 7u64)]);
        assert!(write(&path, &tuple_keys, Encoding::Json).is_err());
        write(&path, &tuple_keys, Encoding::Binary).expect("binary");
        let back: Option<std::collections::BTreeMap<(String, u32), u64>> =
            read(&path, Encoding::Binary).expect("read");
        assert_eq!(back, Some(tuple_keys));
    }
}
