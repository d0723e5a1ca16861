//! `braid client`, `braid server`, `braid status`, `braid set` and `braid peer`.

use crate::daemon::config::{Recovery, Scheduler};
use crate::daemon::control::{Request, default_socket, request};
use clap::{Args, Subcommand};
use std::path::PathBuf;

/// Arguments of `braid client` and `braid server`.
#[derive(Args, Debug)]
pub struct DaemonArgs {
    /// Configuration file (TOML; see docs/operations.md).
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
    /// The daemon's control socket [default: /run/braid/client.sock or /run/braid/server.sock,
    /// whichever exists].
    #[arg(long)]
    pub control: Option<PathBuf>,
    /// Only this vehicle's session (server; its `[[peer]]` name).
    #[arg(long)]
    pub peer: Option<String>,
}

/// Arguments of `braid set`.
#[derive(Args, Debug)]
pub struct SetArgs {
    /// The daemon's control socket [default: /run/braid/client.sock or /run/braid/server.sock,
    /// whichever exists].
    #[arg(long, global = true)]
    pub control: Option<PathBuf>,
    /// Change only this vehicle (server; its `[[peer]]` name), also for its later sessions.
    /// Without it a server changes every vehicle.
    #[arg(long, global = true)]
    pub peer: Option<String>,
    /// What to change.
    #[command(subcommand)]
    pub what: SetWhat,
}

/// What `braid set` changes.
#[derive(Subcommand, Debug)]
pub enum SetWhat {
    /// An uplink's scheduler weight.
    Weight {
        /// Uplink name; on the server also link0, link1, ... or just the number.
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
    let path = default_socket(a.control.as_deref())?;
    let resp = request(&path, &Request::Status { peer: a.peer.clone() })?;
    let Some(s) = resp.status else { anyhow::bail!("{}", resp.error.unwrap_or_else(|| "no status".into())) };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&s)?);
    } else {
        print!("{}", s.render());
        if let Some(p) = a.peer.as_deref().filter(|_| s.sessions.is_empty()) {
            println!("{p}: no session (listed in [[peer]], not connected now)");
        }
    }
    Ok(())
}

/// `braid set`.
pub fn set(a: SetArgs) -> anyhow::Result<()> {
    let resp = request(&default_socket(a.control.as_deref())?, &request_for(a.what, a.peer))?;
    if resp.ok { Ok(()) } else { anyhow::bail!("{}", resp.error.unwrap_or_else(|| "refused".into())) }
}

/// The control request `braid set` sends (to one vehicle's session with `peer`, on a server).
pub fn request_for(what: SetWhat, peer: Option<String>) -> Request {
    match what {
        SetWhat::Weight { link, weight } => Request::SetWeight { link, weight, peer },
        SetWhat::Recovery { name } => Request::SetRecovery { name, peer },
        SetWhat::Scheduler { name } => Request::SetScheduler { name, peer },
    }
}

/// Arguments of `braid peer`.
#[derive(Args, Debug)]
pub struct PeerArgs {
    /// The server's control socket [default: /run/braid/server.sock].
    #[arg(long, global = true)]
    pub control: Option<PathBuf>,
    /// What to do.
    #[command(subcommand)]
    pub what: PeerWhat,
}

/// What `braid peer` does.
#[derive(Subcommand, Debug)]
pub enum PeerWhat {
    /// List a vehicle on the running server; it may join at once. Not written to the file: the
    /// next SIGHUP makes the running list the file's again.
    Add {
        /// Its name (as `[[peer]] name`).
        name: String,
        /// Its public key (`braid pubkey` on the vehicle).
        #[arg(long)]
        public_key: String,
        /// Its passenger networks, comma-separated (its tunnel address among them).
        #[arg(long, value_delimiter = ',', required = true)]
        allowed_ips: Vec<String>,
        /// A pre-shared key file (read by the server, mode 600).
        #[arg(long)]
        preshared_key: Option<PathBuf>,
    },
    /// Unlist a vehicle: its session and routes end at once; the others are not touched.
    Remove {
        /// Its name.
        name: String,
    },
}

/// The control request `braid peer` sends; a bad key or network is refused here, naming it.
pub fn peer_request(what: PeerWhat) -> anyhow::Result<Request> {
    Ok(match what {
        PeerWhat::Add { name, public_key, allowed_ips, preshared_key } => {
            let entry = serde_json::json!({
                "name": name,
                "public_key": public_key,
                "allowed_ips": allowed_ips,
                "preshared_key": preshared_key,
            });
            let entry = serde_json::from_value(entry).map_err(|e| anyhow::anyhow!("braid peer add {name}: {e}"))?;
            Request::PeerAdd { entry: Box::new(entry) }
        }
        PeerWhat::Remove { name } => Request::PeerRemove { name },
    })
}

/// `braid peer`.
pub fn peer(a: PeerArgs) -> anyhow::Result<()> {
    let req = peer_request(a.what)?;
    let resp = request(&default_socket(a.control.as_deref())?, &req)?;
    if resp.ok { Ok(()) } else { anyhow::bail!("{}", resp.error.unwrap_or_else(|| "refused".into())) }
}
