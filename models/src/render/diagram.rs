//! Actions as sequence-diagram events, and counterexamples as Mermaid sequence diagrams.
//!
//! A delivered or lost message is an arrow between its sender and receiver; every other action
//! is a note over the participant it names, read from its `Display` (`Name(b1, ...)` over `b1`,
//! `Controller...` over the controller), so actions added to the core later need nothing here.

use crate::shortest::Trace;
use isr::sim::{describe, Action, Record};
use isr::{Envelope, Node};
use std::fmt::Write;

/// The participant of the controller.
pub const CONTROLLER: &str = "controller";

/// The participants of a diagram over `replicas` brokers, left to right.
pub fn participants(replicas: u32) -> Vec<String> {
    (0..replicas)
        .map(|b| format!("b{b}"))
        .chain(std::iter::once(CONTROLLER.to_string()))
        .collect()
}

fn participant(n: &Node) -> String {
    match n {
        Node::Broker(b) => b.to_string(),
        Node::Controller => CONTROLLER.to_string(),
    }
}

/// The message part of a description, without its route.
fn body(e: &Envelope<Record>) -> String {
    let d = describe(e);
    d.split_once(": ").map_or(d.clone(), |(_, b)| b.to_string())
}

/// Where an action happens in a diagram.
pub enum Event {
    /// A message from one participant to another; `lost` when the network dropped it.
    Message {
        from: String,
        to: String,
        label: String,
        lost: bool,
    },
    /// Something one participant does.
    Note { over: String, label: String },
}

/// The participant an action's `Display` names: the controller for `Controller...` and
/// `Zombie...` actions (the zombie is the old controller), else the first broker among its
/// arguments, else the controller.
fn actor(shown: &str) -> String {
    if shown.starts_with("Controller") || shown.starts_with("Zombie") {
        return CONTROLLER.to_string();
    }
    let args = shown.split_once('(').map_or("", |(_, a)| a);
    args.split(|c: char| !c.is_ascii_alphanumeric())
        .find(|w| {
            w.strip_prefix('b')
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|d| d.is_ascii_digit()))
        })
        .map_or(CONTROLLER.to_string(), str::to_string)
}

/// The diagram event of an action.
pub fn event(action: &Action) -> Event {
    match action {
        Action::Deliver(e) | Action::Drop(e) => Event::Message {
            from: participant(&e.from),
            to: participant(&e.to),
            label: body(e),
            lost: matches!(action, Action::Drop(_)),
        },
        Action::ZombieDeliver(e) => Event::Message {
            from: participant(&e.from),
            to: participant(&e.to),
            label: format!("(to the zombie) {}", body(e)),
            lost: false,
        },
        Action::Duplicate(e) => Event::Note {
            over: participant(&e.from),
            label: action.to_string(),
        },
        other => {
            let label = other.to_string();
            Event::Note {
                over: actor(&label),
                label,
            }
        }
    }
}

/// Mermaid text: `;` and `#` would end a statement or start an entity.
fn mermaid_text(s: &str) -> String {
    s.replace([';', '#'], " ")
}

/// One counterexample in a Mermaid diagram: a heading, the trace, and what its last state
/// violates.
pub struct Section<'a> {
    pub heading: String,
    pub trace: &'a Trace,
    pub violated: Option<String>,
}

/// A Mermaid sequence diagram of counterexamples, one after the other, each between a heading
/// and its violation spanning every participant. `comment` goes first, as `%%` comment lines,
/// so that the output is one diagram that renders as it is.
pub fn mermaid(replicas: u32, comment: &str, sections: &[Section]) -> String {
    let mut out = String::from("sequenceDiagram\n");
    for line in comment.lines().map(str::trim_end) {
        let _ = match line {
            "" => writeln!(out, "%%"),
            _ => writeln!(out, "%% {line}"),
        };
    }
    let names = participants(replicas);
    for p in &names {
        let _ = writeln!(out, "    participant {p}");
    }
    let everyone = format!("{},{CONTROLLER}", names[0]);
    if sections.is_empty() {
        let _ = writeln!(out, "    Note over {everyone}: no counterexample");
    }
    for section in sections {
        let _ = writeln!(
            out,
            "    Note over {everyone}: {}",
            mermaid_text(&section.heading)
        );
        for (i, (action, _)) in section.trace.steps.iter().enumerate() {
            let n = i + 1;
            let _ = match event(action) {
                Event::Message {
                    from,
                    to,
                    label,
                    lost,
                } => {
                    let arrow = if lost { "-x" } else { "->>" };
                    let lost = if lost { " (lost)" } else { "" };
                    writeln!(
                        out,
                        "    {from}{arrow}{to}: {n}. {}{lost}",
                        mermaid_text(&label)
                    )
                }
                Event::Note { over, label } => {
                    writeln!(out, "    Note over {over}: {n}. {}", mermaid_text(&label))
                }
            };
        }
        if let Some(v) = &section.violated {
            let _ = writeln!(
                out,
                "    Note over {everyone}: violated: {}",
                mermaid_text(v)
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::actor;

    #[test]
    fn a_note_goes_over_the_participant_an_action_names() {
        assert_eq!(actor("LeaderWrite(b0)"), "b0");
        assert_eq!(actor("Restart(b2, elects b1)"), "b2");
        assert_eq!(actor("LeaderShrinkIsr(b1 drops b0)"), "b1");
        assert_eq!(actor("ControllerElectLeader(b1)"), "controller");
        assert_eq!(actor("ControllerFailover"), "controller");
        assert_eq!(actor("Tick"), "controller");
        assert_eq!(actor("Something(broker b12)"), "b12");
    }
}
