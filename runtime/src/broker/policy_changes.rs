//! Which topics' log policies may have changed since the retention pass last looked: a topic
//! created, its configs altered, or (for every topic) a broker's configs or a whole new view.
//!
//! The retention pass runs every `log.cleaner.backoff.ms`; without this, a topic created with
//! `segment.ms` or `segment.bytes` would roll by the broker's defaults until the next pass,
//! so that what a producer writes at once lands in one active segment, which is never cleaned
//! or deleted. A change wakes a pass over the changed topics alone, so its cost is theirs, not
//! the cluster's; changes that arrive while a pass runs are taken together by the next.

use crate::controller::records::Record;
use crate::wire::admin::ClusterView;
use std::collections::BTreeSet;
use std::sync::Mutex;
use tokio::sync::Notify;

/// The topics changed and not yet looked at, and the wake-up for the pass.
#[derive(Default)]
pub struct PolicyChanges {
    pending: Mutex<Pending>,
    wake: Notify,
}

#[derive(Default)]
struct Pending {
    every_topic: bool,
    topics: BTreeSet<String>,
}

impl PolicyChanges {
    /// Notes the topics a metadata delta's records change the policy of.
    pub fn note(&self, records: &[Record]) {
        self.add(|pending| {
            for record in records {
                match record {
                    Record::Topic {
                        name,
                        partitions: Some(_),
                    }
                    | Record::TopicConfigs { name, .. } => {
                        pending.topics.insert(name.clone());
                    }
                    Record::BrokerConfigs { .. } => pending.every_topic = true,
                    _ => {}
                }
            }
        });
    }

    /// Notes the topics whose partitions or configs differ between the view kept so far (none
    /// before the first) and a whole new one that replaces it: every topic if the brokers'
    /// configs differ.
    pub fn note_view(&self, old: Option<&ClusterView>, new: &ClusterView) {
        self.add(|pending| match old {
            Some(old) if old.broker_configs == new.broker_configs => {
                let differs = |name: &String| {
                    old.topics.get(name) != new.topics.get(name)
                        || old.topic_configs.get(name) != new.topic_configs.get(name)
                };
                pending
                    .topics
                    .extend(new.topics.keys().filter(|n| differs(n)).cloned());
            }
            _ => pending.every_topic = true,
        });
    }

    /// Adds to what is pending, and wakes the pass if that added anything.
    fn add(&self, note: impl FnOnce(&mut Pending)) {
        let mut pending = self.lock();
        let before = (pending.every_topic, pending.topics.len());
        note(&mut pending);
        let added = (pending.every_topic, pending.topics.len()) != before;
        drop(pending);
        if added {
            self.wake.notify_one();
        }
    }

    /// Waits for a change, then takes what changed: `None` for every topic.
    pub async fn next(&self) -> Option<BTreeSet<String>> {
        self.wake.notified().await;
        let pending = std::mem::take(&mut *self.lock());
        (!pending.every_topic).then_some(pending.topics)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn changes_are_taken_together_and_a_broker_config_means_every_topic() {
        let changes = PolicyChanges::default();
        let configs = |name: &str| Record::TopicConfigs {
            name: name.into(),
            overrides: None,
        };
        changes.note(&[configs("a"), Record::NextPartition(3)]);
        changes.note(&[Record::Topic {
            name: "b".into(),
            partitions: Some(vec![]),
        }]);
        changes.note(&[Record::Topic {
            name: "deleted".into(),
            partitions: None,
        }]);
        assert_eq!(
            changes.next().await,
            Some(BTreeSet::from(["a".to_string(), "b".to_string()]))
        );
        changes.note(&[Record::BrokerConfigs {
            name: String::new(),
            overrides: None,
        }]);
        changes.note(&[configs("c")]);
        assert_eq!(changes.next().await, None, "every topic");
        // Nothing changed since: no wake-up is stored.
        let waited =
            tokio::time::timeout(std::time::Duration::from_millis(20), changes.next()).await;
        assert!(waited.is_err(), "no change, no pass");

        // Whole views: the first is every topic; then the topics that differ.
        let mut view = ClusterView::default();
        view.topics.insert("a".into(), vec![]);
        view.topics.insert("b".into(), vec![]);
        changes.note_view(None, &view);
        assert_eq!(changes.next().await, None);
        let mut next = view.clone();
        next.topic_configs
            .insert("b".into(), [("segment.ms".into(), "500".into())].into());
        changes.note_view(Some(&view), &next);
        changes.note_view(Some(&next), &next);
        assert_eq!(
            changes.next().await,
            Some(BTreeSet::from(["b".to_string()]))
        );
        changes.note_view(Some(&next), &next);
        let waited =
            tokio::time::timeout(std::time::Duration::from_millis(20), changes.next()).await;
        assert!(waited.is_err(), "the same view again: no pass");
    }
}
