//! Consumer groups' committed offsets and membership, kept in `__consumer_offsets` and served
//! by the group's coordinator: the broker that leads the group's partition of it
//! ([`isr_kafka::offsets_topic`]).
//!
//! Nothing here goes through the controller but the topic's creation, on first use. A commit is
//! a record appended to the partition with acks=all and answered once the core acknowledges it
//! (committed: below the HW), so an acknowledged commit survives the coordinator's failure by
//! the property the model checks. Reads come from a view of the partition's committed records,
//! which this broker builds from its own replica, and only once its term is settled
//! ([`isr::Replica::has_high_watermark_reached_current_epoch`]): a new leader's HW may lag what
//! its predecessor committed, and a view read below it would miss acknowledged commits
//! (COORDINATOR_LOAD_IN_PROGRESS meanwhile, which clients retry). A view is rebuilt from the
//! log start whenever the leader epoch changes, and the groups stored in it are then loaded into
//! the broker's membership [`isr_kafka::Coordinator`] before it answers any of them: the
//! members of a group whose coordinator failed carry on in their generation.

use super::BrokerBackend;
use crate::broker::host::Command;
use crate::wire::admin::{Request, TopicSpec};
use bytes::Bytes;
use isr::{Acks, LeaderEpoch, Offset, PartitionId};
use isr_kafka::client::records::{self, now_ms};
use isr_kafka::offsets_topic::{
    self, GroupRecord, OffsetKey, OffsetRecord, OffsetsView, Record, MIN_INSYNC_REPLICAS,
    OFFSETS_TOPIC, REPLICATION_FACTOR,
};
use isr_kafka::{
    Backend, BackendError, CommittedOffset, GroupCoordinator, GroupOffset, StoredGroup,
};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use tracing::{info, warn};

/// How much of the partition one read brings while a view catches up.
const READ_BYTES: usize = 1 << 20;

/// The views of the offsets partitions this broker has served as coordinator.
#[derive(Default)]
pub struct Views {
    by_partition: Mutex<BTreeMap<PartitionId, Arc<tokio::sync::Mutex<Loaded>>>>,
}

/// One partition's view, as far as it was read, in one leader epoch.
#[derive(Default)]
struct Loaded {
    epoch: Option<LeaderEpoch>,
    /// The offset of the next record to read.
    next: Offset,
    view: OffsetsView,
    /// Its groups' membership is loaded into the coordinator, for this epoch.
    installed: bool,
}

/// A group's partition of the offsets topic.
struct OffsetsPartition {
    id: PartitionId,
    /// Its index in the topic, of `count`.
    index: u32,
    count: u32,
    leader: Option<isr::BrokerId>,
    /// Its leader epoch, as this broker's metadata has it.
    leader_epoch: LeaderEpoch,
}

impl Views {
    fn of(&self, partition: PartitionId) -> Arc<tokio::sync::Mutex<Loaded>> {
        let mut views = self.by_partition.lock().unwrap_or_else(|p| p.into_inner());
        views.entry(partition).or_default().clone()
    }
}

/// What a coordinator's write or read of its partition failed with, as Kafka's group
/// coordinator answers it: the client looks for the coordinator again, or retries.
fn as_coordinator(e: BackendError) -> BackendError {
    match e {
        BackendError::NotLeaderOrFollower | BackendError::Storage(_) => {
            BackendError::NotCoordinator
        }
        BackendError::NotEnoughReplicas
        | BackendError::NotEnoughReplicasAfterAppend
        | BackendError::UnknownTopicOrPartition
        | BackendError::LeaderNotAvailable => BackendError::CoordinatorNotAvailable,
        other => other,
    }
}

impl BrokerBackend {
    /// The partition of `__consumer_offsets` that holds `group`'s offsets, with its leader;
    /// the topic is created when the first group needs it.
    async fn offsets_partition(&self, group: &str) -> Result<OffsetsPartition, BackendError> {
        let mut view = self.net.cluster_view().await.map_err(super::admin_error)?;
        if !view.topics.contains_key(OFFSETS_TOPIC) {
            self.create_offsets_topic(view.brokers.values().filter(|b| b.alive).count())
                .await?;
            view = self.net.ask_metadata().await.map_err(super::admin_error)?;
        }
        let ids = view
            .topics
            .get(OFFSETS_TOPIC)
            .ok_or(BackendError::CoordinatorNotAvailable)?;
        // The topic's own count, not the setting: what the first group created it with.
        let count = u32::try_from(ids.len()).unwrap_or(u32::MAX);
        let index = offsets_topic::partition_for(group, count);
        let id = ids
            .get(index as usize)
            .copied()
            .ok_or(BackendError::CoordinatorNotAvailable)?;
        let state = view.partitions.get(&id);
        Ok(OffsetsPartition {
            id,
            index,
            count,
            leader: state.and_then(|p| p.leader),
            leader_epoch: state.map(|p| p.leader_epoch).unwrap_or_default(),
        })
    }

    /// The partition of a group this broker coordinates; NOT_COORDINATOR otherwise.
    async fn led_partition(&self, group: &str) -> Result<OffsetsPartition, BackendError> {
        let partition = self.offsets_partition(group).await?;
        match partition.leader {
            Some(leader) if leader == self.net.me => Ok(partition),
            Some(_) => Err(BackendError::NotCoordinator),
            None => Err(BackendError::CoordinatorNotAvailable),
        }
    }

    /// Creates `__consumer_offsets`: RF 3, or every live broker if fewer; min ISR 2 at most.
    async fn create_offsets_topic(&self, live: usize) -> Result<(), BackendError> {
        let replication_factor = u16::try_from(live)
            .unwrap_or(u16::MAX)
            .clamp(1, REPLICATION_FACTOR);
        let min_isr = MIN_INSYNC_REPLICAS.min(replication_factor);
        let spec = TopicSpec {
            name: OFFSETS_TOPIC.to_owned(),
            partitions: self.settings.offsets_topic_partitions,
            replication_factor,
            configs: [
                ("min.insync.replicas".to_owned(), min_isr.to_string()),
                ("cleanup.policy".to_owned(), "compact".to_owned()),
            ]
            .into(),
            assignment: Vec::new(),
        };
        match self.ask(Request::CreateTopic(spec)).await {
            Ok(_) => {
                info!(
                    partitions = self.settings.offsets_topic_partitions,
                    replication_factor, "created {OFFSETS_TOPIC}"
                );
                Ok(())
            }
            Err(BackendError::TopicAlreadyExists) => Ok(()),
            Err(BackendError::ControllerUnavailable(_)) => {
                Err(BackendError::CoordinatorNotAvailable)
            }
            Err(e) => Err(e),
        }
    }

    /// Where `group` is coordinated: the leader of its offsets partition.
    pub(super) async fn coordinator_of(
        &self,
        group: &str,
    ) -> Result<GroupCoordinator, BackendError> {
        let partition = self.offsets_partition(group).await?;
        let broker = partition
            .leader
            .ok_or(BackendError::CoordinatorNotAvailable)?;
        Ok(GroupCoordinator {
            broker,
            here: broker == self.net.me,
        })
    }

    /// The leader epoch and HW of an offsets partition this broker leads with a settled term;
    /// refused otherwise, as a coordinator refuses.
    async fn settled(&self, partition: PartitionId) -> Result<(LeaderEpoch, Offset), BackendError> {
        self.host(|reply| Command::Coordinating { partition, reply })
            .await
            .map_err(as_coordinator)?
            .ok_or(BackendError::CoordinatorLoadInProgress)
    }

    /// This broker's view of an offsets partition it leads, read up to its HW; refused unless
    /// it leads with a settled term.
    async fn loaded(
        &self,
        partition: PartitionId,
    ) -> Result<tokio::sync::OwnedMutexGuard<Loaded>, BackendError> {
        let (epoch, high_watermark) = self.settled(partition).await?;
        let mut loaded = self.views.of(partition).lock_owned().await;
        if loaded.epoch != Some(epoch) {
            *loaded = Loaded {
                epoch: Some(epoch),
                ..Loaded::default()
            };
        }
        while loaded.next < high_watermark {
            let from = loaded.next;
            let read = self
                .host(|reply| Command::Read {
                    partition,
                    offset: from,
                    max_bytes: READ_BYTES,
                    reply,
                })
                .await
                .map_err(as_coordinator)?;
            if read.batches.is_empty() {
                break;
            }
            for batch in read.batches {
                self.apply_batch(partition, &mut loaded, batch);
            }
            if loaded.next == from {
                break;
            }
        }
        Ok(loaded)
    }

    /// Applies one committed batch of the partition to its view; a batch or record that does
    /// not parse is skipped with a warning naming where it is, never fatal.
    fn apply_batch(&self, partition: PartitionId, loaded: &mut Loaded, batch: Bytes) {
        let base = isr_kafka::batch::base_offset(&batch).and_then(|b| u64::try_from(b).ok());
        let end = base.map(|b| b + isr_kafka::batch::width(&batch));
        match records::decode(batch) {
            Ok(read) => {
                for (offset, why) in loaded.view.apply(read) {
                    warn!(%partition, offset, "{OFFSETS_TOPIC}: skipping a record: {why}");
                }
            }
            Err(why) => {
                warn!(%partition, offset = ?base, "{OFFSETS_TOPIC}: skipping a batch: {why}");
            }
        }
        loaded.next = match end {
            Some(end) => Offset(end.max(loaded.next.0)),
            // A batch without a header cannot say where it ends: one offset on, at least.
            None => Offset(loaded.next.0 + 1),
        };
    }

    /// The offsets partition of a group this broker coordinates, read up to its HW.
    async fn coordinated(
        &self,
        group: &str,
    ) -> Result<(PartitionId, tokio::sync::OwnedMutexGuard<Loaded>), BackendError> {
        let partition = self.offsets_partition(group).await?.id;
        Ok((partition, self.loaded(partition).await?))
    }

    /// Readies this broker to coordinate `group` ([`Backend::load_group`]): the first time in
    /// a leader epoch, its partition is read up to the HW and every group stored there is
    /// loaded into the membership coordinator, replacing what this broker held of them.
    pub(super) async fn load(&self, group: &str) -> Result<(), BackendError> {
        let partition = self.led_partition(group).await?;
        // Loaded in the epoch the metadata names: the coordinator holds all that was stored
        // since (this broker stored it), so there is nothing to read and nothing to ask.
        let current = self.views.of(partition.id);
        let loaded = current.lock().await;
        if loaded.installed && loaded.epoch == Some(partition.leader_epoch) {
            return Ok(());
        }
        drop(loaded);
        let mut loaded = self.loaded(partition.id).await?;
        if !loaded.installed {
            let (index, count) = (partition.index, partition.count);
            let stored = loaded
                .view
                .stored_groups()
                .map(|(g, s)| (g.clone(), s.clone()));
            self.coordinator()
                .load(|g| offsets_topic::partition_for(g, count) == index, stored);
            loaded.installed = true;
        }
        Ok(())
    }

    /// Appends a group's membership (or its deletion) to its partition.
    pub(super) async fn store(
        &self,
        group: &str,
        stored: Option<StoredGroup>,
    ) -> Result<(), BackendError> {
        let partition = self.led_partition(group).await?.id;
        self.settled(partition).await?;
        let record = Record::Group(GroupRecord {
            group: group.to_owned(),
            stored,
        });
        self.append(partition, &[record]).await
    }

    /// Appends records to a group's offsets partition; answered once they are committed.
    async fn append(&self, partition: PartitionId, records: &[Record]) -> Result<(), BackendError> {
        let batch =
            offsets_topic::batch(records, now_ms()).map_err(BackendError::InvalidRequest)?;
        self.host(|reply| Command::Produce {
            partition,
            acks: Acks::All,
            batches: vec![batch],
            reply,
        })
        .await
        .map(|_| ())
        .map_err(as_coordinator)
    }

    /// The positions of one OffsetCommit, as one record batch: one append, one wait for it to
    /// be committed, whatever the number of partitions.
    pub(super) async fn commit(
        &self,
        group: &str,
        offsets: Vec<GroupOffset>,
    ) -> Vec<Result<(), BackendError>> {
        let mut refused = Vec::with_capacity(offsets.len());
        let mut records = Vec::with_capacity(offsets.len());
        for o in offsets {
            match self.partition_id(&o.topic, o.partition).await {
                Ok(_) => {
                    refused.push(None);
                    records.push(Record::Offset(OffsetRecord {
                        key: key(group, &o.topic, o.partition),
                        committed: Some(o.committed),
                    }));
                }
                Err(e) => refused.push(Some(e)),
            }
        }
        // Writing needs neither the view nor a settled term: the Kafka layer loaded the group
        // (Backend::load_group) to check the member, and a record is answered only once
        // committed, which a leader's term must be settled for.
        let written = if records.is_empty() {
            Ok(())
        } else {
            match self.offsets_partition(group).await {
                Ok(partition) => self.append(partition.id, &records).await,
                Err(e) => Err(e),
            }
        };
        refused
            .into_iter()
            .map(|refusal| refusal.map_or_else(|| written.clone(), Err))
            .collect()
    }

    pub(super) async fn committed(
        &self,
        group: &str,
        topic: &str,
        index: u32,
    ) -> Result<Option<CommittedOffset>, BackendError> {
        let (_, loaded) = self.coordinated(group).await?;
        Ok(loaded.view.committed(group, topic, index).cloned())
    }

    pub(super) async fn offsets_of(&self, group: &str) -> Result<Vec<GroupOffset>, BackendError> {
        let (_, loaded) = self.coordinated(group).await?;
        Ok(loaded
            .view
            .of_group(group)
            .map(|(k, c)| GroupOffset {
                topic: k.topic.clone(),
                partition: k.partition,
                committed: c.clone(),
            })
            .collect())
    }

    /// The groups with offsets in the partitions this broker coordinates now; a partition whose
    /// term is not settled yet is left out (its groups are listed once it is).
    pub(super) async fn coordinated_groups(&self) -> Result<Vec<String>, BackendError> {
        let view = self.net.cluster_view().await.map_err(super::admin_error)?;
        let led: Vec<PartitionId> = view
            .topics
            .get(OFFSETS_TOPIC)
            .into_iter()
            .flatten()
            .copied()
            .filter(|id| {
                view.partitions
                    .get(id)
                    .is_some_and(|p| p.leader == Some(self.net.me))
            })
            .collect();
        let mut groups = BTreeSet::new();
        for partition in led {
            if let Ok(loaded) = self.loaded(partition).await {
                groups.extend(loaded.view.groups());
            }
        }
        Ok(groups.into_iter().collect())
    }

    /// Deletes a group's offsets (all, or the named partitions') with one record each; all of
    /// them also deletes its stored membership (DeleteGroups).
    pub(super) async fn delete(
        &self,
        group: &str,
        partitions: Option<Vec<(String, u32)>>,
    ) -> Result<(), BackendError> {
        let (partition, loaded) = self.coordinated(group).await?;
        let whole = partitions.is_none();
        let keys: Vec<OffsetKey> = match partitions {
            Some(named) => named.into_iter().map(|(t, i)| key(group, &t, i)).collect(),
            None => loaded
                .view
                .of_group(group)
                .map(|(k, _)| k.clone())
                .collect(),
        };
        let mut records: Vec<Record> = keys
            .into_iter()
            .filter(|k| {
                loaded
                    .view
                    .committed(&k.group, &k.topic, k.partition)
                    .is_some()
            })
            .map(|key| {
                Record::Offset(OffsetRecord {
                    key,
                    committed: None,
                })
            })
            .collect();
        if whole && loaded.view.stored(group).is_some() {
            records.push(Record::Group(GroupRecord {
                group: group.to_owned(),
                stored: None,
            }));
        }
        drop(loaded);
        if records.is_empty() {
            return Ok(());
        }
        self.append(partition, &records).await
    }
}

fn key(group: &str, topic: &str, partition: u32) -> OffsetKey {
    OffsetKey {
        group: group.to_owned(),
        topic: topic.to_owned(),
        partition,
    }
}
