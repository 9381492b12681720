//! `isr`: a Kafka-style replicated log whose every protocol decision is made by the verified
//! `isr` core. This binary runs the controller and the brokers, starts local clusters, reports
//! their state, and (through `isr-kafka`) talks to them as a Kafka client.

use clap::{CommandFactory, Parser, Subcommand};
use isr_runtime::{broker, cluster, controller, status};
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "isr", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// How the client commands connect to a secured listener: a properties file in
    /// librdkafka's format (security.protocol, sasl.mechanism, sasl.username, sasl.password,
    /// ssl.ca.location), as `isr cluster --security` writes it.
    #[arg(long, global = true, value_name = "FILE")]
    command_config: Option<std::path::PathBuf>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the cluster controller.
    Controller(controller::ControllerArgs),
    /// Run a broker.
    Broker(broker::BrokerArgs),
    /// Run a controller and N brokers on 127.0.0.1 as child processes.
    Cluster(cluster::ClusterArgs),
    /// Show partitions (leader, epoch, AR, ISR, OSR, ELR) and replicas (LEO, HW, lag).
    Status(status::StatusArgs),
    /// Create, list, describe, delete and alter topics, and add partitions (Kafka protocol).
    Topic(isr_kafka::client::topic::TopicArgs),
    /// List, describe and delete consumer groups (Kafka protocol).
    Group(isr_kafka::client::group::GroupArgs),
    /// Produce records from stdin, one per line (Kafka protocol).
    Produce(isr_kafka::client::produce::ProduceArgs),
    /// Print records of a partition (Kafka protocol).
    Consume(isr_kafka::client::consume::ConsumeArgs),
    /// Measure produce or consume throughput and latency (Kafka protocol).
    Perf(isr_kafka::client::perf::PerfArgs),
    /// Add, remove and list SASL users: SCRAM credentials kept by the controller (Kafka
    /// protocol).
    User(isr_kafka::client::user::UserArgs),
    /// Add, list and remove ACLs (Kafka protocol).
    Acl(isr_kafka::client::acl::AclArgs),
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        // Colours only on a terminal: a log redirected to a file or a journal stays greppable
        // (`at=321`, not `at\x1b[0m\x1b[2m=\x1b[0m321`).
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(e),
    };
    if let Some(path) = &cli.command_config {
        match isr_kafka::client::security::ClientSecurity::from_file(path) {
            Ok(security) => isr_kafka::client::security::configure(security),
            Err(e) => {
                eprintln!("isr: {e}");
                return ExitCode::from(2);
            }
        }
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("isr: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result: Result<(), Box<dyn std::error::Error>> = runtime.block_on(async {
        match cli.command {
            Command::Controller(args) => controller::run(args).await.map_err(Into::into),
            Command::Broker(args) => broker::run(args).await.map_err(Into::into),
            Command::Cluster(args) => cluster::run(args).await.map_err(Into::into),
            Command::Status(args) => status::run(args).await.map_err(Into::into),
            Command::Topic(args) => isr_kafka::client::topic::run(args)
                .await
                .map_err(Into::into),
            Command::Group(args) => isr_kafka::client::group::run(args)
                .await
                .map_err(Into::into),
            Command::Produce(args) => isr_kafka::client::produce::run(args)
                .await
                .map_err(Into::into),
            Command::Consume(args) => isr_kafka::client::consume::run(args)
                .await
                .map_err(Into::into),
            Command::Perf(args) => isr_kafka::client::perf::run(args).await.map_err(Into::into),
            Command::User(args) => isr_kafka::client::user::run(args).await.map_err(Into::into),
            Command::Acl(args) => isr_kafka::client::acl::run(args).await.map_err(Into::into),
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("isr: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Prints a command-line error, naming the valid subcommands where one was missing or unknown
/// (clap only suggests similar names).
fn usage_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    let _ = e.print();
    if matches!(
        e.kind(),
        ErrorKind::InvalidSubcommand | ErrorKind::MissingSubcommand
    ) {
        let args: Vec<String> = std::env::args().skip(1).collect();
        if let Some(names) = valid_subcommands(&args) {
            eprintln!("valid subcommands: {names}");
        }
    }
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => ExitCode::SUCCESS,
        _ => ExitCode::from(2),
    }
}

/// The subcommands of the deepest command `args` name.
fn valid_subcommands(args: &[String]) -> Option<String> {
    let mut command = Cli::command();
    for arg in args {
        match command.find_subcommand(arg) {
            Some(sub) => command = sub.clone(),
            None => break,
        }
    }
    let names: Vec<&str> = command
        .get_subcommands()
        .map(|s| s.get_name())
        .filter(|&n| n != "help")
        .collect();
    (!names.is_empty()).then(|| names.join(", "))
}
