//! The end hosts' kernels really run a scenario's `[tcp]` (`braid_testbed::hosts`): two namespaces
//! joined by a veth pair get the paper's 2010 hosts (RFC 2988's 3 s initial RTO, RFC 3390's
//! 3-segment initial window) with Reno and a 300 ms minimum RTO, and the test reads back what
//! the kernel does:
//!
//! - `ss -ti` of a fresh connection shows cwnd 3, an RTO floored at 300 ms (not Linux's 200)
//!   and Reno, on both ends;
//! - a SYN whose SYN-ACK never comes (the server drops it, nftables) is sent again 3 s and then
//!   6 s later, measured by the server's packet counter; a client outside the cgroup, the
//!   control, retries after 1 s;
//! - a server's SYN-ACK that never arrives (the client drops it) is sent again 3 s later and
//!   then 6 s later: the listener's request sockets get the timeout too;
//! - the cgroup is gone after use, and a crashed run's cgroup is swept.
//!
//! Needs root, namespaces, nftables and curl/iperf3; skips with a message otherwise.

use braid_sim::scenario::{Congestion, TcpSpec};
use braid_testbed::hosts::{self, HostTcp};
use braid_testbed::netns::{self, Netns};
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

const CLIENT: &str = "10.98.0.1";
const SERVER: &str = "10.98.0.2";

fn skip_reason() -> Option<String> {
    if let Err(why) = netns::available() {
        return Some(why);
    }
    for tool in ["nft", "curl", "iperf3", "ss"] {
        if netns::run(&["sh", "-c", &format!("command -v {tool} || [ -x /usr/sbin/{tool} ]")]).is_err() {
            return Some(format!("{tool} is missing"));
        }
    }
    None
}

/// Packet counts of the named nftables counters in `ns`.
fn counters(ns: &Netns) -> HashMap<String, u64> {
    let out = ns.sh("nft -j list counters table inet braidtest").unwrap_or_default();
    let v: Value = serde_json::from_str(&out).unwrap_or(Value::Null);
    v["nftables"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|o| {
            let c = o.get("counter")?;
            Some((c["name"].as_str()?.to_string(), c["packets"].as_u64()?))
        })
        .collect()
}

/// `ss -tin` of the established connection to or from `port` in `ns`: (cwnd, rto ms, the line).
fn ss_info(ns: &Netns, port: u16) -> (u32, f64, String) {
    let out = ns.sh(&format!("ss -tin state established '( dport = :{port} or sport = :{port} )'")).unwrap();
    let field = |k: &str| out.split_whitespace().find_map(|w| w.strip_prefix(k)).unwrap_or("nan").to_string();
    (field("cwnd:").parse().unwrap_or(0), field("rto:").parse().unwrap_or(f64::NAN), out)
}

struct Kill(Vec<Child>);
impl Drop for Kill {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[test]
fn end_hosts_run_the_scenarios_tcp() {
    if let Some(why) = skip_reason() {
        eprintln!("SKIP host_tcp: {why}");
        return;
    }
    netns::sweep_stale();
    hosts::sweep_stale();
    let hz = hosts::kernel_hz().expect("kernel HZ");
    assert!([100, 250, 300, 1000].contains(&hz), "HZ {hz}");
    let a = Netns::create("ht", "a").unwrap();
    let b = Netns::create("ht", "b").unwrap();
    netns::run(&["ip", "link", "add", "ha", "netns", a.name(), "type", "veth", "peer", "hb", "netns", b.name()])
        .unwrap();
    a.sh(&format!("ip addr add {CLIENT}/24 dev ha && ip link set ha up")).unwrap();
    b.sh(&format!("ip addr add {SERVER}/24 dev hb && ip link set hb up")).unwrap();

    let era = TcpSpec {
        initial_rto: Duration::from_millis(3000),
        initial_window: 4380,
        min_rto: Duration::from_millis(300),
        congestion: Congestion::Reno,
        ..TcpSpec::default()
    };
    let hosts = HostTcp::new(&era).expect("the era hosts' [tcp]");
    let cgroup = hosts.cgroup().expect("a non-default initial RTO has a cgroup").to_path_buf();
    assert_eq!(hosts.initial_rto_jiffies(), Some(3 * hz));
    // A second set of hosts whose SYNs wait 20 s, for the client of the SYN-ACK measurement,
    // so that no retransmitted SYN of its own makes the server answer early.
    let patient = HostTcp::new(&TcpSpec { initial_rto: Duration::from_secs(20), ..TcpSpec::default() }).unwrap();
    for ns in [&a, &b] {
        hosts.apply(ns).unwrap();
        let routes = ns.sh("ip route show").unwrap();
        for want in ["initcwnd 3", "rto_min lock 300ms", "congctl reno"] {
            assert!(routes.contains(want), "{want}: {routes}");
        }
    }

    // A fresh connection, as the kernel reports it on both ends.
    let listener = b.enter(|| Ok(std::net::TcpListener::bind((SERVER, 84))?)).unwrap();
    let stream = a.enter(|| Ok(std::net::TcpStream::connect((SERVER, 84))?)).unwrap();
    let (_accepted, _) = listener.accept().unwrap();
    for ns in [&a, &b] {
        let (cwnd, rto, line) = ss_info(ns, 84);
        assert_eq!(cwnd, 3, "RFC 3390's 3 segments: {line}");
        assert!((300.0..350.0).contains(&rto), "RTO floored at 300 ms, not 200: {line}");
        assert!(line.contains(" reno "), "{line}");
    }
    drop(stream);

    // Drop SYNs to ports 81 and 83 at the server, SYN-ACKs from port 82 at the client.
    let dir = std::env::temp_dir().join(format!("braid-host-tcp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rules = |path: &Path, counters: &[&str], rules: &[&str]| {
        let mut t = String::from("table inet braidtest {\n");
        for c in counters {
            t += &format!("  counter {c} {{ }}\n");
        }
        t += "  chain in {\n    type filter hook input priority 0;\n";
        for r in rules {
            t += &format!("    {r}\n");
        }
        t += "  }\n}\n";
        std::fs::write(path, t).unwrap();
    };
    rules(
        &dir.join("b.nft"),
        &["syn81", "syn83"],
        &[
            "tcp dport 81 tcp flags & (syn | ack) == syn counter name syn81 drop",
            "tcp dport 83 tcp flags & (syn | ack) == syn counter name syn83 drop",
        ],
    );
    rules(
        &dir.join("a.nft"),
        &["synack82"],
        &["tcp sport 82 tcp flags & (syn | ack) == syn | ack counter name synack82 drop"],
    );
    b.sh(&format!("nft -f {}", dir.join("b.nft").display())).unwrap();
    a.sh(&format!("nft -f {}", dir.join("a.nft").display())).unwrap();

    let log = dir.join("log");
    let mut procs = Kill(Vec::new());
    // The SYN-ACK's server: a listener made by a process in the era hosts' cgroup.
    procs
        .0
        .push(b.spawn_in(Some(&cgroup), &["iperf3", "-s", "-B", SERVER, "-p", "82"], &dir.join("iperf3.log")).unwrap());
    let deadline = Instant::now() + Duration::from_secs(5);
    while !b.sh("ss -tln").unwrap_or_default().contains(":82 ") {
        assert!(Instant::now() < deadline, "iperf3 did not listen");
        std::thread::sleep(Duration::from_millis(50));
    }
    let curl = |cg: Option<&Path>, port: u16| {
        let url = format!("http://{SERVER}:{port}/");
        a.spawn_in(cg, &["curl", "-s", "--connect-timeout", "11", &url], &log).unwrap()
    };
    let start = Instant::now();
    procs.0.push(curl(Some(&cgroup), 81)); // era host: SYN every 3, then 6 s
    procs.0.push(curl(None, 83)); // control: this kernel's 1 s
    procs.0.push(curl(patient.cgroup(), 82)); // SYN-ACKs from the era server
    // When each counter first reached 1, 2, 3 packets.
    let mut seen: HashMap<String, Vec<f64>> = HashMap::new();
    while start.elapsed() < Duration::from_millis(10_500) {
        let now = start.elapsed().as_secs_f64();
        for (name, n) in counters(&b).into_iter().chain(counters(&a)) {
            let times = seen.entry(name).or_default();
            while (times.len() as u64) < n.min(3) {
                times.push(now);
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(procs);
    let gaps = |name: &str| -> Vec<f64> {
        let t = seen.get(name).cloned().unwrap_or_default();
        t.windows(2).map(|w| w[1] - w[0]).collect()
    };
    let (syn, control, synack) = (gaps("syn81"), gaps("syn83"), gaps("synack82"));
    eprintln!(
        "HZ {hz}; gaps between transmissions (s): era SYN {syn:.2?}, control SYN {control:.2?}, era SYN-ACK {synack:.2?}"
    );
    assert!(control.first().is_some_and(|g| (0.8..1.5).contains(g)), "control SYN: {control:?}");
    for (what, g) in [("SYN", &syn), ("SYN-ACK", &synack)] {
        assert_eq!(g.len(), 2, "{what}: {g:?}");
        assert!((2.7..3.6).contains(&g[0]), "{what} resent after {:.2} s, not RFC 2988's 3 s", g[0]);
        assert!((5.5..6.8).contains(&g[1]), "{what} backed off to {:.2} s, not 6 s", g[1]);
    }

    // Clean-up: the cgroups go with the hosts, and a dead run's cgroup is swept.
    drop(hosts);
    drop(patient);
    assert!(!cgroup.exists(), "{} left behind", cgroup.display());
    let root = cgroup.parent().unwrap();
    let dead = (4_000_000..4_194_304).find(|p| !Path::new("/proc").join(p.to_string()).exists()).unwrap();
    let stale = root.join(format!("{}{dead}-tcp0", netns::PREFIX));
    std::fs::create_dir(&stale).unwrap();
    assert!(hosts::sweep_stale() >= 1);
    assert!(!stale.exists());
    let _ = std::fs::remove_dir_all(&dir);
}
