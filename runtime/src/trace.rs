//! Recording a process's trace: every input its core was stepped with and the effects that came
//! back, as JSON lines ([`isr::trace::Event`]), for `isr-check replay`.
//!
//! On with `--trace FILE`, or with the environment variable [`ENV`] naming a directory, where
//! each process writes `<role>-<id>-<pid>.jsonl` (so a test traces every process it starts,
//! restarts included). Each line is written with one `write` before the step's effects are
//! carried out, so a process killed at any moment leaves every message it sent in its trace;
//! the cost is one system call per step, paid only when tracing (a kill can still cut that
//! write short at a page boundary; the reader drops such a last line, whose step's effects
//! never left the process). The log is written during the
//! step, so a kill between a step and its line leaves that step's appends on disk and not in
//! the trace; the replay accepts them as the step of a killed process they can only be.

use crate::storage::{batch, DiskLog};
use bytes::Bytes;
use isr::group::Change as GroupChange;
use isr::trace::{records, Digest, Event};
use isr::{
    Config, Controller, ControllerEffects, ControllerInput, Effects, Entry, Log, Node, Offset,
    PartitionId, ReplicaInput, Tick,
};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};
use tracing::warn;

/// The environment variable naming a directory every process writes its trace into.
pub const ENV: &str = "ISR_TRACE";

/// A record as the trace keeps it.
pub fn digest(record: &Bytes) -> Digest {
    Digest {
        width: batch::width(record),
        size: record.len() as u64,
        checksum: batch::crc(record),
    }
}

/// The entries of `log` from the one holding `from` to `until`, as the trace keeps them.
fn digested(log: &DiskLog, from: Offset, until: Offset) -> Vec<Entry<Digest>> {
    records::entries(&log.read(from, until, usize::MAX), &digest)
}

/// Effects as the trace keeps them.
fn digests(effects: &Effects<Bytes>) -> Effects<Digest> {
    effects
        .iter()
        .map(|e| records::effect(e, &digest))
        .collect()
}

/// A controller's effects as the trace keeps them.
fn controller_digests(effects: &ControllerEffects<Bytes>) -> ControllerEffects<Digest> {
    effects
        .iter()
        .map(|e| records::controller_effect(e, &digest))
        .collect()
}

/// Every trace in `dir` (its `.jsonl` files, in name order), as the replay takes them.
pub fn read_dir(dir: &Path) -> Result<Vec<isr::trace::Trace>, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|f| {
            let text = std::fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()))?;
            let name = f.file_name().unwrap_or_default().to_string_lossy();
            isr::trace::Trace::parse(name, &text, |line| serde_json::from_str(line))
        })
        .collect()
}

/// One process's trace file. Clones write to the same file, a line at a time under a lock,
/// so that the coordinator's group changes (recorded from the request tasks) and the replica
/// thread's steps keep the order they were taken in.
#[derive(Clone)]
pub struct Tracer {
    file: Arc<Mutex<File>>,
    path: Arc<PathBuf>,
}

impl Tracer {
    /// The trace `node` writes: to `file` if given, else into the [`ENV`] directory if set;
    /// `None` when tracing is off. Starts with the process line.
    pub fn start(
        file: Option<&Path>,
        node: Node,
        config: Config,
    ) -> Result<Option<Tracer>, String> {
        let path = match (file, std::env::var_os(ENV)) {
            (Some(file), _) => file.to_path_buf(),
            (None, Some(dir)) => {
                let name = match node {
                    Node::Broker(b) => format!("broker-{}-{}.jsonl", b.0, std::process::id()),
                    Node::Controller => format!("controller-{}.jsonl", std::process::id()),
                };
                PathBuf::from(dir).join(name)
            }
            (None, None) => return Ok(None),
        };
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| format!("cannot write the trace {}: {e}", path.display()))?;
        let started = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        let tracer = Tracer {
            file: Arc::new(Mutex::new(file)),
            path: Arc::new(path),
        };
        tracer.write(&Event::Process {
            node,
            config,
            started,
        });
        Ok(Some(tracer))
    }

    /// A replica recovered `log` with HW checkpoint `hw`.
    pub fn open(&self, partition: PartitionId, hw: Offset, log: &DiskLog) {
        let entries = digested(log, log.log_start_offset(), log.log_end_offset());
        self.write(&Event::Open {
            partition,
            hw_checkpoint: hw,
            entries,
            log_start: log.log_start_offset(),
            first_offset: Some(log.entry_start(log.log_start_offset()))
                .filter(|&first| first < log.log_start_offset()),
        });
    }

    /// A replica's step; `log` is its log after the step, whose end is recorded if its storage
    /// failed during it.
    pub fn replica(
        &self,
        partition: PartitionId,
        now: Tick,
        input: &ReplicaInput<Bytes>,
        effects: &Effects<Bytes>,
        log: &DiskLog,
    ) {
        self.write(&Event::Replica {
            partition,
            now,
            input: records::replica_input(input, &digest),
            effects: digests(effects),
            log_end: log.failure().map(|_| log.log_end_offset()),
        });
    }

    pub fn controller(
        &self,
        now: Tick,
        input: &ControllerInput<Bytes>,
        effects: &ControllerEffects<Bytes>,
    ) {
        self.write(&Event::Controller {
            now,
            input: records::controller_input(input, &digest),
            effects: controller_digests(effects),
        });
    }

    pub fn controller_state(&self, state: &Controller, effects: &ControllerEffects<Bytes>) {
        self.write(&Event::ControllerState {
            state: state.clone(),
            effects: controller_digests(effects),
        });
    }

    /// One line, in one write. A failed write is logged and the process goes on: a trace is a
    /// test's aid, not the protocol's.
    /// A change of a consumer group at this broker's coordinator ([`Event::Group`]).
    pub fn group(&self, group: &str, now: Tick, change: &GroupChange) {
        self.write(&Event::Group {
            group: group.to_owned(),
            now,
            change: change.clone(),
        });
    }

    /// A cleaning installed in `log`: the entries it holds now over each of `ranges` (from
    /// [`DiskLog::install`]), as the replay installs them in its own copy.
    pub fn cleaned(&self, partition: PartitionId, log: &DiskLog, ranges: &[(Offset, Offset)]) {
        for &(from, until) in ranges {
            // The log start may have moved into the range since the cleaning began: the entries
            // then start at the one holding it.
            let from = log.entry_start(from.max(log.log_start_offset()));
            self.write(&Event::Cleaned {
                partition,
                from,
                entries: digested(log, from, until),
            });
        }
    }

    /// The load point the core gave this broker's coordinator for an offsets partition
    /// ([`Event::LoadPoint`]).
    pub fn load_point(&self, partition: PartitionId, load_point: Option<Offset>) {
        self.write(&Event::LoadPoint {
            partition,
            load_point,
        });
    }

    fn write(&self, event: &Event) {
        let mut line = match serde_json::to_vec(event) {
            Ok(line) => line,
            Err(e) => return warn!(error = %e, "cannot encode a trace event"),
        };
        line.push(b'\n');
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(e) = file.write_all(&line) {
            warn!(path = %self.path.display(), error = %e, "cannot write the trace");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::batch::tests::batch_of;
    use isr::trace::DigestLog;
    use isr::LeaderEpoch;

    /// `log`'s answers, with records as digests.
    fn answers<L: Log>(log: &L, digest_of: impl Fn(&L::Record) -> Digest) -> String {
        let end = log.log_end_offset();
        let shown = |entries: Vec<Entry<L::Record>>| -> Vec<(u32, Digest)> {
            entries
                .iter()
                .map(|e| (e.epoch.0, digest_of(&e.record)))
                .collect()
        };
        let mut out = format!("end {end} flushed {}", log.flushed_offset());
        for o in 0..=end.0 + 1 {
            let o = Offset(o);
            out += &format!(
                "\n{o}: {:?} {:?} {:?} {:?} {:?}",
                log.entry(o).map(|e| (e.epoch.0, digest_of(&e.record))),
                log.epoch_at(o),
                log.entry_shape(o),
                shown(log.read(o, end, 2)),
                shown(log.read_within(o, end, 10, 120)),
            );
        }
        out
    }

    /// A process killed in the middle of writing a line leaves that line without its
    /// newline: the reader drops it (its step's effects never left the process), while a
    /// line that does not parse anywhere else is still an error, with its number.
    #[test]
    fn a_line_cut_short_by_a_kill_is_dropped_and_any_other_bad_line_is_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("broker-1-1.jsonl");
        let tracer = Tracer::start(
            Some(&path),
            Node::Broker(isr::BrokerId(1)),
            Config::default(),
        )
        .expect("start")
        .expect("tracing on");
        let step = Event::Controller {
            now: Tick(3),
            input: ControllerInput::Tick,
            effects: Vec::new(),
        };
        tracer.write(&step);
        let whole = std::fs::read_to_string(&path).expect("read");
        let line = serde_json::to_string(&step).expect("encode");
        std::fs::write(&path, format!("{whole}{}", &line[..line.len() / 2])).expect("cut");
        let traces = read_dir(dir.path()).expect("a cut last line is no error");
        assert_eq!(
            traces[0].events.len(),
            2,
            "the process line and the whole step"
        );

        std::fs::write(&path, format!("{}\n{whole}", &line[..line.len() / 2])).expect("cut");
        let error = read_dir(dir.path()).expect_err("a bad first line");
        assert!(
            error.starts_with("broker-1-1.jsonl line 1: not a trace event"),
            "{error}"
        );
    }

    /// The replay's log answers every `Log` question as the disk log does, over batches of
    /// several records, truncations inside and between batches, and flushes.
    #[test]
    fn the_digest_log_answers_as_the_disk_log() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut disk = DiskLog::open(dir.path(), 300).expect("open");
        let mut digests = DigestLog::default();
        let batches = [
            vec!["a"],
            vec!["b", "c", "d"],
            vec!["e", "f"],
            vec!["g"],
            vec!["h", "i", "j", "k"],
        ];
        let check = |disk: &DiskLog, digests: &DigestLog, what: &str| {
            assert_eq!(
                answers(disk, digest),
                answers(digests, |d| *d),
                "after {what}"
            );
        };
        for (i, values) in batches.iter().enumerate() {
            let entry = Entry::new(LeaderEpoch(1 + i as u32 / 2), batch_of(values));
            disk.append(std::slice::from_ref(&entry));
            digests.append(&[Entry::new(entry.epoch, digest(&entry.record))]);
            check(&disk, &digests, &format!("append {i}"));
        }
        disk.flush();
        digests.flush();
        check(&disk, &digests, "flush");
        for cut in [9, 7, 5, 4, 2] {
            disk.truncate_to(Offset(cut));
            digests.truncate_to(Offset(cut));
            check(&disk, &digests, &format!("truncate to {cut}"));
        }
        // What a recovery reads back is what the replay starts from.
        let reopened = DiskLog::open(dir.path(), 300).expect("reopen");
        let recovered: Vec<Entry<Digest>> = reopened
            .read(Offset(0), reopened.log_end_offset(), usize::MAX)
            .iter()
            .map(|e| Entry {
                epoch: e.epoch,
                record: digest(&e.record),
                producer: e.producer,
            })
            .collect();
        assert_eq!(
            answers(&reopened, digest),
            answers(&DigestLog::recovered(Offset(0), None, &recovered), |d| *d)
        );
    }
}
