//! The exposition checked against Prometheus' naming rules and the text format, and labelled by
//! vehicle name.

use super::render;
use crate::daemon::status::{DaemonStatus, SessionStatus, UplinkStatus};
use std::collections::{BTreeMap, HashMap, HashSet};

/// One sample: metric name, labels, value.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// Parses `k="v",k2="v2"` (with the format's escapes).
fn parse_labels(s: &str) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    let mut chars = s.chars().peekable();
    while chars.peek().is_some() {
        let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
        if !valid_name(&key) || key.contains(':') {
            return Err(format!("bad label name {key:?} in {s:?}"));
        }
        if chars.next() != Some('"') {
            return Err(format!("label {key} not quoted in {s:?}"));
        }
        let mut value = String::new();
        loop {
            match chars.next() {
                Some('\\') => match chars.next() {
                    Some('n') => value.push('\n'),
                    Some(c @ ('\\' | '"')) => value.push(c),
                    other => return Err(format!("bad escape {other:?} in {s:?}")),
                },
                Some('"') => break,
                Some(c) => value.push(c),
                None => return Err(format!("unterminated label value in {s:?}")),
            }
        }
        if out.insert(key.clone(), value).is_some() {
            return Err(format!("label {key} twice in {s:?}"));
        }
        match chars.next() {
            None => break,
            Some(',') => {}
            Some(c) => return Err(format!("unexpected {c:?} after a label in {s:?}")),
        }
    }
    Ok(out)
}

fn valid_name(n: &str) -> bool {
    let mut c = n.chars();
    c.next().is_some_and(|f| f.is_ascii_alphabetic() || f == '_' || f == ':')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_' || x == ':')
}

/// Unit words Prometheus asks to replace by base units (seconds, bytes, bits per second, ratios).
const NON_BASE_UNITS: &[&str] = &[
    "ms",
    "us",
    "ns",
    "msec",
    "millis",
    "milliseconds",
    "microseconds",
    "nanoseconds",
    "minutes",
    "hours",
    "kb",
    "kbps",
    "bps",
    "mbps",
    "kbit",
    "mbit",
    "kilobytes",
    "megabytes",
    "kib",
    "mib",
    "percent",
    "pct",
];

/// Parses the text exposition and checks it against the naming rules; returns the samples.
fn check(text: &str) -> Result<Vec<Sample>, String> {
    let mut help: HashSet<String> = HashSet::new();
    let mut kinds: HashMap<String, String> = HashMap::new();
    let mut samples = Vec::new();
    let mut seen_series = HashSet::new();
    for (no, line) in text.lines().enumerate() {
        let at = |e: String| format!("line {}: {e}: {line:?}", no + 1);
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, doc) = rest.split_once(' ').ok_or_else(|| at("HELP without text".into()))?;
            if doc.trim().is_empty() || !help.insert(name.to_string()) {
                return Err(at("empty or repeated HELP".into()));
            }
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').ok_or_else(|| at("TYPE without kind".into()))?;
            if !["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind) {
                return Err(at(format!("unknown type {kind}")));
            }
            if !help.contains(name) {
                return Err(at("TYPE before (or without) HELP".into()));
            }
            if kinds.insert(name.to_string(), kind.to_string()).is_some() {
                return Err(at("repeated TYPE".into()));
            }
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').ok_or_else(|| at("no value".into()))?;
        let value: f64 = value.parse().map_err(|_| at("value is not a number".into()))?;
        if !value.is_finite() {
            return Err(at("NaN or infinite value".into()));
        }
        let (name, labels) = match series.split_once('{') {
            Some((n, rest)) => {
                let inner = rest.strip_suffix('}').ok_or_else(|| at("unclosed labels".into()))?;
                (n.to_string(), parse_labels(inner).map_err(at)?)
            }
            None => (series.to_string(), BTreeMap::new()),
        };
        if !valid_name(&name) {
            return Err(at("bad metric name".into()));
        }
        let kind = kinds.get(&name).ok_or_else(|| at("sample without TYPE".into()))?;
        if !help.contains(&name) {
            return Err(at("sample without HELP".into()));
        }
        if (kind == "counter") != name.ends_with("_total") {
            return Err(at(format!("a {kind} must {}end in _total", if kind == "counter" { "" } else { "not " })));
        }
        if let Some(w) = name.split('_').find(|w| NON_BASE_UNITS.contains(w)) {
            return Err(at(format!("non-base unit {w:?} (use seconds, bytes, bits_per_second, ratio)")));
        }
        if (name.contains("loss") || name.contains("share")) && !name.ends_with("_ratio") {
            return Err(at("a fraction must end in _ratio".into()));
        }
        if name.contains("capacity") && !name.ends_with("_bits_per_second") {
            return Err(at("a rate must end in _bits_per_second".into()));
        }
        if !name.starts_with("braid_") {
            return Err(at("not in the braid_ namespace".into()));
        }
        if !seen_series.insert(series.to_string()) {
            return Err(at("the same series twice".into()));
        }
        samples.push(Sample { name, labels, value });
    }
    for name in help.iter() {
        if !kinds.contains_key(name) {
            return Err(format!("{name}: HELP without TYPE"));
        }
        if !samples.iter().any(|s| &s.name == name) {
            return Err(format!("{name}: a family without samples"));
        }
    }
    Ok(samples)
}

fn uplink(name: &str, rtt_ms: Option<f64>, cap_kbps: f64) -> UplinkStatus {
    UplinkStatus {
        name: name.into(),
        present: true,
        state: "active".into(),
        rtt_ms,
        owd_ms: rtt_ms.map(|r| r / 4.0),
        tx_loss: 0.02,
        rx_loss: 0.0,
        tx_capacity_kbps: cap_kbps,
        rx_capacity_kbps: cap_kbps,
        data_share: 0.5,
        data_sent: 1000,
        bytes_sent: 1_400_000,
        weight: 1,
        ..Default::default()
    }
}

fn session(id: u32, peer: &str, uplinks: Vec<UplinkStatus>) -> SessionStatus {
    SessionStatus {
        id,
        peer: peer.into(),
        cipher: "chacha20-poly1305".into(),
        recovery: "oec".into(),
        scheduler: "min-delay".into(),
        tun_in: 10,
        delivered: 9,
        key_age_s: 12.5,
        uplinks,
        ..Default::default()
    }
}

/// A server with two vehicles: bus-17 with two uplinks, one of them without an RTT or capacity
/// estimate yet, and bus-18 (a name that needs escaping would too: `"` and `\`).
fn fleet() -> DaemonStatus {
    DaemonStatus {
        role: "server".into(),
        uptime_s: 61.0,
        handshakes: 3,
        sessions: vec![
            session(0x5504, "bus-17", vec![uplink("link0", Some(42.0), 2000.0), uplink("link1", None, 0.0)]),
            session(0x0a1b, "bus-18 \"depot\\east\"", vec![uplink("link0", Some(80.0), 900.0)]),
        ],
        ..Default::default()
    }
}

#[test]
fn server_exposition_follows_the_naming_rules_and_names_vehicles() {
    let text = render(&fleet());
    let samples = check(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let build: Vec<&Sample> = samples.iter().filter(|s| s.name == "braid_build_info").collect();
    assert_eq!(build.len(), 1, "{text}");
    assert_eq!(build[0].labels.get("version").map(String::as_str), Some(env!("CARGO_PKG_VERSION")));
    assert_eq!(build[0].value, 1.0);
    let vehicles = ["bus-17", "bus-18 \"depot\\east\""];
    // Everything but the daemon's own series is some vehicle's.
    let daemon_wide = [
        "build_info",
        "uptime_seconds",
        "garbage_datagrams_total",
        "send_errors_total",
        "rejected_datagrams_total",
        "handshakes_total",
        "unknown_session_hints_total",
        "cookie_replies_total",
        "sessions_refused_total",
        "sessions_expired_total",
        "unroutable_packets_total",
        "passenger_dropped_total",
        "sessions",
    ];
    let per_vehicle: Vec<&Sample> =
        samples.iter().filter(|s| !daemon_wide.iter().any(|d| s.name == format!("braid_{d}"))).collect();
    assert!(per_vehicle.len() > 40, "{text}");
    assert!(per_vehicle.iter().any(|s| s.name == "braid_tun_packets_in_total"), "{text}");
    for s in &per_vehicle {
        let v = s.labels.get("vehicle").map(String::as_str);
        assert!(v.is_some_and(|v| vehicles.contains(&v)), "{s:?} has no vehicle label");
        // The session id changes with every join: only the info series carries it.
        assert_eq!(s.labels.contains_key("session"), s.name == "braid_session_info", "{s:?}");
    }
    let rtt = |v: &str, u: &str| {
        samples
            .iter()
            .find(|s| {
                s.name == "braid_uplink_rtt_seconds"
                    && s.labels.get("vehicle").is_some_and(|x| x == v)
                    && s.labels.get("uplink").is_some_and(|x| x == u)
            })
            .map(|s| s.value)
    };
    assert_eq!(rtt("bus-17", "link0"), Some(0.042), "milliseconds are exported as seconds");
    assert_eq!(rtt("bus-17", "link1"), None, "an unknown RTT is left out, not NaN");
    assert_eq!(rtt(vehicles[1], "link0"), Some(0.08));
    let caps = samples.iter().filter(|s| s.name == "braid_uplink_tx_capacity_bits_per_second").count();
    assert_eq!(caps, 2, "the uplink without an estimate has no capacity series");
    let cap = samples.iter().find(|s| s.name == "braid_uplink_tx_capacity_bits_per_second").map(|s| s.value);
    assert_eq!(cap, Some(2_000_000.0), "kbit/s are exported as bit/s");
}

#[test]
fn client_exposition_follows_the_naming_rules() {
    let mut st = fleet();
    st.role = "client".into();
    st.sessions.truncate(1);
    st.sessions[0].uplinks[0].name = "lte1".into();
    let text = render(&st);
    let samples = check(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert!(samples.iter().all(|s| !s.labels.contains_key("vehicle")), "{text}");
    assert!(samples.iter().any(|s| s.labels.get("uplink").is_some_and(|u| u == "lte1")), "{text}");
    // A daemon with no session yet exports no empty families.
    st.sessions.clear();
    check(&render(&st)).unwrap_or_else(|e| panic!("{e}"));
}

/// The checker itself refuses what the rules forbid, so the tests above can fail.
#[test]
fn checker_refuses_rule_breakers() {
    let family = |name: &str, kind: &str, sample: &str| format!("# HELP {name} x.\n# TYPE {name} {kind}\n{sample}\n");
    let bad = [
        family("braid_rtt_seconds", "gauge", "braid_rtt_seconds NaN"),
        family("braid_handshakes", "counter", "braid_handshakes 3"),
        family("braid_sessions_total", "gauge", "braid_sessions_total 3"),
        family("braid_uplink_rtt_ms", "gauge", "braid_uplink_rtt_ms 4"),
        family("braid_uplink_capacity_kbps", "gauge", "braid_uplink_capacity_kbps 4"),
        family("braid_uplink_tx_loss", "gauge", "braid_uplink_tx_loss 0.1"),
        family("braid_x", "gauge", "braid_x{vehicle=\"a} 1"),
        "# TYPE braid_x gauge\nbraid_x 1\n".to_string(),
        "# HELP braid_x x.\nbraid_x 1\n".to_string(),
        family("braid_x", "gauge", "braid_x 1\nbraid_x 2"),
        family("braid_x", "gauge", "braid_y 1"),
    ];
    for text in bad {
        assert!(check(&text).is_err(), "accepted:\n{text}");
    }
    check(&family("braid_x_seconds", "gauge", "braid_x_seconds{a=\"q\\\"\"} 1.5")).expect("a good family");
}
