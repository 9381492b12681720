//! `isr-check replay TRACE...`: checks that the traces of one run of real processes (written
//! with `--trace FILE` or `ISR_TRACE=DIR`) are a behaviour of the protocol ([`isr::trace`]):
//! `accepted N steps`, or the first step that diverges, with the steps before it in a table, and
//! a non-zero exit.

use isr::trace::{Applied, Divergence, Event, Replayer, Trace};
use isr::{Log, PartitionId, Role};
use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// How many steps of the diverging partition are shown before the divergence.
const SHOWN: usize = 8;

/// Reads every trace (a directory stands for the `.jsonl` files in it), replays them, prints
/// the verdict.
pub fn cmd_replay(paths: &[PathBuf]) -> ExitCode {
    let traces = match read_all(paths) {
        Ok(traces) => traces,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    if traces.is_empty() {
        eprintln!("error: no trace given (a directory must hold .jsonl files)");
        return ExitCode::from(2);
    }
    let mut replayer = match Replayer::new(&traces) {
        Ok(r) => r,
        Err(d) => return diverged(&d, &VecDeque::new()),
    };
    // The last steps of each partition, rendered as they were taken.
    let mut recent: VecDeque<(Option<PartitionId>, String)> = VecDeque::new();
    let mut tables = BTreeMap::new();
    loop {
        // A trace from outside may drive the core somewhere it panics: that is a finding, and
        // reported as the divergence it is, not as a crash of the checker.
        let step = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| replayer.step()))
            .unwrap_or_else(|panic| {
                let what = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                Err(Divergence {
                    at: None,
                    steps: replayer.steps(),
                    why: format!("the core panicked on the next step: {what}"),
                })
            });
        match step {
            Ok(Some(applied)) => {
                let shown = render(&replayer, &traces, &mut tables, &applied);
                recent.push_back((applied.partition, shown));
                if recent.len() > SHOWN * 16 {
                    recent.pop_front();
                }
            }
            Ok(None) => break,
            Err(d) => {
                let partition = d.at.and_then(|(t, e)| partition_of(&traces[t].events[e]));
                let before: VecDeque<String> = recent
                    .iter()
                    .filter(|(p, _)| partition.is_none() || *p == partition || p.is_none())
                    .map(|(_, s)| s.clone())
                    .collect();
                let skip = before.len().saturating_sub(SHOWN);
                return diverged(&d, &before.into_iter().skip(skip).collect());
            }
        }
    }
    println!("accepted {} steps", replayer.steps());
    println!(
        "{} traces; every step a transition of the core with the recorded effects (a coordinator's group answers too), every receive after its send, every property held",
        traces.len()
    );
    ExitCode::SUCCESS
}

fn diverged(d: &Divergence, before: &VecDeque<String>) -> ExitCode {
    for step in before {
        println!("{step}");
    }
    println!("{}. DIVERGES: {}", d.steps + 1, d.why);
    println!("rejected after {} accepted steps", d.steps);
    ExitCode::from(1)
}

fn partition_of(event: &Event) -> Option<PartitionId> {
    match event {
        Event::Open { partition, .. }
        | Event::Replica { partition, .. }
        | Event::LoadPoint { partition, .. }
        | Event::Cleaned { partition, .. } => Some(*partition),
        _ => None,
    }
}

/// The rows of a partition's table as last shown, by broker.
type Tables = BTreeMap<PartitionId, BTreeMap<String, [String; 6]>>;

/// The step just taken as counterexamples show one: its name, then the table of its partition,
/// with what changed since that partition's last step marked `*`.
fn render(
    replayer: &Replayer<'_>,
    traces: &[Trace],
    tables: &mut Tables,
    applied: &Applied,
) -> String {
    let n = replayer.steps();
    let trace = &traces[applied.trace];
    let event = &trace.events[applied.event];
    let mut out = format!(
        "{n}. {} ({} line {})",
        event.label(),
        trace.name,
        applied.event + 1
    );
    let Some(partition) = applied.partition else {
        return out;
    };
    let _ = write!(out, "  [{partition}]");
    let mut rows = vec![["", "role", "epoch", "LEO", "HW", "cached ISR"].map(String::from)];
    let before = tables.remove(&partition).unwrap_or_default();
    let mut now = BTreeMap::new();
    for r in replayer.replicas(partition) {
        let (role, isr) = match r.role() {
            Role::Offline => ("offline".to_string(), "-".to_string()),
            Role::Follower(f) => (
                f.leader()
                    .map_or("follower".into(), |l| format!("follow {l}")),
                "-".to_string(),
            ),
            Role::Leader(l) => ("leader".to_string(), set(l.isr())),
        };
        let leo = r.log().log_end_offset();
        let flushed = r.log().flushed_offset();
        let leo = if flushed < leo {
            format!("{leo} (flushed {flushed})")
        } else {
            leo.to_string()
        };
        let row = [
            r.id().to_string(),
            role,
            r.leader_epoch().to_string(),
            leo,
            r.high_watermark().to_string(),
            isr,
        ];
        let mut shown = row.clone();
        if let Some(old) = before.get(&row[0]) {
            for k in 1..row.len() {
                if old[k] != row[k] {
                    shown[k].push('*');
                }
            }
        }
        now.insert(row[0].clone(), row);
        rows.push(shown);
    }
    tables.insert(partition, now);
    let _ = write!(out, "\n{}", isr_models::render::columns(&rows));
    if let Some(state) = replayer.controller().and_then(|c| c.partition(partition)) {
        let leader = state.leader.map_or("none".into(), |l| l.to_string());
        let _ = write!(
            out,
            "\n  controller: leader {leader}, {}, ISR {}, ELR {}",
            state.leader_epoch,
            set(&state.isr),
            set(&state.elr)
        );
    }
    out
}

fn set(brokers: &std::collections::BTreeSet<isr::BrokerId>) -> String {
    let names: Vec<String> = brokers.iter().map(|b| b.to_string()).collect();
    format!("{{{}}}", names.join(","))
}

fn read_all(paths: &[PathBuf]) -> Result<Vec<Trace>, String> {
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            let entries =
                std::fs::read_dir(path).map_err(|e| format!("{}: {e}", path.display()))?;
            let mut found: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
                .collect();
            found.sort();
            files.extend(found);
        } else {
            files.push(path.clone());
        }
    }
    files.iter().map(|f| read(f)).collect()
}

/// One trace file: an event per line.
fn read(path: &Path) -> Result<Trace, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let name = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    Trace::parse(name, &text, |line| serde_json::from_str(line))
}
