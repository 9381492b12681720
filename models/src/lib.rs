//! # isr-models: the replication core under the stateright model checker
//!
//! [`IsrModel`] is a stateright [`Model`] whose state is the core's [`Cluster`] and whose actions
//! are the core's [`Action`]s. Every step is one call of [`Cluster::apply`]: the model adds only
//! what a model checker needs — the choice among enabled actions, the bounds, the properties —
//! and re-implements no protocol logic.
//!
//! Properties are the core's [`Property::ALL`], checked as `always`, and three reachability
//! guards ([`Guard`]), checked as `sometimes`, which fail when the model is vacuous: a record is
//! committed, a failover's new leader commits a record, a restarted replica rejoins the ISR.
//!
//! [`presets`] lists the historical bugs and the safe protocol with their expected verdicts;
//! [`symmetry`] reduces the state space by broker renaming; [`shortest`] finds shortest
//! counterexamples (stateright's discovery paths are not); [`render`] prints states and traces.

pub mod check;
pub mod engine;
pub mod presets;
pub mod refines;
pub mod render;
pub mod shortest;
pub mod symmetry;

use isr::sim::{Action, Bounds, Cluster};
use isr::{Config, Property};
use stateright::{Model, Path};
use std::fmt;

/// The stateright model of a cluster of one partition or a few: the configuration and the bounds it is
/// explored under. Properties are `fn` pointers, so they read these from the model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IsrModel {
    pub cfg: Config,
    pub bounds: Bounds,
    /// The most changes of the controller's partition state other than elections (ISR shrinks
    /// and expansions, fencing, ELR changes). Without it a leader could shrink and re-expand
    /// the ISR forever, each time under a new partition epoch: an infinite state space.
    pub max_isr_changes: u32,
    /// Symmetry reduction: the model's successors (and initial state) are replaced by the
    /// canonical member of their class of broker renamings ([`symmetry::canonicalize`]), so
    /// any search explores one state per class. [`IsrModel::initial`], [`IsrModel::step`] and
    /// [`IsrModel::enabled`] stay unreduced, for traces.
    pub symmetry: bool,
}

/// A reachability guard: a `sometimes` property whose absence means the model is vacuous.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Guard {
    /// Some record is committed.
    RecordCommitted,
    /// A leader elected after a failover commits a record (a committed entry of epoch > 1).
    FailoverCommits,
    /// A replica that restarted is back in the controller's ISR.
    RestartedReplicaRejoins,
}

impl Guard {
    pub const ALL: [Guard; 3] = [
        Guard::RecordCommitted,
        Guard::FailoverCommits,
        Guard::RestartedReplicaRejoins,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Guard::RecordCommitted => "RecordCommitted",
            Guard::FailoverCommits => "FailoverCommits",
            Guard::RestartedReplicaRejoins => "RestartedReplicaRejoins",
        }
    }

    /// Whether the guard's situation is reached in `c`.
    pub fn reached(self, c: &Cluster) -> bool {
        match self {
            Guard::RecordCommitted => c.history.iter().any(|h| !h.committed.is_empty()),
            Guard::FailoverCommits => c
                .history
                .iter()
                .any(|h| h.committed.iter().any(|(_, e)| e.epoch.0 > 1)),
            Guard::RestartedReplicaRejoins => c.rejoined,
        }
    }
}

/// One checked property: a safety property of the core, or a reachability guard.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Check {
    Always(Property),
    Sometimes(Guard),
}

impl Check {
    /// Every check, in the order of [`IsrModel`]'s stateright properties.
    pub fn all() -> Vec<Check> {
        Property::ALL
            .into_iter()
            .map(Check::Always)
            .chain(Guard::ALL.into_iter().map(Check::Sometimes))
            .collect()
    }

    /// Whether an `always` property (a violation is a counterexample).
    pub fn is_always(self) -> bool {
        matches!(self, Check::Always(_))
    }

    pub fn name(self) -> &'static str {
        match self {
            Check::Always(p) => p.name(),
            Check::Sometimes(g) => g.name(),
        }
    }

    /// Parses a property or guard name.
    pub fn from_name(name: &str) -> Option<Check> {
        Check::all().into_iter().find(|c| c.name() == name)
    }
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The stateright property for a check. Conditions must be `fn` pointers, hence one
/// non-capturing closure per property.
fn stateright_property(check: Check) -> stateright::Property<IsrModel> {
    use stateright::Property as P;
    macro_rules! always {
        ($p:expr) => {
            P::always($p.name(), |_, c: &Cluster| c.check($p).is_ok())
        };
    }
    macro_rules! sometimes {
        ($g:expr) => {
            P::sometimes($g.name(), |_, c: &Cluster| $g.reached(c))
        };
    }
    match check {
        Check::Always(Property::StrongIsr) => always!(Property::StrongIsr),
        Check::Always(Property::WeakIsr) => always!(Property::WeakIsr),
        Check::Always(Property::LeaderInIsr) => always!(Property::LeaderInIsr),
        Check::Always(Property::ValidHighWatermark) => always!(Property::ValidHighWatermark),
        Check::Always(Property::LogMatching) => always!(Property::LogMatching),
        Check::Always(Property::CommittedRecordsSurviveLeaderFailure) => {
            always!(Property::CommittedRecordsSurviveLeaderFailure)
        }
        Check::Always(Property::ConsumerReadsAreNeverRevoked) => {
            always!(Property::ConsumerReadsAreNeverRevoked)
        }
        Check::Always(Property::HighWatermarkKeepsUp) => always!(Property::HighWatermarkKeepsUp),
        Check::Always(Property::ReconciliationProgresses) => {
            always!(Property::ReconciliationProgresses)
        }
        Check::Always(Property::ReplicasAreConsistent) => {
            always!(Property::ReplicasAreConsistent)
        }
        Check::Always(Property::AcknowledgedOnMinIsr) => always!(Property::AcknowledgedOnMinIsr),
        Check::Always(Property::ControllerStateIsConsistent) => {
            always!(Property::ControllerStateIsConsistent)
        }
        Check::Always(Property::LeaderEpochsAreUnique) => {
            always!(Property::LeaderEpochsAreUnique)
        }
        Check::Always(Property::IdempotentWritesStoredOnce) => {
            always!(Property::IdempotentWritesStoredOnce)
        }
        Check::Always(Property::LogStartWithinHighWatermark) => {
            always!(Property::LogStartWithinHighWatermark)
        }
        Check::Always(Property::NoReadBelowLogStart) => always!(Property::NoReadBelowLogStart),
        Check::Always(Property::CleanedRecordsAreSuperseded) => {
            always!(Property::CleanedRecordsAreSuperseded)
        }
        Check::Always(Property::ConsumerResumesWithoutLoss) => {
            always!(Property::ConsumerResumesWithoutLoss)
        }
        Check::Always(Property::AcknowledgedCommitsSurvive) => {
            always!(Property::AcknowledgedCommitsSurvive)
        }
        Check::Always(Property::FencedMembersCannotCommit) => {
            always!(Property::FencedMembersCannotCommit)
        }
        Check::Always(Property::FollowersFetchingEveryRoundStayInIsr) => {
            always!(Property::FollowersFetchingEveryRoundStayInIsr)
        }
        Check::Always(Property::TimelyRequestsAreNotRetried) => {
            always!(Property::TimelyRequestsAreNotRetried)
        }
        Check::Sometimes(Guard::RecordCommitted) => sometimes!(Guard::RecordCommitted),
        Check::Sometimes(Guard::FailoverCommits) => sometimes!(Guard::FailoverCommits),
        Check::Sometimes(Guard::RestartedReplicaRejoins) => {
            sometimes!(Guard::RestartedReplicaRejoins)
        }
    }
}

impl IsrModel {
    pub fn new(cfg: Config, bounds: Bounds, max_isr_changes: u32) -> Self {
        IsrModel {
            cfg,
            bounds,
            max_isr_changes,
            symmetry: false,
        }
    }

    /// Changes of a partition's state other than elections so far, in the partition and the
    /// controller state that have made most of them (the active controller's, a zombie's or a
    /// stale store's): every election bumps both the leader and the partition epoch, every
    /// other change only the partition epoch.
    pub fn isr_changes(c: &Cluster) -> u32 {
        c.controllers()
            .flat_map(|ctl| c.partitions().filter_map(|p| ctl.partition(p)))
            .map(|s| s.partition_epoch.0.saturating_sub(s.leader_epoch.0))
            .max()
            .unwrap_or(0)
    }

    /// Whether `c` lies within the bounds the model explores.
    pub fn within(&self, c: &Cluster) -> bool {
        Self::isr_changes(c) <= self.max_isr_changes
    }

    /// The initial cluster: broker 0 leads in epoch 1, everyone in the ISR.
    pub fn initial(&self) -> Cluster {
        Cluster::new(&self.cfg, &self.bounds)
    }

    /// The enabled actions of `c`, in the core's deterministic order.
    pub fn enabled(&self, c: &Cluster) -> Vec<Action> {
        c.actions(&self.cfg, &self.bounds)
    }

    /// The SVG sequence diagram of `actions` taken from the initial state, ending with what
    /// `last`, the state they lead to, violates.
    pub fn diagram(&self, actions: &[Action], last: &Cluster) -> String {
        let violated: Vec<String> = render::violations(last)
            .iter()
            .map(ToString::to_string)
            .collect();
        render::svg(self.bounds.replicas, actions, &violated)
    }

    /// The state after `action`: one core transition.
    pub fn step(&self, c: &Cluster, action: &Action) -> Cluster {
        let mut next = c.clone();
        next.apply(&self.cfg, &self.bounds, action);
        next
    }
}

impl Model for IsrModel {
    type State = Cluster;
    type Action = Action;

    fn init_states(&self) -> Vec<Cluster> {
        let mut initial = self.initial();
        if self.symmetry {
            symmetry::canonicalize(&mut initial);
        }
        vec![initial]
    }

    fn actions(&self, state: &Cluster, actions: &mut Vec<Action>) {
        actions.extend(self.enabled(state));
    }

    fn next_state(&self, last: &Cluster, action: Action) -> Option<Cluster> {
        let mut next = self.step(last, &action);
        if self.symmetry {
            symmetry::canonicalize(&mut next);
        }
        Some(next)
    }

    fn within_boundary(&self, state: &Cluster) -> bool {
        self.within(state)
    }

    fn properties(&self) -> Vec<stateright::Property<Self>> {
        Check::all().into_iter().map(stateright_property).collect()
    }

    fn format_action(&self, action: &Action) -> String {
        action.to_string()
    }

    /// The action, the table of the state it leads to with changes marked, and every property
    /// that state violates, with the reason.
    fn format_step(&self, last: &Cluster, action: Action) -> Option<String> {
        let next = self.step(last, &action);
        let mut out = format!(
            "{action}\n\n{}",
            render::table(&self.bounds, Some(last), &next)
        );
        if let Some(violated) = render::violated_here(&next) {
            out.push_str("\n\n");
            out.push_str(&violated);
        }
        if !self.within(&next) {
            out.push_str("\n\nbeyond the bounds (ISR changes): the checker does not explore it");
        }
        Some(out)
    }

    fn as_svg(&self, path: Path<Cluster, Action>) -> Option<String> {
        let last = path.last_state().clone();
        Some(self.diagram(&path.into_actions(), &last))
    }
}
