//! The broker's replicas and the thread that drives them.
//!
//! Every transition of every hosted replica runs on this one thread, in arrival order: messages
//! from the network, producer writes, consumer reads and clock ticks all come in as
//! [`Command`]s. Disk I/O (appends, fsyncs, checkpoints) happens here too, which is why this is
//! a plain thread and not an async task. The thread decides nothing: the core's
//! [`isr::Replicas`] holds the replicas and knows which are due at each tick, the thread steps
//! it with each input ([`isr::Replicas::step`]) and carries out the [`Effect`]s it returns. The
//! broker's session is the other half of the core's [`isr::Broker`], kept on the network
//! thread so that heartbeats never wait behind replica steps. The one liberty this thread
//! takes is when to flush: every flush the core asked for while a batch of commands ran is done
//! with one fsync per log after the batch (group commit), and only then is the replica told
//! (`Flushed`), so what waited for that flush leaves.

mod clients;
mod replication;
mod retention;

pub use retention::Cleaner;
use retention::Rolling;

use super::beside::Beside;
use super::outbox::{Outbox, Outgoing};
use crate::storage::{DiskLog, PartitionDir};
use crate::trace::Tracer;
use crate::wire::admin::ReplicaView;
use bytes::Bytes;
use isr::{
    Acks, BrokerId, Config, DeleteId, Effect, Effects, Envelope, Log, Message, Offset, PartitionId,
    ProduceId, ReadError, ReadId, Replica, ReplicaInput, Replicas, Tick, Timer, WriteError,
};
use isr_kafka::configs::LogRetention;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot, Notify};
use tracing::{debug, info, warn};

/// At most this many queued commands run before the group commit, which bounds the delay one
/// command can add to what waits for a flush.
const MAX_COMMANDS_PER_COMMIT: usize = 64;

/// Committed batches for a consumer.
pub struct Committed {
    pub batches: Vec<Bytes>,
    pub high_watermark: Offset,
    pub log_start_offset: Offset,
}

#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("this broker does not host the partition")]
    NotHosted,
    #[error("the replica's storage failed: {0}")]
    Storage(String),
    #[error(transparent)]
    Write(#[from] WriteError),
    #[error(transparent)]
    Read(#[from] ReadError),
}

pub enum Command {
    /// Protocol messages from the controller or a peer (senders already checked): one frame's.
    Inbound(Vec<Envelope<Bytes>>),
    Produce {
        partition: PartitionId,
        acks: Acks,
        batches: Vec<Bytes>,
        reply: oneshot::Sender<Result<Offset, HostError>>,
    },
    Read {
        partition: PartitionId,
        offset: Offset,
        max_bytes: usize,
        reply: oneshot::Sender<Result<Committed, HostError>>,
    },
    /// DeleteRecords on a partition this broker leads: the log start moves to `before` (the
    /// high watermark when `None`, Kafka's -1); answered with the new log start.
    DeleteRecords {
        partition: PartitionId,
        before: Option<Offset>,
        reply: oneshot::Sender<Result<Offset, HostError>>,
    },
    /// ListOffsets on a partition this broker leads.
    ListOffsets {
        partition: PartitionId,
        spec: isr_kafka::OffsetSpec,
        reply: oneshot::Sender<Result<Option<isr_kafka::ListedOffset>, HostError>>,
    },
    /// Whether this broker may coordinate the groups whose offsets a partition holds: the
    /// partition's leader epoch and HW when it leads with its term settled
    /// ([`isr::Replica::has_high_watermark_reached_current_epoch`]), `None` while it leads but
    /// is not settled yet.
    Coordinating {
        partition: PartitionId,
        reply: oneshot::Sender<Result<Option<(isr::LeaderEpoch, Offset)>, HostError>>,
    },
    /// The controller's metadata says which partitions exist: drop the hosted ones it deleted
    /// (with their data), as Kafka's StopReplica with deletion does.
    Retire {
        /// Every partition id below this was created at some point.
        next_partition: u32,
        live: BTreeSet<PartitionId>,
    },
    /// The retention pass: each partition's policy (from its topic's configs) at `now_ms`
    /// (wall-clock milliseconds, as record timestamps are). Hosted partitions not named keep
    /// everything.
    Retention {
        policies: Vec<(PartitionId, LogRetention)>,
        now_ms: i64,
    },
    /// The cleaner thread finished cleaning a partition's log (or failed to).
    Cleaned {
        partition: PartitionId,
        result: Result<crate::storage::cleaner::Cleaned, String>,
    },
    Status(oneshot::Sender<Vec<ReplicaView>>),
    /// A connection with this peer opened or closed: what went to it may be lost (a request
    /// sent while there was none is dropped). The followers of its partitions ask again now
    /// rather than when their request timers run out, which a leader holding idle fetches for
    /// long makes long.
    PeerLink(BrokerId),
    /// A session with a controller opened: an AlterPartition sent to the one before, or while
    /// there was none, may be lost with its connection. The leaders with a proposal out send
    /// it again now rather than when their AlterPartition timers run out (30 s).
    ControllerLink,
    Tick,
    /// Clean shutdown: flush and checkpoint everything, then stop.
    Shutdown,
}

pub struct Host {
    me: BrokerId,
    cfg: Config,
    dir: PathBuf,
    now: Tick,
    /// The hosted replicas, each with what this thread keeps beside it, and when each is next
    /// due: a tick steps only those ([`isr::Replicas::due`]), so an idle partition costs nothing.
    replicas: Replicas<DiskLog, Beside>,
    outbox: Outbox,
    /// What the current pass sent, handed to the outbox at its end ([`Host::send_outgoing`]).
    outgoing: Outgoing,
    /// Notified when a high watermark moves: wakes consumers' waiting fetches.
    commits: Arc<Notify>,
    next_produce: ProduceId,
    next_read: ReadId,
    next_delete: DeleteId,
    /// Set when a replica's storage failed: the thread stops after the current command.
    storage_failure: Option<String>,
    /// Partitions whose replica asked for a flush since the last group commit.
    flush_due: BTreeSet<PartitionId>,
    /// Assert the core's invariants after every step (see [`checks_invariants`]).
    check_invariants: bool,
    /// Where every step is recorded, when tracing.
    tracer: Option<Tracer>,
    /// Followers' requests for partitions not hosted yet.
    early: replication::Early,
    /// The cleaner thread for compacted topics; none in tests that do not compact.
    cleaner: Option<Cleaner>,
    /// How the segments of partitions a retention pass named before this broker hosted them
    /// roll (`segment.bytes`, `segment.ms`): set when the controller's order to host one comes,
    /// so that a topic's first records roll by its configs, not the broker's defaults.
    rolling_ahead: BTreeMap<PartitionId, Rolling>,
}

/// Debug builds assert the core's per-replica invariants after every step; so does a release
/// build run with `ISR_CHECK_INVARIANTS=1`, which the integration tests set for every process
/// they start, so that CI's release-mode clusters check them too.
pub(crate) fn checks_invariants() -> bool {
    cfg!(debug_assertions) || std::env::var_os("ISR_CHECK_INVARIANTS").is_some_and(|v| v == "1")
}

impl Host {
    /// Recovers every partition found under `dir`.
    pub fn open(
        me: BrokerId,
        cfg: Config,
        dir: PathBuf,
        outbox: Outbox,
        commits: Arc<Notify>,
        mut tracer: Option<Tracer>,
    ) -> Result<Host, String> {
        let mut replicas = Replicas::new();
        for id in PartitionDir::existing(&dir).map_err(|e| format!("{}: {e}", dir.display()))? {
            let (replica, beside) =
                Beside::open(&dir, me, id, tracer.as_mut()).map_err(|e| e.to_string())?;
            info!(partition = %id, leo = %replica.log_end_offset(),
                hw = %replica.high_watermark(), "recovered");
            replicas.insert(&cfg, replica, beside);
        }
        Ok(Host {
            me,
            cfg,
            dir,
            now: Tick(0),
            replicas,
            outbox,
            outgoing: Outgoing::default(),
            commits,
            next_produce: 0,
            next_read: 0,
            next_delete: 0,
            storage_failure: None,
            flush_due: BTreeSet::new(),
            check_invariants: checks_invariants(),
            tracer,
            early: replication::Early::default(),
            cleaner: None,
            rolling_ahead: BTreeMap::new(),
        })
    }

    /// Compacts the logs of compacted topics on `cleaner`'s thread.
    pub fn with_cleaner(mut self, cleaner: Cleaner) -> Host {
        self.cleaner = Some(cleaner);
        self
    }

    /// Runs commands until shutdown or until every sender is gone. Fails when a replica's
    /// storage failed: the disk is shared by every partition, so the broker stops as a whole
    /// (as Kafka does when its log directory fails), the controller fences it, and its
    /// partitions move to replicas that can still write.
    pub fn run(mut self, mut commands: mpsc::UnboundedReceiver<Command>) -> Result<(), String> {
        while let Some(command) = commands.blocking_recv() {
            if self.handle(command)? {
                self.send_outgoing();
                return Ok(());
            }
            // Under load, take what else has queued up before the group commit, so that one
            // fsync serves every write that arrived meanwhile; idle, the queue is empty and the
            // flush happens at once.
            for _ in 0..MAX_COMMANDS_PER_COMMIT {
                let Ok(command) = commands.try_recv() else {
                    break;
                };
                if self.handle(command)? {
                    self.send_outgoing();
                    return Ok(());
                }
            }
            // What needs no flush leaves before the fsyncs, what waited for them after.
            self.send_outgoing();
            self.group_commit();
            self.send_outgoing();
            if let Some(why) = self.storage_failure.take() {
                return Err(why);
            }
        }
        Ok(())
    }

    /// Carries out one command; `Ok(true)` after a clean shutdown.
    fn handle(&mut self, command: Command) -> Result<bool, String> {
        match command {
            Command::Inbound(envelopes) => {
                for envelope in envelopes {
                    self.on_message(envelope);
                }
            }
            Command::Produce {
                partition,
                acks,
                batches,
                reply,
            } => self.on_produce(partition, acks, batches, reply),
            Command::Read {
                partition,
                offset,
                max_bytes,
                reply,
            } => self.on_read(partition, offset, max_bytes, reply),
            Command::DeleteRecords {
                partition,
                before,
                reply,
            } => self.on_delete_records(partition, before, reply),
            Command::ListOffsets {
                partition,
                spec,
                reply,
            } => {
                let _ = reply.send(self.list_offsets(partition, spec));
            }
            Command::Coordinating { partition, reply } => {
                let _ = reply.send(self.coordinating(partition));
            }
            Command::Retire {
                next_partition,
                live,
            } => self.retire(next_partition, &live),
            Command::Retention { policies, now_ms } => self.on_retention(&policies, now_ms),
            Command::Cleaned { partition, result } => self.on_cleaned(partition, result),
            Command::Status(reply) => {
                let views = self.replicas.iter().map(|(_, r, beside)| beside.view(r));
                let _ = reply.send(views.collect());
            }
            Command::PeerLink(peer) => self.on_peer_link(peer),
            Command::ControllerLink => self.on_controller_link(),
            Command::Tick => self.on_tick(),
            Command::Shutdown => {
                self.shutdown();
                return Ok(true);
            }
        }
        if let Some(why) = self.storage_failure.take() {
            return Err(why);
        }
        Ok(false)
    }

    /// Drops every hosted partition the controller created once and no longer has (ids are
    /// never reused, so one below `next_partition` missing from `live` was deleted): waiting
    /// producers and fetches are answered, and its directory is removed.
    fn retire(&mut self, next_partition: u32, live: &BTreeSet<PartitionId>) {
        let gone = |p: PartitionId| p.0 < next_partition && !live.contains(&p);
        self.early.forget(gone);
        self.rolling_ahead.retain(|&p, _| !gone(p));
        let deleted: Vec<PartitionId> = self
            .replicas
            .iter()
            .map(|(p, ..)| p)
            .filter(|&p| gone(p))
            .collect();
        for partition in deleted {
            if let Some((replica, beside)) = self.replicas.remove(partition) {
                info!(%partition, "partition deleted; removing its replica");
                if let Err(e) = beside.remove(replica) {
                    // Its data stays behind, unused: not worth stopping the broker for.
                    warn!(%partition, error = %e, "cannot remove the deleted partition's directory");
                }
            }
            self.flush_due.remove(&partition);
        }
    }

    /// The replica of a partition for a client's request, and what is kept beside it: refused
    /// when not hosted here, or when its storage failed.
    fn hosted(
        &mut self,
        partition: PartitionId,
    ) -> Result<(&Replica<DiskLog>, &mut Beside), HostError> {
        let (replica, beside) = self
            .replicas
            .get_mut(partition)
            .ok_or(HostError::NotHosted)?;
        match &beside.failed {
            Some(why) => Err(HostError::Storage(why.clone())),
            None => Ok((replica, beside)),
        }
    }

    /// Steps one replica with `input` at the host's time (the core reschedules it) and carries
    /// out the effects. A replica not hosted, or offline since its storage failed, is not
    /// stepped.
    fn step(&mut self, partition: PartitionId, input: ReplicaInput<Bytes>) {
        let (cfg, now) = (self.cfg, self.now);
        // The trace records the input beside its effects: a copy, only when tracing.
        let traced = self.tracer.is_some().then(|| input.clone());
        let Some(effects) = self.replicas.step(&cfg, now, partition, input) else {
            return;
        };
        if let (Some(tracer), Some(input), Some(replica)) =
            (self.tracer.as_mut(), traced, self.replicas.get(partition))
        {
            tracer.replica(partition, now, &input, &effects, replica.log());
        }
        self.execute(partition, effects);
        self.check(partition);
    }

    /// A tick of the clock: every replica's timers that are due fire (the follower's request
    /// and the leader's AlterPartition sent again, held fetches answered, lagging followers
    /// proposed out of the ISR, the high watermark checkpointed). Only the replicas due are
    /// stepped ([`isr::Replicas::due`]): a replica's tick does nothing but fire its due timers.
    fn on_tick(&mut self) {
        self.now = Tick(self.now.0 + 1);
        for partition in self.replicas.due(self.now) {
            self.step(partition, ReplicaInput::Tick);
        }
    }

    /// A connection with `peer` opened or closed: each replica following it fires its request
    /// timer (the core's answer to a lost request: ask again). One pass over the hosted
    /// partitions per connection event, which is rare.
    fn on_peer_link(&mut self, peer: BrokerId) {
        let following: Vec<PartitionId> = self
            .replicas
            .iter()
            .filter(|(_, replica, _)| replica.leader() == Some(peer))
            .map(|(p, ..)| p)
            .collect();
        for partition in following {
            self.step(partition, ReplicaInput::Timeout(Timer::Request));
        }
    }

    /// A session with a controller opened: each leader with an ISR proposal out fires its
    /// AlterPartition timer, sending the proposal to this controller. One pass over the hosted
    /// partitions per session, which is rare.
    fn on_controller_link(&mut self) {
        let proposing: Vec<PartitionId> = self
            .replicas
            .iter()
            .filter(|(_, replica, _)| replica.leader_state().is_some_and(|l| l.proposal_out()))
            .map(|(p, ..)| p)
            .collect();
        for partition in proposing {
            self.step(partition, ReplicaInput::Timeout(Timer::AlterPartition));
        }
    }

    /// Hands what this pass sent to the outbox: one frame per receiver.
    fn send_outgoing(&mut self) {
        if !self.outgoing.is_empty() {
            self.outbox.send(&mut self.outgoing);
        }
    }

    /// Group commit: one fsync per log that owes one, for every flush its replica asked for
    /// since the last; then the replica learns how far its log is durable, and what waited for
    /// that goes out.
    fn group_commit(&mut self) {
        let cfg = self.cfg;
        for partition in std::mem::take(&mut self.flush_due) {
            if self.hosted(partition).is_err() {
                continue;
            }
            // Through the core, which reschedules the replica: a flush may start its high
            // watermark checkpoint's timer.
            let durable = self.replicas.update(&cfg, partition, |replica, beside| {
                replica.log_mut().flush();
                beside.flushed_at_ms = crate::timing::wall_clock_ms();
                replica.log().flushed_offset()
            });
            let Some(durable) = durable else {
                continue;
            };
            if self.storage_ok(partition) {
                self.step(partition, ReplicaInput::Flushed(durable));
            }
        }
    }

    fn execute(&mut self, partition: PartitionId, effects: Effects<Bytes>) {
        let Some((replica, h)) = self.replicas.get_mut(partition) else {
            return;
        };
        for effect in effects {
            match effect {
                Effect::Send(envelope) => {
                    if !matches!(
                        envelope.message,
                        Message::Fetch(_) | Message::FetchResponse(_)
                    ) {
                        debug!(%partition, to = %envelope.to, message = ?envelope.message, "send");
                    }
                    self.outgoing.push(envelope);
                }
                Effect::Acknowledge {
                    id, base_offset, ..
                } => {
                    if let Some(tx) = h.waiting.remove(&id) {
                        let _ = tx.send(Ok(base_offset));
                    }
                }
                Effect::FailWrite { id, error, .. } => {
                    if let Some(tx) = h.waiting.remove(&id) {
                        let _ = tx.send(Err(error.into()));
                    }
                }
                Effect::Read { id, result, .. } => {
                    if let Some(tx) = h.reading.remove(&id) {
                        let log_start_offset = replica.log().log_start_offset();
                        let _ = tx.send(result.map_err(HostError::from).map(|answer| Committed {
                            batches: answer.entries.into_iter().map(|e| e.record).collect(),
                            high_watermark: answer.high_watermark,
                            log_start_offset,
                        }));
                    }
                }
                Effect::RecordsDeleted { id, result, .. } => {
                    if let Some(tx) = h.deleting.remove(&id) {
                        let _ = tx.send(result.map_err(HostError::from));
                    }
                }
                Effect::Truncated { from, to, .. } => {
                    info!(%partition, %from, %to, "log truncated")
                }
                Effect::HighWatermark { .. } => self.commits.notify_waiters(),
                Effect::Flush { .. } => {
                    self.flush_due.insert(partition);
                }
                Effect::CheckpointHighWatermark { offset, .. } => h.checkpoint(replica, offset),
            }
        }
    }

    /// After a step: a failed log stops the broker; in debug builds, the core's invariants hold.
    fn check(&mut self, partition: PartitionId) {
        if !self.storage_ok(partition) || !self.check_invariants {
            return;
        }
        if let Some(Err(broken)) = self.replicas.get(partition).map(Replica::check_local) {
            // Stops the replica thread, and with it the broker: a test sees it die, and its
            // log names the invariant.
            panic!("replica invariant broken in {partition}: {broken:?}");
        }
    }

    /// Whether a hosted replica's storage still works, after a step or a flush. A failed log
    /// takes the replica offline in the core, which never steps it again, and stops the broker
    /// after the current command.
    fn storage_ok(&mut self, partition: PartitionId) -> bool {
        let Some((replica, beside)) = self.replicas.get_mut(partition) else {
            return false;
        };
        beside.check_storage(replica);
        let Some(why) = beside.failed.clone() else {
            return true;
        };
        self.replicas.take_offline(partition);
        self.storage_failure = Some(why);
        false
    }

    /// Clean shutdown: every log flushed, then each replica stopped cleanly (what waited for
    /// the flush goes, pending writes fail, the high watermark is checkpointed).
    fn shutdown(&mut self) {
        let cfg = self.cfg;
        let ids: Vec<PartitionId> = self.replicas.iter().map(|(p, ..)| p).collect();
        for partition in ids {
            if self.hosted(partition).is_ok() {
                self.replicas
                    .update(&cfg, partition, |replica, _| replica.log_mut().flush());
            }
            self.step(partition, ReplicaInput::Stop { clean: true });
            debug!(%partition, "shut down");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::batch::tests::batch_of;
    use crate::timing;
    use crate::wire::link::Link;
    use crate::wire::Frame;
    use isr::{
        BrokerEpoch, ControllerEpoch, FlushPolicy, LeaderAndIsr, LeaderEpoch, Log, Node,
        PartitionEpoch,
    };
    use isr::{Message, PartitionState};

    /// Broker 1's host under `flush=always`, sending through `outbox`.
    fn broker_1(dir: &std::path::Path, outbox: Outbox) -> Host {
        Host::open(
            BrokerId(1),
            timing::config(FlushPolicy::Always),
            dir.to_path_buf(),
            outbox,
            Arc::new(Notify::new()),
            None,
        )
        .expect("open")
    }

    /// The controller's order to broker 1 for `partition`: replicas `assigned`, all in the
    /// ISR, the first leading.
    fn order(partition: u32, assigned: &[u32]) -> Envelope<Bytes> {
        let assigned: Vec<BrokerId> = assigned.iter().copied().map(BrokerId).collect();
        let order = LeaderAndIsr {
            partition: PartitionId(partition),
            state: PartitionState {
                leader: assigned.first().copied(),
                isr: assigned.iter().copied().collect(),
                min_insync_replicas: 1,
                assigned,
                leader_epoch: LeaderEpoch(1),
                elr: Default::default(),
                partition_epoch: PartitionEpoch(1),
            },
            broker_epoch: BrokerEpoch(1),
            controller_epoch: ControllerEpoch(1),
        };
        Envelope {
            from: Node::Controller,
            to: Node::Broker(BrokerId(1)),
            message: Message::LeaderAndIsr(order),
        }
    }

    /// A host leading partition 0 alone (ISR {1}, min ISR 1) under `flush=always`.
    fn sole_leader(dir: &std::path::Path) -> Host {
        let mut host = broker_1(dir, Outbox::default());
        assert_eq!(
            host.handle(Command::Inbound(vec![order(0, &[1])])),
            Ok(false)
        );
        host
    }

    #[test]
    fn a_followers_fetches_for_every_partition_of_one_leader_leave_in_one_frame() {
        let dir = tempfile::tempdir().expect("tempdir");
        let outbox = Outbox::default();
        let (to_2, mut frames_to_2) = Link::detached();
        let (to_3, mut frames_to_3) = Link::detached();
        outbox.add_peer(BrokerId(2), to_2);
        outbox.add_peer(BrokerId(3), to_3);
        let mut host = broker_1(dir.path(), outbox);
        // One controller frame makes broker 1 follow three partitions led by 2 and one led by 3.
        let orders = vec![
            order(0, &[2, 1]),
            order(1, &[2, 1]),
            order(2, &[3, 1]),
            order(3, &[2, 1]),
        ];
        assert_eq!(host.handle(Command::Inbound(orders)), Ok(false));
        host.send_outgoing();

        let fetched = |frame: Frame| -> Vec<u32> {
            let envelopes = match frame {
                Frame::Envelopes(envelopes) => envelopes,
                Frame::Envelope(envelope) => vec![envelope],
                other => panic!("not a protocol message: {other:?}"),
            };
            envelopes
                .into_iter()
                .map(|e| match e.message {
                    Message::Fetch(fetch) => fetch.partition.0,
                    other => panic!("not a Fetch: {other:?}"),
                })
                .collect()
        };
        assert_eq!(fetched(frames_to_2.try_recv().expect("a frame")), [0, 1, 3]);
        assert!(frames_to_2.try_recv().is_err(), "one frame to broker 2");
        assert_eq!(fetched(frames_to_3.try_recv().expect("a frame")), [2]);
        assert!(frames_to_3.try_recv().is_err(), "one frame to broker 3");
    }

    fn produce(host: &mut Host, acks: Acks) -> oneshot::Receiver<Result<Offset, HostError>> {
        produce_batch(host, acks, batch_of(&["a", "b"]))
    }

    fn produce_batch(
        host: &mut Host,
        acks: Acks,
        batch: Bytes,
    ) -> oneshot::Receiver<Result<Offset, HostError>> {
        let (reply, answer) = oneshot::channel();
        let command = Command::Produce {
            partition: PartitionId(0),
            acks,
            batches: vec![batch],
            reply,
        };
        assert_eq!(host.handle(command), Ok(false));
        answer
    }

    fn flushed(host: &Host) -> Offset {
        host.replicas
            .get(PartitionId(0))
            .expect("hosted")
            .log()
            .flushed_offset()
    }

    #[test]
    fn no_write_is_acknowledged_before_the_group_commit_makes_it_durable() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut host = sole_leader(dir.path());
        let mut one = produce(&mut host, Acks::Leader);
        let mut all = produce(&mut host, Acks::All);
        // Both writes are in the log, neither is synced nor answered yet.
        assert_eq!(flushed(&host), Offset(0));
        assert!(one.try_recv().is_err());
        assert!(all.try_recv().is_err());

        host.group_commit();
        assert_eq!(flushed(&host), Offset(4));
        assert_eq!(one.try_recv().expect("answered").ok(), Some(Offset(0)));
        assert_eq!(all.try_recv().expect("answered").ok(), Some(Offset(2)));
    }

    /// A replica whose storage fails (here its high watermark checkpoint, its directory gone)
    /// fails the command that found it, which stops the broker, and is taken offline in the
    /// core: out of the deadline queue, so no tick steps it again, and refused to clients.
    #[test]
    fn a_replica_whose_storage_failed_is_taken_offline_and_out_of_the_tick() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut host = sole_leader(dir.path());
        let mut write = produce(&mut host, Acks::All);
        host.group_commit();
        assert_eq!(write.try_recv().expect("answered").ok(), Some(Offset(0)));
        let due = host
            .replicas
            .next_timeout()
            .expect("the checkpoint's timer runs");

        let partition_dir = dir.path().join("partitions").join("0");
        std::fs::remove_dir_all(partition_dir).expect("remove the partition's directory");
        let mut ticked = Ok(false);
        while ticked == Ok(false) && host.now < due {
            ticked = host.handle(Command::Tick);
        }
        assert!(
            ticked.is_err(),
            "the tick that checkpointed failed: {ticked:?}"
        );
        assert!(host.replicas.is_offline(PartitionId(0)));
        assert_eq!(host.replicas.next_timeout(), None);
        assert!(host.replicas.due(Tick(u64::MAX)).is_empty());
        let refused = produce(&mut host, Acks::All).try_recv().expect("answered");
        assert!(matches!(refused, Err(HostError::Storage(_))), "{refused:?}");
    }

    /// Two records as idempotent producer 5 (epoch 0) sends them, numbered from `sequence`.
    fn idempotent(sequence: i32) -> Bytes {
        use kafka_protocol::records::{
            Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
        };
        let records: Vec<Record> = (0..2)
            .map(|i| Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: -1,
                producer_id: 5,
                producer_epoch: 0,
                timestamp_type: TimestampType::Creation,
                offset: i64::from(i),
                sequence: sequence + i,
                timestamp: 0,
                key: None,
                value: Some(Bytes::from(format!("v{}", sequence + i))),
                headers: Default::default(),
            })
            .collect();
        let mut buf = bytes::BytesMut::new();
        let options = RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        };
        RecordBatchEncoder::encode(&mut buf, &records, &options).expect("encode");
        buf.freeze()
    }

    #[test]
    fn an_idempotent_producers_retry_is_answered_with_the_first_offsets_not_stored_again() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut host = sole_leader(dir.path());
        let mut first = produce_batch(&mut host, Acks::All, idempotent(0));
        let mut retry = produce_batch(&mut host, Acks::All, idempotent(0));
        let mut retry_acks_1 = produce_batch(&mut host, Acks::Leader, idempotent(0));
        let mut next = produce_batch(&mut host, Acks::All, idempotent(2));
        host.group_commit();
        for (answer, offset) in [(&mut first, 0), (&mut retry, 0), (&mut retry_acks_1, 0)] {
            assert_eq!(
                answer.try_recv().expect("answered").ok(),
                Some(Offset(offset))
            );
        }
        assert_eq!(next.try_recv().expect("answered").ok(), Some(Offset(2)));
        let log = host.replicas.get(PartitionId(0)).expect("hosted").log();
        assert_eq!(
            log.log_end_offset(),
            Offset(4),
            "the retries appended nothing"
        );

        // Recovery rebuilds the index from the segments: a retry after a restart is known too.
        drop(host);
        let mut host = sole_leader(dir.path());
        let mut late = produce_batch(&mut host, Acks::All, idempotent(2));
        host.group_commit();
        assert_eq!(late.try_recv().expect("answered").ok(), Some(Offset(2)));
        let log = host.replicas.get(PartitionId(0)).expect("hosted").log();
        assert_eq!(log.log_end_offset(), Offset(4));
    }

    #[test]
    fn a_batch_far_ahead_of_its_producers_sequence_is_refused_and_stores_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut host = sole_leader(dir.path());
        let mut first = produce_batch(&mut host, Acks::All, idempotent(0));
        let mut gap = produce_batch(&mut host, Acks::All, idempotent(1000));
        host.group_commit();
        assert_eq!(first.try_recv().expect("answered").ok(), Some(Offset(0)));
        let refused = gap.try_recv().expect("answered");
        assert!(
            matches!(
                refused,
                Err(HostError::Write(WriteError::OutOfOrderSequence {
                    expected: 2,
                    got: 1000,
                    ..
                }))
            ),
            "{refused:?}"
        );
        let log = host.replicas.get(PartitionId(0)).expect("hosted").log();
        assert_eq!(log.log_end_offset(), Offset(2), "the gap stored nothing");
    }
}
