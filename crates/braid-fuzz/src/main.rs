//! `braid-fuzz`: runs the fuzz targets on stable Rust.
//!
//! ```text
//! braid-fuzz --target all --inputs 10000000 --seed 1     # split evenly over the targets
//! braid-fuzz --target wire-feedback --time-s 60 --inputs 1000000000
//! braid-fuzz --target session-pair --replay crash.bin    # re-run one saved input
//! braid-fuzz --list
//! ```

use braid_fuzz::{Options, TARGETS, Target, runner};
use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Fuzz braid's decoders with a deterministic, structure-aware mutation loop.
#[derive(Debug, Parser)]
#[command(name = "braid-fuzz")]
struct Args {
    /// Target name, a comma-separated list, or `all`.
    #[arg(long, default_value = "all")]
    target: String,
    /// Inputs in total, split evenly over the chosen targets (seeds included).
    #[arg(long, default_value_t = 100_000)]
    inputs: u64,
    /// Seed of the mutation streams.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Wall-clock budget in seconds, split evenly over the chosen targets.
    #[arg(long)]
    time_s: Option<f64>,
    /// Directory crashing inputs are saved to.
    #[arg(long, default_value = "target/fuzz-crashes")]
    crash_dir: PathBuf,
    /// Run this one saved input on the target instead of fuzzing (panics print in full).
    #[arg(long)]
    replay: Option<PathBuf>,
    /// List the targets and exit.
    #[arg(long)]
    list: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    if args.list {
        for t in TARGETS {
            println!("{:<16} {}", t.name, t.about);
        }
        return ExitCode::SUCCESS;
    }
    let chosen: Vec<&Target> = if args.target == "all" {
        TARGETS.iter().collect()
    } else {
        let mut v = Vec::new();
        for name in args.target.split(',') {
            match braid_fuzz::target(name.trim()) {
                Some(t) => v.push(t),
                None => {
                    eprintln!("unknown target {name:?}; --list shows them");
                    return ExitCode::from(2);
                }
            }
        }
        v
    };
    if let Some(path) = args.replay {
        let input = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("{}: {e}", path.display());
                return ExitCode::from(2);
            }
        };
        for t in chosen {
            // Outside the runner: a panic prints its message and backtrace as usual.
            println!("{}: {:?}", t.name, (t.run)(&input));
        }
        return ExitCode::SUCCESS;
    }
    let n = chosen.len() as u64;
    println!(
        "braid-fuzz: {} target(s), {} inputs in total, seed {}{}",
        n,
        args.inputs,
        args.seed,
        args.time_s.map_or(String::new(), |s| format!(", at most {s} s"))
    );
    println!(
        "{:<16} {:>12} {:>9} {:>7} {:>9} {:>12} {:>7}",
        "target", "inputs", "accepted", "seeds", "time s", "inputs/s", "panics"
    );
    let (mut total, mut secs, mut panics) = (0u64, 0f64, 0usize);
    for (i, t) in chosen.iter().enumerate() {
        let opts = Options {
            // The remainder goes to the first targets, so the total is exactly --inputs.
            inputs: args.inputs / n + u64::from((i as u64) < args.inputs % n),
            seed: args.seed,
            time_limit: args.time_s.map(|s| Duration::from_secs_f64(s / n as f64)),
            crash_dir: Some(args.crash_dir.clone()),
        };
        let r = runner::run(t, &opts);
        println!(
            "{:<16} {:>12} {:>8.1}% {:>3}/{:<3} {:>9.1} {:>12.0} {:>7}",
            r.target,
            r.inputs,
            100.0 * r.accepted as f64 / r.inputs.max(1) as f64,
            r.seeds_accepted.0,
            r.seeds_accepted.1,
            r.elapsed.as_secs_f64(),
            r.rate(),
            r.crashes.len()
        );
        total += r.inputs;
        secs += r.elapsed.as_secs_f64();
        panics += r.crashes.len();
    }
    println!(
        "{:<16} {:>12} {:>9} {:>7} {:>9.1} {:>12.0} {:>7}",
        "total",
        total,
        "",
        "",
        secs,
        total as f64 / secs.max(1e-9),
        panics
    );
    if panics > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}
