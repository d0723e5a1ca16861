//! The simulator's input files: scenario TOML (`braid_sim::scenario`), per-second schedule CSV and
//! mahimahi traces (`braid_sim::link::spec`).

use super::{Target, Verdict, text};
use braid_sim::link::{LinkModel, Schedule, Trace};
use braid_sim::scenario::Scenario;
use std::path::Path;

/// The repository's scenario directory: relative trace and schedule paths in the seeds resolve
/// against it, as they do for `braid sim scenarios/x.toml`.
const SCENARIOS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios");

/// Scenario files.
pub(super) const SCENARIO: Target = Target {
    name: "sim-scenario",
    about: "Scenario::from_str (links, workload, schemes, tcp, sweeps), expand_sweep",
    text: true,
    max_len: 8192,
    run: scenario,
    seeds: || {
        vec![
            include_str!("../../../../scenarios/bus.toml"),
            include_str!("../../../../scenarios/bus-short-flows.toml"),
            include_str!("../../../../scenarios/fig10-gilbert-sweep.toml"),
            include_str!("../../../../scenarios/fig7b-load-scaling.toml"),
            include_str!("../../../../scenarios/fmtcp-fig11.toml"),
            include_str!("../../../../scenarios/fmtcp-table2-case1.toml"),
            include_str!("../../../../scenarios/fmtcp-table2-case5.toml"),
            include_str!("../../../../scenarios/natalie-fig7.toml"),
        ]
        .into_iter()
        .map(|s| s.as_bytes().to_vec())
        .collect()
    },
};

/// Schedule CSV.
pub(super) const SCHEDULE: Target = Target {
    name: "sim-schedule",
    about: "link::Schedule::parse (t_s,delay_ms,loss,rate_kbps CSV) and Schedule::at",
    text: true,
    max_len: 4096,
    run: schedule,
    seeds: || {
        vec![
            include_str!("../../../../scenarios/natalie-fig7-link0.csv").as_bytes().to_vec(),
            include_str!("../../../../scenarios/fmtcp-fig11-link2.csv").as_bytes().to_vec(),
            b"t_s,delay_ms,loss,rate_kbps\n0,20,0.01,1000\n5,,0.2,\n10,40,,500\n".to_vec(),
        ]
    },
};

/// Mahimahi traces.
pub(super) const TRACE: Target = Target {
    name: "sim-trace",
    about: "link::Trace::parse (mahimahi: one ms timestamp per line) and mean_kbps",
    text: true,
    max_len: 4096,
    run: trace,
    seeds: || vec![b"1\n1\n2\n\n4\n".to_vec(), b"0\n5\n5\n5\n17\n17\n23\n40\n".to_vec(), b"1000\n".to_vec()],
};

fn scenario(input: &[u8]) -> Verdict {
    let Ok(s) = Scenario::from_str(&text(input), Path::new(SCENARIOS)) else { return Verdict::Rejected };
    for (_, point) in s.expand_sweep() {
        let _ = point.workload.mean_rate_kbps();
        for l in &point.links {
            let _ = (l.down.rate.mean_kbps(), l.up.rate.mean_kbps(), l.down.loss.mean_loss(), l.up.loss.mean_loss());
            // Parse, don't validate: whatever parses must build a link model.
            let _ = (LinkModel::<()>::new(&l.down, 1), LinkModel::<()>::new(&l.up, 2));
        }
    }
    Verdict::Accepted
}

fn schedule(input: &[u8]) -> Verdict {
    let Ok(s) = Schedule::parse("fuzz.csv", &text(input)) else { return Verdict::Rejected };
    for r in &s.rows {
        assert!(r.t_s.is_finite() && r.t_s >= 0.0);
        assert!(r.loss.is_none_or(|l| (0.0..=1.0).contains(&l)));
        let _ = s.at(r.t_s);
    }
    assert!(s.rows.windows(2).all(|w| w[0].t_s <= w[1].t_s), "rows sorted");
    Verdict::Accepted
}

fn trace(input: &[u8]) -> Verdict {
    let Ok(t) = Trace::parse("fuzz.trace", &text(input)) else { return Verdict::Rejected };
    assert!(t.period_ms >= 1 && !t.opportunities_ms.is_empty());
    assert!(t.mean_kbps().is_finite());
    Verdict::Accepted
}
