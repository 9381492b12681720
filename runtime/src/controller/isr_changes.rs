//! What the active controller made of the ISR changes leaders asked for, summed over a window
//! and logged once per window: how many it was asked, how many it accepted, and why it refused
//! the others. A cluster that keeps proposing ISR changes (leaders dropping followers that are
//! slow to fetch and taking them back, or resending proposals the controller has not answered
//! yet) shows it here, at the default log level, without a per-request line.

use isr::{ControllerEffect as Effect, Message};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use tracing::info;

/// How often the counts are logged (when there are any).
const WINDOW: Duration = Duration::from_secs(10);

/// The AlterPartition answers of the current window.
pub struct IsrChanges {
    since: Instant,
    asked: u64,
    accepted: u64,
    /// Refusals by error kind (the error's variant name).
    refused: BTreeMap<String, u64>,
}

impl Default for IsrChanges {
    fn default() -> Self {
        IsrChanges {
            since: Instant::now(),
            asked: 0,
            accepted: 0,
            refused: BTreeMap::new(),
        }
    }
}

impl IsrChanges {
    /// Counts the AlterPartition answers among a step's effects.
    pub fn count<R>(&mut self, effects: &[Effect<R>]) {
        for effect in effects {
            let Effect::Send(envelope) = effect else {
                continue;
            };
            let Message::AlterPartitionResponse(answer) = &envelope.message else {
                continue;
            };
            self.asked += 1;
            match &answer.result {
                Ok(_) => self.accepted += 1,
                Err(e) => {
                    let shown = format!("{e:?}");
                    let kind = shown
                        .split(|c: char| !c.is_ascii_alphanumeric())
                        .next()
                        .unwrap_or_default();
                    *self.refused.entry(kind.to_string()).or_default() += 1;
                }
            }
        }
    }

    /// Logs the window's counts once it is over (nothing if nobody asked), and starts the next.
    pub fn log_if_due(&mut self) {
        if self.since.elapsed() < WINDOW {
            return;
        }
        if self.asked > 0 {
            info!(
                asked = self.asked,
                accepted = self.accepted,
                refused = ?self.refused,
                seconds = self.since.elapsed().as_secs(),
                "ISR changes asked of the controller"
            );
        }
        *self = IsrChanges::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use isr::{
        AlterPartitionError, AlterPartitionResponse, BrokerId, ControllerEpoch, Envelope, Node,
        PartitionEpoch, PartitionId,
    };
    use std::collections::BTreeSet;

    fn answer(result: Result<isr::PartitionState, AlterPartitionError>) -> Effect<()> {
        Effect::Send(Envelope {
            from: Node::Controller,
            to: Node::Broker(BrokerId(1)),
            message: Message::AlterPartitionResponse(AlterPartitionResponse {
                partition: PartitionId(0),
                request_partition_epoch: PartitionEpoch(1),
                requested_isr: BTreeSet::new(),
                requested_broker_epochs: BTreeMap::new(),
                controller_epoch: ControllerEpoch(1),
                result,
            }),
        })
    }

    #[test]
    fn answers_are_counted_by_outcome_and_refusals_by_kind() {
        let mut changes = IsrChanges::default();
        let stale = AlterPartitionError::InvalidUpdateVersion {
            request: PartitionEpoch(1),
            current: PartitionEpoch(2),
        };
        let ineligible = AlterPartitionError::IneligibleReplicas(BTreeSet::from([BrokerId(2)]));
        changes.count(&[
            answer(Err(stale.clone())),
            answer(Err(stale)),
            answer(Err(ineligible)),
        ]);
        changes.count::<()>(&[Effect::MustRegister {
            broker: BrokerId(3),
        }]);
        assert_eq!((changes.asked, changes.accepted), (3, 0));
        assert_eq!(
            changes.refused,
            BTreeMap::from([
                ("IneligibleReplicas".to_string(), 1),
                ("InvalidUpdateVersion".to_string(), 2)
            ])
        );
    }
}
