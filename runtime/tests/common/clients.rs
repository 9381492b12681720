//! Real Kafka clients (kcat, python3 with confluent-kafka) as child processes of a test.
//! runtime/kafka/tests/clients/install.sh installs them, and CI runs it; a test whose client is
//! missing says "SKIPPED" and passes, except under CI=true, where it fails.

use super::TestCluster;
use std::io::{BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A client process, SIGKILLed and reaped on drop, so that a failing test leaves nothing behind.
pub struct Client(pub Child);

impl Client {
    pub fn spawn(command: &mut Command) -> Client {
        Client(command.spawn().expect("spawn client"))
    }

    /// Waits for the exit status, panicking (and so killing the client) after `timeout`.
    pub fn wait(&mut self, timeout: Duration, what: &str) -> ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(status) = self.0.try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                start.elapsed() < timeout,
                "{what} still running after {timeout:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Runs `command` to its end (stdout and stderr captured), killing it after `timeout`:
    /// its exit status, stdout and stderr.
    pub fn run(
        command: &mut Command,
        timeout: Duration,
        what: &str,
    ) -> (ExitStatus, String, String) {
        let mut client = Client::spawn(
            command
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped()),
        );
        let out = Client::drain(client.0.stdout.take().expect("stdout"));
        let err = Client::drain(client.0.stderr.take().expect("stderr"));
        let status = client.wait(timeout, what);
        (
            status,
            out.join().expect("stdout"),
            err.join().expect("stderr"),
        )
    }

    /// Reads a pipe to its end on a thread, so that the client never blocks writing to it.
    pub fn drain(pipe: impl Read + Send + 'static) -> JoinHandle<String> {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = BufReader::new(pipe).read_to_string(&mut text);
            text
        })
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[path = "../../kafka/tests/common/present.rs"]
mod present;
pub use present::client_present;

/// Whether python3 can import confluent_kafka (else the test is skipped).
pub fn confluent_kafka_present() -> bool {
    client_present(
        "python3",
        &["-c", "import confluent_kafka"],
        "python3 cannot import confluent_kafka",
    )
}

pub fn kafka_python_present() -> bool {
    client_present(
        "python3",
        &["-c", "import kafka"],
        "python3 cannot import kafka (kafka-python)",
    )
}

/// A client script of runtime/kafka/tests/clients.
pub fn script(name: &str) -> PathBuf {
    [
        env!("CARGO_MANIFEST_DIR"),
        "kafka",
        "tests",
        "clients",
        name,
    ]
    .iter()
    .collect()
}

/// Runs the client script `name` of runtime/kafka/tests/clients with python3 and `args`,
/// within `timeout`; asserts it exits successfully (with its output in the message) and
/// returns what it printed.
pub fn run_script(name: &str, args: &[&str], timeout: Duration) -> String {
    let (status, out, err) = Client::run(
        Command::new("python3").arg(script(name)).args(args),
        timeout,
        name,
    );
    assert!(
        status.success(),
        "{name} failed ({status})\nstdout:\n{out}\nstderr:\n{err}"
    );
    out
}

/// The addresses of the running brokers, comma-separated: a client's bootstrap list.
pub fn bootstrap(cluster: &TestCluster) -> String {
    (1..=cluster.brokers.len() as u32)
        .filter_map(|b| cluster.address(b))
        .collect::<Vec<_>>()
        .join(",")
}
