//! `braid testbed`: a scenario's contenders on real kernels over emulated links; and the demo's
//! testbed half.

use super::sim::ScenarioArgs;
use anyhow::Context;
use braid_sim::results::SimReport;
use braid_sim::scenario::{Peer, Scenario, SchemeKind, SchemeSpec};
use braid_testbed::{TestbedOptions, accuracy, hosts, netns, run_testbed};
use clap::Args;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// Arguments of `braid testbed`.
#[derive(Args, Debug)]
pub struct TestbedArgs {
    #[command(flatten)]
    pub scenario: ScenarioArgs,
    /// Seconds of workload per run (overrides the file's `duration_s`; the testbed runs in real
    /// time).
    #[arg(long)]
    pub duration_s: Option<u64>,
    /// Contenders run side by side, each on its own namespaces (default: all).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Keep the configs and logs of every contender in this directory (default: a temporary
    /// directory removed on success).
    #[arg(long)]
    pub keep: Option<PathBuf>,
    /// Instead of a scenario, measure the emulator's accuracy (delay, rate, loss) and exit non-zero
    /// if a target is missed.
    #[arg(long, conflicts_with = "file")]
    pub accuracy: bool,
}

/// Ctrl-C and SIGTERM set the flag; the runs stop and everything is cleaned up.
fn stop_flag() -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let _ = signal_hook::flag::register(sig, stop.clone());
    }
    stop
}

/// The contenders' directory, absolute: nginx reads its configuration and logs from paths in it
/// and would take a relative one as relative to its own prefix (`/usr/share/nginx`).
fn work_dir(keep: &Option<PathBuf>) -> anyhow::Result<PathBuf> {
    let dir =
        keep.clone().unwrap_or_else(|| std::env::temp_dir().join(format!("braid-testbed-{}", std::process::id())));
    std::path::absolute(&dir).with_context(|| format!("--keep {}: cannot make the path absolute", dir.display()))
}

/// Runs `braid testbed`.
pub fn testbed(a: TestbedArgs) -> anyhow::Result<()> {
    if a.accuracy {
        return run_accuracy(&a);
    }
    let scenario = a.scenario.scenario()?;
    // The end hosts' kernels take [tcp] (braid_testbed::hosts); say what they cannot take.
    for w in hosts::unapplied(&scenario.tcp) {
        eprintln!("braid testbed: {w}");
    }
    a.scenario.check_versus(&scenario.schemes)?;
    let report = run(&scenario, &a, a.scenario.json)?;
    a.scenario.show(&report)
}

fn run(scenario: &Scenario, a: &TestbedArgs, quiet: bool) -> anyhow::Result<SimReport> {
    let dir = work_dir(&a.keep)?;
    let opts = TestbedOptions {
        runs: a.scenario.runs,
        seed: a.scenario.seed,
        duration: a.duration_s.map(Duration::from_secs),
        jobs: a.jobs,
        braid_bin: std::env::current_exe().context("locating the braid binary")?,
        work_dir: dir.clone(),
        stop: stop_flag(),
    };
    let bar = super::sim::progress_bar(format!("testbed: {} (real time)", scenario.name), quiet);
    if let Some(b) = &bar {
        // Runs take minutes of real time: keep the spinner and the clock moving between them.
        b.enable_steady_tick(Duration::from_millis(250));
    }
    let progress = |done: usize, total: usize| {
        if let Some(b) = &bar {
            b.set_length(total as u64);
            b.set_position(done as u64);
        }
    };
    let result = run_testbed(scenario, &opts, &progress);
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    match result {
        Ok(r) => {
            if a.keep.is_none() {
                let _ = std::fs::remove_dir_all(&dir);
            }
            Ok(r)
        }
        Err(e) => Err(e.context(format!("configs and logs kept in {}", dir.display()))),
    }
}

fn run_accuracy(a: &TestbedArgs) -> anyhow::Result<()> {
    netns::available().map_err(|e| anyhow::anyhow!(e))?;
    netns::sweep_stale();
    let dir = work_dir(&a.keep)?;
    let checks = accuracy::measure(&dir, 1.0)?;
    if a.keep.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    if a.scenario.json {
        let rows: Vec<_> = checks
            .iter()
            .map(|c| {
                serde_json::json!({ "what": c.what, "configured": c.configured, "measured": c.measured,
                    "tolerance": c.tolerance, "unit": c.unit, "pass": c.pass(), "detail": c.detail })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&rows).unwrap_or_default());
    } else {
        println!(
            "{:<26} {:>12} {:>12} {:>10}  {:<8} {:<5} detail",
            "check", "configured", "measured", "tolerance", "unit", "ok"
        );
        for c in &checks {
            println!(
                "{:<26} {:>12.4} {:>12.4} {:>10.4}  {:<8} {:<5} {}",
                c.what,
                c.configured,
                c.measured,
                c.tolerance,
                c.unit,
                if c.pass() { "yes" } else { "NO" },
                c.detail
            );
        }
    }
    let failed: Vec<&str> = checks.iter().filter(|c| !c.pass()).map(|c| c.what.as_str()).collect();
    anyhow::ensure!(failed.is_empty(), "emulator accuracy targets missed: {}", failed.join(", "));
    Ok(())
}

/// The demo on the testbed: the embedded bus with `plain`, `mptcp`, braid `oec` (the paper's
/// scheme) and braid's default (what a user gets without choosing), side by side.
/// `Err` with the reason when the testbed cannot run here (the caller falls back to the
/// simulator).
pub fn demo(runs: u32, duration_s: u64) -> Result<anyhow::Result<()>, String> {
    netns::available()?;
    // The bus's end hosts are the paper's of 2010 ([tcp]: RFC 2988's 3 s initial RTO, RFC 3390's
    // 3-segment initial window); the testbed gives the real kernels the same, the initial RTO
    // through a BPF program, so check that this kernel takes it before starting.
    let mut scenario = Scenario::default_bus();
    drop(hosts::HostTcp::new(&scenario.tcp).map_err(|e| super::error_chain(&e))?);
    let peer = |name: &str, p| SchemeSpec {
        name: name.into(),
        kind: SchemeKind::Peer(p),
        fec_percent: None,
        weights: None,
        hold: None,
        aqm: false,
        location: false,
    };
    let braid = |name: &str| {
        scenario
            .schemes
            .iter()
            .find(|s| s.name == name)
            .cloned()
            .ok_or(format!("the bus scenario has no {name} scheme"))
    };
    let (oec, default) = (braid("oec")?, braid("default")?);
    scenario.schemes = vec![peer("plain", Peer::Plain), peer("mptcp", Peer::Mptcp), oec, default];
    let missing = braid_testbed::run::missing_tools(&scenario);
    if !missing.is_empty() {
        let m: Vec<String> = missing.iter().map(|(c, p)| format!("{c} (package {p})")).collect();
        return Err(format!("missing {}; run scripts/testbed-deps.sh to install them", m.join(", ")));
    }
    eprintln!(
        "braid demo: the PluriBus bus on the real-kernel testbed (namespaces, emulated WiMax + EVDO links, curl against nginx): \
         plain TCP on the best uplink, kernel MPTCP, braid oec and braid's default side by side, {runs} runs of {duration_s} s in real time; \
         the end hosts are the paper's of 2010 (3 s initial RTO, 3-segment initial window)"
    );
    let args = TestbedArgs {
        scenario: ScenarioArgs { runs: Some(runs), ..ScenarioArgs::default() },
        duration_s: Some(duration_s),
        jobs: None,
        keep: None,
        accuracy: false,
    };
    Ok(run(&scenario, &args, false).and_then(|report| args.scenario.show(&report)))
}
