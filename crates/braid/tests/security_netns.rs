//! The attacks of the security review, on real daemons in network namespaces, each showing that
//! the honest vehicle joins within 2 s:
//!
//! - a vehicle sending from another vehicle's passenger address (cryptokey routing);
//! - 100 initiations/s against a server while a two-uplink vehicle joins (cookies per uplink);
//! - 20,000 initiations/s from 65,536 spoofed sources (no table of sources to fill);
//! - a relay adding 0.6 s each way (several pending handshakes, retry backoff);
//! - an all-zero public key, refused at start by key and line;
//! - the control socket: 0600 under umask 000, other users refused.
//!
//! Needs root, `ip netns`, python3 and setpriv; skips with a message otherwise. The tests take a
//! lock so they run one at a time (they time joins, on a shared 2-core machine).

mod common;
use braid_proto::crypto::{CipherSuite, INITIATION_LEN, Initiator, PublicKey, StaticSecret};
use braid_proto::{Instant as ProtoInstant, LinkId};
use common::{print_log_tails, run};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_braid");
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
/// The join deadline of the issue.
const JOIN: Duration = Duration::from_secs(2);

/// Namespaces (`lan` with the server on 192.0.2.1, one per vehicle), processes and files; all
/// removed on drop, also when the test fails.
struct Bed {
    lan: String,
    vans: Vec<String>,
    dir: PathBuf,
    children: Vec<Child>,
    server_pub: String,
}

impl Drop for Bed {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        for ns in self.vans.iter().chain([&self.lan]) {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
        if std::thread::panicking() {
            print_log_tails(&self.dir, ["server.log", "c0.log", "c1.log"], 25);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn have_tools() -> bool {
    if !run(&["id", "-u"]).is_ok_and(|s| s.trim() == "0") {
        eprintln!("SKIP security_netns: needs root for network namespaces and TUN");
        return false;
    }
    for t in [["python3", "-V"], ["setpriv", "--version"], ["ip", "-V"]] {
        if run(&t).is_err() {
            eprintln!("SKIP security_netns: {} is needed", t[0]);
            return false;
        }
    }
    true
}

/// `braid genkey` into `dir/name.key` (mode 600); returns the public key.
fn genkey(dir: &Path, name: &str) -> String {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    let key = run(&[BIN, "genkey"]).unwrap_or_else(|e| panic!("{e}"));
    let path = dir.join(format!("{name}.key"));
    std::fs::write(&path, &key).expect("key file");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let mut child =
        Command::new(BIN).arg("pubkey").stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("braid pubkey");
    child.stdin.take().expect("stdin").write_all(key.as_bytes()).expect("write key");
    String::from_utf8_lossy(&child.wait_with_output().expect("braid pubkey").stdout).trim().to_string()
}

impl Bed {
    /// The server's namespace and `uplinks[i]` veth pairs to vehicle i's namespace (10.<i+1>.<j+1>.0/24).
    fn new(tag: &str, uplinks: &[usize]) -> Option<Bed> {
        if !have_tools() {
            return None;
        }
        let id = std::process::id() % 10_000;
        let lan = format!("bsl{tag}{id}");
        let vans: Vec<String> = (0..uplinks.len()).map(|i| format!("bsv{tag}{i}{id}")).collect();
        let dir = std::env::temp_dir().join(format!("braid-sec-{tag}-{id}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let mut bed = Bed { lan: lan.clone(), vans: Vec::new(), dir, children: Vec::new(), server_pub: String::new() };
        run(&["ip", "netns", "add", &lan]).expect("netns");
        bed.ns(
            &lan,
            "ip link set lo up && ip addr add 192.0.2.1/32 dev lo && sysctl -qw net.ipv4.conf.all.rp_filter=0",
        );
        for (i, (van, &n)) in vans.iter().zip(uplinks).enumerate() {
            run(&["ip", "netns", "add", van]).expect("netns");
            bed.vans.push(van.clone());
            bed.ns(van, "ip link set lo up");
            for j in 0..n {
                let (u, l, net) = (format!("u{j}"), format!("l{i}{j}"), format!("10.{}.{}", i + 1, j + 1));
                run(&["ip", "link", "add", &u, "netns", van, "type", "veth", "peer", &l, "netns", &lan]).expect("veth");
                bed.ns(van, &format!("ip addr add {net}.2/24 dev {u} && ip link set {u} up"));
                bed.ns(
                    &lan,
                    &format!("ip addr add {net}.1/24 dev {l} && ip link set {l} up && sysctl -qw net.ipv4.conf.{l}.rp_filter=0"),
                );
                bed.ns(van, &format!("ip route add 192.0.2.1 via {net}.1 dev {u} metric {}", 10 + j));
            }
        }
        bed.server_pub = genkey(&bed.dir, "server");
        Some(bed)
    }

    fn ns(&self, ns: &str, cmd: &str) -> String {
        run(&["ip", "netns", "exec", ns, "sh", "-c", cmd]).unwrap_or_else(|e| panic!("{e}"))
    }

    fn spawn(&mut self, ns: &str, cmd: &str, log: &str) -> usize {
        let log = std::fs::File::create(self.dir.join(log)).expect("log file");
        let child = Command::new("ip")
            .args(["netns", "exec", ns, "sh", "-c", cmd])
            .env("BRAID_LOG", "info,braid_proto=warn")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log file"))
            .stderr(log)
            .spawn()
            .expect("spawn");
        self.children.push(child);
        self.children.len() - 1
    }

    /// Writes server.toml listing `peers` (name, public key, allowed_ips) and starts the server
    /// (with umask 000, so the control socket's mode is the daemon's doing).
    fn start_server(&mut self, peers: &[(&str, &str, &str)]) {
        let d = self.dir.display().to_string();
        let mut cfg = format!(
            "listen = \"0.0.0.0:7700\"\nprivate_key = \"{d}/server.key\"\n\
             tun = {{ name = \"braid0\", address = \"10.77.0.1/24\" }}\ncontrol = \"{d}/server.sock\"\n"
        );
        for (name, key, allowed) in peers {
            cfg.push_str(&format!("[[peer]]\nname = \"{name}\"\npublic_key = \"{key}\"\nallowed_ips = {allowed}\n"));
        }
        std::fs::write(self.dir.join("server.toml"), cfg).expect("server.toml");
        let lan = self.lan.clone();
        self.spawn(&lan, &format!("umask 000; exec {BIN} server --config {d}/server.toml"), "server.log");
        let sock = self.dir.join("server.sock");
        wait_for("the server", Duration::from_secs(10), || sock.exists());
    }

    /// Writes c<i>.toml for vehicle i (tunnel address 10.77.0.<i+2>, its uplinks) and returns
    /// the vehicle's public key; `server` is the address it joins.
    fn client_config(&self, i: usize, uplinks: usize, server: &str) -> String {
        let public = genkey(&self.dir, &format!("c{i}"));
        let d = self.dir.display().to_string();
        let mut cfg = format!(
            "server = \"{server}\"\nprivate_key = \"{d}/c{i}.key\"\nserver_public_key = \"{}\"\n\
             tun = {{ name = \"braid0\", address = \"10.77.0.{}/24\" }}\ncontrol = \"{d}/c{i}.sock\"\n",
            self.server_pub,
            i + 2
        );
        for j in 0..uplinks {
            cfg.push_str(&format!("[[uplink]]\nname = \"up{j}\"\ninterface = \"u{j}\"\n"));
        }
        std::fs::write(self.dir.join(format!("c{i}.toml")), cfg).expect("client config");
        public
    }

    /// Starts vehicle i and returns how long it took to have a session (panics beyond `limit`).
    fn join(&mut self, i: usize, limit: Duration) -> Duration {
        let (van, d) = (self.vans[i].clone(), self.dir.display().to_string());
        let t = Instant::now();
        self.spawn(&van, &format!("exec {BIN} client --config {d}/c{i}.toml"), &format!("c{i}.log"));
        wait_for(&format!("vehicle {i} to join"), limit, || self.sessions(&format!("c{i}")) == 1);
        t.elapsed()
    }

    fn status(&self, side: &str) -> Option<Value> {
        let sock = self.dir.join(format!("{side}.sock"));
        let out = run(&[BIN, "status", "--json", "--control", sock.to_str()?]).ok()?;
        serde_json::from_str(&out).ok()
    }

    fn sessions(&self, side: &str) -> usize {
        self.status(side).and_then(|s| s["sessions"].as_array().map(Vec::len)).unwrap_or(0)
    }

    /// A handshake initiation from a key the server does not list, with a valid mac1: what a
    /// flooder who knows only the server's public key sends.
    fn forged_initiation(&self) -> String {
        let key = <[u8; 32]>::try_from(base64_decode(&self.server_pub)).expect("32-byte key");
        let mut c =
            Initiator::new(StaticSecret::from_bytes([7; 32]), PublicKey(key), None, CipherSuite::default(), [9; 32]);
        let mut buf = [0u8; INITIATION_LEN];
        c.initiate(ProtoInstant::from_micros(0), 1, 0, LinkId(0), &mut buf).expect("fits");
        buf.iter().map(|b| format!("{b:02x}")).collect()
    }
}

fn base64_decode(s: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.decode(s).expect("base64")
}

fn wait_for(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(start.elapsed() < timeout, "timed out after {timeout:?} waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Sends one datagram (hex) RATE times a second for SECONDS from one UDP socket.
const FLOOD: &str = r#"
import socket, sys, time
pkt = bytes.fromhex(sys.argv[1]); rate = float(sys.argv[2]); dur = float(sys.argv[3])
dst = (sys.argv[4], int(sys.argv[5]))
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
t0 = time.time(); n = 0
while time.time() - t0 < dur:
    due = int((time.time() - t0) * rate)
    while n < due:
        try: s.sendto(pkt, dst)
        except OSError: pass
        n += 1
    time.sleep(0.002)
print(n, "sent")
"#;

/// Sends one UDP payload (hex) RATE times a second for SECONDS from NSRC spoofed sources
/// (10.200.0.0/16 and on), through a raw socket.
const SPOOF: &str = r#"
import socket, struct, sys, time
pkt = bytes.fromhex(sys.argv[1]); rate = float(sys.argv[2]); dur = float(sys.argv[3])
dip = sys.argv[4]; dport = int(sys.argv[5]); nsrc = int(sys.argv[6])
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
ulen = 8 + len(pkt)
b = bytearray(struct.pack('!BBHHHBBH4s4s', 0x45, 0, 20 + ulen, 0, 0, 64, 17, 0, bytes(4), socket.inet_aton(dip))
              + struct.pack('!HHHH', 40000, dport, ulen, 0) + pkt)
t0 = time.time(); n = 0
while True:
    el = time.time() - t0
    if el >= dur: break
    due = min(int(el * rate), n + 500)
    while n < due:
        i = n % nsrc
        b[12] = 10; b[13] = 200 + (i >> 16); b[14] = (i >> 8) & 255; b[15] = i & 255
        b[20:22] = (1024 + (n & 0x7fff)).to_bytes(2, 'big')
        try: s.sendto(b, (dip, 0))
        except OSError: pass
        n += 1
    if n >= int((time.time() - t0) * rate): time.sleep(0.001)
print(n, round(time.time() - t0, 2))
"#;

/// A UDP relay delaying each datagram by DELAY seconds each way: clients send to :7701, the
/// relay forwards to 192.0.2.1:7700 and back.
const RELAY: &str = r#"
import asyncio, sys
D = float(sys.argv[1]); client = None
class Front(asyncio.DatagramProtocol):
    def connection_made(self, t): self.t = t
    def datagram_received(self, data, addr):
        global client; client = addr
        loop.call_later(D, back.t.sendto, data, ('192.0.2.1', 7700))
class Back(asyncio.DatagramProtocol):
    def connection_made(self, t): self.t = t
    def datagram_received(self, data, addr):
        if client: loop.call_later(D, front.t.sendto, data, client)
loop = asyncio.new_event_loop()
_, front = loop.run_until_complete(loop.create_datagram_endpoint(Front, local_addr=('0.0.0.0', 7701)))
_, back = loop.run_until_complete(loop.create_datagram_endpoint(Back, local_addr=('0.0.0.0', 0)))
loop.run_forever()
"#;

/// Sends a forged data datagram (first byte: braid's version and type data, the first argument) for
/// each session id given after it and prints the length of the answer to each (0: none within a
/// second).
const PROBE: &str = r#"
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(1.0)
for sid in sys.argv[2:]:
    s.sendto(bytes([int(sys.argv[1])]) + int(sid).to_bytes(2, "big") + bytes([0]) + bytes([0x7f, 0, 0]) + bytes(53), ("192.0.2.1", 7700))
    try: print(len(s.recv(2048)))
    except socket.timeout: print(0)
"#;

/// The first byte of a data datagram of protocol `version`, as [`PROBE`] takes it.
fn data_first_byte(version: u8) -> u8 {
    (version << 6) | (1 << 2)
}

#[test]
fn a_vehicle_cannot_take_another_vehicles_addresses() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut bed) = Bed::new("a", &[1, 1]) else { return };
    let k17 = bed.client_config(0, 1, "192.0.2.1:7700");
    let k18 = bed.client_config(1, 1, "192.0.2.1:7700");
    bed.start_server(&[("bus-17", &k17, "[\"10.77.0.2/32\"]"), ("bus-18", &k18, "[\"10.77.0.3/32\", \"fd18::/64\"]")]);
    let lan = bed.lan.clone();
    bed.ns(&lan, "ip route add 10.77.0.0/24 dev braid0 2>/dev/null || true");
    let (t17, t18) = (bed.join(0, JOIN), bed.join(1, JOIN));
    println!("bus-17 joined in {:.2} s, bus-18 in {:.2} s", t17.as_secs_f64(), t18.as_secs_f64());
    // bus-18 is reachable from the server's side before it sent anything itself.
    let ping = bed.ns(&lan, "ping -c 3 -i 0.2 -W 2 10.77.0.3");
    assert!(ping.contains(" 0% packet loss"), "bus-18 not reachable by its configured address: {ping}");
    // bus-17 sends from bus-18's address through its own session.
    let van17 = bed.vans[0].clone();
    bed.ns(&van17, "ip addr add 10.77.0.3/32 dev braid0");
    let _ = run(&[
        "ip",
        "netns",
        "exec",
        &van17,
        "ping",
        "-c",
        "3",
        "-i",
        "0.2",
        "-W",
        "1",
        "-I",
        "10.77.0.3",
        "10.77.0.1",
    ]);
    bed.ns(&van17, "ip addr del 10.77.0.3/32 dev braid0");
    let srv = bed.status("server").expect("server status");
    let dropped = srv["passenger_dropped"]["source_not_allowed"].as_u64().unwrap_or(0);
    println!("server dropped {dropped} packets with a source outside the sender's allowed_ips");
    assert!(dropped >= 3, "spoofed sources not refused: {srv}");
    let spoofer = srv["sessions"].as_array().into_iter().flatten().find(|s| s["peer"] == "bus-17").cloned();
    assert!(spoofer.is_some_and(|s| s["source_not_allowed"].as_u64() >= Some(3)), "not counted per vehicle: {srv}");
    // The server's packets to bus-18 still go to bus-18.
    let before = bed.status("c1").expect("bus-18 status")["sessions"][0]["delivered"].as_u64().unwrap_or(0);
    let ping = bed.ns(&lan, "ping -c 5 -i 0.2 -W 2 10.77.0.3");
    let after = bed.status("c1").expect("bus-18 status")["sessions"][0]["delivered"].as_u64().unwrap_or(0);
    println!("server -> bus-18 after the spoof: {}", ping.lines().last().unwrap_or(""));
    assert!(ping.contains(" 0% packet loss") && after >= before + 5, "bus-18's traffic taken over: {ping}");

    // A forged datagram for a live session id and one for a dead id get the same answer (an
    // unknown-session hint each, 11 bytes), so a prober learns nothing about which ids are live.
    let live = srv["sessions"][0]["id"].as_u64().expect("a session id");
    let dead = (live + 1) % 65_536;
    let ours = data_first_byte(braid_proto::wire::VERSION);
    let answers = bed.ns(&lan, &format!("python3 -c '{PROBE}' {ours} {live} {dead}"));
    println!("answers to forged datagrams for a live and a dead session id: {}", answers.trim());
    assert_eq!(answers.split_whitespace().collect::<Vec<_>>(), ["11", "11"], "live and dead ids told apart");
    // One from a braid of another protocol version gets no answer, and the log says why.
    let other = data_first_byte(braid_proto::wire::VERSION ^ 1);
    let answers = bed.ns(&lan, &format!("python3 -c '{PROBE}' {other} {live}"));
    assert_eq!(answers.trim(), "0", "answered a datagram of another protocol version");
    let log = std::fs::read_to_string(bed.dir.join("server.log")).unwrap_or_default();
    assert!(log.contains("another protocol version"), "the server's log does not name the other version");

    // The control socket: 0600 although the server started with umask 000; user nobody is
    // refused, even when the file mode would let it in (peer credentials).
    use std::os::unix::fs::PermissionsExt;
    let sock = bed.dir.join("server.sock");
    let mode = std::fs::metadata(&sock).expect("socket").permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "control socket mode {mode:o} under umask 000");
    std::fs::set_permissions(&bed.dir, std::fs::Permissions::from_mode(0o755)).expect("chmod dir");
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o777)).expect("chmod socket");
    let s = sock.to_str().unwrap_or_default();
    let nobody = run(&[
        "setpriv",
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        BIN,
        "set",
        "--control",
        s,
        "recovery",
        "arq",
    ]);
    assert!(nobody.is_err(), "user nobody switched the server's recovery: {nobody:?}");
    assert_ne!(bed.status("server").expect("status")["sessions"][0]["recovery"], "arq");
}

#[test]
fn a_two_uplink_vehicle_joins_under_an_initiation_flood() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut bed) = Bed::new("f", &[2]) else { return };
    let k = bed.client_config(0, 2, "192.0.2.1:7700");
    bed.start_server(&[("bus-17", &k, "[\"10.77.0.2/32\"]")]);
    let lan = bed.lan.clone();
    let init = bed.forged_initiation();
    bed.spawn(&lan, &format!("exec python3 -c '{FLOOD}' {init} 100 6 192.0.2.1 7700"), "flood.log");
    // Let the server see the load first (its threshold is 64 initiations/s).
    wait_for("the server under load", Duration::from_secs(5), || {
        bed.status("server").is_some_and(|s| s["cookie_replies"].as_u64() > Some(50))
    });
    let t = bed.join(0, JOIN);
    let srv = bed.status("server").expect("server status");
    println!(
        "two-uplink vehicle joined in {:.2} s under 100 initiations/s (cookie replies so far {})",
        t.as_secs_f64(),
        srv["cookie_replies"]
    );
}

#[test]
fn a_vehicle_joins_under_a_flood_from_65536_spoofed_sources() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut bed) = Bed::new("s", &[1, 1]) else { return };
    let k = bed.client_config(0, 1, "192.0.2.1:7700");
    bed.start_server(&[("bus-17", &k, "[\"10.77.0.2/32\"]")]);
    let init = bed.forged_initiation();
    // The flooder sits behind the second vehicle's link (an attacker on the Internet).
    let attacker = bed.vans[1].clone();
    bed.spawn(&attacker, &format!("exec python3 -c \"{SPOOF}\" {init} 20000 10 192.0.2.1 7700 65536"), "spoof.log");
    wait_for("the spoofed flood to reach the server", Duration::from_secs(5), || {
        bed.status("server").is_some_and(|s| s["cookie_replies"].as_u64() > Some(4096))
    });
    // Well into the flood, not at a moment a table of sources might just have been swept.
    std::thread::sleep(Duration::from_millis(400));
    // Three joins (the vehicle restarted in between): a table of sources that fills up leaves a
    // gap now and then, which one lucky join could hit.
    let mut times = Vec::new();
    for round in 0..3 {
        if round > 0 {
            let c = bed.children.len() - 1;
            let _ = bed.children[c].kill();
            let _ = bed.children[c].wait();
            std::thread::sleep(Duration::from_millis(300));
        }
        times.push(bed.join(0, JOIN).as_secs_f64());
    }
    let srv = bed.status("server").expect("server status");
    println!(
        "vehicle joined in {:.2?} s (3 restarts) under 20k/s from 65,536 spoofed sources (cookie replies {}, rate limited {})",
        times, srv["cookie_replies"], srv["rejected"]["rate_limited"]
    );
}

#[test]
fn a_handshake_completes_over_a_1_2_s_round_trip() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut bed) = Bed::new("r", &[1]) else { return };
    let k = bed.client_config(0, 1, "192.0.2.1:7701");
    bed.start_server(&[("bus-17", &k, "[\"10.77.0.2/32\"]")]);
    let lan = bed.lan.clone();
    bed.spawn(&lan, &format!("exec python3 -c \"{RELAY}\" 0.6"), "relay.log");
    wait_for("the relay", Duration::from_secs(10), || !bed.ns(&lan, "ss -Hlun sport = :7701").trim().is_empty());
    let t = bed.join(0, JOIN);
    println!("joined in {:.2} s over a relay adding 0.6 s each way", t.as_secs_f64());
    // And the tunnel carries traffic once any later response has settled the session.
    let van = bed.vans[0].clone();
    wait_for("a ping through the slow tunnel", Duration::from_secs(15), || {
        run(&["ip", "netns", "exec", &van, "ping", "-c", "1", "-W", "3", "10.77.0.1"]).is_ok()
    });
}

#[test]
fn an_all_zero_key_is_refused_at_start_by_key_and_line() {
    let dir = std::env::temp_dir().join(format!("braid-sec-zero-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let server_pub = genkey(&dir, "server");
    let d = dir.display();
    let zero = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
    std::fs::write(
        dir.join("server.toml"),
        format!(
            "listen = \"0.0.0.0:7700\"\nprivate_key = \"{d}/server.key\"\ntun = {{ name = \"braid0\", address = \"10.77.0.1/24\" }}\n\
             control = \"{d}/s.sock\"\n[[peer]]\nname = \"bus-0\"\npublic_key = \"{zero}\"\nallowed_ips = [\"10.77.0.2/32\"]\n"
        ),
    )
    .expect("server.toml");
    std::fs::write(
        dir.join("client.toml"),
        format!(
            "server = \"192.0.2.1:7700\"\nprivate_key = \"{d}/server.key\"\nserver_public_key = \"{zero}\"\n\
             tun = {{ name = \"braid0\", address = \"10.77.0.2/24\" }}\n[[uplink]]\nname = \"a\"\ninterface = \"u0\"\n"
        ),
    )
    .expect("client.toml");
    for (role, line) in [("server", "line 7"), ("client", "line 3")] {
        let t = Instant::now();
        let out = Command::new(BIN).args([role, "--config", &format!("{d}/{role}.toml")]).output().expect("run");
        let err = String::from_utf8_lossy(&out.stderr);
        println!("{role}: exit {:?} in {:.2} s: {}", out.status.code(), t.elapsed().as_secs_f64(), err.trim());
        assert!(!out.status.success(), "{role} started with an all-zero key");
        assert!(err.contains("public_key") && err.contains(line) && err.contains("small order"), "{role}: {err}");
    }
    assert!(!server_pub.is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}
