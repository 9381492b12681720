//! What is fuzzed: each decoder's seeds, its configured allocation limit, and how one input is
//! fed to it.

use super::kafka::{self, Accepting};
use super::mutate;
use crate::rng::Rng;
use bytes::Bytes;
use isr::{EpochCache, LeaderEpoch, Offset, PartitionId};
use isr_kafka::client::records::{self, Idempotent, Outgoing};
use isr_runtime::decode;
use isr_runtime::storage::batch::{stamp, MAX_BATCH};
use isr_runtime::wire::codec::MAX_FRAME;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// How one input fared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// Decoded (or, for a connection, served to its end).
    Accepted,
    /// A typed error (or a closed connection).
    Refused,
    /// A connection still open after a minute of (virtual) time: waiting on a long poll or a
    /// rebalance the input asked for.
    Waiting,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    KafkaRequest,
    /// Kafka requests on a SASL_SSL listener, past its TLS handshake: logins.
    KafkaSasl,
    InternalFrame,
    Segment,
    Checkpoint,
    Metadata,
    PartitionDir,
}

pub struct Target {
    pub kind: Kind,
    pub name: &'static str,
    /// This target's share of the inputs, in thousandths.
    pub share: u64,
    /// The largest single allocation an input may cause: the decoder's configured limit.
    pub limit: usize,
    seeds: Vec<Vec<u8>>,
    /// The batch the Kafka target's backend serves to fetches.
    batch: Bytes,
    runtime: tokio::runtime::Runtime,
    scratch: Option<PathBuf>,
}

/// `values` as one producer's batch, stamped at `base` in `epoch` as a log stores it.
fn batch(values: &[&str], base: u64, epoch: u32, producer: Option<Idempotent>) -> Bytes {
    let records: Vec<Outgoing> = values
        .iter()
        .map(|v| Outgoing {
            key: Some(Bytes::from_static(b"k")),
            value: Bytes::copy_from_slice(v.as_bytes()),
        })
        .collect();
    let encoded = records::encode_as(&records, 1_700_000_000_000, producer).unwrap_or_default();
    stamp(&encoded, Offset(base), LeaderEpoch(epoch))
}

/// Segment files of one to five batches, some from an idempotent producer.
fn segments() -> Vec<Vec<u8>> {
    let producer = Some(Idempotent {
        producer_id: 5,
        producer_epoch: 0,
        first_sequence: 0,
    });
    let batches = [
        batch(&["a"], 0, 1, None),
        batch(&["b", "c"], 1, 1, producer),
        batch(&["d"], 3, 2, None),
        batch(&["e", "f", "g"], 4, 3, None),
        batch(&[""], 7, 3, None),
    ];
    (1..=batches.len())
        .map(|n| {
            batches[..n]
                .iter()
                .flat_map(|b| b.iter().copied())
                .collect()
        })
        .collect()
}

/// Rewrites the CRC of every batch whose length prefix still walks, so that mutations reach
/// the checks behind the CRC.
fn fix_crcs(segment: &mut [u8]) {
    let mut at = 0usize;
    while at + 21 <= segment.len() {
        let declared = i32::from_be_bytes([
            segment[at + 8],
            segment[at + 9],
            segment[at + 10],
            segment[at + 11],
        ]);
        let Some(total) = usize::try_from(declared)
            .ok()
            .and_then(|d| d.checked_add(12))
        else {
            return;
        };
        if total < 21 || at + total > segment.len() {
            return;
        }
        let crc = crc32c::crc32c(&segment[at + 21..at + total]);
        segment[at + 17..at + 21].copy_from_slice(&crc.to_be_bytes());
        at += total;
    }
}

fn checkpoints() -> Vec<Vec<u8>> {
    let mut epochs = EpochCache::default();
    epochs.record(LeaderEpoch(1), Offset(0));
    epochs.record(LeaderEpoch(3), Offset(17));
    [
        serde_json::to_vec_pretty(&Offset(42)),
        serde_json::to_vec_pretty(&epochs),
        serde_json::to_vec_pretty(&true),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// Every target, with its share of the inputs.
pub fn all() -> std::io::Result<Vec<Target>> {
    let one = batch(&["x", "y"], 0, 1, None);
    let examples = decode::examples(one.clone());
    // The partition directory target writes files: on tmpfs, where fsync costs nothing.
    let shm = PathBuf::from("/dev/shm");
    let scratch = tempfile::Builder::new()
        .prefix("isr-fuzz-")
        .tempdir_in(if shm.is_dir() {
            shm
        } else {
            std::env::temp_dir()
        })?
        .keep();
    let target = |kind, name, share, limit, seeds| -> std::io::Result<Target> {
        Ok(Target {
            kind,
            name,
            share,
            limit,
            seeds,
            batch: one.clone(),
            runtime: runtime()?,
            scratch: (kind == Kind::PartitionDir).then(|| scratch.clone()),
        })
    };
    let bodies: Vec<Vec<u8>> = examples.frames.iter().map(|f| f[4..].to_vec()).collect();
    Ok(vec![
        target(
            Kind::KafkaRequest,
            "kafka-request",
            300,
            isr_kafka::MAX_FRAME_BYTES,
            kafka::seeds(&one),
        )?,
        target(
            Kind::KafkaSasl,
            "kafka-sasl",
            100,
            isr_kafka::MAX_FRAME_BYTES,
            kafka::sasl_seeds(),
        )?,
        target(
            Kind::InternalFrame,
            "internal-frame",
            250,
            MAX_FRAME,
            bodies,
        )?,
        target(Kind::Segment, "segment", 150, MAX_BATCH, segments())?,
        target(Kind::Checkpoint, "checkpoint", 100, 1 << 20, checkpoints())?,
        target(
            Kind::Metadata,
            "metadata",
            95,
            1 << 20,
            vec![examples.metadata],
        )?,
        target(
            Kind::PartitionDir,
            "partition-dir",
            5,
            MAX_BATCH,
            segments(),
        )?,
    ])
}

/// A single-threaded runtime whose clock only moves when every task waits: a request asking
/// to wait a minute costs no time.
fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
}

impl Target {
    /// After a panic, a runtime the panic may have left half-way is replaced.
    pub fn reset(&mut self) -> std::io::Result<()> {
        self.runtime = runtime()?;
        Ok(())
    }

    /// The `n`th input of this target.
    pub fn input(&self, rng: &mut Rng, out: &mut Vec<u8>) {
        match self.kind {
            // A connection's requests, or a connection's frames: one to three, each length
            // prefixed (correctly, seven times in eight).
            Kind::KafkaRequest | Kind::KafkaSasl | Kind::InternalFrame => {
                out.clear();
                let mut body = Vec::new();
                for _ in 0..1 + rng.below(3) {
                    mutate::input(rng, &self.seeds, &mut body);
                    let wrong = (rng.below(8) == 0).then(|| rng.next_u64() as u32);
                    kafka::prefixed(out, &body, wrong);
                }
            }
            Kind::Segment | Kind::PartitionDir => {
                mutate::input(rng, &self.seeds, out);
                if rng.below(2) == 0 {
                    fix_crcs(out);
                }
            }
            Kind::Checkpoint | Kind::Metadata => mutate::input(rng, &self.seeds, out),
        }
    }

    /// Feeds one input to the decoder.
    pub fn run(&mut self, input: &[u8], n: u64) -> Fate {
        let refused = |ok: bool| if ok { Fate::Accepted } else { Fate::Refused };
        match self.kind {
            Kind::KafkaRequest | Kind::KafkaSasl => {
                let stream =
                    tokio::io::join(std::io::Cursor::new(input.to_vec()), tokio::io::sink());
                let peer = std::net::SocketAddr::from(([127, 0, 0, 1], 1));
                let mut info = isr_kafka::ConnectionInfo::plaintext(peer);
                let backend = if self.kind == Kind::KafkaSasl {
                    // SASL_SSL after its TLS handshake, so that PLAIN is offered too.
                    info.protocol = isr_kafka::auth::SecurityProtocol::SaslSsl;
                    Arc::new(Accepting::with_alice(self.batch.clone()))
                } else {
                    Arc::new(Accepting::new(self.batch.clone()))
                };
                let serve = isr_kafka::serve_connection(stream, Bytes::new(), backend, info);
                let served = self
                    .runtime
                    .block_on(async { tokio::time::timeout(Duration::from_secs(60), serve).await });
                match served {
                    Ok(result) => refused(result.is_ok()),
                    Err(_) => Fate::Waiting,
                }
            }
            Kind::InternalFrame => {
                let (_, error) = self.runtime.block_on(decode::internal_frames(input));
                refused(error.is_none())
            }
            Kind::Segment => refused(decode::segment(input, 0).torn.is_none()),
            Kind::Checkpoint => refused(match n % 3 {
                0 => decode::high_watermark(input).is_ok(),
                1 => decode::leader_epochs(input).is_ok(),
                _ => decode::clean_shutdown_marker(input).is_ok(),
            }),
            Kind::Metadata => refused(decode::controller_metadata(input).is_ok()),
            Kind::PartitionDir => self.partition_dir(input, n),
        }
    }

    /// A partition directory holding the input as its first segment, and, from the input's
    /// tail, its checkpoints; recovered as a broker recovers it at start.
    fn partition_dir(&self, input: &[u8], n: u64) -> Fate {
        let Some(root) = &self.scratch else {
            return Fate::Refused;
        };
        let dir = root.join("partitions").join("0");
        let _ = std::fs::remove_dir_all(&dir);
        if std::fs::create_dir_all(&dir).is_err() {
            return Fate::Refused;
        }
        let split = input.len() - input.len() / 8;
        let (segment, tail) = input.split_at(split);
        let _ = std::fs::write(dir.join("00000000000000000000.log"), segment);
        let hw = if n % 2 == 0 { tail } else { &b"3"[..] };
        let _ = std::fs::write(dir.join("high-watermark.json"), hw);
        let _ = std::fs::write(dir.join("leader-epochs.json"), tail);
        if n % 5 == 0 {
            // A later segment, whose base may or may not follow the first's end.
            let _ = std::fs::write(dir.join("00000000000000000003.log"), segment);
        }
        match decode::partition_directory(root, PartitionId(0)) {
            Ok(_) => Fate::Accepted,
            Err(_) => Fate::Refused,
        }
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        if let Some(dir) = &self.scratch {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The seeds are what the decoders accept, so mutations start from the inside: every
    /// Kafka seed is served to its end, every frame, segment, checkpoint and metadata seed
    /// decodes, and a segment whose CRCs a mutation broke decodes again once they are fixed.
    /// The SASL target's seeds are the parts of a login: a PLAIN login with the right
    /// password is served to the end (ApiVersions after it), the wrong one is refused, and a
    /// SCRAM first message gets its challenge.
    fn sasl_logins(target: &mut Target, seeds: &[Vec<u8>]) {
        let connection = |parts: &[usize]| {
            let mut input = Vec::new();
            for &p in parts {
                kafka::prefixed(&mut input, &seeds[p], None);
            }
            input
        };
        // Seeds: handshakes PLAIN v0, v1, SCRAM-SHA-256 v0, v1, SCRAM-SHA-512 v0, v1, GSSAPI
        // v0, v1; then per token SaslAuthenticate v0, v1, v2 and the bare token: PLAIN right
        // (8..12), PLAIN wrong (12..16), SCRAM first (16..20), SCRAM final (20..24);
        // ApiVersions last.
        let last = seeds.len() - 1;
        assert_eq!(target.run(&connection(&[1, 9, last]), 0), Fate::Accepted);
        assert_eq!(
            target.run(&connection(&[0, 11, last]), 0),
            Fate::Accepted,
            "v0: bare"
        );
        assert_eq!(
            target.run(&connection(&[1, 13]), 0),
            Fate::Refused,
            "wrong password"
        );
        assert_eq!(
            target.run(&connection(&[5, 17]), 0),
            Fate::Accepted,
            "challenged"
        );
        assert_eq!(
            target.run(&connection(&[9]), 0),
            Fate::Refused,
            "no handshake"
        );
    }

    #[test]
    fn every_seed_is_accepted() {
        let mut all = all().expect("targets");
        for target in all.iter_mut() {
            let seeds = target.seeds.clone();
            assert!(!seeds.is_empty(), "{} has seeds", target.name);
            if target.kind == Kind::KafkaSasl {
                sasl_logins(target, &seeds);
                continue;
            }
            for (n, seed) in seeds.iter().enumerate() {
                let input = match target.kind {
                    Kind::KafkaRequest | Kind::KafkaSasl | Kind::InternalFrame => {
                        let mut framed = Vec::new();
                        kafka::prefixed(&mut framed, seed, None);
                        framed
                    }
                    _ => seed.clone(),
                };
                // The checkpoint seeds are one per decoder, in the order run() cycles.
                let fate = target.run(&input, n as u64);
                assert_eq!(fate, Fate::Accepted, "{} seed {n}", target.name);
            }
        }
        let mut segment = segments().pop().expect("a segment");
        segment[40] ^= 0xff;
        assert!(decode::segment(&segment, 0).torn.is_some());
        fix_crcs(&mut segment);
        assert_eq!(decode::segment(&segment, 0).batches, 5);
    }
}
