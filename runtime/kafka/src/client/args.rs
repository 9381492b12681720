//! Arguments several client commands share.

/// A command that lists things.
#[derive(Clone, Debug, clap::Args)]
pub struct ListArgs {
    /// A broker to start from: HOST:PORT, or several separated by commas.
    #[arg(long)]
    pub bootstrap: String,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// A command that shows one named thing.
#[derive(Clone, Debug, clap::Args)]
pub struct NamedArgs {
    /// A broker to start from: HOST:PORT, or several separated by commas.
    #[arg(long)]
    pub bootstrap: String,
    pub name: String,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// A command that deletes one named thing.
#[derive(Clone, Debug, clap::Args)]
pub struct DeleteArgs {
    /// A broker to start from: HOST:PORT, or several separated by commas.
    #[arg(long)]
    pub bootstrap: String,
    pub name: String,
}
