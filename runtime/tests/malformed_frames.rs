//! Garbage on the internal protocol closes that one connection; the process keeps serving.

mod common;

use common::TestCluster;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Sends `bytes` and reports whether the server closed the connection within 5 s.
fn closes_after(address: &str, bytes: &[u8]) -> bool {
    let mut stream = TcpStream::connect(address).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let _ = stream.write_all(bytes);
    let mut buf = [0u8; 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

fn frame(version: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = ((payload.len() + 1) as u32).to_be_bytes().to_vec();
    out.push(version);
    out.extend_from_slice(payload);
    out
}

#[test]
fn malformed_internal_frames_close_only_their_connection() {
    let mut cluster = TestCluster::start(1);
    let broker = cluster.address(1).expect("broker 1");
    let controller = cluster.controller_list();
    let magic = b"ISR\x01".to_vec();
    // A Hello from an admin client, in the real encoding: variant 0 (Hello), Peer variant 1.
    let hello = frame(1, &[0, 1]);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "oversized length",
            [magic.clone(), vec![0x7f, 0xff, 0xff, 0xff]].concat(),
        ),
        (
            "unknown version",
            [magic.clone(), frame(9, &[0, 1])].concat(),
        ),
        ("empty frame", [magic.clone(), vec![0, 0, 0, 0]].concat()),
        (
            "garbage payload",
            [magic.clone(), frame(1, &[0xff; 16])].concat(),
        ),
        (
            "garbage after hello",
            [magic.clone(), hello.clone(), frame(1, &[0xee; 9])].concat(),
        ),
        (
            "frame before hello",
            [magic.clone(), frame(1, &[3, 0, 0])].concat(),
        ),
    ];
    for target in [&broker, &controller] {
        for (what, bytes) in &cases {
            assert!(
                closes_after(target, bytes),
                "{what} to {target} was not refused"
            );
        }
    }
    // Not the magic, not Kafka either: the controller refuses it.
    assert!(closes_after(&controller, b"GET / HTTP/1.0\r\n\r\n"));

    assert!(
        cluster.controllers[0]
            .as_mut()
            .is_some_and(|c| c.is_running()),
        "controller died"
    );
    assert!(
        cluster.brokers[0].as_mut().is_some_and(|b| b.is_running()),
        "broker died"
    );
    cluster.wait_for(Duration::from_secs(5), "broker still registered", |s| {
        s["brokers"]["1"]["alive"] == true
    });
}
