//! `braid`: one good link for everyone on board from several poor wireless uplinks.
//!
//! One binary: the gateway and server daemons (`braid client`, `braid server`), their control
//! commands (`braid status`, `braid set`), the simulator (`braid sim`) and the demo (`braid demo`). The engine is `braid-proto`; the simulator is `braid-sim`.

mod cli;
mod daemon;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// braid: bonds a vehicle's cellular and WiFi uplinks into one loss-free link (PluriBus-style
/// opportunistic erasure coding).
#[derive(Parser, Debug)]
#[command(name = "braid", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Log filter (tracing EnvFilter syntax), e.g. "info" or "braid_proto=debug".
    #[arg(long, global = true, env = "BRAID_LOG", default_value = "warn")]
    log: String,
    /// Log lines as text (colours only on a terminal) or as one JSON object per line.
    #[arg(long, global = true, env = "BRAID_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
}

/// How log lines are written to stderr.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum LogFormat {
    /// Human-readable lines; ANSI colours only when stderr is a terminal (not in files or journald).
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a scenario in the deterministic simulator and compare its schemes.
    Sim(cli::sim::SimArgs),
    /// Run braid's main job on its embedded default: the PluriBus bus on the real-kernel testbed
    /// (braid vs plain TCP vs MPTCP), or in the simulator where the testbed cannot run.
    Demo(cli::sim::DemoArgs),
    /// Run a scenario's contenders (braid schemes, plain TCP, MPTCP, kcptun) on real kernels over
    /// emulated links.
    Testbed(cli::testbed::TestbedArgs),
    /// Run the vehicle gateway: carry the TUN device's packets over every uplink.
    Client(cli::daemon::DaemonArgs),
    /// Run the server: one session per vehicle, packets to and from its TUN device.
    Server(cli::daemon::DaemonArgs),
    /// Show a running daemon's sessions and uplinks.
    Status(cli::daemon::StatusArgs),
    /// Change a running daemon's settings without disturbing its traffic.
    Set(cli::daemon::SetArgs),
    /// Add or remove a vehicle on a running server without touching the others.
    Peer(cli::daemon::PeerArgs),
    /// Check a client or server configuration file and its key files, as `nginx -t`: prints
    /// OK or the error with its key and line; exit status 0 or 1.
    Check(cli::daemon::CheckArgs),
    /// Print a new private key (base64): `braid genkey > private.key` (umask 077 first).
    Genkey,
    /// Read a private key on stdin, print its public key: `braid pubkey < private.key`.
    Pubkey,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Err(e) = init_logging(&cli.log, cli.log_format) {
        eprintln!("braid: {}", cli::error_chain(&e));
        return ExitCode::FAILURE;
    }
    let result = match cli.command {
        Command::Sim(a) => cli::sim::sim(a),
        Command::Demo(a) => cli::sim::demo(a),
        Command::Testbed(a) => cli::testbed::testbed(a),
        Command::Client(a) => daemon::client::run(&a.config),
        Command::Server(a) => daemon::server::run(&a.config),
        Command::Status(a) => cli::daemon::status(a),
        Command::Set(a) => cli::daemon::set(a),
        Command::Peer(a) => cli::daemon::peer(a),
        Command::Check(a) => cli::daemon::check(a),
        Command::Genkey => daemon::keys::genkey(),
        Command::Pubkey => daemon::keys::pubkey(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("braid: {}", cli::error_chain(&e));
            ExitCode::FAILURE
        }
    }
}

/// Installs the log subscriber: a filter that does not parse is an error (it used to become
/// `warn` silently), and colours go only to a terminal.
fn init_logging(filter: &str, format: LogFormat) -> anyhow::Result<()> {
    use std::io::IsTerminal as _;
    let filter = tracing_subscriber::EnvFilter::builder()
        .with_default_directive(tracing::Level::WARN.into())
        .parse(filter)
        .map_err(|e| anyhow::anyhow!("--log / BRAID_LOG {filter:?}: {e}"))?;
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => builder.json().init(),
    }
    Ok(())
}
