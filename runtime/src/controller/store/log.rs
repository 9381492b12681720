//! The file store's metadata log: one batch of records per committed change, appended and made
//! durable before the change's messages leave.
//!
//! Layout: a magic (`ISRL`) and the log's format version (big-endian u16), then batches, each
//! its payload's length (u32), the payload's CRC-32C (u32), and the payload: the change's
//! records in postcard.
//!
//! A crash can leave a torn last batch (a short length, a short payload, a wrong checksum):
//! recovery cuts the log at the last whole batch and says where, since what was torn was never
//! acknowledged. A batch whose checksum holds but which this isr cannot decode was written by a
//! newer isr: it is refused, and nothing is cut or overwritten.

use super::StoreError;
use crate::controller::records::Record;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use tracing::warn;

const MAGIC: &[u8; 4] = b"ISRL";
/// The log format this isr writes and reads: 2 has no consumer group offsets (they are records
/// in `__consumer_offsets`); 1 had them, and is no longer read.
pub const LOG_FORMAT: u16 = 2;
const HEADER: u64 = 6;
/// A batch's length and checksum.
const FRAME: usize = 8;

pub struct MetadataLog {
    path: PathBuf,
    file: File,
    /// The log's length: where the next batch goes.
    bytes: u64,
}

impl MetadataLog {
    /// Opens the log at `path`, creating it if absent, and reads every whole batch. A torn tail
    /// is cut off, with a warning naming the byte it was cut at.
    pub fn open(path: &Path) -> Result<(MetadataLog, Vec<Vec<Record>>), StoreError> {
        let io = |source| StoreError::Io {
            path: path.to_path_buf(),
            source,
        };
        let place = path.display().to_string();
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(io)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(io)?;
        let mut log = MetadataLog {
            path: path.to_path_buf(),
            file,
            bytes: bytes.len() as u64,
        };
        if bytes.len() < HEADER as usize {
            // New, or torn before its header was whole: nothing was ever committed to it.
            log.clear()?;
            return Ok((log, Vec::new()));
        }
        if &bytes[..4] != MAGIC {
            return Err(StoreError::Corrupt {
                place,
                reason: format!(
                    "it does not start with {:?}",
                    String::from_utf8_lossy(MAGIC)
                ),
            });
        }
        let version = u16::from_be_bytes([bytes[4], bytes[5]]);
        if version > LOG_FORMAT {
            return Err(StoreError::NewerFormat {
                place,
                found: version,
                supported: LOG_FORMAT,
            });
        }
        if version < LOG_FORMAT {
            return Err(StoreError::Corrupt {
                place,
                reason: format!(
                    "log format {version} is no longer read (this isr reads {LOG_FORMAT})"
                ),
            });
        }
        let (batches, whole) = read_batches(&bytes, &place)?;
        if whole < bytes.len() {
            warn!(log = %place, at = whole, torn = bytes.len() - whole,
                "the metadata log ends in a torn batch: cut at the last whole one");
            log.file.set_len(whole as u64).map_err(io)?;
            log.file.sync_all().map_err(io)?;
            log.bytes = whole as u64;
        }
        Ok((log, batches))
    }

    /// Appends one change's records and makes them durable.
    pub fn append(&mut self, records: &[Record]) -> Result<(), StoreError> {
        let payload = postcard::to_allocvec(records).map_err(|e| StoreError::Corrupt {
            place: self.path.display().to_string(),
            reason: format!("records postcard cannot encode: {e}"),
        })?;
        let length = u32::try_from(payload.len())
            .map_err(|_| StoreError::Unavailable(format!("a change of {} bytes", payload.len())))?;
        let mut batch = Vec::with_capacity(FRAME + payload.len());
        batch.extend_from_slice(&length.to_be_bytes());
        batch.extend_from_slice(&crc32c::crc32c(&payload).to_be_bytes());
        batch.extend_from_slice(&payload);
        self.write_at_end(&batch)?;
        self.bytes += batch.len() as u64;
        Ok(())
    }

    /// Empties the log, durably: a new log, or one torn before its header was whole.
    pub fn clear(&mut self) -> Result<(), StoreError> {
        let io = |source| StoreError::Io {
            path: self.path.clone(),
            source,
        };
        self.file.set_len(0).map_err(io)?;
        let mut header = MAGIC.to_vec();
        header.extend_from_slice(&LOG_FORMAT.to_be_bytes());
        self.bytes = 0;
        self.write_at_end(&header)?;
        self.bytes = HEADER;
        Ok(())
    }

    /// Drops the batches before byte `upto` (a durable snapshot holds them), durably: the ones
    /// after it go to a new file that replaces the log. A crash before the replacement leaves
    /// the whole log, which replays onto the snapshot to the same state (a record sets a value).
    pub fn drop_prefix(&mut self, upto: u64) -> Result<(), StoreError> {
        let io = |source| StoreError::Io {
            path: self.path.clone(),
            source,
        };
        let upto = upto.clamp(HEADER, self.bytes);
        let mut rest = vec![0; (self.bytes - upto) as usize];
        self.file.seek(SeekFrom::Start(upto)).map_err(io)?;
        self.file.read_exact(&mut rest).map_err(io)?;
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&LOG_FORMAT.to_be_bytes());
        bytes.extend_from_slice(&rest);
        let tmp = self.path.with_extension("log.tmp");
        let mut file = File::create(&tmp).map_err(io)?;
        file.write_all(&bytes).map_err(io)?;
        file.sync_all().map_err(io)?;
        std::fs::rename(&tmp, &self.path).map_err(io)?;
        if let Some(dir) = self.path.parent() {
            File::open(dir).and_then(|d| d.sync_all()).map_err(io)?;
        }
        self.file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&self.path)
            .map_err(io)?;
        self.bytes = bytes.len() as u64;
        Ok(())
    }

    /// The log's length in bytes.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    fn write_at_end(&mut self, bytes: &[u8]) -> Result<(), StoreError> {
        let io = |source| StoreError::Io {
            path: self.path.clone(),
            source,
        };
        self.file.seek(SeekFrom::Start(self.bytes)).map_err(io)?;
        self.file.write_all(bytes).map_err(io)?;
        self.file.sync_data().map_err(io)
    }
}

/// The whole batches after the header, and where the last one ends.
fn read_batches(bytes: &[u8], place: &str) -> Result<(Vec<Vec<Record>>, usize), StoreError> {
    let mut batches = Vec::new();
    let mut at = HEADER as usize;
    while let Some(frame) = bytes.get(at..at + FRAME) {
        let length = u32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize;
        let crc = u32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
        let Some(payload) = bytes.get(at + FRAME..at + FRAME + length) else {
            break;
        };
        if crc32c::crc32c(payload) != crc {
            break;
        }
        let records = postcard::from_bytes(payload).map_err(|e| StoreError::Corrupt {
            place: format!("{place} at byte {at}"),
            reason: format!("a change this isr cannot read (written by a newer isr?): {e}"),
        })?;
        batches.push(records);
        at += FRAME + length;
    }
    Ok((batches, at))
}

#[cfg(test)]
mod tests {
    use super::*;
    use isr::PartitionId;

    fn topic(name: &str) -> Record {
        Record::Topic {
            name: name.into(),
            partitions: Some(vec![PartitionId(1)]),
        }
    }

    #[test]
    fn batches_come_back_in_order_after_a_reopen() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("metadata.log");
        let (mut log, batches) = MetadataLog::open(&path).expect("new");
        assert!(batches.is_empty());
        log.append(&[topic("a")]).expect("a");
        log.append(&[topic("b"), Record::NextPartition(2)])
            .expect("b");
        drop(log);
        let (_, batches) = MetadataLog::open(&path).expect("again");
        assert_eq!(
            batches,
            vec![vec![topic("a")], vec![topic("b"), Record::NextPartition(2)]]
        );
    }

    #[test]
    fn a_torn_tail_is_cut_at_the_last_whole_batch_and_appends_follow_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("metadata.log");
        let (mut log, _) = MetadataLog::open(&path).expect("new");
        log.append(&[topic("a")]).expect("a");
        let whole = log.bytes();
        log.append(&[topic("b")]).expect("b");
        let full = std::fs::read(&path).expect("read");
        drop(log);
        // Every cut inside the second batch, and a flipped byte in it, leaves the first.
        let mut torn: Vec<Vec<u8>> = (whole as usize + 1..full.len())
            .map(|n| full[..n].to_vec())
            .collect();
        let mut flipped = full.clone();
        if let Some(last) = flipped.last_mut() {
            *last ^= 0xff;
        }
        torn.push(flipped);
        for bytes in torn {
            std::fs::write(&path, &bytes).expect("write");
            let (mut log, batches) = MetadataLog::open(&path).expect("recovers");
            assert_eq!(batches, vec![vec![topic("a")]], "{} bytes", bytes.len());
            assert_eq!(log.bytes(), whole);
            log.append(&[topic("c")]).expect("c");
            drop(log);
            let (_, batches) = MetadataLog::open(&path).expect("again");
            assert_eq!(batches, vec![vec![topic("a")], vec![topic("c")]]);
        }
    }

    #[test]
    fn a_newer_log_or_an_unreadable_batch_is_refused_and_left_as_it_is() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("metadata.log");
        let (mut log, _) = MetadataLog::open(&path).expect("new");
        log.append(&[topic("a")]).expect("a");
        drop(log);
        let good = std::fs::read(&path).expect("read");

        let mut newer = good.clone();
        newer[4..6].copy_from_slice(&(LOG_FORMAT + 1).to_be_bytes());
        std::fs::write(&path, &newer).expect("write");
        let err = MetadataLog::open(&path).err().expect("refused");
        assert!(matches!(err, StoreError::NewerFormat { found, .. } if found == LOG_FORMAT + 1));
        assert_eq!(std::fs::read(&path).expect("read"), newer, "nothing cut");

        // A whole batch (its checksum holds) of a record kind this isr does not know.
        let mut unknown = good[..HEADER as usize].to_vec();
        let payload = [1u8, 200, 0];
        unknown.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        unknown.extend_from_slice(&crc32c::crc32c(&payload).to_be_bytes());
        unknown.extend_from_slice(&payload);
        std::fs::write(&path, &unknown).expect("write");
        let err = MetadataLog::open(&path).err().expect("refused");
        assert!(err.to_string().contains("newer isr"), "{err}");
        assert_eq!(std::fs::read(&path).expect("read"), unknown, "nothing cut");
    }
}
