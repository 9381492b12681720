//! A controller that cannot use its store says why on one line and exits non-zero: an
//! unreachable etcd (naming its endpoints), a store in a newer format, a second controller with
//! the same id, a second controller on one file store.

mod common;

use common::etcd::{self, Etcd};
use common::{Proc, ISR};
use std::process::Command;

/// Runs `isr controller ARGS`, which must fail; its stderr.
fn refused(args: &[&str]) -> String {
    let out = Command::new(ISR)
        .arg("controller")
        .args(args)
        .args(["--listen", "127.0.0.1:0"])
        .output()
        .expect("isr controller");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "it started: {stderr}");
    assert!(
        !stderr.contains("panicked"),
        "a panic is not an error message: {stderr}"
    );
    stderr
}

#[test]
fn an_unreachable_etcd_is_named() {
    let err = refused(&["--store", "etcd://127.0.0.1:1,127.0.0.1:2"]);
    assert!(
        err.contains("cannot reach etcd at 127.0.0.1:1,127.0.0.1:2"),
        "{err}"
    );
    let err = refused(&["--store", "zookeeper://127.0.0.1:2181"]);
    assert!(err.contains("etcd://HOST:PORT"), "{err}");
}

#[test]
fn one_file_store_serves_one_controller_and_a_newer_format_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().to_string_lossy().to_string();
    let first = Proc::start(
        &["controller", "--listen", "127.0.0.1:0", "--dir", &path],
        &dir.path().join("first.log"),
    );
    let err = refused(&["--dir", &path]);
    assert!(err.contains("another controller process uses"), "{err}");
    drop(first);

    // The metadata of a future isr: the magic, then format 99.
    let mut newer = b"ISRM".to_vec();
    newer.extend_from_slice(&99u16.to_be_bytes());
    std::fs::write(dir.path().join("metadata.bin"), newer).expect("write");
    let err = refused(&["--dir", &path]);
    assert!(
        err.contains("format 99, newer than this isr's format"),
        "{err}"
    );
}

#[test]
fn two_controllers_with_one_id_and_an_etcd_store_in_a_newer_format_are_refused() {
    if !etcd::present() {
        return;
    }
    let etcd = Etcd::start(1);
    let store = etcd.store();
    let dir = tempfile::tempdir().expect("tempdir");
    let first = Proc::start(
        &[
            "controller",
            "--id",
            "7",
            "--listen",
            "127.0.0.1:0",
            "--store",
            &store,
        ],
        &dir.path().join("first.log"),
    );
    let err = refused(&["--id", "7", "--store", &store]);
    assert!(err.contains("controller id 7 is already running"), "{err}");
    assert!(err.contains(&first.address), "names the other: {err}");

    let endpoint = store.trim_start_matches("etcd://").to_string();
    etcd::etcdctl(&endpoint, &["put", "future/format", "99"]);
    let err = refused(&["--id", "8", "--store", &format!("{store}/future")]);
    assert!(
        err.contains("format 99, newer than this isr's format"),
        "{err}"
    );
}
