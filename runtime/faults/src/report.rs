//! What `isr-faults run` prints: a table with one row per scenario (or, with `--json`, an array
//! of objects), the details of any scenario that did not do what it expects, and for the slow
//! follower, acks=all latency over time.

use crate::history::{Acks, History, Outcome};
use crate::run::Report;
use serde_json::json;
use std::fmt::Write as _;
use std::time::Duration;

fn ms(d: Duration) -> String {
    d.as_millis().to_string()
}

/// The table: scenario, fault, expected, writes attempted, acknowledged, lost, duplicated,
/// the longest unavailability, the time to recover after the heal, and the verdict.
pub fn table(reports: &[Report]) -> String {
    let mut rows = vec![[
        "scenario".to_string(),
        "fault".into(),
        "expected".into(),
        "attempted".into(),
        "acked".into(),
        "lost".into(),
        "dup".into(),
        "unavail ms".into(),
        "recover ms".into(),
        "verdict".into(),
    ]];
    for r in reports {
        let f = &r.findings;
        rows.push([
            r.scenario.clone(),
            r.fault.clone(),
            r.expected.to_string(),
            f.attempted.to_string(),
            f.acknowledged.to_string(),
            f.lost.len().to_string(),
            f.duplicated.len().to_string(),
            ms(f.unavailable),
            f.recovered.map_or("-".into(), ms),
            r.verdict.as_str().to_string(),
        ]);
    }
    let widths: Vec<usize> = (0..10)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for (i, row) in rows.iter().enumerate() {
        let cells: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(c, cell)| {
                // Text left, numbers right.
                if (3..9).contains(&c) {
                    format!("{cell:>w$}", w = widths[c])
                } else {
                    format!("{cell:<w$}", w = widths[c])
                }
            })
            .collect();
        let _ = writeln!(out, "{}", cells.join("  ").trim_end());
        if i == 0 {
            let rule: Vec<String> = widths.iter().map(|&w| "-".repeat(w)).collect();
            let _ = writeln!(out, "{}", rule.join("  "));
        }
    }
    out
}

/// `--json`: exactly the fields the issue names.
pub fn json(reports: &[Report]) -> String {
    let rows: Vec<serde_json::Value> = reports
        .iter()
        .map(|r| {
            json!({
                "scenario": r.scenario,
                "expected": r.expected.to_string(),
                "attempted": r.findings.attempted,
                "acknowledged": r.findings.acknowledged,
                "lost": r.findings.lost.len(),
                "duplicated": r.findings.duplicated.len(),
                "unavailable_ms": r.findings.unavailable.as_millis() as u64,
                "verdict": r.verdict.as_str().to_lowercase(),
            })
        })
        .collect();
    serde_json::to_string_pretty(&rows).unwrap_or_default()
}

/// The details of one scenario: the other checks' counts, anything that went wrong, and (when
/// asked, or when it did not do what it expects) its fault schedule.
pub fn details(r: &Report, schedule: bool) -> String {
    let f = &r.findings;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}: {} indeterminate, {} deleted below the log start, {} reads, {} commits; out of \
         order {}, reads revoked {}, \
         commits moved back {}, records skipped {}; longest without a commit {:.1} s from \
         {:.1} s; healthy {} after the heal; longest unavailability: {}",
        r.scenario,
        f.indeterminate,
        f.deleted,
        f.reads,
        f.commits,
        f.out_of_order.len(),
        f.revoked_reads.len(),
        f.commit_regressions.len(),
        f.skipped.len(),
        f.commit_gap.as_secs_f64(),
        f.commit_gap_from.as_secs_f64(),
        r.healthy_after
            .map_or("never".into(), |d| format!("{:.1} s", d.as_secs_f64())),
        f.unavailable_partition.map_or("-".into(), |p| format!(
            "partition {p} from {:.1} s to {:.1} s",
            f.unavailable_from.as_secs_f64(),
            (f.unavailable_from + f.unavailable).as_secs_f64()
        )),
    );
    let lost = f.lost.iter().map(|l| {
        format!(
            "lost {} (acks={}) acknowledged at {}/{}, {}",
            l.value,
            if l.acks == Acks::All { "all" } else { "1" },
            l.partition,
            l.acked_at,
            l.found_at
                .map_or("not in the log".into(), |o| format!("now at {o}"))
        )
    });
    let dup = f
        .duplicated
        .iter()
        .map(|(v, at)| format!("duplicated {v} at offsets {at:?}"));
    let listed: Vec<String> = r
        .problems
        .iter()
        .cloned()
        .chain(lost.take(5))
        .chain(dup.take(5))
        .chain(f.out_of_order.iter().take(5).cloned())
        .chain(f.revoked_reads.iter().take(5).cloned())
        .chain(f.commit_regressions.iter().take(5).cloned())
        .chain(f.skipped.iter().take(5).cloned())
        .collect();
    for line in listed {
        let _ = writeln!(out, "    {line}");
    }
    match &r.replay {
        Some(Ok(steps)) => {
            let _ = writeln!(out, "    replay: accepted {steps} steps");
        }
        Some(Err(why)) => {
            let first = why.lines().next().unwrap_or_default();
            let _ = writeln!(out, "    replay: diverged: {first}");
        }
        None => {}
    }
    if schedule {
        let _ = writeln!(out, "    fault schedule:");
        for (at, what) in &r.schedule {
            let _ = writeln!(out, "    {:>7.1} s  {what}", at.as_secs_f64());
        }
        if let Some(dir) = &r.dir {
            let _ = writeln!(out, "    processes' logs and data: {}", dir.display());
        }
    }
    out
}

/// The acks=all writes to `partition` that were acknowledged: (completed, latency).
fn acknowledged(
    history: &History,
    partition: u32,
) -> impl Iterator<Item = (Duration, Duration)> + '_ {
    history
        .writes
        .iter()
        .filter(move |w| w.acks == Acks::All && w.partition == partition)
        .filter(|w| matches!(w.outcome, Outcome::Acked(_)))
        .filter_map(|w| Some((w.completed?, w.completed?.saturating_sub(w.invoked))))
}

/// acks=all latency to `partition` over time, in `bin`s of completion time: p50 as a bar (the
/// longest bar is the slowest bin), p50, max and how many writes, and the schedule's marks.
pub fn latency_chart(
    history: &History,
    partition: u32,
    marks: &[(Duration, String)],
    bin: Duration,
) -> String {
    let mut bins: Vec<Vec<Duration>> = Vec::new();
    for (done, latency) in acknowledged(history, partition) {
        let i = (done.as_millis() / bin.as_millis().max(1)) as usize;
        if bins.len() <= i {
            bins.resize(i + 1, Vec::new());
        }
        bins[i].push(latency);
    }
    for b in bins.iter_mut() {
        b.sort();
    }
    let p50 = |b: &Vec<Duration>| b.get(b.len() / 2).copied().unwrap_or_default();
    let widest = bins.iter().map(p50).max().unwrap_or_default().as_secs_f64();
    let mut out = String::from("      t  acks=all latency p50 (bar), p50 / max, acknowledged\n");
    let mut marks = marks.iter().peekable();
    for (i, b) in bins.iter().enumerate() {
        let from = bin * i as u32;
        let mut label = Vec::new();
        while let Some((at, what)) = marks.peek() {
            if *at >= from + bin {
                break;
            }
            label.push(what.as_str());
            marks.next();
        }
        let bar = if widest > 0.0 {
            (p50(b).as_secs_f64() / widest * 40.0).round() as usize
        } else {
            0
        };
        let _ = writeln!(
            out,
            "{:>6.1} s {:<40} {:>5.0} / {:>5.0} ms {:>5}  {}",
            from.as_secs_f64(),
            "#".repeat(bar),
            p50(b).as_secs_f64() * 1e3,
            b.last().copied().unwrap_or_default().as_secs_f64() * 1e3,
            b.len(),
            label.join("; ")
        );
    }
    out
}

/// acks=all latency to `partition` between consecutive marks: each phase's p50, p99 and count.
pub fn phases(
    history: &History,
    partition: u32,
    marks: &[(Duration, String)],
    end: Duration,
) -> String {
    let mut out = String::new();
    for (i, (from, what)) in marks.iter().enumerate() {
        let until = marks.get(i + 1).map_or(end, |(t, _)| *t);
        let mut latencies: Vec<Duration> = acknowledged(history, partition)
            .filter(|(done, _)| *done >= *from && *done < until)
            .map(|(_, l)| l)
            .collect();
        latencies.sort();
        let at = |q: f64| {
            latencies
                .get(((latencies.len() as f64 - 1.0) * q).round().max(0.0) as usize)
                .map_or(0.0, |d| d.as_secs_f64() * 1e3)
        };
        let _ = writeln!(
            out,
            "  {:>5.1}-{:<5.1} s  p50 {:>6.1} ms  p99 {:>6.1} ms  {:>6} acks  {what}",
            from.as_secs_f64(),
            until.as_secs_f64(),
            at(0.5),
            at(0.99),
            latencies.len()
        );
    }
    out
}
