//! `isr perf produce` and `isr perf consume`: throughput and latency over the Kafka protocol.

use super::cluster::Cluster;
use super::consume::{self, Start};
use super::error::ClientError;
use super::produce;
use super::records::{self, Outgoing};
use bytes::Bytes;
use isr::Acks;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Clone, Debug, clap::Args)]
pub struct PerfArgs {
    #[command(subcommand)]
    pub command: PerfCommand,
}

#[derive(Clone, Debug, clap::Subcommand)]
pub enum PerfCommand {
    /// Write records as fast as acknowledgements allow.
    Produce(PerfProduceArgs),
    /// Read records from the beginning of every partition.
    Consume(PerfConsumeArgs),
}

#[derive(Clone, Debug, clap::Args)]
pub struct PerfProduceArgs {
    /// A broker to start from: HOST:PORT, or several separated by commas.
    #[arg(long)]
    pub bootstrap: String,
    #[arg(long)]
    pub topic: String,
    /// Records to write in all.
    #[arg(long)]
    pub records: u64,
    /// Bytes of each record's value.
    #[arg(long, default_value_t = 100)]
    pub record_size: usize,
    #[arg(long, default_value = "all")]
    pub acks: Acks,
    /// Concurrent producers, each with its own connections; producer i writes partition
    /// i modulo the partition count.
    #[arg(long, default_value_t = 1)]
    pub producers: u32,
    /// Records per produce request (one batch); latency is measured per request.
    #[arg(long, default_value_t = 100)]
    pub batch: u32,
    /// Give each record a key, one of this many (`k0`, `k1`, ...) in turn, as a compacted
    /// topic needs (0: no keys).
    #[arg(long, default_value_t = 0)]
    pub keys: u64,
}

#[derive(Clone, Debug, clap::Args)]
pub struct PerfConsumeArgs {
    /// A broker to start from: HOST:PORT, or several separated by commas.
    #[arg(long)]
    pub bootstrap: String,
    #[arg(long)]
    pub topic: String,
    /// Stop once this many records are read (from all partitions together).
    #[arg(long)]
    pub records: u64,
}

/// Runs a perf command, printing its report to stdout.
pub async fn run(args: PerfArgs) -> Result<(), ClientError> {
    run_with(args, &mut std::io::stdout().lock()).await
}

pub async fn run_with(args: PerfArgs, out: &mut impl Write) -> Result<(), ClientError> {
    let report = match args.command {
        PerfCommand::Produce(a) => perf_produce(a).await?,
        PerfCommand::Consume(a) => perf_consume(a).await?,
    };
    write!(out, "{report}").map_err(ClientError::Output)
}

/// What one worker did: records and bytes moved, and each request's latency.
#[derive(Default)]
struct Tally {
    records: u64,
    bytes: u64,
    latencies: Vec<Duration>,
}

impl Tally {
    fn absorb(&mut self, other: Tally) {
        self.records += other.records;
        self.bytes += other.bytes;
        self.latencies.extend(other.latencies);
    }
}

/// The printed result of a run.
pub struct Report {
    pub records: u64,
    pub bytes: u64,
    pub elapsed: Duration,
    /// p50, p99, p99.9 and max of request latency.
    pub latency: [Duration; 4],
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let secs = self.elapsed.as_secs_f64().max(f64::EPSILON);
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        writeln!(f, "records: {} in {:.3} s", self.records, secs)?;
        writeln!(
            f,
            "throughput: {:.0} records/s, {:.2} MB/s",
            self.records as f64 / secs,
            self.bytes as f64 / secs / 1e6
        )?;
        let [p50, p99, p999, max] = self.latency;
        writeln!(
            f,
            "latency ms: p50 {:.2} p99 {:.2} p99.9 {:.2} max {:.2}",
            ms(p50),
            ms(p99),
            ms(p999),
            ms(max)
        )
    }
}

fn report(mut tally: Tally, elapsed: Duration) -> Report {
    tally.latencies.sort_unstable();
    let at = |q: f64| {
        let n = tally.latencies.len();
        if n == 0 {
            return Duration::ZERO;
        }
        let i = ((n as f64 * q).ceil() as usize).clamp(1, n) - 1;
        tally.latencies[i]
    };
    Report {
        records: tally.records,
        bytes: tally.bytes,
        elapsed,
        latency: [at(0.5), at(0.99), at(0.999), at(1.0)],
    }
}

/// Collects every worker's tally; the first worker error fails the run.
async fn gather(
    mut workers: tokio::task::JoinSet<Result<Tally, ClientError>>,
) -> Result<Tally, ClientError> {
    let mut total = Tally::default();
    while let Some(joined) = workers.join_next().await {
        let tally =
            joined.map_err(|e| ClientError::Usage(format!("perf worker failed: {e}")))??;
        total.absorb(tally);
    }
    Ok(total)
}

async fn perf_produce(args: PerfProduceArgs) -> Result<Report, ClientError> {
    if args.producers == 0 || args.batch == 0 {
        return Err(ClientError::Usage(
            "--producers and --batch must be at least 1".into(),
        ));
    }
    let mut cluster = Cluster::connect(&args.bootstrap).await?;
    let partitions = produce::partition_count(&mut cluster, &args.topic).await?;
    let value = Bytes::from(vec![b'x'; args.record_size]);
    let started = Instant::now();
    let mut workers = tokio::task::JoinSet::new();
    for i in 0..args.producers {
        // Spread the remainder over the first producers.
        let share = args.records / u64::from(args.producers)
            + u64::from(u64::from(i) < args.records % u64::from(args.producers));
        let (bootstrap, topic, value) = (args.bootstrap.clone(), args.topic.clone(), value.clone());
        let (acks, batch, keys) = (args.acks, u64::from(args.batch), args.keys);
        workers.spawn(async move {
            let mut cluster = Cluster::connect(&bootstrap).await?;
            let partition = i % partitions;
            let mut tally = Tally::default();
            while tally.records < share {
                let n = batch.min(share - tally.records);
                let written = tally.records;
                let batch: Vec<Outgoing> = (0..n)
                    .map(|j| Outgoing {
                        key: (keys > 0).then(|| Bytes::from(format!("k{}", (written + j) % keys))),
                        value: value.clone(),
                    })
                    .collect();
                let request = produce::request(
                    &topic,
                    partition,
                    acks,
                    records::encode(&batch, records::now_ms())?,
                );
                let sent = Instant::now();
                produce::send(&mut cluster, &topic, partition, acks, &request).await?;
                tally.latencies.push(sent.elapsed());
                tally.records += n;
                tally.bytes += n * value.len() as u64;
            }
            Ok(tally)
        });
    }
    let tally = gather(workers).await?;
    Ok(report(tally, started.elapsed()))
}

async fn perf_consume(args: PerfConsumeArgs) -> Result<Report, ClientError> {
    let mut cluster = Cluster::connect(&args.bootstrap).await?;
    let partitions = produce::partition_count(&mut cluster, &args.topic).await?;
    let remaining = Arc::new(AtomicU64::new(args.records));
    let started = Instant::now();
    let mut workers = tokio::task::JoinSet::new();
    for partition in 0..partitions {
        let (bootstrap, topic, remaining) = (
            args.bootstrap.clone(),
            args.topic.clone(),
            Arc::clone(&remaining),
        );
        workers.spawn(async move {
            let mut cluster = Cluster::connect(&bootstrap).await?;
            let mut next =
                consume::resolve(&mut cluster, &topic, partition, Start::Earliest).await?;
            let end = consume::resolve(&mut cluster, &topic, partition, Start::Latest).await?;
            let mut tally = Tally::default();
            // A partition stops at its end as of the start, or once enough records are read.
            while next < end && remaining.load(Ordering::Relaxed) > 0 {
                let sent = Instant::now();
                let (read, _, end) = consume::fetch(&mut cluster, &topic, partition, next).await?;
                tally.latencies.push(sent.elapsed());
                for r in &read {
                    if r.offset < next {
                        continue;
                    }
                    let taken = remaining
                        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
                    if taken.is_err() {
                        break;
                    }
                    tally.records += 1;
                    tally.bytes += r.value.as_ref().map_or(0, |v| v.len() as u64);
                    next = r.offset + 1;
                }
                if remaining.load(Ordering::Relaxed) > 0 {
                    next = next.max(end.unwrap_or(next));
                }
            }
            Ok(tally)
        });
    }
    let tally = gather(workers).await?;
    if tally.records < args.records {
        return Err(ClientError::Usage(format!(
            "topic {} holds only {} records, {} asked",
            args.topic, tally.records, args.records
        )));
    }
    Ok(report(tally, started.elapsed()))
}
