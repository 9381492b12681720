//! One scenario from start to verdict: start the cluster, start the workload, inject the fault
//! schedule, heal, wait until the cluster is healthy, let the workload run a little longer,
//! stop it, read everything back, and check the history.

use crate::client::Router;
use crate::cluster::{Cluster, PARTITIONS, TOPIC};
use crate::history::{self, FinalState, Findings, History, Recorder, Timeline};
use crate::rng::Rng;
use crate::scenario::{self, Expected, Run, Scenario};
use crate::workload::{Plan, Workload, GROUP};
use isr_kafka::client::consume::{
    committed_offset, fetch_request, fetched_records, list_offsets_request, listed_offset,
    offset_fetch_request, EARLIEST,
};
use isr_kafka::client::records;
use std::path::PathBuf;
use std::time::Duration;
use tokio::time::Instant;

/// How a scenario ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Safe, and nothing was lost.
    Pass,
    /// Safe, and the history or the cluster broke a guarantee.
    Fail,
    /// The predicted loss was observed.
    Reproduced,
    /// The predicted loss was not observed: never a pass.
    NotReproduced,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "FAIL",
            Verdict::Reproduced => "reproduced",
            Verdict::NotReproduced => "not reproduced",
        }
    }

    /// Whether the scenario did what it expects.
    pub fn ok(self) -> bool {
        matches!(self, Verdict::Pass | Verdict::Reproduced)
    }
}

pub struct Options {
    pub isr: PathBuf,
    pub duration: Duration,
    pub seed: u64,
    pub keep: bool,
    pub verbose: bool,
}

/// What one scenario found.
pub struct Report {
    pub scenario: String,
    pub fault: String,
    pub expected: Expected,
    pub findings: Findings,
    pub verdict: Verdict,
    pub problems: Vec<String>,
    pub schedule: Vec<(Duration, String)>,
    pub marks: Vec<(Duration, String)>,
    pub history: History,
    /// From the heal until every partition had a leader and a full ISR.
    pub healthy_after: Option<Duration>,
    pub dir: Option<PathBuf>,
    /// The processes' traces replayed on the core ([`isr::trace`]): the steps accepted, or
    /// the first divergence (a property broken, for the scenarios expected to lose data).
    pub replay: Option<Result<usize, String>>,
}

/// How long the workload runs before the faults, and after the cluster is healthy again.
const WARM_UP: Duration = Duration::from_secs(1);
const SETTLE: Duration = Duration::from_secs(2);
const HEALTHY_WITHIN: Duration = Duration::from_secs(60);
/// A partition without acknowledgements for longer than this, in any scenario, is worth a
/// look: its directory is kept (the verdict is about safety, and stays as it is).
const SURPRISING_OUTAGE: Duration = Duration::from_secs(20);

pub async fn run(s: &Scenario, opts: &Options) -> Report {
    let mut report = Report {
        scenario: s.name.clone(),
        fault: s.fault.clone(),
        expected: s.expected,
        findings: Findings::default(),
        verdict: Verdict::Fail,
        problems: Vec::new(),
        schedule: Vec::new(),
        marks: Vec::new(),
        history: History::default(),
        healthy_after: None,
        dir: None,
        replay: None,
    };
    let cluster = match Cluster::start(&opts.isr, s.setup(), opts.keep).await {
        Ok(c) => c,
        Err(e) => {
            report
                .problems
                .push(format!("the cluster did not start: {e}"));
            return judge(report);
        }
    };
    report.dir = opts.keep.then(|| cluster.dir.path().to_path_buf());
    let start = Instant::now();
    let recorder = Recorder::default();
    let plan = Plan {
        bootstrap: cluster.bootstrap(),
        topic: TOPIC.to_string(),
        partitions: PARTITIONS,
        acks_all: s.acks_all(),
        acks_one: s.acks_one(),
        members: 2,
    };
    let workload = Workload::start(plan, recorder.clone(), start);
    let mut run = Run {
        cluster,
        start,
        duration: opts.duration,
        rng: Rng::new(opts.seed),
        schedule: Vec::new(),
        problems: Vec::new(),
        marks: Vec::new(),
        verbose: opts.verbose,
        history: recorder.clone(),
    };
    tokio::time::sleep(WARM_UP).await;
    if let Err(e) = scenario::inject(s.kind, &mut run).await {
        run.problems.push(format!("the schedule stopped: {e}"));
    }
    if let Err(e) = run.cluster.heal().await {
        run.problems.push(format!("healing: {e}"));
    }
    let healed = start.elapsed();
    run.log("healed: links restored, every process running, disks repaired");
    match run.cluster.wait_healthy(HEALTHY_WITHIN).await {
        Ok(took) => {
            report.healthy_after = Some(took);
            run.log(format!("healthy after {:.1} s", took.as_secs_f64()));
        }
        Err(e) => run.problems.push(format!("after the heal: {e}")),
    }
    tokio::time::sleep(SETTLE).await;
    let workload_end = start.elapsed();
    workload.stop().await;
    run.log("workload stopped");
    if s.kind == scenario::Kind::CrashMidWrite && !run.cluster.brokers.is_empty() {
        let torn = (1..=3).any(|b| run.cluster.cut_torn_tail(b));
        if torn {
            run.log("recovery cut the half-written batch");
        } else {
            run.problems
                .push("no recovery cut a torn batch after the crash mid-write".into());
        }
    }
    let last = read_back(&run.cluster).await;
    // Every process stopped, its trace is complete: the run must be a behaviour of the model.
    run.cluster.stop_all().await;
    let replayed = isr_runtime::trace::read_dir(&run.cluster.traces())
        .and_then(|traces| isr::trace::replay(&traces).map_err(|d| d.why))
        .map(|accepted| accepted.steps);
    if let (Expected::Safe, Err(why)) = (s.expected, &replayed) {
        run.problems
            .push(format!("the run is not a behaviour of the protocol: {why}"));
    }
    report.replay = Some(replayed);
    let timeline = Timeline {
        workload_start: Duration::ZERO,
        healed,
        workload_end,
    };
    let history = std::mem::take(&mut *recorder.lock());
    match last {
        Ok(last) => report.findings = history::check(&history, &last, timeline),
        Err(e) => run.problems.push(format!("reading back: {e}")),
    }
    let gap = report.findings.commit_gap;
    if s.kind == scenario::Kind::CoordinatorFailover && gap > scenario::RESUME_WITHIN {
        run.problems.push(format!(
            "the members went {:.1} s without a commit from {:.1} s (at most {} s after their \
             coordinator's loss)",
            gap.as_secs_f64(),
            report.findings.commit_gap_from.as_secs_f64(),
            scenario::RESUME_WITHIN.as_secs()
        ));
    }
    report.history = history;
    report.problems.extend(run.problems);
    report.schedule = run.schedule;
    report.marks = run.marks;
    let mut report = judge(report);
    // What did not go as expected, or took surprisingly long, keeps its processes' logs.
    if !report.verdict.ok() || report.findings.unavailable > SURPRISING_OUTAGE {
        run.cluster.dir.disable_cleanup(true);
        report.dir = Some(run.cluster.dir.path().to_path_buf());
    }
    report
}

fn judge(mut report: Report) -> Report {
    let f = &report.findings;
    report.verdict = match report.expected {
        Expected::Safe => {
            let clean = f.lost.is_empty()
                && f.duplicated.is_empty()
                && f.out_of_order.is_empty()
                && f.revoked_reads.is_empty()
                && f.commit_regressions.is_empty()
                && f.skipped.is_empty()
                && f.acknowledged > 0
                && report.problems.is_empty();
            if clean {
                Verdict::Pass
            } else {
                Verdict::Fail
            }
        }
        Expected::Loss => {
            if !f.lost.is_empty() || !f.revoked_reads.is_empty() {
                Verdict::Reproduced
            } else {
                Verdict::NotReproduced
            }
        }
    };
    report
}

/// Everything the cluster holds, read back from each partition's leader up to its high
/// watermark, and the group's committed offsets.
async fn read_back(cluster: &Cluster) -> Result<FinalState, String> {
    let mut router = Router::new(&cluster.bootstrap(), TOPIC);
    let mut last = FinalState::default();
    let deadline = Instant::now() + Duration::from_secs(30);
    for p in 0..PARTITIONS {
        let mut log = Vec::new();
        let mut next = 0i64;
        let mut start = 0i64;
        loop {
            if Instant::now() > deadline {
                return Err(format!("partition {p} could not be read to its end"));
            }
            router.refresh().await;
            let Some(leader) = router.leader(p) else {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            };
            let request = fetch_request(TOPIC, p, next, 0);
            let Ok(answer) = router.call(&leader, &request, Duration::from_secs(5)).await else {
                continue;
            };
            let (data, hw) = match fetched_records(&leader, answer) {
                Ok(fetched) => fetched,
                // Below the log start (retention runs on): read again from where it is now.
                Err(e) if e.is_offset_out_of_range() => {
                    let request = list_offsets_request(TOPIC, p, EARLIEST);
                    let listed = router.call(&leader, &request, Duration::from_secs(5)).await;
                    if let Ok(earliest) = listed.and_then(|a| listed_offset(&leader, a)) {
                        (start, next) = (earliest, earliest);
                        log.clear();
                    }
                    continue;
                }
                Err(_) => continue,
            };
            let batch = records::decode(data).map_err(|e| format!("partition {p}: {e}"))?;
            let before = next;
            for r in batch {
                if r.offset < next {
                    continue;
                }
                let value = r.value.as_deref().unwrap_or_default();
                log.push((r.offset, String::from_utf8_lossy(value).into_owned()));
                next = r.offset + 1;
            }
            if next == before && next >= hw {
                break;
            }
        }
        last.logs.insert(p, log);
        last.log_starts.insert(p, start);
    }
    for p in 0..PARTITIONS {
        let mut committed = None;
        for n in 0..30 {
            let Ok(coordinator) = router.coordinator(GROUP, n).await else {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            };
            let request = offset_fetch_request(GROUP, TOPIC, p);
            let answer = router.call(&coordinator, &request, Duration::from_secs(5));
            if let Ok(Ok(offset)) = answer.await.map(|a| committed_offset(&a)) {
                committed = Some(offset);
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let offset = committed.ok_or(format!("the group's offset for partition {p}"))?;
        last.committed.insert(p, offset);
    }
    Ok(last)
}
