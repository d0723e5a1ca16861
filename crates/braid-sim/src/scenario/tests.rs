//! Scenario parsing tests: every key, every error class (with its key and line), sweeps, relative
//! paths, the shipped scenario files, and never panicking.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::*;
use crate::link::{LossSpec, RateSpec};

/// A fresh empty directory under the system temp dir (no tempfile crate in the workspace).
fn temp_dir(tag: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "braid-scenario-{}-{tag}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// 1-based line of the first line containing `needle`.
fn line_of(text: &str, needle: &str) -> usize {
    text.lines().position(|l| l.contains(needle)).unwrap_or_else(|| panic!("{needle:?} not in text")) + 1
}

fn parse(text: &str) -> Result<Scenario, ScenarioError> {
    Scenario::from_str(text, Path::new("/nonexistent-base"))
}

/// Asserts that `text` is rejected with an error naming `key` at the line containing `marker`,
/// and whose message contains `says`.
#[track_caller]
fn assert_rejects(text: &str, key: &str, marker: &str, says: &str) {
    let e = parse(text).expect_err("should be rejected");
    let shown = e.to_string();
    assert_eq!(e.key(), Some(key), "{shown}");
    assert_eq!(e.line(), Some(line_of(text, marker)), "{shown}");
    assert!(shown.contains(says), "{shown:?} should say {says:?}");
}

/// A small valid scenario; tests append to or edit it.
const MINIMAL: &str = r#"name = "min"
duration_s = 10

[[link]]
name = "a"
down = { rate_kbps = 1000 }
up = { rate_kbps = 100 }

[workload]
kind = "bulk"

[[scheme]]
name = "oec"
recovery = "oec"
"#;

fn with(replace: &str, by: &str) -> String {
    assert!(MINIMAL.contains(replace), "{replace:?}");
    MINIMAL.replacen(replace, by, 1)
}

#[test]
fn minimal_scenario_gets_documented_defaults() {
    let s = parse(MINIMAL).unwrap();
    assert_eq!(s.name, "min");
    assert_eq!(s.duration, Duration::from_secs(10));
    assert_eq!((s.runs, s.seed), (DEFAULT_RUNS, DEFAULT_SEED));
    let d = &s.links[0].down;
    assert_eq!(d.rate, RateSpec::Constant { kbps: 1000.0 });
    assert_eq!(d.delay, Duration::ZERO);
    assert_eq!(d.queue_bytes, 64_000);
    assert_eq!(d.loss, LossSpec::None);
    assert!(d.schedule.is_none() && d.outages.is_empty());
    assert_eq!(s.workload, WorkloadSpec::Bulk { direction: Direction::Down, flows: 1 });
    assert_eq!(
        s.schemes[0].kind,
        SchemeKind::Braid { recovery: RecoveryKind::Oec, scheduler: SchedulerKind::MinDelay }
    );
    assert_eq!((s.schemes[0].fec_percent, &s.schemes[0].weights, s.schemes[0].hold), (None, &None, None));
    assert_eq!(
        s.tcp,
        TcpSpec { congestion: Congestion::Cubic, mss: 1360, buffer_bytes: 256_000, ..TcpSpec::default() }
    );
    assert_eq!(
        (s.tcp.initial_rto, s.tcp.min_rto, s.tcp.initial_window),
        (Duration::from_secs(1), Duration::from_millis(200), 14_600)
    );
    assert!(s.sweep.is_none());
    assert_eq!(s.expand_sweep(), vec![(None, s.clone())]);
}

#[test]
fn every_key_round_trips() {
    let dir = temp_dir("keys");
    std::fs::write(dir.join("cap.trace"), "1\n2\n3\n4\n").unwrap();
    std::fs::write(dir.join("s.csv"), "t_s,delay_ms,loss,rate_kbps\n0,30,0.1,500\n").unwrap();
    let text = r#"
name = "all"
duration_s = 12.5
runs = 3
seed = 99

[[link]]
name = "w"
outages = [ { at_s = 50, for_s = 1 } ]
down = { rate_kbps = 1500, delay_ms = 20.5, queue_kb = 1.5, loss = { model = "bernoulli", p = 0.05 }, outages = [ { at_s = 60, for_s = 5 }, { at_s = 10, for_s = 0.5 } ] }
up = { trace = "cap.trace", delay_ms = 7, queue_kb = 32, schedule = "s.csv", loss = { model = "gilbert", p_gb = 0.05, p_bg = 0.5, loss_good = 0.01, loss_bad = 0.3 } }

[[link]]
name = "e"
down = { rate_kbps = 900, loss = { model = "none" } }
up = { rate_kbps = 250, loss = { model = "gilbert", p_gb = 0.1, p_bg = 0.2 } }

[workload]
kind = "flows"
direction = "both"
size_bytes = { dist = "pareto", scale = 1000, shape = 1.5, max = 1e6 }
interarrival_s = { dist = "uniform", min = 0.1, max = 0.3 }
scale = 2.5

[[scheme]]
name = "w1"
recovery = "rlnc"
scheduler = "wrr"
weights = [2, 1]
hold_ms = 30

[[scheme]]
name = "w2"
recovery = "dup"
scheduler = "wrr:auto"

[[scheme]]
name = "f"
recovery = "fec:250"
scheduler = "eat"

[[scheme]]
name = "kcp"
peer = "kcptun"
fec_percent = 30

[[scheme]]
name = "mp"
peer = "mptcp"

[tcp]
congestion = "reno"
mss = 1200
buffer_kb = 100
initial_rto_ms = 3000
min_rto_ms = 300
initial_window_bytes = 4380
sack = true
hystart = true
linux_rto = true
byte_counting = true
rack = true
whole_segments = false
"#;
    let s = Scenario::from_str(text, &dir).unwrap();
    assert_eq!((s.name.as_str(), s.duration, s.runs, s.seed), ("all", Duration::from_millis(12_500), 3, 99));
    assert_eq!(s.base_dir, dir);

    let w = &s.links[0];
    assert_eq!(w.name, "w");
    assert_eq!(w.down.rate, RateSpec::Constant { kbps: 1500.0 });
    assert_eq!(w.down.delay, Duration::from_micros(20_500));
    assert_eq!(w.down.queue_bytes, 1500);
    assert_eq!(w.down.loss, LossSpec::Bernoulli { p: 0.05 });
    // Direction outages plus the link's, sorted by start.
    let starts: Vec<_> = w.down.outages.iter().map(|o| (o.at.as_secs_f64(), o.duration.as_secs_f64())).collect();
    assert_eq!(starts, vec![(10.0, 0.5), (50.0, 1.0), (60.0, 5.0)]);
    let RateSpec::Trace(t) = &w.up.rate else { panic!("up should be a trace: {:?}", w.up.rate) };
    assert_eq!(t.opportunities_ms, vec![1, 2, 3, 4]);
    assert_eq!(w.up.delay, Duration::from_millis(7));
    assert_eq!(w.up.queue_bytes, 32_000);
    assert_eq!(w.up.schedule.as_ref().unwrap().rows[0].rate_kbps, Some(500.0));
    assert_eq!(w.up.loss, LossSpec::Gilbert { p_gb: 0.05, p_bg: 0.5, loss_good: 0.01, loss_bad: 0.3 });
    assert_eq!(w.up.outages.len(), 1);

    let e = &s.links[1];
    assert_eq!(e.down.loss, LossSpec::None);
    assert_eq!(e.up.loss, LossSpec::Gilbert { p_gb: 0.1, p_bg: 0.2, loss_good: 0.0, loss_bad: 1.0 });

    assert_eq!(
        s.workload,
        WorkloadSpec::Flows {
            direction: Direction::Both,
            size_bytes: Dist::Pareto { scale: 1000.0, shape: 1.5, max: Some(1e6) },
            interarrival_s: Dist::Uniform { min: 0.1, max: 0.3 },
            scale: 2.5,
        }
    );

    let by_name = |n: &str| s.schemes.iter().find(|x| x.name == n).unwrap();
    let w1 = by_name("w1");
    let rlnc = RecoveryKind::Rlnc { ahead_percent: 0.0 };
    assert_eq!(w1.kind, SchemeKind::Braid { recovery: rlnc, scheduler: SchedulerKind::Wrr { auto: false } });
    assert_eq!(w1.weights, Some(vec![2.0, 1.0]));
    assert_eq!(w1.hold, Some(Duration::from_millis(30)));
    let w2 = by_name("w2");
    assert_eq!(
        w2.kind,
        SchemeKind::Braid { recovery: RecoveryKind::Dup, scheduler: SchedulerKind::Wrr { auto: true } }
    );
    assert_eq!(w2.weights, None);
    let fec = RecoveryKind::Fec { percent: 250.0 };
    assert_eq!(by_name("f").kind, SchemeKind::Braid { recovery: fec, scheduler: SchedulerKind::Eat });
    assert_eq!(by_name("f").fec_percent, None);
    assert_eq!(by_name("kcp").kind, SchemeKind::Peer(Peer::Kcptun));
    assert_eq!(by_name("kcp").fec_percent, Some(30.0));
    assert_eq!(by_name("mp").kind, SchemeKind::Peer(Peer::Mptcp));
    assert_eq!(
        s.tcp,
        TcpSpec {
            congestion: Congestion::Reno,
            mss: 1200,
            buffer_bytes: 100_000,
            initial_rto: Duration::from_secs(3),
            min_rto: Duration::from_millis(300),
            initial_window: 4380,
            sack: true,
            hystart: true,
            linux_rto: true,
            byte_counting: true,
            rack: true,
            whole_segments: false,
        }
    );
}

#[test]
fn every_name_parses_back_to_itself() {
    for r in RecoveryKind::SPELLINGS {
        let r = r.example();
        let text = with("recovery = \"oec\"", &format!("recovery = \"{r}\""));
        let want = SchemeKind::Braid { recovery: r.parse().unwrap(), scheduler: SchedulerKind::MinDelay };
        assert_eq!(parse(&text).unwrap().schemes[0].kind, want);
    }
    for s in SchedulerKind::SPELLINGS {
        let s = s.example();
        let weights = if s == "wrr" { "\nweights = [1]" } else { "" };
        let text = with("recovery = \"oec\"", &format!("recovery = \"none\"\nscheduler = \"{s}\"{weights}"));
        assert_eq!(
            parse(&text).unwrap().schemes[0].kind,
            SchemeKind::Braid { recovery: RecoveryKind::None, scheduler: s.parse().unwrap() }
        );
    }
    for p in Peer::ALL {
        let text = with("recovery = \"oec\"", &format!("peer = \"{p}\""));
        assert_eq!(parse(&text).unwrap().schemes[0].kind, SchemeKind::Peer(*p));
    }
    for d in Direction::ALL {
        let text = with("kind = \"bulk\"", &format!("kind = \"bulk\"\ndirection = \"{d}\"\nflows = 4"));
        assert_eq!(parse(&text).unwrap().workload, WorkloadSpec::Bulk { direction: *d, flows: 4 });
    }
}

#[test]
fn workload_kinds_and_dists_parse() {
    let text = with("kind = \"bulk\"", "kind = \"cbr\"\nrate_kbps = 64\npacket_bytes = 160\ndirection = \"up\"");
    assert_eq!(
        parse(&text).unwrap().workload,
        WorkloadSpec::Cbr { direction: Direction::Up, rate_kbps: 64.0, packet_bytes: 160 }
    );
    let text = with("kind = \"bulk\"", "kind = \"cbr\"\nrate_kbps = 64");
    assert_eq!(parse(&text).unwrap().workload.mean_rate_kbps(), Some(64.0));

    let flows = |size: &str, gap: &str| {
        let text = with("kind = \"bulk\"", &format!("kind = \"flows\"\nsize_bytes = {size}\ninterarrival_s = {gap}"));
        match parse(&text).unwrap().workload {
            WorkloadSpec::Flows { size_bytes, interarrival_s, scale, direction } => {
                assert_eq!((scale, direction), (1.0, Direction::Down));
                (size_bytes, interarrival_s)
            }
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(
        flows("{ dist = \"lognormal\", median = 8000, sigma = 1.8 }", "{ dist = \"fixed\", value = 2 }"),
        (Dist::LogNormal { median: 8000.0, sigma: 1.8, max: None }, Dist::Fixed { value: 2.0 })
    );
    assert_eq!(
        flows(
            "{ dist = \"lognormal\", median = 8000, sigma = 1.8, max = 5_000_000 }",
            "{ dist = \"exponential\", mean = 0.6 }"
        ),
        (Dist::LogNormal { median: 8000.0, sigma: 1.8, max: Some(5e6) }, Dist::Exponential { mean: 0.6 })
    );
    assert_eq!(
        flows("{ dist = \"pareto\", scale = 100, shape = 2.5 }", "{ dist = \"uniform\", min = 0, max = 1 }").0,
        Dist::Pareto { scale: 100.0, shape: 2.5, max: None }
    );
}

#[test]
fn unknown_top_level_key_is_named_with_its_line() {
    let text = with("duration_s = 10", "duration_s = 10\nreport = 1");
    assert_rejects(&text, "report", "report = 1", "unknown field `report`");
}

#[test]
fn unknown_key_in_a_link_direction_is_named_with_its_line() {
    let text = with("up = { rate_kbps = 100 }", "up = { rate_kbps = 100, jitter_ms = 3 }");
    assert_rejects(&text, "link.a.up.jitter_ms", "jitter_ms", "unknown field `jitter_ms`");
    // The same inside a [link.down] style sub-table.
    let text = with(
        "down = { rate_kbps = 1000 }\nup = { rate_kbps = 100 }",
        "\n[link.down]\nrate_kbps = 1000\n\ndelai_ms = 5\n\n[link.up]\nrate_kbps = 100",
    );
    assert_rejects(&text, "link.a.down.delai_ms", "delai_ms", "unknown field `delai_ms`");
}

#[test]
fn unknown_key_in_loss_is_named_with_its_line() {
    let text =
        with("up = { rate_kbps = 100 }", "up = { rate_kbps = 100,\n  loss = { model = \"bernoulli\",\n    q = 0.1 } }");
    assert_rejects(&text, "link.a.up.loss.q", "q = 0.1", "unknown field `q`");
    // A key of another model is not silently ignored.
    let text = with(
        "up = { rate_kbps = 100 }",
        "up = { rate_kbps = 100, loss = { model = \"gilbert\", p = 0.1, p_gb = 0.1, p_bg = 0.1 } }",
    );
    assert_rejects(&text, "link.a.up.loss.p", "gilbert", "does not apply to model \"gilbert\"");
    let text = with("up = { rate_kbps = 100 }", "up = { rate_kbps = 100, loss = { model = \"markov\" } }");
    assert_rejects(&text, "link.a.up.loss.model", "markov", "valid: none, bernoulli, gilbert");
}

#[test]
fn unknown_key_in_a_scheme_is_named_with_its_line() {
    let text = format!("{MINIMAL}\n[[scheme]]\nname = \"second\"\nrecovery = \"arq\"\nretries = 3\n");
    assert_rejects(&text, "scheme.second.retries", "retries", "unknown field `retries`");
}

#[test]
fn wrong_type_is_named_with_its_line() {
    let text = with("down = { rate_kbps = 1000 }", "down = { rate_kbps = 1000, delay_ms = \"20\" }");
    assert_rejects(&text, "link.a.down.delay_ms", "delay_ms", "invalid type");
    let text = with("duration_s = 10", "duration_s = 10\nruns = 2.5");
    assert_rejects(&text, "runs", "runs", "invalid type");
    let text = with("name = \"oec\"", "name = \"oec\"\nweights = 3");
    assert_rejects(&text, "scheme.oec.weights", "weights", "array");
}

#[test]
fn out_of_range_values_are_named_with_their_line() {
    let text = with("up = { rate_kbps = 100 }", "up = { rate_kbps = 100, loss = { model = \"bernoulli\", p = 1.5 } }");
    assert_rejects(&text, "link.a.up.loss.p", "p = 1.5", "within [0, 1]");
    let text = with(
        "up = { rate_kbps = 100 }",
        "up = { rate_kbps = 100, loss = { model = \"gilbert\", p_gb = 0.1, p_bg = -0.1 } }",
    );
    assert_rejects(&text, "link.a.up.loss.p_bg", "p_bg", "within [0, 1]");
    let text = with("up = { rate_kbps = 100 }", "up = { rate_kbps = nan }");
    assert_rejects(&text, "link.a.up.rate_kbps", "nan", "> 0");
    assert_rejects(&with("duration_s = 10", "duration_s = -1"), "duration_s", "duration_s", "> 0");
    assert_rejects(&with("duration_s = 10", "duration_s = 10\nruns = 0"), "runs", "runs", "at least 1");
    assert_rejects(&with("duration_s = 10", "duration_s = 10\nruns = -2"), "runs", "runs", "invalid value");
    let text = with("down = { rate_kbps = 1000 }", "down = { rate_kbps = 1000, queue_kb = 0 }");
    assert_rejects(&text, "link.a.down.queue_kb", "queue_kb", "> 0");
    let text =
        with("down = { rate_kbps = 1000 }", "down = { rate_kbps = 1000, outages = [ { at_s = 1, for_s = 0 } ] }");
    assert_rejects(&text, "link.a.down.outages[0].for_s", "outages", "> 0");
    let text = with(
        "kind = \"bulk\"",
        "kind = \"flows\"\nsize_bytes = { dist = \"pareto\", scale = 1, shape = 0.9 }\ninterarrival_s = { dist = \"fixed\", value = 1 }",
    );
    assert_rejects(&text, "workload.size_bytes.max", "pareto", "shape <= 1");
    let text = with(
        "kind = \"bulk\"",
        "kind = \"flows\"\nsize_bytes = { dist = \"fixed\", value = 1 }\ninterarrival_s = { dist = \"fixed\", value = 0 }",
    );
    assert_rejects(&text, "workload.interarrival_s", "interarrival_s", "mean must be > 0");
    assert_rejects(&format!("{MINIMAL}\n[tcp]\nmss = 10\n"), "tcp.mss", "mss", "at least 64");
    assert_rejects(&format!("{MINIMAL}\n[tcp]\ncongestion = \"bbr\"\n"), "tcp.congestion", "bbr", "valid: reno, cubic");
    assert_rejects(
        &format!("{MINIMAL}\n[tcp]\ninitial_rto_ms = 0\n"),
        "tcp.initial_rto_ms",
        "initial_rto_ms",
        "1..=60000",
    );
    assert_rejects(&format!("{MINIMAL}\n[tcp]\nmin_rto_ms = 0.5\n"), "tcp.min_rto_ms", "min_rto_ms", "whole number");
    assert_rejects(
        &format!("{MINIMAL}\n[tcp]\ninitial_window_bytes = 100\n"),
        "tcp.initial_window_bytes",
        "initial_window_bytes",
        "at least one segment",
    );
}

#[test]
fn missing_rate_is_named_at_its_direction() {
    let text = with("up = { rate_kbps = 100 }", "up = { delay_ms = 20 }");
    assert_rejects(&text, "link.a.up.rate_kbps", "up = {", "rate_kbps or trace");
    let text = with("up = { rate_kbps = 100 }", "up = { rate_kbps = 100, trace = \"t\" }");
    assert_rejects(&text, "link.a.up.trace", "up = {", "not both");
    let text = with("up = { rate_kbps = 100 }", "");
    assert_rejects(&text, "link.a.up", "[[link]]", "missing");
}

#[test]
fn structural_rules_are_enforced() {
    // Names.
    let text = format!("{MINIMAL}\n[[link]]\nname  = \"a\"\ndown = {{ rate_kbps = 1 }}\nup = {{ rate_kbps = 1 }}\n");
    assert_rejects(&text, "link[1].name", "name  = \"a\"", "duplicate link name");
    let text = format!("{MINIMAL}\n[[scheme]]\nname  = \"oec\"\nrecovery = \"arq\"\n");
    assert_rejects(&text, "scheme[1].name", "name  = \"oec\"", "duplicate scheme name");
    // At least one link and one scheme.
    let text = MINIMAL.replacen("[[link]]", "[[lnk]]", 1);
    assert!(parse(&text).is_err());
    let no_link = MINIMAL.replacen(
        "[[link]]\nname = \"a\"\ndown = { rate_kbps = 1000 }\nup = { rate_kbps = 100 }\n",
        "link = []\n",
        1,
    );
    assert_rejects(&no_link, "link", "link = []", "at least one");
    let no_scheme = MINIMAL.replacen("[[scheme]]\nname = \"oec\"\nrecovery = \"oec\"\n", "", 1);
    assert_rejects(&no_scheme, "scheme", "name = \"min\"", "missing");
}

#[test]
fn scheme_options_are_checked() {
    let scheme = |body: &str| format!("{MINIMAL}\n[[scheme]] # s\nname = \"s\"\n{body}\n");
    assert_rejects(&scheme("recovery = \"fec\""), "scheme.s.recovery", "recovery = \"fec\"", "write fec:<K>");
    assert_rejects(&scheme("recovery = \"fec:1001\""), "scheme.s.recovery", "1001", "(0, 1000]");
    assert_rejects(
        &scheme("peer = \"kcptun\"\nfec_percent = 0"),
        "scheme.s.fec_percent",
        "fec_percent = 0",
        "(0, 1000]",
    );
    assert_rejects(
        &scheme("recovery = \"magic\""),
        "scheme.s.recovery",
        "magic",
        "expected one of auto, none, arq, fec:<K>, dup, oec, rlnc, rlnc:<K>, fountain",
    );
    // Reed-Solomon and a duplicating scheduler were names without an implementation: refused
    // while parsing, not when the run starts.
    assert_rejects(&scheme("recovery = \"rs:10\""), "scheme.s.recovery", "rs:10", "unknown recovery scheme");
    assert_rejects(
        &scheme("recovery = \"oec\"\nscheduler = \"dup\""),
        "scheme.s.scheduler",
        "dup",
        "expected one of min-delay, single, round-robin, wrr, wrr:auto, eat",
    );
    assert_rejects(&scheme("peer = \"quic\""), "scheme.s.peer", "quic", "valid: plain, mptcp, kcptun");
    assert_rejects(&scheme("peer = \"plain\"\nrecovery = \"oec\""), "scheme.s.peer", "plain", "not both");
    assert_rejects(&scheme("peer = \"plain\"\nhold_ms = 5"), "scheme.s.hold_ms", "hold_ms", "does not apply");
    // A scheme with no recovery runs braid's general setting, `auto`.
    let only_name = parse(&scheme("")).expect("a scheme with only a name");
    let s = only_name.schemes.iter().find(|s| s.name == "s").expect("scheme s");
    assert_eq!(
        s.kind,
        SchemeKind::Braid { recovery: braid_proto::RecoveryKind::Auto, scheduler: SchedulerKind::MinDelay }
    );
    assert_rejects(
        &scheme("recovery = \"oec\"\nscheduler = \"wrr\"\nweights = [1, 2]"),
        "scheme.s.weights",
        "weights",
        "2 weights but there are 1 links",
    );
    // Location awareness without a vehicle would silently run as if it were off.
    assert_rejects(&scheme("location = true"), "scheme.s.location", "location", "needs a [vehicle]");
    // Weights apply to every scheduler but wrr:auto.
    let weighted = parse(&scheme("recovery = \"oec\"\nweights = [3]")).expect("weights with min-delay");
    assert_eq!(weighted.schemes.iter().find(|s| s.name == "s").and_then(|s| s.weights.clone()), Some(vec![3.0]));
    assert_rejects(
        &scheme("recovery = \"oec\"\nscheduler = \"wrr:auto\"\nweights = [1]"),
        "scheme.s.weights",
        "weights",
        "does not apply to scheduler wrr:auto",
    );
    assert_rejects(
        &scheme("recovery = \"oec\"\nscheduler = \"wrr\""),
        "scheme.s.scheduler",
        "scheduler = \"wrr\"",
        "write scheduler = \"wrr:auto\"",
    );
    assert_rejects(
        &scheme("recovery = \"oec\"\nscheduler = \"wrr\"\nweights = [0]"),
        "scheme.s.weights",
        "weights",
        "> 0",
    );
    assert_rejects(&scheme("recovery = \"oec\"\nhold_ms = -1"), "scheme.s.hold_ms", "hold_ms", ">= 0");
}

#[test]
fn workload_options_are_checked() {
    assert_rejects(
        &with("kind = \"bulk\"", "kind = \"bulk\"\nscale = 2"),
        "workload.scale",
        "scale",
        "does not apply to kind \"bulk\"",
    );
    assert_rejects(
        &with("kind = \"bulk\"", "kind = \"poisson\""),
        "workload.kind",
        "poisson",
        "valid: flows, bulk, cbr",
    );
    assert_rejects(
        &with("kind = \"bulk\"", "kind = \"bulk\"\ndirection = \"sideways\""),
        "workload.direction",
        "sideways",
        "valid: down, up, both",
    );
    assert_rejects(&with("kind = \"bulk\"", "kind = \"cbr\""), "workload.rate_kbps", "[workload]", "missing");
    let text = with(
        "kind = \"bulk\"",
        "kind = \"flows\"\ninterarrival_s = { dist = \"fixed\", value = 1 }\nsize_bytes = { dist = \"zipf\", s = 1 }",
    );
    assert_rejects(&text, "workload.size_bytes.s", "zipf", "unknown field `s`");
    let text = with(
        "kind = \"bulk\"",
        "kind = \"flows\"\ninterarrival_s = { dist = \"fixed\", value = 1 }\nsize_bytes = { dist = \"zipf\" }",
    );
    assert_rejects(
        &text,
        "workload.size_bytes.dist",
        "zipf",
        "valid: lognormal, pareto, fixed, exponential, uniform, empirical",
    );
    let text = with(
        "kind = \"bulk\"",
        "kind = \"flows\"\ninterarrival_s = { dist = \"exponential\", mean = 1, median = 2 }\nsize_bytes = { dist = \"fixed\", value = 1 }",
    );
    assert_rejects(&text, "workload.interarrival_s.median", "exponential", "does not apply to dist \"exponential\"");
    let text = with(
        "kind = \"bulk\"",
        "kind = \"flows\"\ninterarrival_s = { dist = \"lognormal\", median = 1 }\nsize_bytes = { dist = \"fixed\", value = 1 }",
    );
    assert_rejects(&text, "workload.interarrival_s.sigma", "lognormal", "missing");
}

#[test]
fn syntax_errors_carry_a_line() {
    let text = "name = \"x\"\nduration_s = 10\n[[link]\n";
    let e = parse(text).unwrap_err();
    assert!(matches!(e, ScenarioError::Syntax { line: 3, .. }), "{e}");
}

const SWEEP: &str = r#"name = "sweep"
duration_s = 10

[[link]]
name = "wan"
down = { rate_kbps = 1500, delay_ms = 75, loss = { model = "gilbert", p_gb = 0.5, p_bg = 0.5, loss_good = 0, loss_bad = 0.01 } }
up = { rate_kbps = 1500, delay_ms = 75, loss = { model = "gilbert", p_gb = 0.5, p_bg = 0.5, loss_good = 0, loss_bad = 0.01 } }

[[link]]
name = "other"
down = { rate_kbps = 100 }
up = { rate_kbps = 100 }

[workload]
kind = "flows"
size_bytes = { dist = "fixed", value = 1000 }
interarrival_s = { dist = "exponential", mean = 1 }

[[scheme]]
name = "fec"
recovery = "fec:10"

[sweep]
keys = ["link.wan.down.loss.loss_bad", "link.wan.up.loss.loss_bad"]
values = [0.1, 0.5, 0.7]
"#;

fn sweep_with(keys: &str, values: &str) -> String {
    SWEEP
        .replacen(
            "keys = [\"link.wan.down.loss.loss_bad\", \"link.wan.up.loss.loss_bad\"]",
            &format!("keys = {keys}"),
            1,
        )
        .replacen("values = [0.1, 0.5, 0.7]", &format!("values = {values}"), 1)
}

fn loss_bad(d: &crate::link::LinkDirSpec) -> f64 {
    match d.loss {
        LossSpec::Gilbert { loss_bad, .. } => loss_bad,
        other => panic!("{other:?}"),
    }
}

#[test]
fn sweep_sets_every_key_to_each_value() {
    let s = parse(SWEEP).unwrap();
    // The base scenario is the file as written.
    assert_eq!(loss_bad(&s.links[0].down), 0.01);
    let sweep = s.sweep.as_ref().unwrap();
    assert_eq!(sweep.label, "link.wan.down.loss.loss_bad");
    let points = s.expand_sweep();
    assert_eq!(points.len(), 3);
    for ((value, point), want) in points.iter().zip([0.1, 0.5, 0.7]) {
        assert_eq!(*value, Some(want));
        assert_eq!(loss_bad(&point.links[0].down), want);
        assert_eq!(loss_bad(&point.links[0].up), want);
        assert!(point.sweep.is_none());
        // Nothing else changes.
        assert_eq!(point.links[1], s.links[1]);
        assert_eq!(point.schemes, s.schemes);
    }
}

#[test]
fn sweep_reaches_workload_scheme_and_top_level_keys() {
    // `scale` is absent from the file: the sweep inserts it.
    let s =
        parse(&sweep_with("[\"workload.scale\"]", "[1, 2, 4, 8]").replacen("[sweep]", "[sweep]\nlabel = \"load\"", 1))
            .unwrap();
    assert_eq!(s.sweep.as_ref().unwrap().label, "load");
    let scales: Vec<f64> = s
        .expand_sweep()
        .into_iter()
        .map(|(_, p)| match p.workload {
            WorkloadSpec::Flows { scale, .. } => scale,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(scales, vec![1.0, 2.0, 4.0, 8.0]);

    let s = parse(&sweep_with("[\"duration_s\", \"runs\"]", "[3, 4]")).unwrap();
    let got: Vec<_> = s.expand_sweep().into_iter().map(|(_, p)| (p.duration.as_secs(), p.runs)).collect();
    assert_eq!(got, vec![(3, 3), (4, 4)]);
}

#[test]
fn sweep_key_naming_nothing_is_an_error_naming_it() {
    let text = sweep_with("[\"link.lan.down.loss.loss_bad\"]", "[0.1]");
    let e = parse(&text).unwrap_err();
    assert!(matches!(&e, ScenarioError::SweepKey { key, .. } if key == "link.lan.down.loss.loss_bad"), "{e}");
    assert_eq!(e.line(), Some(line_of(&text, "keys =")));
    assert!(e.to_string().contains("no `link` entry named `lan`"), "{e}");

    for key in ["link.wan.down.loss.los_bad", "workload.scael", "sclae", "scheme.fec.fec_pct"] {
        let text = sweep_with(&format!("[\"{key}\"]"), "[0.1]");
        let e = parse(&text).unwrap_err();
        assert!(matches!(&e, ScenarioError::SweepKey { key: k, .. } if k == key), "{key}: {e}");
        assert!(e.to_string().contains("names nothing"), "{e}");
    }
    for key in ["link.wan.sideways.delay_ms", "link.wan", "link.wan.down", "link.wan.down.loss.loss_bad.x", "a..b"] {
        let e = parse(&sweep_with(&format!("[\"{key}\"]"), "[0.1]")).unwrap_err();
        assert!(matches!(&e, ScenarioError::SweepKey { key: k, .. } if k == key), "{key}: {e}");
    }
}

#[test]
fn bad_sweep_value_is_reported_with_the_value_and_key() {
    let text = sweep_with("[\"link.wan.up.loss.loss_bad\"]", "[0.5,\n  1.5]");
    let e = parse(&text).unwrap_err();
    assert!(matches!(e, ScenarioError::SweepPoint { value, .. } if value == 1.5), "{e}");
    assert_eq!(e.key(), Some("link.wan.up.loss.loss_bad"));
    // The key exists in the file: the error points at it.
    assert_eq!(e.line(), Some(line_of(&text, "up = { rate_kbps = 1500")));

    let text = sweep_with("[\"runs\"]", "[1,\n 2.5]");
    let e = parse(&text).unwrap_err();
    assert_eq!(e.key(), Some("runs"), "{e}");
    assert_eq!(e.line(), Some(line_of(&text, " 2.5]")), "{e}");

    assert_rejects(&sweep_with("[]", "[1]"), "sweep.keys", "keys = []", "at least one key");
    assert_rejects(&sweep_with("[\"runs\"]", "[]"), "sweep.values", "values = []", "at least one value");
    assert_rejects(&sweep_with("[\"runs\"]", "[\"x\"]"), "sweep.values[0]", "values =", "invalid type");
    assert_rejects(&sweep_with("[\"runs\"]", "[-inf]"), "sweep.values[0]", "values =", "number or inf");
    assert_rejects(&sweep_with("[\"runs\"]", "[nan]"), "sweep.values[0]", "values =", "number or inf");
    // inf passes the sweep's own check, and is then checked as a written value.
    assert_eq!(parse(&sweep_with("[\"runs\"]", "[inf]")).unwrap_err().key(), Some("runs"));
}

#[test]
fn links_take_a_coding_budget_and_a_backup_mode() {
    let s = parse(MINIMAL).unwrap();
    assert_eq!(s.links[0].metering, braid_proto::Metering::default(), "unmetered unless the file says");
    let s = parse(&with("up = { rate_kbps = 100 }", "up = { rate_kbps = 100 }\ncoding_budget = 0.25\nbackup = true"))
        .unwrap();
    assert_eq!(s.links[0].metering, braid_proto::Metering { coding_budget: Some(0.25), backup: true });
    let s = parse(&with("up = { rate_kbps = 100 }", "up = { rate_kbps = 100 }\ncoding_budget = inf")).unwrap();
    assert_eq!(s.links[0].metering.coding_budget, None, "inf is no bound");
    let text = with("up = { rate_kbps = 100 }", "up = { rate_kbps = 100 }\ncoding_budget = -0.5");
    assert_rejects(&text, "link.a.coding_budget", "coding_budget = -0.5", "must be a number >= 0");
    let text = with("up = { rate_kbps = 100 }", "up = { rate_kbps = 100 }\nbackup = 1");
    assert_rejects(&text, "link.a.backup", "backup = 1", "invalid type");
}

#[test]
fn a_link_s_rate_is_told_to_braid_unless_the_file_says_it_is_unknown() {
    assert!(parse(MINIMAL).unwrap().links[0].rate_known, "told, as the figures before the option were made");
    let s = parse(&with("up = { rate_kbps = 100 }", "up = { rate_kbps = 100 }\nrate_known = false")).unwrap();
    assert!(!s.links[0].rate_known);
    let text = with("up = { rate_kbps = 100 }", "up = { rate_kbps = 100 }\nrate_known = \"no\"");
    assert_rejects(&text, "link.a.rate_known", "rate_known = \"no\"", "invalid type");
}

#[test]
fn relative_paths_resolve_against_the_scenario_directory() {
    let dir = temp_dir("paths");
    std::fs::create_dir_all(dir.join("traces")).unwrap();
    std::fs::write(dir.join("traces/up.trace"), "0\n5\n10\n").unwrap();
    std::fs::write(dir.join("sched.csv"), "t_s,delay_ms,loss,rate_kbps\n0,,0.2,\n").unwrap();
    std::fs::write(dir.join("sizes.txt"), "# sizes\n100\n300\n").unwrap();
    let text = MINIMAL
        .replacen("up = { rate_kbps = 100 }", "up = { trace = \"traces/up.trace\", schedule = \"sched.csv\" }", 1)
        .replacen(
            "kind = \"bulk\"",
            "kind = \"flows\"\nsize_bytes = { dist = \"empirical\", file = \"sizes.txt\" }\ninterarrival_s = { dist = \"fixed\", value = 1 }",
            1,
        );
    let file = dir.join("scenario.toml");
    std::fs::write(&file, &text).unwrap();

    let check = |s: Scenario| {
        let RateSpec::Trace(t) = &s.links[0].up.rate else { panic!("{:?}", s.links[0].up.rate) };
        assert_eq!(t.opportunities_ms, vec![0, 5, 10]);
        assert_eq!(s.links[0].up.schedule.as_ref().unwrap().rows[0].loss, Some(0.2));
        let WorkloadSpec::Flows { size_bytes: Dist::Empirical { file, values }, .. } = &s.workload else {
            panic!("{:?}", s.workload)
        };
        assert_eq!(file, &dir.join("sizes.txt"));
        assert_eq!(&values[..], &[100.0, 300.0]);
    };
    check(Scenario::from_file(&file).unwrap());
    check(Scenario::from_str(&text, &dir).unwrap());

    // Elsewhere, the same text does not find its files, and says which key named them.
    let e = Scenario::from_str(&text, &dir.join("traces")).unwrap_err();
    assert!(matches!(&e, ScenarioError::File { key, .. } if key == "link.a.up.trace"), "{e}");
    assert_eq!(e.line(), Some(line_of(&text, "traces/up.trace")));

    // A bad trace file is reported with the key and the file's own line.
    std::fs::write(dir.join("traces/up.trace"), "0\nfast\n").unwrap();
    let e = Scenario::from_file(&file).unwrap_err().to_string();
    assert!(e.contains("link.a.up.trace") && e.contains("up.trace:2"), "{e}");

    let e = Scenario::from_file(&dir.join("missing.toml")).unwrap_err();
    assert!(matches!(e, ScenarioError::Io { .. }), "{e}");
}

/// The repository's `scenarios/` directory.
fn scenarios_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios")
}

#[test]
fn every_shipped_scenario_parses() {
    let mut n = 0;
    for entry in std::fs::read_dir(scenarios_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let s = Scenario::from_file(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert!(!s.expand_sweep().is_empty());
            n += 1;
        }
    }
    assert!(n >= 3, "found only {n} scenarios");
}

#[test]
fn default_bus_is_the_paper_bus() {
    let s = Scenario::default_bus();
    assert_eq!(s, Scenario::from_file(&scenarios_dir().join("bus.toml")).unwrap().with_base_dir("."));
    assert_eq!((s.duration, s.runs, s.seed), (Duration::from_secs(300), 10, 1));
    let names: Vec<_> = s.links.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["wimax", "evdo"]);
    let rtt_ms = |l: &LinkSpec| (l.down.delay + l.up.delay).as_millis();
    assert_eq!((rtt_ms(&s.links[0]), rtt_ms(&s.links[1])), (40, 150));
    let rates: Vec<_> = s.links.iter().map(|l| (l.down.rate.mean_kbps(), l.up.rate.mean_kbps())).collect();
    assert_eq!(rates, [(1500.0, 200.0), (1000.0, 300.0)]);
    // WiMax about 5 % bursty loss, EVDO under 1 %.
    for d in [&s.links[0].down, &s.links[0].up] {
        assert!((d.loss.mean_loss() - 0.05).abs() < 0.002, "{:?}", d.loss);
        assert!(matches!(d.loss, LossSpec::Gilbert { .. }));
    }
    for d in [&s.links[1].down, &s.links[1].up] {
        assert!(d.loss.mean_loss() > 0.0 && d.loss.mean_loss() < 0.01, "{:?}", d.loss);
    }
    // 86 kbit/s on average, from heavy-tailed (capped) flow sizes.
    let rate = s.workload.mean_rate_kbps().unwrap();
    assert!((rate - 86.0).abs() < 0.86, "{rate} kbit/s");
    assert!(matches!(&s.workload, WorkloadSpec::Flows { size_bytes: Dist::LogNormal { max: Some(_), .. }, .. }));
    let schemes: Vec<_> = s.schemes.iter().map(|x| (x.name.as_str(), x.kind)).collect();
    let braid = |recovery| SchemeKind::Braid { recovery, scheduler: SchedulerKind::MinDelay };
    assert_eq!(
        schemes,
        [
            ("none", braid(RecoveryKind::None)),
            ("arq", braid(RecoveryKind::Arq)),
            ("fec10", braid(RecoveryKind::Fec { percent: 10.0 })),
            ("fec100", braid(RecoveryKind::Fec { percent: 100.0 })),
            ("oec", braid(RecoveryKind::Oec)),
            ("default", braid(RecoveryKind::Auto)),
        ]
    );
}

#[test]
fn figure_scenarios_sweep_what_the_paper_varies() {
    let bus = Scenario::default_bus();
    let s = Scenario::from_file(&scenarios_dir().join("fig10-gilbert-sweep.toml")).unwrap();
    assert_eq!(s.links.len(), 1);
    assert_eq!(s.workload, bus.workload);
    // The bus's schemes (the default last), then braid's rlnc (issue 6).
    assert_eq!(s.schemes[..bus.schemes.len()], bus.schemes[..]);
    assert_eq!(s.schemes.iter().skip(bus.schemes.len()).map(|x| x.name.as_str()).collect::<Vec<_>>(), ["rlnc"]);
    let points = s.expand_sweep();
    let want = [0.01, 0.05, 0.1, 0.3, 0.5, 0.7];
    assert_eq!(points.iter().map(|p| p.0.unwrap()).collect::<Vec<_>>(), want);
    for ((_, p), w) in points.iter().zip(want) {
        for d in [&p.links[0].down, &p.links[0].up] {
            assert_eq!(d.loss, LossSpec::Gilbert { p_gb: 0.5, p_bg: 0.5, loss_good: 0.0, loss_bad: w });
            assert_eq!((d.delay, d.rate.mean_kbps()), (Duration::from_millis(75), 1500.0));
        }
    }

    let s = Scenario::from_file(&scenarios_dir().join("fig7b-load-scaling.toml")).unwrap();
    assert_eq!(s.links, bus.links);
    assert_eq!(s.schemes.iter().map(|x| x.name.as_str()).collect::<Vec<_>>(), ["none", "oec", "default"]);
    let rates: Vec<_> = s.expand_sweep().iter().map(|(_, p)| p.workload.mean_rate_kbps().unwrap()).collect();
    let base = bus.workload.mean_rate_kbps().unwrap();
    for (r, k) in rates.iter().zip([1.0, 2.0, 4.0, 8.0]) {
        assert!((r / base - k).abs() < 1e-9, "{rates:?}");
    }
}

impl Scenario {
    /// The same scenario as if loaded relative to `dir`, to compare loads from different places.
    fn with_base_dir(mut self, dir: &str) -> Scenario {
        self.base_dir = PathBuf::from(dir);
        self
    }
}

mod never_panics {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        #[test]
        fn on_arbitrary_text(text in "\\PC*") {
            let _ = Scenario::from_str(&text, Path::new("/nonexistent-base"));
        }

        #[test]
        fn on_tomlish_text(text in "([a-z_\\.\\[\\]={}\",\\-0-9 ]|\n|inf|nan|link|down|loss|sweep|keys|values){0,200}") {
            let _ = Scenario::from_str(&text, Path::new("/nonexistent-base"));
        }

        #[test]
        fn on_mutated_scenarios(at in 0usize..4000, cut in 0usize..40, insert in "[ -~\n]{0,12}", sweep in any::<bool>()) {
            let base = if sweep { SWEEP } else { Scenario::default_bus_toml() };
            let mut bytes: Vec<char> = base.chars().collect();
            let at = at % (bytes.len() + 1);
            let end = (at + cut).min(bytes.len());
            bytes.splice(at..end, insert.chars());
            let text: String = bytes.into_iter().collect();
            let _ = Scenario::from_str(&text, Path::new("/nonexistent-base"));
        }
    }
}

#[test]
fn the_table2_bound_is_cases_1_to_5_without_their_losses() {
    // One lossless link per point, in case order, carrying each case's sum of capacity x (1 - loss)
    // at the same one-way delay, so that comparing a case with its point is fair.
    let ideal = Scenario::from_file(&scenarios_dir().join("fmtcp-table2-ideal.toml")).unwrap();
    let points = ideal.expand_sweep();
    assert_eq!(points.len(), 5);
    for (i, (_, point)) in points.iter().enumerate() {
        let case = Scenario::from_file(&scenarios_dir().join(format!("fmtcp-table2-case{}.toml", i + 1))).unwrap();
        let usable: f64 = case.links.iter().map(|l| l.down.rate.mean_kbps() * (1.0 - l.down.loss.mean_loss())).sum();
        let [link] = point.links.as_slice() else { panic!("point {i}: {} links", point.links.len()) };
        assert!((link.down.rate.mean_kbps() - usable).abs() < 1.0, "case {}: {:?} vs {usable}", i + 1, link.down.rate);
        assert_eq!(link.down.loss.mean_loss(), 0.0);
        assert_eq!(link.down.delay, case.links[1].down.delay);
        assert_eq!((point.duration, point.tcp), (case.duration, case.tcp));
    }
}

/// A one-link drive-by scenario with `drive` as its `drive_by` table and `vehicle` as the vehicle.
fn drive_by(vehicle: &str, drive: &str, down: &str) -> String {
    format!(
        "name = \"d\"\nduration_s = 58\n{vehicle}\n[[link]]\nname = \"wifi\"\ndrive_by = {drive}\ndown = {down}\nup = {{ delay_ms = 5 }}\n[workload]\nkind = \"bulk\"\n[[scheme]]\nname = \"x\"\nrecovery = \"arq\"\n"
    )
}

#[test]
fn drive_by_links_parse_with_the_paper_defaults() {
    let v = "[vehicle]\nspeed_kmh = 80\nstart_m = -640";
    let sc = parse(&drive_by(v, "{ aps_m = [0] }", "{ delay_ms = 5 }")).unwrap();
    let d = sc.links[0].drive_by.as_ref().unwrap();
    assert_eq!(d.aps_m, vec![0.0]);
    assert_eq!(d.range_m, 640.0);
    assert!((d.vehicle.speed_mps - 22.222).abs() < 1e-3);
    assert_eq!(sc.vehicle.unwrap().start_m, -640.0);
    let sc = parse(&drive_by(v, "{ first_m = 1000, spacing_m = 3000, count = 3 }", "{ delay_ms = 5 }")).unwrap();
    assert_eq!(sc.links[0].drive_by.as_ref().unwrap().aps_m, vec![1000.0, 4000.0, 7000.0]);
}

#[test]
fn drive_by_errors_name_key_and_line() {
    let v = "[vehicle]\nspeed_kmh = 80";
    assert_rejects(&drive_by("", "{ aps_m = [0] }", "{}"), "link.wifi.drive_by", "drive_by", "[vehicle]");
    assert_rejects(
        &drive_by(v, "{ aps_m = [0] }", "{ rate_kbps = 100 }"),
        "link.wifi.down.rate_kbps",
        "down =",
        "drive-by",
    );
    assert_rejects(
        &drive_by(v, "{ aps_m = [0], edge_loss = 2 }", "{}"),
        "link.wifi.drive_by.edge_loss",
        "drive_by",
        "probability",
    );
    assert_rejects(&drive_by(v, "{ spacing_m = 100 }", "{}"), "link.wifi.drive_by.count", "drive_by", "missing");
    assert_rejects(&drive_by(v, "{ range_m = 100 }", "{}"), "link.wifi.drive_by.aps_m", "drive_by", "aps_m");
    assert_rejects(
        &drive_by("[vehicle]\nspeed_kmh = -1", "{ aps_m = [0] }", "{}"),
        "vehicle.speed_kmh",
        "speed_kmh",
        "> 0",
    );
    assert_rejects(
        &drive_by(v, "{ aps_m = [0], colour = 1 }", "{}"),
        "link.wifi.drive_by.colour",
        "drive_by",
        "unknown field",
    );
}

#[test]
fn old_scheme_spellings_name_the_new_one_with_key_and_line() {
    let scheme = |body: &str| format!("{MINIMAL}\n[[scheme]] # s\nname = \"s\"\n{body}\n");
    assert_rejects(
        &scheme("recovery = \"fec\"\nfec_percent = 10"),
        "scheme.s.fec_percent",
        "fec_percent = 10",
        "write recovery = \"fec:10\"",
    );
    assert_rejects(
        &scheme("recovery = \"rlnc\"\nfec_percent = 2"),
        "scheme.s.fec_percent",
        "fec_percent = 2",
        "write recovery = \"rlnc:2\"",
    );
    assert_rejects(
        &scheme("recovery = \"oec\"\nscheduler = \"wrr\"\nweights = \"auto\""),
        "scheme.s.weights",
        "weights = \"auto\"",
        "write scheduler = \"wrr:auto\"",
    );
    assert_rejects(&scheme("recovery = \"fec10\""), "scheme.s.recovery", "fec10", "is written \"fec:10\" now");
    assert_rejects(
        &scheme("recovery = \"oec\"\nscheduler = \"wrr-auto\""),
        "scheme.s.scheduler",
        "wrr-auto",
        "is written \"wrr:auto\" now",
    );
}
