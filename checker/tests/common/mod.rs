//! What the `isr-check` tests share: running the binary, and `isr-check explore` as a child
//! process that is stopped however the test ends.
#![allow(dead_code)] // Each test crate uses part of this.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

pub fn isr_check(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_isr-check"))
        .args(args)
        .output()
        .expect("isr-check runs")
}

/// The body of `GET path` from `addr`, if the answer is 200.
pub fn get(addr: &str, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut answer = String::new();
    s.read_to_string(&mut answer).ok()?;
    let (head, body) = answer.split_once("\r\n\r\n")?;
    head.contains(" 200 ").then(|| body.to_string())
}

/// A shortest counterexample as `explore` prints it.
#[derive(Debug)]
pub struct Counterexample {
    pub property: String,
    pub steps: usize,
    pub url: String,
    /// The property's explanation in the last state.
    pub violation: String,
}

impl Counterexample {
    /// The Explorer's action indices, from the initial state's.
    pub fn indices(&self) -> Vec<usize> {
        let path = self.url.split_once("#/steps/").expect("a steps URL").1;
        path.split('/')
            .map(|i| i.parse().expect("an index"))
            .collect()
    }
}

/// `isr-check explore` on a free loopback port, once its check at start is done.
pub struct Explorer {
    child: Child,
    /// `http://127.0.0.1:PORT/`
    pub base: String,
    pub counterexamples: Vec<Counterexample>,
    pub stdout: Vec<String>,
}

impl Drop for Explorer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Explorer {
    /// Starts `isr-check explore ARGS --addr 127.0.0.1:0` and reads what it prints until it
    /// says it serves.
    pub fn start(args: &[&str]) -> Explorer {
        let mut child = Command::new(env!("CARGO_BIN_EXE_isr-check"))
            .arg("explore")
            .args(args)
            .args(["--addr", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("explore starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut explorer = Explorer {
            child,
            base: String::new(),
            counterexamples: Vec::new(),
            stdout: Vec::new(),
        };
        loop {
            let Ok(line) = rx.recv_timeout(Duration::from_secs(300)) else {
                panic!("explore stopped or stalled:\n{:#?}", explorer.stdout);
            };
            if explorer.base.is_empty() {
                if let Some((_, url)) = line.split_once(" on http://") {
                    explorer.base = format!("http://{url}");
                }
            }
            if let Some(rest) = line.strip_prefix("shortest counterexample for ") {
                let (head, url) = rest.split_once(": ").expect("a URL");
                let (property, steps) = head.split_once(" (").expect("a length");
                explorer.counterexamples.push(Counterexample {
                    property: property.to_string(),
                    steps: steps.trim_end_matches(" steps)").parse().expect("a length"),
                    url: url.to_string(),
                    violation: String::new(),
                });
            } else if let (Some(v), Some(last)) =
                (line.strip_prefix("  "), explorer.counterexamples.last_mut())
            {
                last.violation = v.to_string();
            }
            let serving = line.starts_with("serving ");
            explorer.stdout.push(line);
            if serving {
                return explorer;
            }
        }
    }

    /// `host:port`
    pub fn addr(&self) -> &str {
        self.base
            .trim_start_matches("http://")
            .trim_end_matches('/')
    }
}
