//! Readable states and traces: a compact table per state with changes marked, a Mermaid
//! sequence diagram, and an SVG sequence diagram for the Explorer.

use crate::shortest::Trace;
use isr::sim::{describe, set, Action, Bounds, Cluster, Record};
use isr::{Envelope, FollowerPhase, Log, Node, Offset, Role};
use std::fmt::Write;

/// The cells of one replica's row.
fn replica_cells(c: &Cluster, i: usize) -> [String; 5] {
    let r = &c.replicas[i];
    let role = match r.role() {
        Role::Offline => "down".to_string(),
        Role::Leader(_) => "leader".to_string(),
        Role::Follower(f) => {
            let leader = f.leader.map_or("-".to_string(), |b| b.to_string());
            match f.phase {
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
            let _ = write!(log, "{o}:{}:{}", e.epoch.0, e.record);
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
    [
        role,
        r.leader_epoch().to_string(),
        log,
        leo,
        r.high_watermark().to_string(),
    ]
}

/// The controller's line; a zombie controller's and a stale store's follow it when present.
fn controller_line(c: &Cluster) -> String {
    let describe = |ctl: &isr::Controller| match ctl.partition(isr::sim::PARTITION) {
        Some(s) => format!(
            "{}: leader {}, {}, ISR {}, ELR {}",
            ctl.epoch(),
            s.leader.map_or("none".to_string(), |b| b.to_string()),
            s.leader_epoch,
            set(&s.isr),
            set(&s.elr)
        ),
        None => format!("{}: no partition", ctl.epoch()),
    };
    let mut line = describe(&c.controller);
    if let Some(zombie) = &c.zombie {
        let _ = write!(line, "; zombie {}", describe(zombie));
    }
    if let Some(store) = &c.stale_store {
        let _ = write!(line, "; store {}", describe(store));
    }
    line
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
    ];
    let mut rows: Vec<Vec<String>> = vec![header.iter().map(|s| s.to_string()).collect()];
    for i in 0..c.replicas.len() {
        let now = replica_cells(c, i);
        let old = before.map(|b| replica_cells(b, i));
        let mut row = vec![format!("b{i}")];
        for (k, cell) in now.into_iter().enumerate() {
            let changed = old.as_ref().is_some_and(|o| o[k] != cell);
            row.push(if changed { format!("{cell}*") } else { cell });
        }
        rows.push(row);
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|k| rows.iter().map(|r| r[k].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in &rows {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        let _ = writeln!(out, "  {}", line.join("  ").trim_end());
    }
    let ctl = controller_line(c);
    let mark = if before.is_some_and(|b| controller_line(b) != ctl) {
        "*"
    } else {
        ""
    };
    let _ = writeln!(out, "  controller: {ctl}{mark}");
    let _ = write!(
        out,
        "  in flight: {}  written: {}/{}  crashes: {} clean, {} unclean",
        c.network.len(),
        c.written,
        bounds.records,
        c.clean_crashes,
        c.unclean_crashes
    );
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

fn participant(n: &Node) -> String {
    match n {
        Node::Broker(b) => b.to_string(),
        Node::Controller => "controller".to_string(),
    }
}

/// The message part of a description, without its route.
fn body(e: &Envelope<Record>) -> String {
    let d = describe(e);
    d.split_once(": ").map_or(d.clone(), |(_, b)| b.to_string())
}

/// Where an action happens, for diagrams: (from, to, label), or a note over one participant.
enum Event {
    Message {
        from: String,
        to: String,
        label: String,
        lost: bool,
    },
    Note {
        over: String,
        label: String,
    },
}

fn event(action: &Action) -> Event {
    let note = |b: &isr::BrokerId, label: String| Event::Note {
        over: b.to_string(),
        label,
    };
    match action {
        Action::Deliver(e) | Action::Drop(e) => Event::Message {
            from: participant(&e.from),
            to: participant(&e.to),
            label: body(e),
            lost: matches!(action, Action::Drop(_)),
        },
        Action::Duplicate(e) => Event::Note {
            over: participant(&e.from),
            label: action.to_string(),
        },
        Action::ZombieDeliver(e) => Event::Message {
            from: participant(&e.from),
            to: participant(&e.to),
            label: format!("(to the zombie) {}", body(e)),
            lost: false,
        },
        Action::ControllerShrinkIsr(_)
        | Action::ControllerElectLeader(_)
        | Action::ControllerFailover
        | Action::ZombieShrinkIsr(_)
        | Action::ZombieElectLeader(_) => Event::Note {
            over: "controller".to_string(),
            label: action.to_string(),
        },
        Action::LeaderWrite(b)
        | Action::FollowerFetch(b)
        | Action::CleanShutdown(b)
        | Action::UncleanCrash(b)
        | Action::Restart { broker: b, .. }
        | Action::Reregister { broker: b, .. }
        | Action::Flush(b)
        | Action::ConsumerRead(b) => note(b, action.to_string()),
        Action::LeaderShrinkIsr { leader, .. } => note(leader, action.to_string()),
    }
}

/// A Mermaid sequence diagram of a counterexample.
pub fn mermaid(replicas: u32, trace: &Trace) -> String {
    let mut out = String::from("sequenceDiagram\n");
    for b in 0..replicas {
        let _ = writeln!(out, "    participant b{b}");
    }
    out.push_str("    participant controller\n");
    for (i, (action, _)) in trace.steps.iter().enumerate() {
        let n = i + 1;
        let label = |l: &str| l.replace([';', '#'], " ");
        let _ = match event(action) {
            Event::Message {
                from,
                to,
                label: l,
                lost,
            } => {
                let arrow = if lost { "-x" } else { "->>" };
                let lost = if lost { " (lost)" } else { "" };
                writeln!(out, "    {from}{arrow}{to}: {n}. {}{lost}", label(&l))
            }
            Event::Note { over, label: l } => {
                writeln!(out, "    Note over {over}: {n}. {}", label(&l))
            }
        };
    }
    out
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// An SVG sequence diagram of a path, for the Explorer.
pub fn svg(replicas: u32, actions: &[Action]) -> String {
    let names: Vec<String> = (0..replicas)
        .map(|b| format!("b{b}"))
        .chain(std::iter::once("controller".to_string()))
        .collect();
    let x = |name: &str| 60 + 180 * names.iter().position(|n| n == name).unwrap_or(0);
    let height = 60 + 28 * actions.len() + 20;
    let width = 60 + 180 * names.len();
    let mut out = format!(
        "<svg version='1.1' baseProfile='full' width='{width}' height='{height}' \
         viewBox='0,0,{width},{height}' xmlns='http://www.w3.org/2000/svg'>\
         <defs><marker id='arrow' markerWidth='12' markerHeight='10' refX='12' refY='5' \
         orient='auto'><polygon points='0 0, 12 5, 0 10'/></marker></defs>"
    );
    for name in &names {
        let cx = x(name);
        let _ = write!(
            out,
            "<text x='{cx}' y='20' text-anchor='middle' font-family='monospace'>{name}</text>\
             <line x1='{cx}' y1='30' x2='{cx}' y2='{height}' stroke='#999'/>"
        );
    }
    for (i, action) in actions.iter().enumerate() {
        let y = 56 + 28 * i;
        match event(action) {
            Event::Message {
                from,
                to,
                label,
                lost,
            } => {
                let (x1, x2) = (x(&from), x(&to));
                let dash = if lost { " stroke-dasharray='4'" } else { "" };
                let _ = write!(
                    out,
                    "<line x1='{x1}' y1='{y}' x2='{x2}' y2='{y}' stroke='black'{dash} \
                     marker-end='url(#arrow)'/><text x='{}' y='{}' font-size='10' \
                     text-anchor='middle' font-family='monospace'>{}. {}</text>",
                    (x1 + x2) / 2,
                    y - 4,
                    i + 1,
                    escape(&label)
                );
            }
            Event::Note { over, label } => {
                let _ = write!(
                    out,
                    "<text x='{}' y='{y}' font-size='10' text-anchor='middle' \
                     font-family='monospace' fill='#236'>{}. {}</text>",
                    x(&over),
                    i + 1,
                    escape(&label)
                );
            }
        }
    }
    out.push_str("</svg>");
    out
}
