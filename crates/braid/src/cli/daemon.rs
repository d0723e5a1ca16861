//! `braid client`, `braid server`, `braid status` and `braid set`.

use crate::daemon::config::{Recovery, Scheduler};
use crate::daemon::control::{Request, request};
use clap::{Args, Subcommand};
use std::path::PathBuf;

/// Arguments of `braid client` and `braid server`.
#[derive(Args, Debug)]
pub struct DaemonArgs {
    /// Configuration file (TOML; see README).
    #[arg(long, short)]
    pub config: PathBuf,
}

/// Arguments of `braid check`.
#[derive(Args, Debug)]
pub struct CheckArgs {
    /// Configuration file: a client's (it has `server`) or a server's (it has `listen`).
    #[arg(long, short)]
    pub config: PathBuf,
}

/// `braid check`: parses and checks `--config` as the daemon would at start (keys, values,
/// addresses, MTU, key files and their permissions) without starting anything.
pub fn check(a: CheckArgs) -> anyhow::Result<()> {
    let kind = check_config(&a.config)?;
    println!("braid check: {}: {kind} configuration OK", a.config.display());
    Ok(())
}

/// Which daemon `path` configures, once it has passed every check the daemon makes at start.
pub fn check_config(path: &std::path::Path) -> anyhow::Result<&'static str> {
    use crate::daemon::config::{ClientConfig, ServerConfig};
    use anyhow::Context as _;
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let table: toml::Table = toml::from_str(&text).with_context(|| format!("in {}", path.display()))?;
    if table.contains_key("listen") {
        let c = ServerConfig::parse(&text).with_context(|| format!("in {}", path.display()))?;
        c.keys().with_context(|| format!("in {}", path.display()))?;
        Ok("server")
    } else if table.contains_key("server") {
        let c = ClientConfig::parse(&text).with_context(|| format!("in {}", path.display()))?;
        c.keys().with_context(|| format!("in {}", path.display()))?;
        Ok("client")
    } else {
        anyhow::bail!("in {}: neither `server` (a client's) nor `listen` (a server's) is set", path.display())
    }
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
    /// The loss-recovery scheme.
    #[command(after_help = scheme_help("Schemes", braid_proto::RecoveryKind::SPELLINGS))]
    Recovery {
        /// Scheme, e.g. oec or fec:10.
        name: Recovery,
    },
    /// The scheduler.
    #[command(after_help = scheme_help("Schedulers", braid_proto::SchedulerKind::SPELLINGS))]
    Scheduler {
        /// Scheduler, e.g. min-delay or wrr:auto.
        name: Scheduler,
    },
}

/// A `--help` section listing every spelling of a scheme table, the same in config files and
/// scenario files.
pub fn scheme_help<K>(title: &str, table: &[braid_proto::scheme::Spelling<K>]) -> String {
    format!("{title} (as in config and scenario files):\n{}", braid_proto::scheme::help(table))
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
    let resp = request(&a.control, &request_for(a.what))?;
    if resp.ok { Ok(()) } else { anyhow::bail!("{}", resp.error.unwrap_or_else(|| "refused".into())) }
}

/// The control request `braid set` sends.
pub fn request_for(what: SetWhat) -> Request {
    match what {
        SetWhat::Weight { link, weight } => Request::SetWeight { link, weight },
        SetWhat::Recovery { name } => Request::SetRecovery { name },
        SetWhat::Scheduler { name } => Request::SetScheduler { name },
    }
}
