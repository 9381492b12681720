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

/// Replaces `path` with `value` as JSON (readable by operators), atomically and durably.
pub fn write<T: Serialize>(path: &Path, value: &T) -> Result<(), CheckpointError> {
    let bytes = serde_json::to_vec_pretty(value).map_err(|e| CheckpointError::Corrupt {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    write_bytes(path, &bytes)
}

/// Replaces `path` with `bytes`, atomically and durably.
pub fn write_bytes(path: &Path, bytes: &[u8]) -> Result<(), CheckpointError> {
    let io_err = |source| CheckpointError::Io {
        path: path.to_path_buf(),
        source,
    };
    let tmp = path.with_extension("tmp");
    let mut file = fs::File::create(&tmp).map_err(io_err)?;
    file.write_all(bytes).map_err(io_err)?;
    file.sync_all().map_err(io_err)?;
    fs::rename(&tmp, path).map_err(io_err)?;
    sync_dir(path.parent().unwrap_or(Path::new("."))).map_err(io_err)
}

/// Reads a checkpoint written by [`write`]; `None` if there is none yet.
pub fn read<T: DeserializeOwned>(path: &Path) -> Result<Option<T>, CheckpointError> {
    match fs::read(path) {
        Ok(bytes) => decode(&bytes, path).map(Some),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(CheckpointError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// The value a checkpoint's bytes hold; `path` names where they came from, for errors.
pub fn decode<T: DeserializeOwned>(bytes: &[u8], path: &Path) -> Result<T, CheckpointError> {
    serde_json::from_slice(bytes).map_err(|e| CheckpointError::Corrupt {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_garbage_is_a_typed_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("hw");
        assert!(matches!(read::<u64>(&path), Ok(None)));
        write(&path, &42u64).expect("write");
        assert!(matches!(read::<u64>(&path), Ok(Some(42))));
        fs::write(&path, b"{{nope").expect("garble");
        assert!(matches!(
            read::<u64>(&path),
            Err(CheckpointError::Corrupt { .. })
        ));
    }
}
