//! Starting each contender on a built [`Topology`]: braid (client in the van, server in the lan),
//! `plain` (kernel TCP over the best uplink, no tunnel: today's practice), `mptcp` (kernel
//! Multipath TCP with one subflow per uplink, via `mptcpize`), and `kcptun` (an ARQ + Reed-Solomon
//! FEC tunnel over the best uplink). The web namespace runs the same servers for all: nginx for
//! `flows`, iperf3 for `bulk` and `cbr`. Every contender's end hosts (the clients' namespace and
//! web, their routes and their processes) get the scenario's `[tcp]` ([`HostTcp`]); the tunnels'
//! own processes (braid, kcptun) keep the kernel's defaults.

use crate::association::{Endpoint, EndpointManager};
use crate::hosts::HostTcp;
use crate::netns::Netns;
use crate::topology::{RIDERS_NET, SERVER, Topology, VAN_LAN, WEB, uplink_addr, uplink_dev};
use anyhow::{Context, bail};
use braid_config::allowed_ips::{AllowedIps, Prefix};
use braid_config::config::{
    ClientConfig, Key, LocationSettings, PeerEntry, PeerUplink, Recovery, Scheduler, ServerConfig, SessionSettings,
    TunConfig, UplinkConfig,
};
use braid_config::keys;
use braid_sim::host::TcpCounters;
use braid_sim::scenario::{Peer, SchemeKind, SchemeSpec};
use serde_json::Value;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::Duration;

/// Port of the web server.
pub const HTTP_PORT: u16 = 80;
/// Port of the iperf3 server.
pub const IPERF_PORT: u16 = 5201;
/// Where kcptun's client listens on the van, for the riders.
const KCPTUN_LOCAL_PORT: u16 = 8388;
/// kcptun's server port on the lan.
const KCPTUN_SERVER_PORT: u16 = 29900;
/// braid's server port.
const BRAID_PORT: u16 = 7700;

/// What the workload needs from the servers in the web namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    /// nginx serving one file of `blob_bytes` (flows download byte ranges of it).
    Http {
        /// Size of the file.
        blob_bytes: u64,
    },
    /// An iperf3 server.
    Iperf,
}

impl Service {
    fn port(self) -> u16 {
        match self {
            Service::Http { .. } => HTTP_PORT,
            Service::Iperf => IPERF_PORT,
        }
    }
}

/// A started contender: where the workload's clients run and what they connect to.
pub struct Running {
    /// The contender's name.
    pub name: String,
    /// Whether the workload's clients run in the van (MPTCP: the multipath host) rather than in
    /// the riders' namespace.
    pub clients_in_van: bool,
    /// Whether clients must be wrapped in `mptcpize run`.
    pub mptcp: bool,
    /// The address the clients connect to.
    pub target: SocketAddr,
    /// braid's control sockets (client, server), to read counters at the end.
    pub braid_control: Option<(PathBuf, PathBuf)>,
    /// The cgroup the workload's clients must run in ([`HostTcp::cgroup`]).
    pub cgroup: Option<PathBuf>,
    children: Vec<Child>,
    /// MPTCP's drive-by endpoints following the WiFi card's association.
    _endpoints: Option<EndpointManager>,
}

impl Running {
    /// The namespace the workload's clients run in.
    pub fn client_ns<'a>(&self, topo: &'a Topology) -> &'a Netns {
        if self.clients_in_van { &topo.van } else { &topo.riders }
    }

    /// Whether every process of the contender is still running; the name of one that exited.
    pub fn exited(&mut self) -> Option<String> {
        self.children.iter_mut().find_map(|c| matches!(c.try_wait(), Ok(Some(_))).then(|| format!("pid {}", c.id())))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Starts the servers of `service` in web and the contender `scheme`, applies the end hosts'
/// TCP `hosts` to the clients' namespace and web, and waits until a client in its namespace
/// reaches the service (at most `ready_within`).
pub fn start(
    topo: &Topology,
    scheme: &SchemeSpec,
    service: Service,
    braid_bin: &Path,
    hosts: &HostTcp,
    gpsd: Option<SocketAddr>,
    ready_within: Duration,
) -> anyhow::Result<Running> {
    let dir = &topo.dir;
    let mut run = Running {
        name: scheme.name.clone(),
        clients_in_van: false,
        mptcp: false,
        target: SocketAddr::from((WEB, service.port())),
        braid_control: None,
        cgroup: hosts.cgroup().map(Path::to_path_buf),
        _endpoints: None,
        children: Vec::new(),
    };
    let best = topo.best_uplink();
    match scheme.kind {
        SchemeKind::Braid { .. } => start_braid(topo, scheme, braid_bin, gpsd, &mut run)?,
        SchemeKind::Peer(Peer::Plain) => {
            topo.van.sh(&format!("ip route add default dev {}", uplink_dev(best)))?;
            topo.lan.sh(&format!("ip route add {RIDERS_NET} dev dn{best}"))?;
        }
        SchemeKind::Peer(Peer::Mptcp) => {
            run.clients_in_van = true;
            run.mptcp = true;
            // One subflow per uplink: each source address leaves by its own uplink (policy
            // routing), the best uplink carries the first subflow, and the others are announced
            // as subflow endpoints (RFC 8684; Linux's in-kernel path manager).
            let mut cmd = format!(
                "ip route add default dev {} && ip mptcp limits set subflow 8 add_addr_accepted 8",
                uplink_dev(best)
            );
            for i in 0..topo.links.len() {
                let _ = write!(
                    cmd,
                    " && ip rule add from {a} table {t} && ip route add default dev {d} table {t}",
                    a = uplink_addr(i),
                    t = 100 + i,
                    d = uplink_dev(i)
                );
                // A drive-by uplink's endpoint follows its association instead
                // (`crate::association`, started with the workload).
                if i != best && topo.links[i].drive_by.is_none() {
                    let _ = write!(
                        cmd,
                        " && ip mptcp endpoint add {} dev {} id {} subflow",
                        uplink_addr(i),
                        uplink_dev(i),
                        endpoint_id(i)
                    );
                }
            }
            topo.van.sh(&cmd)?;
            topo.web.sh("ip mptcp limits set subflow 8 add_addr_accepted 8")?;
            let passes = topo.drive_passes();
            let endpoints: Vec<Endpoint> = (0..topo.links.len())
                .filter(|&i| i != best)
                .filter_map(|i| {
                    let pass = passes.get(i).cloned().flatten()?;
                    Some(Endpoint { addr: uplink_addr(i), dev: uplink_dev(i), id: endpoint_id(i), pass })
                })
                .collect();
            if !endpoints.is_empty() {
                run._endpoints = Some(EndpointManager::start(topo.van.name(), endpoints, topo.clock())?);
            }
            for ns in [&topo.van, &topo.web] {
                let on = ns.sh("sysctl -n net.mptcp.enabled")?;
                if on.trim() != "1" {
                    bail!("kernel MPTCP is disabled in {} (net.mptcp.enabled = {})", ns.name(), on.trim());
                }
            }
        }
        SchemeKind::Peer(Peer::Kcptun) => {
            // The client reaches the kcptun server over the best uplink only.
            topo.van.sh(&format!("ip route replace {SERVER} dev {} metric 1", uplink_dev(best)))?;
            // kcptun's FEC is Reed-Solomon over groups of data shards; K % redundancy means
            // round(10 * K / 100) parity shards per 10 data shards (its default is 10 + 3).
            let parity = scheme.fec_percent.map_or(3, |k| (k / 10.0).round().max(0.0) as u32).to_string();
            let target = format!("{WEB}:{}", service.port());
            let listen = format!(":{KCPTUN_SERVER_PORT}");
            let common = ["--crypt", "none", "--nocomp", "--mode", "fast", "--ds", "10", "--ps", &parity, "--quiet"];
            let mut a = vec!["kcptun-server", "-t", &target, "-l", &listen];
            a.extend_from_slice(&common);
            run.children.push(topo.lan.spawn(&a, &dir.join("kcptun-server.log"))?);
            let local = format!("{VAN_LAN}:{KCPTUN_LOCAL_PORT}");
            let remote = format!("{SERVER}:{KCPTUN_SERVER_PORT}");
            let mut a = vec!["kcptun-client", "-l", &local, "-r", &remote];
            a.extend_from_slice(&common);
            run.children.push(topo.van.spawn(&a, &dir.join("kcptun-client.log"))?);
            run.target = SocketAddr::from((VAN_LAN, KCPTUN_LOCAL_PORT));
        }
    }
    // After the contender's routes exist, so that every route the end hosts use carries them.
    hosts.apply(run.client_ns(topo)).context("applying [tcp] to the clients' namespace")?;
    hosts.apply(&topo.web).context("applying [tcp] to the web namespace")?;
    let server = start_service(topo, service, run.mptcp, hosts.cgroup())?;
    let server_pid = server.id();
    run.children.push(server);
    wait_ready(topo, &mut run, ready_within)?;
    // The server joins the cgroup itself as it starts (kcptun's client answers the readiness
    // probe before that), so give it a moment; one outside would keep the kernel's 1 s.
    wait_for(Duration::from_secs(10), || hosts.holds(server_pid)).with_context(|| {
        format!(
            "contender {}: the web server (pid {server_pid}) did not join the end hosts' cgroup, so it would not get [tcp]'s initial RTO",
            run.name
        )
    })?;
    Ok(run)
}

fn start_braid(
    topo: &Topology,
    scheme: &SchemeSpec,
    braid_bin: &Path,
    gpsd: Option<SocketAddr>,
    run: &mut Running,
) -> anyhow::Result<()> {
    let dir = &topo.dir;
    let (recovery, scheduler) = braid_sim::world::engine_scheme(scheme)?;
    let weights: Vec<u32> = match &scheme.weights {
        Some(w) => w.iter().map(|x| (x * 100.0).round() as u32).collect(),
        _ => vec![1; topo.links.len()],
    };
    let (csock, ssock) = (dir.join("client.sock"), dir.join("server.sock"));
    // A fresh key pair per side and run, as an operator makes them (`braid genkey`, mode 600).
    let (ckey, cpub) = make_key(braid_bin, &dir.join("client.key"))?;
    let (skey, spub) = make_key(braid_bin, &dir.join("server.key"))?;
    // The daemons' files are written through their own types, so every setting of the scheme
    // reaches them or this fails to build.
    let session = SessionSettings {
        recovery: Some(Recovery(recovery)),
        scheduler: Some(Scheduler(scheduler)),
        aqm: scheme.aqm,
        hold_ms: scheme.hold.map(|h| h.as_secs_f64() * 1e3),
    };
    let tun = |address: &str| -> anyhow::Result<TunConfig> {
        let address = address.to_string().try_into().map_err(anyhow::Error::msg)?;
        Ok(TunConfig { name: "braid0".into(), address, mtu: None })
    };
    let mut client =
        ClientConfig::new(format!("{SERVER}:{BRAID_PORT}"), ckey, keys::parse_public(&spub)?, tun("10.77.0.2/24")?);
    client.control = Some(csock.clone());
    client.session = session.clone();
    // Location awareness from the testbed's gpsd; the map starts empty each run, as the
    // simulator's does.
    client.location =
        gpsd.map(|addr| LocationSettings { enabled: true, gpsd: addr.to_string(), map: dir.join("location.json") });
    client.uplink = topo
        .links
        .iter()
        .enumerate()
        .map(|(i, l)| {
            // 0: none given, the daemon finds the rate (its default).
            let (up, down) = l.told_rates_kbps().map_or((0.0, 0.0), |(u, d)| (u.max(1.0).round(), d.max(1.0).round()));
            UplinkConfig {
                name: l.name.clone(),
                interface: uplink_dev(i),
                up_kbps: up,
                down_kbps: down,
                weight: weights.get(i).copied().unwrap_or(1),
                coding_budget: l.metering.coding_budget,
                backup: l.metering.backup,
                monthly_budget: None,
                billing_day: 1,
            }
        })
        .collect();
    // The vehicle's tunnel address and the riders' network behind it (cryptokey routing).
    let allowed =
        ["10.77.0.2/32", RIDERS_NET].iter().map(|p| Prefix::try_from(p.to_string()).map_err(anyhow::Error::msg));
    let van = PeerEntry {
        name: "van".into(),
        public_key: Key(keys::parse_public(&cpub)?),
        preshared_key: None,
        allowed_ips: AllowedIps(allowed.collect::<anyhow::Result<_>>()?),
        // The scenario's metering holds for what the server sends too.
        uplink: topo
            .links
            .iter()
            .map(|l| PeerUplink { coding_budget: l.metering.coding_budget, backup: l.metering.backup })
            .collect(),
    };
    let mut server =
        ServerConfig::new(SocketAddr::from(([0, 0, 0, 0], BRAID_PORT)), skey, tun("10.77.0.1/24")?, vec![van]);
    server.control = Some(ssock.clone());
    server.session = session;
    let (client, server) = (client.to_toml()?, server.to_toml()?);
    let (cpath, spath) = (dir.join("client.toml"), dir.join("server.toml"));
    std::fs::write(&cpath, client)?;
    std::fs::write(&spath, server)?;
    let bin = braid_bin.to_str().context("braid binary path is not UTF-8")?;
    run.children.push(topo.lan.spawn(&[bin, "server", "--config", path_str(&spath)?], &dir.join("server.log"))?);
    run.children.push(topo.van.spawn(&[bin, "client", "--config", path_str(&cpath)?], &dir.join("client.log"))?);
    // Passengers' traffic into the tunnel on both sides once the TUN devices exist.
    wait_for(Duration::from_secs(10), || {
        topo.van.sh("ip link show braid0").is_ok() && topo.lan.sh("ip link show braid0").is_ok()
    })
    .context("braid's TUN devices did not appear within 10 s (see client.log / server.log)")?;
    topo.van.sh("ip route add default dev braid0")?;
    topo.lan.sh(&format!("ip route add {RIDERS_NET} dev braid0"))?;
    run.braid_control = Some((csock, ssock));
    Ok(())
}

/// The MPTCP endpoint id of uplink `i` (ids are unique among the vehicle's endpoints; 0 is the
/// kernel's for the first subflow's address).
fn endpoint_id(i: usize) -> u8 {
    u8::try_from(i + 1).unwrap_or(u8::MAX)
}

/// Writes a new private key to `path` (mode 600) with `braid genkey`; the path and its public key.
fn make_key(braid_bin: &Path, path: &Path) -> anyhow::Result<(PathBuf, String)> {
    use std::os::unix::fs::PermissionsExt as _;
    let bin = path_str(braid_bin)?;
    let key = crate::netns::run(&[bin, "genkey"])?;
    std::fs::write(path, &key)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    let mut c = std::process::Command::new(bin);
    c.arg("pubkey").stdin(std::fs::File::open(path)?);
    let out = c.output().context("braid pubkey")?;
    anyhow::ensure!(out.status.success(), "braid pubkey: {}", String::from_utf8_lossy(&out.stderr));
    Ok((path.to_path_buf(), String::from_utf8_lossy(&out.stdout).trim().to_string()))
}

fn start_service(topo: &Topology, service: Service, mptcp: bool, cgroup: Option<&Path>) -> anyhow::Result<Child> {
    let dir = &topo.dir;
    let wrap = |args: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = if mptcp { vec!["mptcpize".into(), "run".into()] } else { Vec::new() };
        v.extend(args.iter().map(|s| s.to_string()));
        v
    };
    match service {
        Service::Http { blob_bytes } => {
            let www = dir.join("www");
            std::fs::create_dir_all(&www)?;
            std::fs::create_dir_all(dir.join("nginx-tmp"))?;
            // Incompressible content, so nothing on the path could shrink it.
            let mut blob = vec![0u8; blob_bytes.max(1) as usize];
            let mut x = 0x9e37_79b9_7f4a_7c15u64;
            for b in &mut blob {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *b = x as u8;
            }
            std::fs::write(www.join("blob"), blob)?;
            let d = dir.display();
            let conf = format!(
                "daemon off;\nmaster_process off;\nworker_processes 1;\nuser root;\npid {d}/nginx.pid;\nerror_log {d}/nginx-error.log warn;\n\
                 events {{ worker_connections 4096; }}\n\
                 http {{\n  access_log off;\n  sendfile on;\n  keepalive_timeout 0;\n  default_type application/octet-stream;\n\
                   client_body_temp_path {d}/nginx-tmp/body;\n  proxy_temp_path {d}/nginx-tmp/proxy;\n  fastcgi_temp_path {d}/nginx-tmp/fastcgi;\n\
                   uwsgi_temp_path {d}/nginx-tmp/uwsgi;\n  scgi_temp_path {d}/nginx-tmp/scgi;\n\
                   server {{ listen {WEB}:{HTTP_PORT}; root {d}/www; }}\n}}\n"
            );
            let conf_path = dir.join("nginx.conf");
            std::fs::write(&conf_path, conf)?;
            let args = wrap(&["nginx", "-e", &format!("{d}/nginx-error.log"), "-c", path_str(&conf_path)?]);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            topo.web.spawn_in(cgroup, &args, &dir.join("nginx.log"))
        }
        Service::Iperf => {
            // JSON, so that a download's client can fetch the sender's own figures
            // (`--get-server-output`, [`crate::workload::run_iperf`]).
            let args = wrap(&["iperf3", "-s", "-J", "-B", &WEB.to_string(), "-p", &IPERF_PORT.to_string()]);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            topo.web.spawn_in(cgroup, &args, &dir.join("iperf3-server.log"))
        }
    }
}

/// Waits until a TCP connection from the clients' namespace to the target succeeds, over the
/// contender's own path (so braid's links are up and kcptun's tunnel is open).
fn wait_ready(topo: &Topology, run: &mut Running, within: Duration) -> anyhow::Result<()> {
    let ns = run.client_ns(topo);
    let target = run.target;
    let deadline = std::time::Instant::now() + within;
    loop {
        let ok = ns.enter(move || Ok(std::net::TcpStream::connect_timeout(&target, Duration::from_secs(2)).is_ok()))?;
        if ok {
            return Ok(());
        }
        if let Some(who) = run.exited() {
            bail!(
                "contender {}: a process ({who}) exited during start; see the logs in {}",
                run.name,
                topo.dir.display()
            );
        }
        if std::time::Instant::now() > deadline {
            bail!(
                "contender {}: {target} unreachable after {:?}; see the logs in {}",
                run.name,
                within,
                topo.dir.display()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn wait_for(within: Duration, mut ok: impl FnMut() -> bool) -> anyhow::Result<()> {
    let deadline = std::time::Instant::now() + within;
    while !ok() {
        if std::time::Instant::now() > deadline {
            bail!("timed out");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

fn path_str(p: &Path) -> anyhow::Result<&str> {
    p.to_str().with_context(|| format!("path {} is not UTF-8", p.display()))
}

/// braid's counters at the end of a run, read from both daemons' control sockets.
#[derive(Debug, Clone, Default)]
pub struct BraidCounters {
    /// Passenger packets that entered either tunnel end.
    pub tun_in: u64,
    /// Passenger packets that left either tunnel end.
    pub delivered: u64,
    /// Passenger packets either end's AQM dropped (the uplinks were congested).
    pub aqm_dropped: u64,
    /// Data packets sent (first transmissions), both ends.
    pub data_sent: u64,
    /// Data packets sent again.
    pub resent: u64,
    /// Coded packets sent.
    pub coded_sent: u64,
    /// Packets recovered by decoding.
    pub recovered: u64,
    /// The client's estimates per uplink, by name: down capacity (kbit/s) and down loss.
    pub uplink_estimates: Vec<(String, f64, f64)>,
    /// Data packets (first transmissions) each uplink carried, both ends, indexed by uplink id:
    /// the simulator's `data_share`. The links' byte counts also hold coded packets and reports.
    pub uplink_data_sent: Vec<u64>,
}

/// Reads [`BraidCounters`] with `braid status --json`.
pub fn braid_counters(braid_bin: &Path, control: &(PathBuf, PathBuf)) -> anyhow::Result<BraidCounters> {
    let mut c = BraidCounters::default();
    for (k, sock) in [&control.0, &control.1].into_iter().enumerate() {
        let out = crate::netns::run(&[path_str(braid_bin)?, "status", "--json", "--control", path_str(sock)?])?;
        let v: Value = serde_json::from_str(&out).context("braid status --json")?;
        for s in v["sessions"].as_array().into_iter().flatten() {
            for u in s["uplinks"].as_array().into_iter().flatten() {
                // Uplink ids are a u8 on the wire.
                if let Some(id) = u["id"].as_u64().filter(|&id| id < 256).map(|id| id as usize) {
                    if c.uplink_data_sent.len() <= id {
                        c.uplink_data_sent.resize(id + 1, 0);
                    }
                    c.uplink_data_sent[id] += u["data_sent"].as_u64().unwrap_or(0);
                }
                if k == 0 {
                    let name = u["name"].as_str().unwrap_or_default().to_string();
                    let cap = u["rx_capacity_kbps"].as_f64().unwrap_or(0.0);
                    c.uplink_estimates.push((name, cap, u["rx_loss"].as_f64().unwrap_or(0.0)));
                }
            }
            let n = |k: &str| s[k].as_u64().unwrap_or(0);
            c.tun_in += n("tun_in");
            c.delivered += n("delivered");
            c.aqm_dropped += n("aqm_dropped");
            c.data_sent += n("data_sent");
            c.resent += n("data_resent");
            c.coded_sent += n("coded_sent");
            c.recovered += n("recovered");
        }
    }
    Ok(c)
}

/// `ns`'s TCP retransmission timeouts and loss recoveries so far, from `/proc/net/netstat` (per
/// namespace), in the simulator's terms; zeros when it cannot be read.
pub fn tcp_events(ns: &Netns) -> TcpCounters {
    ns.sh("cat /proc/net/netstat").map(|s| parse_tcp_events(&s)).unwrap_or_default()
}

/// The `TcpExt` counters of a `/proc/net/netstat` text (a header line of names, then a line of
/// values, both starting `TcpExt:`): `TCPTimeouts`, `TCPSackRecovery + TCPRenoRecovery` (the
/// recoveries entered, each one window cut) and `TCPSpuriousRTOs` (timeouts F-RTO undid).
pub fn parse_tcp_events(netstat: &str) -> TcpCounters {
    let mut lines = netstat.lines().filter(|l| l.starts_with("TcpExt:"));
    let (Some(names), Some(values)) = (lines.next(), lines.next()) else { return TcpCounters::default() };
    let mut e = TcpCounters::default();
    for (name, value) in names.split_whitespace().zip(values.split_whitespace()).skip(1) {
        let v: u64 = value.parse().unwrap_or(0);
        match name {
            "TCPTimeouts" => e.timeouts += v,
            "TCPSackRecovery" | "TCPRenoRecovery" => e.recoveries += v,
            "TCPSpuriousRTOs" => e.spurious_timeouts += v,
            _ => {}
        }
    }
    e
}

/// Reads an interface counter (`/sys/class/net/<dev>/statistics/<what>`) inside `ns`.
pub fn if_counter(ns: &Netns, dev: &str, what: &str) -> u64 {
    ns.sh(&format!("cat /sys/class/net/{dev}/statistics/{what}")).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_events_are_read_by_name_from_the_tcpext_lines() {
        let netstat = "TcpExt: SyncookiesSent TCPTimeouts TCPRenoRecovery TCPSackRecovery TCPSpuriousRTOs\n\
                       TcpExt: 1 7 2 5 3\n\
                       IpExt: InNoRoutes TCPTimeouts\n\
                       IpExt: 0 99\n";
        assert_eq!(parse_tcp_events(netstat), TcpCounters { timeouts: 7, recoveries: 7, spurious_timeouts: 3 });
        assert_eq!(parse_tcp_events("garbage\n"), TcpCounters::default());
        assert_eq!(parse_tcp_events("TcpExt: TCPTimeouts\n"), TcpCounters::default(), "no values line");
    }
}
