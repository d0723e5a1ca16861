//! End to end: `braid client` and `braid server` in two network namespaces joined by two veth
//! pairs (two uplinks), carrying ping and a 20 MB TCP transfer while one uplink goes down and up,
//! the other's address changes, the scheme is switched live and garbage is thrown at the server.
//!
//! Needs root and `ip netns`; skips with a message otherwise. Uses python3 for the TCP peers.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_braid");

/// Namespaces, processes and files of one run; all removed on drop, also when the test fails.
struct Testbed {
    van: String,
    lan: String,
    dir: PathBuf,
    children: Vec<Child>,
}

impl Drop for Testbed {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        for ns in [&self.van, &self.lan] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
        if std::thread::panicking() {
            for f in ["client.log", "server.log"] {
                let log = std::fs::read_to_string(self.dir.join(f)).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(30).collect();
                eprintln!("--- {f} (last lines) ---");
                for l in tail.iter().rev() {
                    eprintln!("{l}");
                }
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn run(args: &[&str]) -> Result<String, String> {
    let out = Command::new(args[0]).args(&args[1..]).output().map_err(|e| format!("{args:?}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!("{args:?}: {}", String::from_utf8_lossy(&out.stderr)))
    }
}

impl Testbed {
    fn ns(&self, ns: &str, cmd: &str) -> String {
        run(&["ip", "netns", "exec", ns, "sh", "-c", cmd]).unwrap_or_else(|e| panic!("{e}"))
    }

    fn spawn(&mut self, ns: &str, args: &[&str], log: &str) -> usize {
        let log = std::fs::File::create(self.dir.join(log)).expect("log file");
        let child = Command::new("ip")
            .args(["netns", "exec", ns])
            .args(args)
            .env("BRAID_LOG", "info,braid_proto=warn")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log file"))
            .stderr(log)
            .spawn()
            .expect("spawn");
        self.children.push(child);
        self.children.len() - 1
    }

    fn status(&self, side: &str) -> Value {
        let sock = self.dir.join(format!("{side}.sock"));
        let out = run(&[BIN, "status", "--json", "--control", sock.to_str().unwrap_or_default()])
            .unwrap_or_else(|e| panic!("{e}"));
        serde_json::from_str(&out).expect("status JSON")
    }

    fn set(&self, args: &[&str]) {
        let sock = self.dir.join("client.sock");
        let mut a = vec![BIN, "set", "--control", sock.to_str().unwrap_or_default()];
        a.extend_from_slice(args);
        run(&a).unwrap_or_else(|e| panic!("{e}"));
    }
}

/// Builds the namespaces: van (client) and lan (server, 192.0.2.1 on lo), two veth pairs with
/// distinct subnets, a host route to the server through each.
fn setup() -> Option<Testbed> {
    let root = run(&["id", "-u"]).map(|s| s.trim() == "0").unwrap_or(false);
    if !root {
        eprintln!("SKIP daemon_netns: needs root for network namespaces and TUN");
        return None;
    }
    let tag = std::process::id() % 100_000;
    let (van, lan) = (format!("van{tag}"), format!("lan{tag}"));
    let dir = std::env::temp_dir().join(format!("braid-netns-{tag}"));
    let _ = std::fs::create_dir_all(&dir);
    let tb = Testbed { van: van.clone(), lan: lan.clone(), dir, children: Vec::new() };
    if let Err(e) = run(&["ip", "netns", "add", &van]).and_then(|_| run(&["ip", "netns", "add", &lan])) {
        eprintln!("SKIP daemon_netns: ip netns failed: {e}");
        return None;
    }
    for (v, l, net) in [("va0", "la0", "10.1.1"), ("vb0", "lb0", "10.1.2")] {
        run(&["ip", "link", "add", v, "netns", &van, "type", "veth", "peer", l, "netns", &lan]).expect("veth");
        tb.ns(&van, &format!("ip addr add {net}.2/24 dev {v} && ip link set {v} up"));
        tb.ns(&lan, &format!("ip addr add {net}.1/24 dev {l} && ip link set {l} up"));
    }
    tb.ns(&van, "ip link set lo up");
    tb.ns(&lan, "ip link set lo up && ip addr add 192.0.2.1/32 dev lo");
    tb.ns(&van, "ip route add 192.0.2.1 via 10.1.1.1 dev va0 metric 10");
    tb.ns(&van, "ip route add 192.0.2.1 via 10.1.2.1 dev vb0 metric 20");
    Some(tb)
}

fn write_configs(dir: &Path) {
    let d = dir.display();
    std::fs::write(
        dir.join("client.toml"),
        format!(
            r#"server = "192.0.2.1:7700"
tun = {{ name = "braid0", address = "10.77.0.2/24" }}
control = "{d}/client.sock"
metrics = "127.0.0.1:9477"
[[uplink]]
name = "a"
interface = "va0"
[[uplink]]
name = "b"
interface = "vb0"
[session]
recovery = "oec"
scheduler = "min-delay"
"#
        ),
    )
    .expect("client.toml");
    std::fs::write(
        dir.join("server.toml"),
        format!(
            r#"listen = "0.0.0.0:7700"
tun = {{ name = "braid0", address = "10.77.0.1/24" }}
control = "{d}/server.sock"
"#
        ),
    )
    .expect("server.toml");
}

fn wait_for(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(start.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn uplinks(st: &Value) -> Vec<Value> {
    st["sessions"][0]["uplinks"].as_array().cloned().unwrap_or_default()
}

fn all_active(st: &Value) -> bool {
    let u = uplinks(st);
    u.len() == 2 && u.iter().all(|l| l["state"] == "active" && l["present"] == true)
}

const RECEIVER: &str = r#"
import hashlib, socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("10.77.0.1", 5001)); s.listen(1)
c, _ = s.accept(); h = hashlib.sha256(); n = 0
while True:
    b = c.recv(65536)
    if not b: break
    h.update(b); n += len(b)
print(n, h.hexdigest())
"#;

// 20 MB of seeded pseudo-random bytes, paced at ~2.5 MB/s so the link events land mid-transfer.
const SENDER: &str = r#"
import hashlib, random, socket, time
data = random.Random(7).randbytes(20 * 1024 * 1024)
c = socket.create_connection(("10.77.0.1", 5001), timeout=30)
t0 = time.time(); step = 64 * 1024
for i in range(0, len(data), step):
    c.sendall(data[i:i + step])
    ahead = (i + step) / 2.5e6 - (time.time() - t0)
    if ahead > 0: time.sleep(ahead)
c.shutdown(socket.SHUT_WR); c.recv(1); c.close()
print(len(data), hashlib.sha256(data).hexdigest(), round(time.time() - t0, 2))
"#;

#[test]
fn tunnel_survives_uplink_changes() {
    let Some(mut tb) = setup() else { return };
    if run(&["python3", "-c", "import hashlib, random; random.Random(1).randbytes(1)"]).is_err() {
        eprintln!("SKIP daemon_netns: python3 (3.9+) is needed for the TCP peers");
        return;
    }
    write_configs(&tb.dir);
    let (van, lan) = (tb.van.clone(), tb.lan.clone());
    let dir = tb.dir.clone();
    tb.spawn(&lan, &[BIN, "server", "--config", dir.join("server.toml").to_str().unwrap_or_default()], "server.log");
    wait_for("the server", Duration::from_secs(10), || dir.join("server.sock").exists());
    tb.spawn(&van, &[BIN, "client", "--config", dir.join("client.toml").to_str().unwrap_or_default()], "client.log");
    wait_for("the client", Duration::from_secs(10), || dir.join("client.sock").exists());
    wait_for("both uplinks active", Duration::from_secs(10), || all_active(&tb.status("client")));

    let t = Instant::now();
    let ping = tb.ns(&van, "ping -c 5 -i 0.2 -W 2 10.77.0.1");
    println!("ping through the tunnel ({:.1} s):\n{}", t.elapsed().as_secs_f64(), ping.lines().last().unwrap_or(""));
    assert!(ping.contains(" 0% packet loss"), "{ping}");

    let rx = tb.spawn(&lan, &["python3", "-c", RECEIVER], "receiver.out");
    std::thread::sleep(Duration::from_millis(300));
    let tx = tb.spawn(&van, &["python3", "-c", SENDER], "sender.out");
    let start = Instant::now();
    let at = |s: f64| {
        let d = Duration::from_secs_f64(s);
        if let Some(rest) = d.checked_sub(start.elapsed()) {
            std::thread::sleep(rest);
        }
    };

    at(1.5);
    let session = tb.status("client")["sessions"][0]["id"].as_u64().expect("session id") as u32;
    let garbage = format!(
        "import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
         for i in range(300): s.sendto(bytes([0, i % 256]) + b'junk' * 10, ('192.0.2.1', 7700))\n\
         for i in range(100): s.sendto(bytes([0x44]) + ({session}).to_bytes(3, 'big') + bytes(8) + bytes([1]), ('192.0.2.1', 7700))\n"
    );
    tb.ns(&van, &format!("python3 -c \"{garbage}\""));

    at(2.0);
    tb.ns(&van, "ip link set va0 down");
    println!("{:5.1} s: uplink a down", start.elapsed().as_secs_f64());
    at(3.5);
    tb.ns(&van, "ip link set va0 up && ip route replace 192.0.2.1 via 10.1.1.1 dev va0 metric 10");
    println!("{:5.1} s: uplink a up", start.elapsed().as_secs_f64());
    at(5.0);
    tb.ns(
        &van,
        // As a modem reconnecting: the old address goes, a new one comes, the route is re-added.
        "ip addr del 10.1.2.2/24 dev vb0 && ip addr add 10.1.2.3/24 dev vb0 && \
         ip route replace 192.0.2.1 via 10.1.2.1 dev vb0 metric 20",
    );
    println!("{:5.1} s: uplink b readdressed 10.1.2.2 -> 10.1.2.3", start.elapsed().as_secs_f64());
    at(6.5);
    tb.set(&["recovery", "arq"]);
    tb.set(&["weight", "b", "3"]);
    let st = tb.status("client");
    assert_eq!(st["sessions"][0]["recovery"], "arq", "{st}");
    println!("{:5.1} s: recovery switched to arq live", start.elapsed().as_secs_f64());

    let deadline = Instant::now() + Duration::from_secs(30);
    for i in [tx, rx] {
        loop {
            if tb.children[i].try_wait().expect("wait").is_some() {
                break;
            }
            assert!(Instant::now() < deadline, "the transfer did not finish");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let sent = std::fs::read_to_string(dir.join("sender.out")).unwrap_or_default();
    let got = std::fs::read_to_string(dir.join("receiver.out")).unwrap_or_default();
    println!("sender: {}receiver: {}", sent, got);
    assert!(tb.children[tx].try_wait().ok().flatten().is_some_and(|s| s.success()), "sender failed: {sent}");
    let s: Vec<&str> = sent.split_whitespace().collect();
    let r: Vec<&str> = got.split_whitespace().collect();
    assert!(s.len() >= 2 && r.len() >= 2 && s[..2] == r[..2], "transfer not byte-exact: {sent} vs {got}");
    assert_eq!(r[0], (20 * 1024 * 1024).to_string());

    wait_for("both uplinks active again", Duration::from_secs(10), || all_active(&tb.status("client")));
    let st = tb.status("client");
    for u in uplinks(&st) {
        let rtt = u["rtt_ms"].as_f64().unwrap_or(-1.0);
        let loss = u["tx_loss"].as_f64().unwrap_or(-1.0);
        println!(
            "uplink {}: state {} rtt {:.2} ms owd {} ms loss {:.3} share {:.2} data {} coded {} downs {}",
            u["name"], u["state"], rtt, u["owd_ms"], loss, u["data_share"], u["data_sent"], u["coded_sent"], u["downs"]
        );
        assert!(rtt > 0.0 && rtt < 1000.0, "rtt {u}");
        assert!((0.0..=1.0).contains(&loss), "loss {u}");
        assert!(u["data_sent"].as_u64().unwrap_or(0) > 100, "uplink unused: {u}");
    }
    assert!(uplinks(&st)[0]["downs"].as_u64().unwrap_or(0) >= 1, "uplink a never seen down: {st}");
    let srv = tb.status("server");
    let garbage = srv["garbage_datagrams"].as_u64().unwrap_or(0);
    let malformed = srv["sessions"][0]["malformed"].as_u64().unwrap_or(0);
    println!("server: garbage datagrams {garbage}, malformed in session {malformed}, sessions {}", srv["sessions"]);
    assert!(garbage >= 300, "{srv}");
    assert!(malformed >= 100, "{srv}");
    assert_eq!(srv["sessions"].as_array().map(Vec::len), Some(1), "garbage created sessions: {srv}");

    let metrics = tb.ns(
        &van,
        "python3 -c \"import urllib.request as u; print(u.urlopen('http://127.0.0.1:9477/metrics').read().decode())\"",
    );
    assert!(metrics.contains("braid_uplink_rtt_seconds{"), "{metrics}");

    // SIGTERM stops both cleanly: exit 0 and the control socket removed.
    for (i, side) in [(1, "client"), (0, "server")] {
        let pid = tb.children[i].id().to_string();
        run(&["kill", "-TERM", &pid]).expect("kill");
        wait_for("a clean stop", Duration::from_secs(5), || tb.children[i].try_wait().ok().flatten().is_some());
        let code = tb.children[i].try_wait().ok().flatten();
        assert!(code.is_some_and(|c| c.success()), "{side} exit: {code:?}");
        assert!(!dir.join(format!("{side}.sock")).exists(), "{side} left its control socket");
    }
}
