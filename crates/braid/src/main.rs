//! `braid`: one good link for everyone on board from several poor wireless uplinks.
//!
//! One binary: the simulator (`braid sim`), the demo (`braid demo`), and (to come) the gateway and
//! server daemons. The engine is `braid-proto`; the simulator is `braid-sim`.

mod cli;

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
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a scenario in the deterministic simulator and compare its schemes.
    Sim(cli::sim::SimArgs),
    /// Run braid's main job on its embedded default: the PluriBus bus scenario, all schemes.
    Demo(cli::sim::DemoArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_new(&cli.log).unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .init();
    let result = match cli.command {
        Command::Sim(a) => cli::sim::sim(a),
        Command::Demo(a) => cli::sim::demo(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("braid: {e:#}");
            ExitCode::FAILURE
        }
    }
}
