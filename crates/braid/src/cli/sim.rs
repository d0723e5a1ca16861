//! `braid sim` and `braid demo`.

use super::provenance::Provenance;
use anyhow::Context;
use braid_sim::report::{self, Versus};
use braid_sim::results::SimReport;
use braid_sim::runner::{RunOptions, run_scenario};
use braid_sim::scenario::{Scenario, SchemeKind, SchemeSpec};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::path::PathBuf;

/// What `braid sim` and `braid testbed` share: the scenario, its runs and seed, and how the
/// results are shown.
#[derive(Args, Debug, Default)]
pub struct ScenarioArgs {
    /// Scenario file (TOML, docs/scenarios.md); `[[scheme]]` entries may be braid schemes or, for `braid
    /// testbed`, `peer = "plain" | "mptcp" | "kcptun"`. Without it, the embedded PluriBus bus.
    pub file: Option<PathBuf>,
    /// Print one JSON object (docs/scenarios.md) instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Also write CSV files and plots (SVG and PNG) into this directory.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Independent runs per scheme or contender (overrides the file).
    #[arg(long)]
    pub runs: Option<u32>,
    /// Seed of the first run (overrides the file).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Also print the per-link table.
    #[arg(short, long)]
    pub verbose: bool,
    /// Compare SCHEME's mean FCT with REFERENCE's, paired by seed (per sweep point: the mean
    /// difference with its 95 % interval); repeatable. Default: every scheme against the first.
    #[arg(long, value_name = "REFERENCE,SCHEME")]
    pub versus: Vec<Versus>,
}

impl ScenarioArgs {
    /// The scenario file, or the embedded bus.
    pub fn scenario(&self) -> anyhow::Result<Scenario> {
        match &self.file {
            Some(f) => Scenario::from_file(f).with_context(|| format!("scenario {}", f.display())),
            None => Ok(Scenario::default_bus()),
        }
    }

    /// Fails if a `--versus` names a scheme that is not among `schemes`: checked before the runs,
    /// which may take hours, rather than after.
    pub fn check_versus(&self, schemes: &[SchemeSpec]) -> anyhow::Result<()> {
        let known = |name: &str| schemes.iter().any(|s| s.name == name);
        for v in &self.versus {
            for name in [&v.reference, &v.scheme] {
                anyhow::ensure!(
                    known(name),
                    "--versus {},{}: no scheme {name:?} to run here (schemes: {})",
                    v.reference,
                    v.scheme,
                    schemes.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(", ")
                );
            }
        }
        Ok(())
    }

    /// Prints the report as asked (table or JSON) and writes the CSV files and plots if asked.
    /// Both carry the provenance: `--json` under `"provenance"`, `--out` as `provenance.json`
    /// and `scenario.toml`.
    pub fn show(&self, report: &SimReport) -> anyhow::Result<()> {
        let provenance = Provenance::new(self.file.as_deref(), report)?;
        if self.json {
            println!("{}", serde_json::to_string_pretty(&json_with_provenance(report, &self.versus, &provenance))?);
        } else {
            print_report(report, false, self.verbose, &self.versus);
        }
        if let Some(dir) = &self.out {
            write_outputs(report, dir)?;
            provenance.write(dir).with_context(|| format!("writing provenance into {}", dir.display()))?;
        }
        Ok(())
    }
}

/// Arguments of `braid sim`.
#[derive(Args, Debug)]
pub struct SimArgs {
    #[command(flatten)]
    pub scenario: ScenarioArgs,
    /// Parallel jobs (default: all cores).
    #[arg(long)]
    pub jobs: Option<usize>,
}

/// Arguments of `braid demo`.
#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Runs per scheme.
    #[arg(long)]
    pub runs: Option<u32>,
    /// Parallel jobs of the simulator (default: all cores).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Run the simulator even where the real-kernel testbed could run.
    #[arg(long)]
    pub sim: bool,
    /// Seconds of workload per testbed run (real time).
    #[arg(long, default_value_t = 60)]
    pub duration_s: u64,
}

/// Runs `braid sim`.
pub fn sim(a: SimArgs) -> anyhow::Result<()> {
    let mut scenario = a.scenario.scenario()?;
    // A testbed scenario lists real-kernel peers beside braid's schemes: simulate braid's.
    let peers = without_peers(&mut scenario);
    if !peers.is_empty() {
        anyhow::ensure!(
            !scenario.schemes.is_empty(),
            "every scheme is a real-kernel peer; run them with `braid testbed`"
        );
        eprintln!("braid sim: skipping {} (real-kernel peers run only on `braid testbed`)", peers.join(", "));
    }
    let s = &a.scenario;
    s.check_versus(&scenario.schemes)?;
    let report = run_with_progress(&scenario, &RunOptions { runs: s.runs, seed: s.seed, jobs: a.jobs }, s.json)?;
    s.show(&report)
}

/// Takes the real-kernel peers out of `scenario`, from every sweep point too (each point is a
/// whole scenario of its own, and the runner runs the points), and returns their names.
pub(crate) fn without_peers(scenario: &mut Scenario) -> Vec<String> {
    let is_peer = |s: &SchemeSpec| matches!(s.kind, SchemeKind::Peer(_));
    let peers = scenario.schemes.iter().filter(|s| is_peer(s)).map(|s| s.name.clone()).collect();
    scenario.schemes.retain(|s| !is_peer(s));
    if let Some(sweep) = scenario.sweep.as_mut() {
        for point in &mut sweep.points {
            point.schemes.retain(|s| !is_peer(s));
        }
    }
    peers
}

/// Runs `braid demo`: the embedded bus on the real-kernel testbed when this machine can run it
/// (root, namespaces, the peers' packages), otherwise in the simulator, saying why.
pub fn demo(a: DemoArgs) -> anyhow::Result<()> {
    if !a.sim {
        match super::testbed::demo(a.runs.unwrap_or(DEMO_TESTBED_RUNS), a.duration_s) {
            Ok(result) => return result,
            Err(why) => eprintln!("braid demo: not on the testbed ({why}); running the simulator instead"),
        }
    }
    let scenario = Scenario::default_bus();
    eprintln!(
        "braid demo: the PluriBus bus (WiMax-like + EVDO-like uplinks, bursty short TCP flows) in the simulator, {} runs x {} schemes",
        a.runs.unwrap_or(scenario.runs),
        scenario.schemes.len()
    );
    let report = run_with_progress(&scenario, &RunOptions { runs: a.runs, seed: None, jobs: a.jobs }, false)?;
    print_report(&report, false, false, &[]);
    Ok(())
}

/// Runs of the demo on the testbed (each `duration_s` of real time, contenders side by side).
const DEMO_TESTBED_RUNS: u32 = 3;

/// A progress bar of runs on stderr, `None` when stderr is not a terminal or output is `quiet`
/// (JSON). Shared by `braid sim` and `braid testbed`.
pub(crate) fn progress_bar(message: String, quiet: bool) -> Option<ProgressBar> {
    (std::io::stderr().is_terminal() && !quiet).then(|| {
        let b = ProgressBar::new(0);
        b.set_style(
            ProgressStyle::with_template("{spinner} {msg} [{bar:30}] {pos}/{len} runs, {elapsed} elapsed, ~{eta} left")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        b.set_message(message);
        b
    })
}

fn run_with_progress(scenario: &Scenario, opts: &RunOptions, quiet: bool) -> anyhow::Result<SimReport> {
    let bar = progress_bar(format!("simulating {}", scenario.name), quiet);
    let progress = |done: usize, total: usize| {
        if let Some(b) = &bar {
            b.set_length(total as u64);
            b.set_position(done as u64);
        }
    };
    let report = run_scenario(scenario, opts, &progress)?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    Ok(report)
}

pub(crate) fn print_report(report: &SimReport, json: bool, verbose: bool, versus: &[Versus]) {
    if json {
        println!("{}", serde_json::to_string_pretty(&report::json(report, versus)).unwrap_or_default());
        return;
    }
    println!("{}", report::table(report, versus));
    if verbose {
        println!("{}", report::link_table(report));
    }
}

/// The `--json` object with `"provenance"` added.
pub fn json_with_provenance(report: &SimReport, versus: &[Versus], provenance: &Provenance) -> serde_json::Value {
    let mut v = report::json(report, versus);
    if let serde_json::Value::Object(m) = &mut v {
        m.insert("provenance".into(), serde_json::to_value(provenance).unwrap_or_default());
    }
    v
}

pub(crate) fn write_outputs(report: &SimReport, dir: &std::path::Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut files = report::write_csv(report, dir).with_context(|| format!("writing CSV into {}", dir.display()))?;
    files.extend(report::write_plots(report, dir)?);
    eprintln!("wrote {} files into {}", files.len(), dir.display());
    Ok(())
}
