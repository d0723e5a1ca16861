//! Regression check for bonding out of the box: a short run of `scripts/bench-bond.sh` (real
//! `braid client` / `braid server` with the default configuration, two veth uplinks shaped by `tbf`
//! to 15 and 10 Mbit/s, one iperf3 download for 8 s) must carry clearly more than the best uplink
//! alone could. Before capacity discovery, the uplink whose estimate came from the trickle it
//! carried before traffic started stayed unused (20 + 5 Mbit/s carried 4.95-11).
//!
//! A loose bound, not a benchmark: the full measurement is `scripts/bench-bond.sh`. Needs root,
//! network namespaces, `tc` and iperf3; skips with a message otherwise.

use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_braid");

fn have(cmd: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {cmd} || test -x /usr/sbin/{cmd}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn two_unequal_uplinks_carry_more_than_the_best_one() {
    let root = Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if !root {
        eprintln!("SKIP bond_netns: needs root for network namespaces, TUN and tc");
        return;
    }
    for cmd in ["iperf3", "tc", "ip", "ping", "python3"] {
        if !have(cmd) {
            eprintln!("SKIP bond_netns: {cmd} is missing (scripts/testbed-deps.sh installs it)");
            return;
        }
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/bench-bond.sh");
    let out = Command::new("bash")
        .arg(&script)
        .args(["1", "8"])
        .env("BIN", BIN)
        .env("CASES", "15+10")
        .env("TESTS", "down1")
        .env("DROP", "0")
        .output()
        .expect("run bench-bond.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "bench-bond.sh failed:\n{stdout}\n{stderr}");
    println!("{stdout}");
    let row = stdout
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.len() > 3 && f[0] == "15+10" && f[1] == "down1")
        .unwrap_or_else(|| panic!("no result row in:\n{stdout}\n{stderr}"));
    let mbps: f64 = row[3].parse().expect("Mbit/s");
    // The best uplink alone carries at most 15 Mbit/s of frames, about 13.8 of TCP payload through
    // the tunnel; the pair at most about 23.
    assert!(mbps >= 1.2 * 15.0, "15 + 10 Mbit/s carried {mbps:.2} Mbit/s, less than 1.2x the best uplink\n{stderr}");
}
