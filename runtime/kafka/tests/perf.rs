//! `isr perf produce` and `isr perf consume` against the in-memory server.

mod common;

use common::TestServer;
use isr::Acks;
use isr_kafka::client::perf::{self, PerfArgs, PerfCommand, PerfConsumeArgs, PerfProduceArgs};

async fn run(command: PerfCommand) -> String {
    let mut out = Vec::new();
    perf::run_with(PerfArgs { command }, &mut out)
        .await
        .expect("perf run");
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn perf_produce_then_consume_reports_rates_and_latency() {
    let server = TestServer::start().await;
    server.backend.add_topic("perf", 2);
    let produced = run(PerfCommand::Produce(PerfProduceArgs {
        bootstrap: server.bootstrap(),
        topic: "perf".into(),
        records: 5_000,
        record_size: 100,
        acks: Acks::All,
        producers: 2,
        batch: 50,
        keys: 10,
    }))
    .await;
    println!("perf produce:\n{produced}");
    assert!(produced.starts_with("records: 5000 in "), "{produced}");
    assert!(
        produced.contains(" records/s, ") && produced.contains(" MB/s\n"),
        "{produced}"
    );
    assert!(produced.contains("latency ms: p50 "), "{produced}");
    assert_eq!(
        server.backend.end("perf", 0) + server.backend.end("perf", 1),
        5_000
    );

    let consumed = run(PerfCommand::Consume(PerfConsumeArgs {
        bootstrap: server.bootstrap(),
        topic: "perf".into(),
        records: 5_000,
    }))
    .await;
    println!("perf consume:\n{consumed}");
    assert!(consumed.starts_with("records: 5000 in "), "{consumed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn perf_consume_says_when_the_topic_is_short() {
    let server = TestServer::start().await;
    server.backend.add_topic("empty", 1);
    let mut out = Vec::new();
    let args = PerfArgs {
        command: PerfCommand::Consume(PerfConsumeArgs {
            bootstrap: server.bootstrap(),
            topic: "empty".into(),
            records: 10,
        }),
    };
    let e = perf::run_with(args, &mut out)
        .await
        .expect_err("nothing to read");
    assert_eq!(e.to_string(), "topic empty holds only 0 records, 10 asked");
}
