//! `braid client`, `braid server`, `braid status` and `braid set`.

use crate::daemon::control::{Request, request};
use clap::{Args, Subcommand};
use std::path::PathBuf;

/// Arguments of `braid client` and `braid server`.
#[derive(Args, Debug)]
pub struct DaemonArgs {
    /// Configuration file (TOML; see docs/operations.md).
    #[arg(long, short)]
    pub config: PathBuf,
}

/// Arguments of `braid status`.
#[derive(Args, Debug)]
pub struct StatusArgs {
    /// Print the JSON snapshot instead of the table.
    #[arg(long)]
    pub json: bool,
    /// The daemon's control socket.
    #[arg(long, default_value = "/run/braid/client.sock")]
    pub control: PathBuf,
}

/// Arguments of `braid set`.
#[derive(Args, Debug)]
pub struct SetArgs {
    /// The daemon's control socket.
    #[arg(long, global = true, default_value = "/run/braid/client.sock")]
    pub control: PathBuf,
    /// What to change.
    #[command(subcommand)]
    pub what: SetWhat,
}

/// What `braid set` changes.
#[derive(Subcommand, Debug)]
pub enum SetWhat {
    /// An uplink's scheduler weight.
    Weight {
        /// Uplink name (client) or link<N> (server).
        link: String,
        /// New weight.
        weight: u32,
    },
    /// The loss-recovery scheme: none, arq, fec<K>, dup, oec.
    Recovery {
        /// Scheme name.
        name: String,
    },
    /// The scheduler: min-delay, single, round-robin.
    Scheduler {
        /// Scheduler name.
        name: String,
    },
}

/// `braid status`.
pub fn status(a: StatusArgs) -> anyhow::Result<()> {
    let resp = request(&a.control, &Request::Status)?;
    let Some(s) = resp.status else { anyhow::bail!("{}", resp.error.unwrap_or_else(|| "no status".into())) };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&s)?);
    } else {
        print!("{}", s.render());
    }
    Ok(())
}

/// `braid set`.
pub fn set(a: SetArgs) -> anyhow::Result<()> {
    let req = match a.what {
        SetWhat::Weight { link, weight } => Request::SetWeight { link, weight },
        SetWhat::Recovery { name } => Request::SetRecovery { name },
        SetWhat::Scheduler { name } => Request::SetScheduler { name },
    };
    let resp = request(&a.control, &req)?;
    if resp.ok { Ok(()) } else { anyhow::bail!("{}", resp.error.unwrap_or_else(|| "refused".into())) }
}
