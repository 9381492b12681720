//! Whether a real client a test drives is installed (runtime/kafka/tests/clients/install.sh
//! installs them all, and CI runs it). Shared by the isr-kafka and isr-runtime tests.

use std::process::{Command, Stdio};

/// Whether `program ARGS` runs and succeeds. Without it a test says that it is skipped and
/// why, and passes; but under CI (`CI=true`) it fails, so that a broken installer cannot turn
/// the client tests green without running them.
pub fn client_present(program: &str, args: &[&str], missing: &str) -> bool {
    let ok = Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        let hint = "run runtime/kafka/tests/clients/install.sh";
        assert!(
            std::env::var("CI").map_or(true, |v| v != "true"),
            "{missing} under CI=true: the real-client tests must run ({hint})"
        );
        eprintln!("SKIPPED: {missing} ({hint})");
    }
    ok
}
