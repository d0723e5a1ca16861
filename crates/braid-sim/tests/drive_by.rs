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
    // Windows that fit the access point's queue (the simulator's default hosts), so that only the
    // fringe's wireless losses are lost: `arq` repairs overflows too, which a larger window makes
    // (the test below).
    sc.tcp.buffer_bytes = braid_sim::scenario::DEFAULT_BUFFER_KB as usize * 1000;
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

#[test]
fn the_default_lets_a_lone_links_overflows_reach_the_passengers_tcp() {
    // The pass's hosts have Linux's autotuned buffers (4 MiB): the download's window outgrows the
    // access point's 300 kB queue and overflows it. Repaired, the overflows hid the congestion
    // from the passenger's TCP, the queue stayed full and the falling rate of the exit went on
    // resends: 68.7 % of the pass (seeds 1-3). Given up to its TCP, which backs off: 78.2 % when
    // a full queue was judged by delay alone, under which the overflows on the climb to the
    // access point (a faster rate drains the same 300 kB sooner) were repaired into the full
    // queue and the passenger's TCP waited out timeouts; judged in bytes too, 85.7 %.
    let mut sc = scenario("drive-by-pass.toml");
    assert!(sc.tcp.buffer_bytes >= 4_000_000, "the shipped pass has Linux-sized buffers");
    sc.schemes.retain(|s| s.name == "default");
    let report = run_scenario(&sc, &RunOptions { runs: Some(3), ..Default::default() }, &|_, _| {}).unwrap();
    let share = report.results[0].pass_share.expect("bulk over a drive-by link");
    println!("default: mean pass share {share:.3}, resent {}", report.results[0].resent);
    assert!(share > 0.82, "default {share}");
}
