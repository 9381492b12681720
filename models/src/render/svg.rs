//! An SVG sequence diagram of a path, for the Explorer.
//!
//! The Explorer shows it on a navy panel, so the diagram draws its own background in that
//! colour and light text and arrows on it (contrast above 7:1; message labels are haloed in the
//! background colour, so lifelines do not cross them), and it is laid out so that every
//! label lies inside its view box: lanes shift right far enough for the widest label centred on
//! the first lane, and the box widens for the widest label on the right.

use super::diagram::{event, participants, Event};
use isr::sim::Action;
use std::fmt::Write;

/// The Explorer's dark panel (stateright's `--bg-drk`).
const BACKGROUND: &str = "#142b46";
/// Participant names and notes.
const TEXT: &str = "#e7ecef";
/// Lifelines.
const LIFELINE: &str = "#7d9cbb";
/// Messages delivered: arrows and labels.
const ARROW: &str = "#f2e27a";
const ARROW_LABEL: &str = "#fff9d1";
/// Messages lost.
const LOST: &str = "#ffab91";
/// Notes' boxes.
const NOTE_FILL: &str = "#23466b";
/// Violated properties.
const VIOLATED: &str = "#ff8a80";

const FONT_SIZE: f64 = 12.0;
/// A generous estimate of a monospace glyph's advance, in ems (most are 0.6).
const GLYPH_EM: f64 = 0.66;
const LANE_GAP: f64 = 190.0;
const MARGIN: f64 = 12.0;
const HEADER_Y: f64 = 20.0;
const FIRST_ROW_Y: f64 = 50.0;
const ROW_HEIGHT: f64 = 30.0;

/// The estimated width of `s` in pixels.
fn width_of(s: &str) -> f64 {
    s.chars().count() as f64 * FONT_SIZE * GLYPH_EM
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// One row of the diagram, with lanes as x offsets from the first lane.
enum Row {
    Arrow {
        x1: f64,
        x2: f64,
        label: String,
        lost: bool,
    },
    Note {
        x: f64,
        label: String,
    },
    Violation {
        label: String,
    },
}

impl Row {
    /// The horizontal extent of the row's text, from the first lane; `None` for rows laid
    /// against the left margin.
    fn extent(&self) -> Option<(f64, f64)> {
        let centred = |x: f64, label: &str| {
            let half = width_of(label) / 2.0 + 4.0;
            Some((x - half, x + half))
        };
        match self {
            Row::Arrow { x1, x2, label, .. } => centred((x1 + x2) / 2.0, label),
            Row::Note { x, label } => centred(*x, label),
            Row::Violation { .. } => None,
        }
    }
}

/// An SVG sequence diagram of `actions` over `replicas` brokers and the controller, ending with
/// the properties the last state violates (`violations`, one explanation each).
pub fn svg(replicas: u32, actions: &[Action], violations: &[String]) -> String {
    let names = participants(replicas);
    let lane = |name: &str| {
        names
            .iter()
            .position(|n| n == name)
            .unwrap_or(names.len() - 1) as f64
            * LANE_GAP
    };
    let mut rows: Vec<Row> = actions
        .iter()
        .enumerate()
        .map(|(i, action)| match event(action) {
            Event::Message {
                from,
                to,
                label,
                lost,
            } => Row::Arrow {
                x1: lane(&from),
                x2: lane(&to),
                label: format!("{}. {label}{}", i + 1, if lost { " (lost)" } else { "" }),
                lost,
            },
            Event::Note { over, label } => Row::Note {
                x: lane(&over),
                label: format!("{}. {label}", i + 1),
            },
        })
        .collect();
    rows.extend(violations.iter().map(|v| Row::Violation {
        label: format!("✗ {v}"),
    }));

    // Shift the lanes right until every centred label starts inside the margin, and widen the
    // box until every label ends inside it.
    let last_lane = (names.len() - 1) as f64 * LANE_GAP;
    let header_half = names.iter().map(|n| width_of(n) / 2.0).fold(0.0, f64::max);
    let extents: Vec<(f64, f64)> = rows.iter().filter_map(Row::extent).collect();
    let left = extents.iter().map(|e| e.0).fold(-header_half, f64::min);
    let shift = (MARGIN - left).ceil();
    let right = extents
        .iter()
        .map(|e| e.1)
        .fold(last_lane + header_half, f64::max)
        + shift;
    let widest_violation = rows
        .iter()
        .filter_map(|r| match r {
            Row::Violation { label } => Some(MARGIN + width_of(label)),
            _ => None,
        })
        .fold(0.0, f64::max);
    let width = (right.max(widest_violation) + MARGIN).ceil();
    let height = (FIRST_ROW_Y + ROW_HEIGHT * rows.len() as f64).ceil();

    let mut out = format!(
        "<svg version='1.1' baseProfile='full' width='{width}' height='{height}' \
         viewBox='0 0 {width} {height}' xmlns='http://www.w3.org/2000/svg' \
         font-family='monospace' font-size='{FONT_SIZE}'>\
         <defs>{}{}</defs>\
         <rect width='{width}' height='{height}' fill='{BACKGROUND}'/>",
        marker("isr-arrow", ARROW),
        marker("isr-lost", LOST)
    );
    for name in &names {
        let x = lane(name) + shift;
        let _ = write!(
            out,
            "<text x='{x}' y='{HEADER_Y}' text-anchor='middle' font-weight='bold' \
             fill='{TEXT}'>{name}</text><line x1='{x}' y1='{}' x2='{x}' y2='{height}' \
             stroke='{LIFELINE}' stroke-dasharray='3 3'/>",
            HEADER_Y + 8.0
        );
    }
    for (i, row) in rows.iter().enumerate() {
        let y = FIRST_ROW_Y + ROW_HEIGHT * i as f64;
        let _ = match row {
            Row::Arrow {
                x1,
                x2,
                label,
                lost,
            } => {
                let (x1, x2) = (x1 + shift, x2 + shift);
                let (colour, text, end, dash) = if *lost {
                    (LOST, LOST, "isr-lost", " stroke-dasharray='5 3'")
                } else {
                    (ARROW, ARROW_LABEL, "isr-arrow", "")
                };
                write!(
                    out,
                    "<line x1='{x1}' y1='{}' x2='{x2}' y2='{}' stroke='{colour}' \
                     stroke-width='1.5'{dash} marker-end='url(#{end})'/>\
                     <text x='{}' y='{}' text-anchor='middle' fill='{text}' \
                     stroke='{BACKGROUND}' stroke-width='4' paint-order='stroke'>{}</text>",
                    y + 7.0,
                    y + 7.0,
                    (x1 + x2) / 2.0,
                    y + 1.0,
                    escape(label)
                )
            }
            Row::Note { x, label } => {
                let x = x + shift;
                let w = width_of(label) + 8.0;
                write!(
                    out,
                    "<rect x='{}' y='{}' width='{w}' height='20' rx='3' fill='{NOTE_FILL}' \
                     stroke='{LIFELINE}'/><text x='{x}' y='{}' text-anchor='middle' \
                     fill='{TEXT}'>{}</text>",
                    x - w / 2.0,
                    y - 10.0,
                    y + 4.0,
                    escape(label)
                )
            }
            Row::Violation { label } => write!(
                out,
                "<text x='{MARGIN}' y='{}' font-weight='bold' fill='{VIOLATED}'>{}</text>",
                y + 4.0,
                escape(label)
            ),
        };
    }
    out.push_str("</svg>");
    out
}

/// An arrowhead in `colour`.
fn marker(id: &str, colour: &str) -> String {
    format!(
        "<marker id='{id}' markerWidth='10' markerHeight='8' refX='10' refY='4' orient='auto'>\
         <polygon points='0 0, 10 4, 0 8' fill='{colour}'/></marker>"
    )
}
