//! What a result came from: braid's version and git commit, the seeds, the host and the scenario
//! itself, recorded in `--json` and written beside `--out`'s files, so that a figure can be traced
//! to what produced it and run again.

use braid_sim::results::SimReport;
use braid_sim::scenario::Scenario;
use serde::Serialize;
use std::path::Path;

/// The provenance of one report.
#[derive(Debug, Clone, Serialize)]
pub struct Provenance {
    /// braid's version (Cargo.toml).
    pub braid_version: &'static str,
    /// The git commit braid was built from, or "unknown" outside a git checkout.
    pub git_commit: &'static str,
    /// The machine's host name.
    pub host: String,
    /// Every seed a run used, ascending (run `i` of each scheme uses the first plus `i`).
    pub seeds: Vec<u64>,
    /// The scenario file as given, or `null` for the embedded bus.
    pub scenario_file: Option<String>,
    /// The scenario's text, as read.
    pub scenario_toml: String,
}

/// The commit `build.rs` embedded.
pub const GIT_COMMIT: &str = env!("BRAID_GIT_COMMIT");

impl Provenance {
    /// The provenance of `report`, run from `file` (the embedded bus when `None`).
    pub fn new(file: Option<&Path>, report: &SimReport) -> anyhow::Result<Self> {
        use anyhow::Context as _;
        let scenario_toml = match file {
            Some(f) => std::fs::read_to_string(f).with_context(|| format!("reading {} again", f.display()))?,
            None => Scenario::default_bus_toml().to_string(),
        };
        let mut seeds: Vec<u64> = report.runs.iter().map(|r| r.seed).collect();
        seeds.sort_unstable();
        seeds.dedup();
        Ok(Provenance {
            braid_version: env!("CARGO_PKG_VERSION"),
            git_commit: GIT_COMMIT,
            host: host_name(),
            seeds,
            scenario_file: file.map(|f| f.display().to_string()),
            scenario_toml,
        })
    }

    /// Writes `provenance.json` and the scenario (`scenario.toml`) into `dir`; the paths written.
    pub fn write(&self, dir: &Path) -> anyhow::Result<Vec<std::path::PathBuf>> {
        let json = dir.join("provenance.json");
        std::fs::write(&json, serde_json::to_string_pretty(self)? + "\n")?;
        let toml = dir.join("scenario.toml");
        std::fs::write(&toml, &self.scenario_toml)?;
        Ok(vec![json, toml])
    }
}

/// The kernel's host name (Linux), else `$HOSTNAME`, else "unknown".
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown".into())
}
