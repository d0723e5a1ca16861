//! Paper 002's single drive-by pass (scenarios/drive-by-pass.toml), bulk download over WiFi alone,
//! in virtual time: braid against end-to-end TCP with no recovery, as shares of the pass's
//! potential (the integral of the rate the model allows).

use braid_sim::runner::{RunOptions, run_scenario};
use braid_sim::scenario::Scenario;
use std::path::Path;

fn scenario(file: &str) -> Scenario {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios").join(file);
    Scenario::from_file(&path).expect("shipped scenario parses")
}

#[test]
fn braid_moves_more_of_the_pass_than_plain_tcp() {
    let mut sc = scenario("drive-by-pass.toml");
    sc.schemes.retain(|s| s.name == "tcp" || s.name == "braid-arq");
    let report = run_scenario(&sc, &RunOptions { runs: Some(2), ..Default::default() }, &|_, _| {}).unwrap();
    for r in &report.runs {
        let series: Vec<String> = r.goodput_kbps_series.iter().map(|k| format!("{:.1}", k / 1000.0)).collect();
        println!("{} seed {}: share {:.3} series {}", r.scheme, r.seed, r.pass_share.unwrap_or(0.0), series.join(" "));
    }
    let share = |name: &str| {
        report.results.iter().find(|r| r.scheme == name).and_then(|r| r.pass_share).expect("bulk over a drive-by link")
    };
    for r in &report.results {
        println!("{}: mean pass share {:.3}", r.scheme, r.pass_share.unwrap_or(0.0));
    }
    // Plain TCP moves about half of the pass (paper 002: under 50 %); braid's ARQ, which hides the
    // fringe's losses from it, much more.
    assert!((0.3..0.7).contains(&share("tcp")), "tcp {}", share("tcp"));
    assert!(share("braid-arq") > share("tcp") + 0.2, "braid {} vs tcp {}", share("braid-arq"), share("tcp"));
}
