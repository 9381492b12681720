//! A state as a table: one row per replica, the controller's view, what the properties judge
//! (each leader's cached ISR, the committed, acknowledged and consumed history), and what is in
//! flight. The command line prints it after every step of a counterexample; the Explorer shows
//! it for the state selected.

use crate::shortest::Trace;
use isr::sim::{describe, record_label, set, Bounds, Cluster, Payload, Phase, Record, ReplicaId};
use isr::{Entry, FollowerPhase, Log, Offset, Property, Role, Violation};
use std::collections::BTreeSet;
use std::fmt::Write;

/// The cells of one replica's row.
fn replica_cells(c: &Cluster, i: usize) -> [String; 6] {
    let r = &c.replicas[i];
    let role = match r.role() {
        Role::Offline => "down".to_string(),
        Role::Leader(_) => "leader".to_string(),
        Role::Follower(f) => {
            let leader = f.leader().map_or("-".to_string(), |b| b.to_string());
            match f.phase() {
                FollowerPhase::Fetching => format!("follow {leader}"),
                FollowerPhase::Reconciling { requested } => {
                    format!("reconcile {leader} ?{requested}")
                }
            }
        }
    };
    let mut log = String::new();
    for o in 0..r.log_end_offset().0 {
        if let Some(e) = r.entry(Offset(o)) {
            if !log.is_empty() {
                log.push(' ');
            }
            let _ = write!(log, "{o}:{}:{}", e.epoch.0, record_label(e.record));
        }
    }
    if log.is_empty() {
        log.push('-');
    }
    let flushed = r.log().flushed_offset();
    let leo = if flushed < r.log_end_offset() {
        format!("{} (flushed {flushed})", r.log_end_offset())
    } else {
        r.log_end_offset().to_string()
    };
    // The ISR a leader computes its high watermark over and WeakIsr judges: its own cached copy,
    // with a change it proposed and the controller has not answered yet.
    let isr = r
        .leader_state()
        .map_or("-".to_string(), |l| match l.proposed_isr() {
            Some(p) => format!("{} (proposed {})", set(l.isr()), set(p)),
            None => set(l.isr()),
        });
    [
        role,
        r.leader_epoch().to_string(),
        log,
        leo,
        r.high_watermark().to_string(),
        isr,
    ]
}

/// `p1 ` before what is said of a partition, when there are several.
fn label(c: &Cluster, p: isr::PartitionId) -> String {
    if c.history.len() > 1 {
        format!("{p} ")
    } else {
        String::new()
    }
}

/// The controller's line, with its controller epoch and each partition's state; a zombie
/// controller's and a stale store's follow it when present.
fn controller_line(c: &Cluster) -> String {
    let describe = |ctl: &isr::Controller| {
        let partitions: Vec<String> = c
            .partitions()
            .map(|p| match ctl.partition(p) {
                Some(s) => format!(
                    "{}leader {}, {}, ISR {}, ELR {}",
                    label(c, p),
                    s.leader.map_or("none".to_string(), |b| b.to_string()),
                    s.leader_epoch,
                    set(&s.isr),
                    set(&s.elr)
                ),
                None => format!("{}no partition", label(c, p)),
            })
            .collect();
        format!("{}: {}", ctl.epoch(), partitions.join("; "))
    };
    let mut line = describe(&c.controller);
    if let Some(zombie) = &c.zombie {
        line += &format!("; zombie {}", describe(zombie));
    }
    if let Some(store) = &c.stale_store {
        line += &format!("; store {}", describe(store));
    }
    line
}

/// History entries as `offset:epoch:record`, as in the log column.
fn entries(records: &BTreeSet<(Offset, Entry<Record>)>) -> String {
    if records.is_empty() {
        return "-".to_string();
    }
    let items: Vec<String> = records
        .iter()
        .map(|(o, e)| format!("{o}:{}:{}", e.epoch.0, record_label(e.record)))
        .collect();
    items.join(" ")
}

/// What the properties about the past judge: records committed, acknowledged to an acks=all
/// producer, and (with a consumer) read.
fn history_line(bounds: &Bounds, c: &Cluster) -> String {
    let lines: Vec<String> = c
        .partitions()
        .map(|p| {
            let h = &c.history[p.0 as usize];
            let mut line = format!(
                "{}committed: {}  acknowledged: {}",
                label(c, p),
                entries(&h.committed),
                entries(&h.acknowledged)
            );
            if bounds.consumer {
                let _ = write!(line, "  consumed: {}", entries(&h.consumed));
            }
            line
        })
        .collect();
    lines.join("\n  ")
}

/// `line`, marked with `*` when `before` had another.
/// The consumer group, when the model has one: each consumer (member id, generation, phase,
/// position, commit awaiting an answer), the serving coordinators' generations and positions,
/// the last acknowledged commit, and what each record of the offsets partition holds.
fn group_line(c: &Cluster) -> Option<String> {
    let g = c.consumers.as_deref()?;
    let offset = |o: Option<Offset>| o.map_or("-".to_string(), |o| o.to_string());
    let mut parts: Vec<String> = g
        .members
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let phase = match m.phase {
                Phase::Out => "out".to_string(),
                Phase::Joining => "joining".to_string(),
                Phase::Syncing => "syncing".to_string(),
                Phase::Stable { owns: true } => "owner".to_string(),
                Phase::Stable { owns: false } => "member".to_string(),
            };
            let id = if m.member_id.is_empty() {
                "-"
            } else {
                &m.member_id
            };
            let pending = m.pending.map_or(String::new(), |r| format!(" awaits #{r}"));
            format!(
                "c{i} {id} g{} {phase} at {}{pending}",
                m.generation,
                offset(m.position)
            )
        })
        .collect();
    for (b, k) in g.coordinators.iter().enumerate() {
        if let Some(k) = k {
            let generation = k.group.generation();
            parts.push(format!(
                "coordinator b{b} {} g{generation} at {}",
                k.epoch,
                offset(k.offset)
            ));
        }
    }
    parts.push(format!("acknowledged commit {}", offset(g.acknowledged)));
    let records: Vec<String> = g
        .payloads
        .iter()
        .enumerate()
        .map(|(i, p)| match p {
            Payload::Commit { generation, offset } => {
                format!("#{}=commit g{generation} {offset}", i + 1)
            }
            Payload::Group(s) => format!(
                "#{}=group g{} ({} members)",
                i + 1,
                s.generation,
                s.members.len()
            ),
        })
        .collect();
    if !records.is_empty() {
        parts.push(format!("records {}", records.join(" ")));
    }
    Some(format!("group: {}", parts.join("; ")))
}

fn marked(line: String, before: Option<String>) -> String {
    if before.is_some_and(|b| b != line) {
        format!("{line}*")
    } else {
        line
    }
}

/// `rows` as aligned columns, each line indented by two spaces (no newline after the last):
/// the layout of every state table, the model's and `isr-check replay`'s.
pub fn columns<R: AsRef<[String]>>(rows: &[R]) -> String {
    let n = rows.iter().map(|r| r.as_ref().len()).max().unwrap_or(0);
    let widths: Vec<usize> = (0..n)
        .map(|k| {
            rows.iter()
                .filter_map(|r| r.as_ref().get(k))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let lines: Vec<String> = rows
        .iter()
        .map(|row| {
            let cells: Vec<String> = row
                .as_ref()
                .iter()
                .zip(&widths)
                .map(|(cell, w)| format!("{cell:<w$}"))
                .collect();
            format!("  {}", cells.join("  ").trim_end())
        })
        .collect();
    lines.join("\n")
}

/// A compact table of `c`; cells that differ from `before` are marked with `*`.
pub fn table(bounds: &Bounds, before: Option<&Cluster>, c: &Cluster) -> String {
    let header = [
        "",
        "role",
        "epoch",
        "log (offset:epoch:record)",
        "LEO",
        "HW",
        "cached ISR",
    ];
    let mut rows: Vec<Vec<String>> = vec![header.iter().map(|s| s.to_string()).collect()];
    for i in 0..c.replicas.len() {
        let now = replica_cells(c, i);
        let old = before.map(|b| replica_cells(b, i));
        let r = &c.replicas[i];
        let mut row = vec![ReplicaId::new(r.id(), r.partition()).to_string()];
        for (k, cell) in now.into_iter().enumerate() {
            let changed = old.as_ref().is_some_and(|o| o[k] != cell);
            row.push(if changed { format!("{cell}*") } else { cell });
        }
        rows.push(row);
    }
    let mut out = columns(&rows);
    out.push('\n');
    let ctl = marked(controller_line(c), before.map(controller_line));
    let _ = writeln!(out, "  controller: {ctl}");
    let history = marked(
        history_line(bounds, c),
        before.map(|b| history_line(bounds, b)),
    );
    let _ = writeln!(out, "  {history}");
    if let Some(group) = group_line(c) {
        let group = marked(group, before.and_then(group_line));
        let _ = writeln!(out, "  {group}");
    }
    let _ = write!(
        out,
        "  in flight: {}  written: {}/{}  crashes: {} clean, {} unclean",
        c.network.len(),
        c.written,
        bounds.records,
        c.clean_crashes,
        c.unclean_crashes
    );
    if c.clocked {
        let _ = write!(out, "  tick {}", c.now.0);
    }
    out
}

/// Every property `c` violates, each with the core's explanation.
pub fn violations(c: &Cluster) -> Vec<Violation> {
    Property::ALL
        .into_iter()
        .filter_map(|p| c.check(p).err())
        .collect()
}

/// `violated here:` and the explanation of each property `c` violates; `None` if none.
pub fn violated_here(c: &Cluster) -> Option<String> {
    let violated = violations(c);
    if violated.is_empty() {
        return None;
    }
    let mut out = "violated here:".to_string();
    for v in violated {
        let _ = write!(out, "\n  {v}");
    }
    Some(out)
}

/// The whole of `c` for a reader: the table, each message in flight, and every property it
/// violates with the reason.
pub fn state(bounds: &Bounds, c: &Cluster) -> String {
    let mut out = table(bounds, None, c);
    for e in &c.network {
        let _ = write!(out, "\n    {}", describe(e));
    }
    let verdict = violated_here(c).unwrap_or_else(|| "every property holds here".to_string());
    let _ = write!(out, "\n\n{verdict}");
    out
}

/// A counterexample as numbered steps, each followed by the table of the state it led to.
pub fn trace_text(bounds: &Bounds, trace: &Trace) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "0. initial state");
    let _ = writeln!(out, "{}", table(bounds, None, &trace.initial));
    let mut before = &trace.initial;
    for (i, (action, state)) in trace.steps.iter().enumerate() {
        let _ = writeln!(out, "{}. {action}", i + 1);
        let _ = writeln!(out, "{}", table(bounds, Some(before), state));
        before = state;
    }
    out
}
