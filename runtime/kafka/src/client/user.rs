//! `isr user add|remove|list`: the cluster's SASL users, as SCRAM credentials kept by the
//! controller (AlterUserScramCredentials, DescribeUserScramCredentials).
//!
//! The password is salted and iterated here: the broker receives the salted password, from
//! which the controller keeps only StoredKey and ServerKey, so the password itself never
//! leaves this process.

pub use super::args::ListArgs;
use super::cluster::{Cluster, Route};
use super::error::{malformed, ClientError};
use super::topic::print_json;
use crate::auth::scram::{Mechanism, DEFAULT_ITERATIONS, MAX_ITERATIONS, MIN_ITERATIONS};
use kafka_protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};
use kafka_protocol::protocol::StrBytes;
use serde_json::json;
use std::io::{BufRead, Write};
use std::path::PathBuf;

/// RESOURCE_NOT_FOUND: describing a user that has no credentials.
const RESOURCE_NOT_FOUND: i16 = 91;
/// Bytes of salt for a new credential.
const SALT_BYTES: usize = 24;

#[derive(Clone, Debug, clap::Args)]
pub struct UserArgs {
    #[command(subcommand)]
    pub command: UserCommand,
}

#[derive(Clone, Debug, clap::Subcommand)]
pub enum UserCommand {
    /// Add a user, or change a user's password: one SCRAM credential per mechanism.
    Add(AddArgs),
    /// Remove a user (its credentials of every mechanism, or of those named).
    Remove(RemoveArgs),
    /// List the users and their SCRAM mechanisms and iterations.
    List(ListArgs),
}

#[derive(Clone, Debug, clap::Args)]
pub struct AddArgs {
    /// A broker to start from: HOST:PORT, or several separated by commas.
    #[arg(long)]
    pub bootstrap: String,
    pub name: String,
    /// The password (visible to other local users in the process list: prefer
    /// --password-file).
    #[arg(
        long,
        required_unless_present = "password_file",
        conflicts_with = "password_file"
    )]
    pub password: Option<String>,
    /// A file whose first line is the password; `-` reads it from stdin.
    #[arg(long, value_name = "FILE")]
    pub password_file: Option<PathBuf>,
    /// SCRAM-SHA-256 or SCRAM-SHA-512 (repeatable; default both).
    #[arg(long = "mechanism", value_parser = mechanism)]
    pub mechanisms: Vec<Mechanism>,
    /// PBKDF2 iterations of the salted password.
    #[arg(long, default_value_t = DEFAULT_ITERATIONS,
        value_parser = clap::value_parser!(u32).range(i64::from(MIN_ITERATIONS)..=i64::from(MAX_ITERATIONS)))]
    pub iterations: u32,
}

#[derive(Clone, Debug, clap::Args)]
pub struct RemoveArgs {
    /// A broker to start from: HOST:PORT, or several separated by commas.
    #[arg(long)]
    pub bootstrap: String,
    pub name: String,
    /// Remove only this mechanism's credential (repeatable; default every one the user has).
    #[arg(long = "mechanism", value_parser = mechanism)]
    pub mechanisms: Vec<Mechanism>,
}

fn mechanism(name: &str) -> Result<Mechanism, String> {
    Mechanism::from_name(name).ok_or_else(|| format!("{name}: SCRAM-SHA-256 or SCRAM-SHA-512"))
}

pub async fn run(args: UserArgs) -> Result<(), ClientError> {
    run_with(args, &mut std::io::stdout().lock()).await
}

pub async fn run_with(args: UserArgs, out: &mut impl Write) -> Result<(), ClientError> {
    match args.command {
        UserCommand::Add(a) => add(a, out).await,
        UserCommand::Remove(a) => remove(a, out).await,
        UserCommand::List(a) => list(a, out).await,
    }
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

/// The password from --password or --password-file (its first line, without the newline).
fn password(args: &AddArgs) -> Result<String, ClientError> {
    let password = match (&args.password, &args.password_file) {
        (Some(p), _) => p.clone(),
        (None, Some(path)) => {
            let mut line = String::new();
            let read = if path.as_os_str() == "-" {
                std::io::stdin().lock().read_line(&mut line)
            } else {
                std::fs::File::open(path)
                    .and_then(|f| std::io::BufReader::new(f).read_line(&mut line))
            };
            read.map_err(|e| {
                ClientError::Usage(format!("--password-file {}: {e}", path.display()))
            })?;
            line.trim_end_matches(['\n', '\r']).to_owned()
        }
        (None, None) => return Err(ClientError::Usage("--password or --password-file".into())),
    };
    if password.is_empty() {
        return Err(ClientError::Usage("the password is empty".into()));
    }
    Ok(password)
}

/// Sends an AlterUserScramCredentials and reports the one user's outcome.
async fn alter(
    cluster: &mut Cluster,
    request: AlterUserScramCredentialsRequest,
) -> Result<(), ClientError> {
    cluster
        .send(
            Route::Admin,
            &request,
            |addr, a: AlterUserScramCredentialsResponse| {
                let result = a
                    .results
                    .first()
                    .ok_or_else(|| malformed(addr, "no result for the user"))?;
                match ClientError::from_code(
                    result.error_code,
                    result.error_message.as_ref().map(|m| m.as_str()),
                ) {
                    Some(e) => Err(e),
                    None => Ok(()),
                }
            },
        )
        .await
}

async fn add(args: AddArgs, out: &mut impl Write) -> Result<(), ClientError> {
    let password = password(&args)?;
    let mechanisms = if args.mechanisms.is_empty() {
        Mechanism::ALL.to_vec()
    } else {
        args.mechanisms.clone()
    };
    let mut upsertions = Vec::new();
    for m in &mechanisms {
        let salt =
            crate::auth::random_bytes(SALT_BYTES).map_err(|e| ClientError::Usage(e.to_string()))?;
        let salted = m.salted_password(password.as_bytes(), &salt, args.iterations);
        upsertions.push(
            ScramCredentialUpsertion::default()
                .with_name(text(&args.name))
                .with_mechanism(m.code())
                .with_iterations(i32::try_from(args.iterations).unwrap_or(i32::MAX))
                .with_salt(salt.into())
                .with_salted_password(salted.into()),
        );
    }
    let mut cluster = Cluster::connect(&args.bootstrap).await?;
    alter(
        &mut cluster,
        AlterUserScramCredentialsRequest::default().with_upsertions(upsertions),
    )
    .await?;
    let names: Vec<&str> = mechanisms.iter().map(|m| m.name()).collect();
    writeln!(out, "user {}: {}", args.name, names.join(", ")).map_err(ClientError::Output)
}

/// Every user with its (mechanism, iterations) pairs; `only` narrows to one user.
async fn describe(
    cluster: &mut Cluster,
    only: Option<&str>,
) -> Result<Vec<(String, Vec<(Mechanism, i32)>)>, ClientError> {
    let request = DescribeUserScramCredentialsRequest::default()
        .with_users(only.map(|u| vec![UserName::default().with_name(text(u))]));
    cluster
        .send(
            Route::Admin,
            &request,
            |_, a: DescribeUserScramCredentialsResponse| {
                if let Some(e) = ClientError::from_code(
                    a.error_code,
                    a.error_message.as_ref().map(|m| m.as_str()),
                ) {
                    return Err(e);
                }
                let mut users = Vec::new();
                for r in a.results {
                    if r.error_code == RESOURCE_NOT_FOUND {
                        continue;
                    }
                    if let Some(e) = ClientError::from_code(
                        r.error_code,
                        r.error_message.as_ref().map(|m| m.as_str()),
                    ) {
                        return Err(e);
                    }
                    let credentials = r
                        .credential_infos
                        .iter()
                        .filter_map(|c| Some((Mechanism::from_code(c.mechanism)?, c.iterations)))
                        .collect();
                    users.push((r.user.as_str().to_owned(), credentials));
                }
                Ok(users)
            },
        )
        .await
}

async fn remove(args: RemoveArgs, out: &mut impl Write) -> Result<(), ClientError> {
    let mut cluster = Cluster::connect(&args.bootstrap).await?;
    let mechanisms = if args.mechanisms.is_empty() {
        let users = describe(&mut cluster, Some(&args.name)).await?;
        match users.into_iter().next() {
            Some((_, credentials)) => credentials.into_iter().map(|(m, _)| m).collect(),
            None => {
                let all = describe(&mut cluster, None).await?;
                let names: Vec<String> = all.into_iter().map(|(u, _)| u).collect();
                return Err(ClientError::Usage(format!(
                    "no user {}; users: {}",
                    args.name,
                    if names.is_empty() {
                        "none".to_owned()
                    } else {
                        names.join(", ")
                    }
                )));
            }
        }
    } else {
        args.mechanisms.clone()
    };
    let deletions = mechanisms
        .iter()
        .map(|m| {
            ScramCredentialDeletion::default()
                .with_name(text(&args.name))
                .with_mechanism(m.code())
        })
        .collect();
    alter(
        &mut cluster,
        AlterUserScramCredentialsRequest::default().with_deletions(deletions),
    )
    .await?;
    let names: Vec<&str> = mechanisms.iter().map(|m| m.name()).collect();
    writeln!(out, "removed user {}: {}", args.name, names.join(", ")).map_err(ClientError::Output)
}

async fn list(args: ListArgs, out: &mut impl Write) -> Result<(), ClientError> {
    let mut cluster = Cluster::connect(&args.bootstrap).await?;
    let users = describe(&mut cluster, None).await?;
    if args.json {
        let value: Vec<_> = users
            .iter()
            .map(|(user, credentials)| {
                let credentials: Vec<_> = credentials
                    .iter()
                    .map(|(m, i)| json!({"mechanism": m.name(), "iterations": i}))
                    .collect();
                json!({"user": user, "credentials": credentials})
            })
            .collect();
        return print_json(out, &json!(value));
    }
    for (user, credentials) in &users {
        let credentials: Vec<String> = credentials
            .iter()
            .map(|(m, i)| format!("{}:{i}", m.name()))
            .collect();
        writeln!(out, "{user} {}", credentials.join(" ")).map_err(ClientError::Output)?;
    }
    Ok(())
}
