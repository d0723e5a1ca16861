//! One grammar of scheme names: every spelling braid-proto lists reads the same from a scenario
//! file, a daemon config and `braid set`.

use crate::daemon::config::ClientConfig;
use crate::daemon::control::Request;
use braid_proto::scheme::Spelling;
use braid_proto::{RecoveryKind, SchedulerKind};
use braid_sim::scenario::{Scenario, SchemeKind};
use clap::Parser as _;

const CLIENT: &str = r#"
server = "192.0.2.1:7700"
private_key = "/etc/braid/client.key"
server_public_key = "hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo="
tun = { name = "braid0", address = "10.77.0.2/24" }
[[uplink]]
name = "lte1"
interface = "wwan0"
[session]
"#;

fn scenario(recovery: &str, scheduler: &str) -> SchemeKind {
    // Fixed-weight wrr needs its weights; every other scheduler refuses them.
    let weights = if scheduler == "wrr" { "weights = [1]\n" } else { "" };
    let text = format!(
        "name = \"g\"\nduration_s = 1\n[[link]]\nname = \"a\"\ndown = {{ rate_kbps = 1000 }}\nup = {{ rate_kbps = 100 }}\n\
         [workload]\nkind = \"bulk\"\n[[scheme]]\nname = \"s\"\nrecovery = \"{recovery}\"\nscheduler = \"{scheduler}\"\n{weights}"
    );
    Scenario::from_str(&text, std::path::Path::new(".")).unwrap_or_else(|e| panic!("{text}\n{e}")).schemes[0].kind
}

fn config(key: &str, name: &str) -> ClientConfig {
    let text = format!("{CLIENT}{key} = \"{name}\"\n");
    ClientConfig::parse(&text).unwrap_or_else(|e| panic!("{text}\n{e:#}"))
}

/// What the daemon receives for `braid set ARGS`: parsed by the command line, sent as JSON and
/// read back on the control socket.
fn set(args: &[&str]) -> Request {
    let cli = crate::Cli::try_parse_from(["braid", "set"].iter().chain(args)).expect("braid set parses");
    let crate::Command::Set(a) = cli.command else { panic!("not set") };
    let sent = serde_json::to_string(&super::daemon::request_for(a.what, a.peer)).unwrap();
    serde_json::from_str(&sent).unwrap_or_else(|e| panic!("{sent}: {e}"))
}

fn examples<K>(table: &[Spelling<K>]) -> Vec<String> {
    table.iter().map(Spelling::example).collect()
}

#[test]
fn every_scheme_name_reads_the_same_in_scenarios_configs_and_braid_set() {
    for name in examples(RecoveryKind::SPELLINGS) {
        let want: RecoveryKind = name.parse().unwrap();
        assert_eq!(
            scenario(&name, "min-delay"),
            SchemeKind::Braid { recovery: want, scheduler: SchedulerKind::MinDelay }
        );
        assert_eq!(config("recovery", &name).session.recovery(), want, "{name}");
        let Request::SetRecovery { name: got, .. } = set(&["recovery", &name]) else { panic!("{name}") };
        assert_eq!(got.0, want, "{name}");
    }
    for name in examples(SchedulerKind::SPELLINGS) {
        let want: SchedulerKind = name.parse().unwrap();
        assert_eq!(scenario("oec", &name), SchemeKind::Braid { recovery: RecoveryKind::Oec, scheduler: want });
        assert_eq!(config("scheduler", &name).session.scheduler(), want, "{name}");
        let Request::SetScheduler { name: got, .. } = set(&["scheduler", &name]) else { panic!("{name}") };
        assert_eq!(got.0, want, "{name}");
    }
}

#[test]
fn old_spellings_are_refused_everywhere_with_the_new_one() {
    let e = format!("{:#}", ClientConfig::parse(&format!("{CLIENT}recovery = \"fec10\"\n")).unwrap_err());
    assert!(e.contains("\"fec:10\"") && e.contains("line 10"), "{e}");
    let e = crate::Cli::try_parse_from(["braid", "set", "scheduler", "wrr-auto"]).unwrap_err().to_string();
    assert!(e.contains("\"wrr:auto\""), "{e}");
    let e = serde_json::from_str::<Request>(r#"{"cmd":"set_recovery","name":"rlnc2"}"#).unwrap_err().to_string();
    assert!(e.contains("\"rlnc:2\""), "{e}");
}

#[test]
fn help_lists_every_scheme_name() {
    let help = |what: &str| match crate::Cli::try_parse_from(["braid", "set", what, "--help"]) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("--help prints help"),
    };
    let (r, s) = (help("recovery"), help("scheduler"));
    for sp in RecoveryKind::SPELLINGS {
        assert!(r.contains(&sp.pattern()) && r.contains(sp.help), "{r}");
    }
    for sp in SchedulerKind::SPELLINGS {
        assert!(s.contains(&sp.pattern()), "{s}");
    }
}

#[test]
fn json_and_out_carry_version_commit_seeds_host_and_the_scenario() {
    use super::provenance::{GIT_COMMIT, Provenance};
    use braid_sim::runner::{RunOptions, run_scenario};
    let dir = std::env::temp_dir().join(format!("braid-provenance-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("tiny.toml");
    let text = "name = \"tiny\"\nduration_s = 2\nruns = 2\nseed = 40\n[[link]]\nname = \"a\"\ndown = { rate_kbps = 1000 }\n\
                up = { rate_kbps = 100 }\n[workload]\nkind = \"bulk\"\n[[scheme]]\nname = \"s\"\nrecovery = \"fec:10\"\n";
    std::fs::write(&file, text).unwrap();
    let sc = Scenario::from_file(&file).unwrap();
    let report = run_scenario(&sc, &RunOptions { seed: Some(7), ..Default::default() }, &|_, _| {}).unwrap();
    let p = Provenance::new(Some(&file), &report).unwrap();
    let v = super::sim::json_with_provenance(&report, &[], &p);
    let p = &v["provenance"];
    assert_eq!(p["braid_version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(p["git_commit"], GIT_COMMIT);
    // Built from this repository's checkout: a full commit hash.
    assert!(GIT_COMMIT == "unknown" || (GIT_COMMIT.len() == 40 && GIT_COMMIT.chars().all(|c| c.is_ascii_hexdigit())));
    assert_eq!(p["seeds"], serde_json::json!([7, 8]), "--seed 7, two runs");
    assert!(!p["host"].as_str().unwrap().is_empty());
    assert_eq!(p["scenario_toml"], text);
    let out = dir.join("out");
    std::fs::create_dir_all(&out).unwrap();
    Provenance::new(Some(&file), &report).unwrap().write(&out).unwrap();
    assert_eq!(std::fs::read_to_string(out.join("scenario.toml")).unwrap(), text);
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("provenance.json")).unwrap()).unwrap();
    assert_eq!(&written, p);
    let _ = std::fs::remove_dir_all(&dir);
}

#[derive(clap::Parser)]
struct PeerCli {
    #[command(flatten)]
    peer: super::daemon::PeerArgs,
}

#[test]
fn braid_peer_sends_a_checked_entry() {
    let parse = |args: &[&str]| {
        let a = PeerCli::try_parse_from(std::iter::once("peer").chain(args.iter().copied())).expect("arguments");
        super::daemon::peer_request(a.peer.what)
    };
    let key = "hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo=";
    let r = parse(&["add", "bus-19", "--public-key", key, "--allowed-ips", "10.77.0.4/32,192.168.19.0/24"]).unwrap();
    let json = serde_json::to_string(&r).unwrap();
    assert!(json.starts_with(r#"{"cmd":"peer_add","entry":{"name":"bus-19""#), "{json}");
    assert!(json.contains(r#""allowed_ips":["10.77.0.4/32","192.168.19.0/24"]"#), "{json}");
    // Read back as the server does.
    assert!(
        matches!(serde_json::from_str::<Request>(&json).unwrap(), Request::PeerAdd { entry } if entry.name == "bus-19")
    );
    // A bad network or key is refused before anything is sent, naming it.
    let e = parse(&["add", "bus-19", "--public-key", key, "--allowed-ips", "10.77.0.4/24"]).unwrap_err().to_string();
    assert!(e.contains("bus-19") && e.contains("host bits"), "{e}");
    let e = parse(&["add", "bus-19", "--public-key", "nope", "--allowed-ips", "10.77.0.4/32"]).unwrap_err().to_string();
    assert!(e.contains("bus-19"), "{e}");
    let r = parse(&["remove", "bus-17"]).unwrap();
    assert_eq!(serde_json::to_string(&r).unwrap(), r#"{"cmd":"peer_remove","name":"bus-17"}"#);
}

/// `braid sim` on a testbed file with a sweep: the peers leave every sweep point, not only the
/// top-level scheme list, or the runner meets them at the first point and refuses the file.
#[test]
fn braid_sim_takes_the_peers_out_of_every_sweep_point() {
    let text = "name = \"g\"\nduration_s = 1\n[[link]]\nname = \"a\"\ndown = { rate_kbps = 1000, delay_ms = 10 }\n\
                up = { rate_kbps = 1000, delay_ms = 10 }\n[sweep]\nkeys = [\"link.a.down.delay_ms\"]\nvalues = [10, 20]\n\
                [workload]\nkind = \"bulk\"\n[[scheme]]\nname = \"default\"\n[[scheme]]\nname = \"plain\"\npeer = \"plain\"\n";
    let mut sc = Scenario::from_str(text, std::path::Path::new(".")).unwrap_or_else(|e| panic!("{text}\n{e}"));
    assert_eq!(super::sim::without_peers(&mut sc), vec!["plain".to_string()]);
    let points = sc.expand_sweep();
    assert_eq!(points.len(), 2);
    for (value, point) in &points {
        let names: Vec<&str> = point.schemes.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["default"], "sweep point {value:?}");
    }
}

#[test]
fn an_error_names_each_cause_once() {
    use anyhow::Context as _;
    let dir = std::env::temp_dir().join(format!("braid-chain-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("s.toml");
    std::fs::write(
        &file,
        "name = \"g\"\nduration_s = 1\n[[link]]\nname = \"a\"\n\
         down = { rate_kbps = 1000, schedule = \"gone.csv\" }\nup = { rate_kbps = 100 }\n\
         [workload]\nkind = \"bulk\"\n[[scheme]]\nname = \"s\"\n",
    )
    .unwrap();
    let e = Scenario::from_file(&file).with_context(|| format!("scenario {}", file.display())).unwrap_err();
    let msg = super::error_chain(&e);
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(msg.starts_with("scenario ") && msg.contains("link.a.down.schedule") && msg.contains("gone.csv"), "{msg}");
    // The OS error once; anyhow's own `{:#}` says it three times.
    assert_eq!(msg.matches("os error 2").count(), 1, "{msg}");
    assert_eq!(format!("{e:#}").matches("os error 2").count(), 3, "{e:#}");
}
