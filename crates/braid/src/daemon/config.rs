//! The daemons' configuration files (TOML).
//!
//! Every table refuses unknown keys (`deny_unknown_fields`) and every value that the engine would
//! refuse is checked while parsing, so a bad file fails at start with the toml crate's message: the
//! line, the column and the key.

use anyhow::{Context, bail};
use braid_proto::crypto::{CipherSuite, PeerConfig, PublicKey, StaticSecret};
use braid_proto::{Metering, RecoveryKind, SchedulerKind, Session, SessionConfig};
use serde::Deserialize;
use std::net::{Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};

/// Outer IPv4 + UDP header bytes around every braid datagram.
pub const OUTER_IPV4_UDP: usize = 28;
/// Bytes kept free for the AEAD tag that seals every datagram.
pub const AEAD_RESERVE: usize = braid_proto::crypto::TAG_LEN;
/// Path MTU assumed when the file does not say.
pub const DEFAULT_PATH_MTU: u16 = 1500;

/// `braid client` configuration.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientConfig {
    /// The server, `host:port`.
    pub server: String,
    /// This vehicle's private key file (`braid genkey`; mode 600).
    pub private_key: PathBuf,
    /// The server's public key (`braid pubkey`), base64.
    pub server_public_key: Key,
    /// A pre-shared key file (optional; `braid genkey` makes one), the same on the server's
    /// `[[peer]]` entry for this vehicle.
    #[serde(default)]
    pub preshared_key: Option<PathBuf>,
    /// The transport AEAD: `chacha20-poly1305` (default) or `aes-256-gcm`.
    #[serde(default)]
    pub cipher: Option<Cipher>,
    /// Seconds between rekeying handshakes (default 120, as WireGuard).
    #[serde(default = "default_rekey_s")]
    pub rekey_s: u64,
    /// Seconds without an authentic datagram from the server after which the client handshakes
    /// again (the server may have restarted).
    #[serde(default = "default_rejoin_s")]
    pub rejoin_s: u64,
    /// The TUN device.
    pub tun: TunConfig,
    /// Path MTU of the uplinks (default 1500).
    #[serde(default)]
    pub path_mtu: Option<u16>,
    /// One entry per uplink.
    #[serde(default)]
    pub uplink: Vec<UplinkConfig>,
    /// Engine settings.
    #[serde(default)]
    pub session: SessionSettings,
    /// Control socket path (default `/run/braid/client.sock`).
    #[serde(default)]
    pub control: Option<PathBuf>,
    /// Prometheus endpoint address; off when absent.
    #[serde(default)]
    pub metrics: Option<SocketAddr>,
}

/// `braid server` configuration.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// UDP address to listen on.
    pub listen: SocketAddr,
    /// The server's private key file (mode 600).
    pub private_key: PathBuf,
    /// The vehicles it accepts.
    #[serde(default)]
    pub peer: Vec<PeerEntry>,
    /// Handshake initiations per second above which the server asks for cookies (WireGuard's
    /// "under load").
    #[serde(default = "default_handshake_load")]
    pub handshake_load: u32,
    /// The TUN device.
    pub tun: TunConfig,
    /// Path MTU (default 1500).
    #[serde(default)]
    pub path_mtu: Option<u16>,
    /// Engine settings for what the server sends.
    #[serde(default)]
    pub session: SessionSettings,
    /// Most sessions (vehicles) kept at once; a new session beyond it is refused.
    #[serde(default = "default_max_sessions")]
    pub max_sessions: usize,
    /// A session that has received nothing for this long is dropped.
    #[serde(default = "default_idle_s")]
    pub session_idle_s: u64,
    /// Control socket path (default `/run/braid/server.sock`).
    #[serde(default)]
    pub control: Option<PathBuf>,
    /// Prometheus endpoint address; off when absent.
    #[serde(default)]
    pub metrics: Option<SocketAddr>,
}

fn default_rekey_s() -> u64 {
    braid_proto::crypto::REKEY_AFTER.as_secs()
}

fn default_rejoin_s() -> u64 {
    5
}

fn default_handshake_load() -> u32 {
    braid_proto::crypto::handshake::DEFAULT_LOAD_THRESHOLD
}

/// A vehicle the server accepts: `[[peer]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeerEntry {
    /// Its name in status and logs.
    pub name: String,
    /// Its public key, base64.
    pub public_key: Key,
    /// A pre-shared key file, if the vehicle uses one.
    #[serde(default)]
    pub preshared_key: Option<PathBuf>,
    /// How the server meters its sends on the vehicle's uplinks, by position.
    #[serde(default)]
    pub uplink: Vec<PeerUplink>,
}

/// A base64 public key, checked while parsing so the error carries the line.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(try_from = "String")]
pub struct Key(pub PublicKey);

impl TryFrom<String> for Key {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        super::keys::parse_public(&s).map(Key).map_err(|e| format!("{e:#}"))
    }
}

/// An AEAD name, checked while parsing.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(try_from = "String")]
pub struct Cipher(pub CipherSuite);

impl TryFrom<String> for Cipher {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse().map(Cipher)
    }
}

/// What the client's handshake needs, with the key files read.
pub struct ClientKeys {
    /// Its static key.
    pub secret: StaticSecret,
    /// The server's public key.
    pub server: PublicKey,
    /// The pre-shared key.
    pub psk: Option<[u8; 32]>,
}

/// The most sessions a server may be configured for: half the 16-bit session id space.
pub const MAX_SESSIONS: usize = 1 << 15;

fn default_max_sessions() -> usize {
    1024
}

fn default_idle_s() -> u64 {
    120
}

/// The TUN device.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TunConfig {
    /// Interface name.
    pub name: String,
    /// IPv4 address with prefix length, e.g. `10.77.0.2/24`.
    pub address: Ipv4Cidr,
    /// MTU; computed from the path MTU and braid's overhead when absent.
    #[serde(default)]
    pub mtu: Option<u16>,
}

/// An IPv4 address and prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct Ipv4Cidr {
    /// The address.
    pub addr: Ipv4Addr,
    /// The prefix length.
    pub prefix: u8,
}

impl TryFrom<String> for Ipv4Cidr {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        let (a, p) = s.split_once('/').ok_or_else(|| format!("{s:?} is not ADDRESS/PREFIX, e.g. 10.77.0.2/24"))?;
        let addr: Ipv4Addr = a.parse().map_err(|_| format!("{a:?} is not an IPv4 address"))?;
        let prefix: u8 = p.parse().ok().filter(|p| *p <= 32).ok_or_else(|| format!("prefix {p:?} is not 0..=32"))?;
        Ok(Ipv4Cidr { addr, prefix })
    }
}

/// One uplink of the client.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UplinkConfig {
    /// Its name in status output and `braid set weight`.
    pub name: String,
    /// The network interface it sends through (SO_BINDTODEVICE).
    pub interface: String,
    /// Expected upload capacity, kbit/s: bootstraps the engine's estimate (0 = unknown).
    #[serde(default)]
    pub up_kbps: f64,
    /// Expected download capacity, kbit/s.
    #[serde(default)]
    pub down_kbps: f64,
    /// Scheduler weight.
    #[serde(default = "default_weight")]
    pub weight: u32,
    /// Coded bytes the client sends on this uplink at most this fraction of the data bytes it
    /// sends there (`braid_proto::link::CodingMeter`); absent: no bound. The server's side is
    /// its `[[peer.uplink]]`.
    #[serde(default)]
    pub coding_budget: Option<f64>,
    /// Carries traffic only when no non-backup uplink is usable; otherwise only a keepalive probe
    /// every 30 s.
    #[serde(default)]
    pub backup: bool,
}

impl UplinkConfig {
    /// Its metering, checked while parsing.
    pub fn metering(&self) -> Metering {
        Metering::new(self.coding_budget, self.backup).unwrap_or_default()
    }
}

/// How the server meters what it sends on one of a vehicle's uplinks: `[[peer.uplink]]`, one per
/// `[[uplink]]` of the vehicle's file, in the same order (the server knows uplinks by position).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeerUplink {
    /// As the vehicle's `coding_budget`, for what the server sends.
    #[serde(default)]
    pub coding_budget: Option<f64>,
    /// As the vehicle's `backup`.
    #[serde(default)]
    pub backup: bool,
}

impl PeerUplink {
    /// Its metering, checked while parsing.
    pub fn metering(&self) -> Metering {
        Metering::new(self.coding_budget, self.backup).unwrap_or_default()
    }
}

fn default_weight() -> u32 {
    1
}

/// Engine settings: the `[session]` table.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionSettings {
    /// Loss-recovery scheme (`RecoveryKind::from_str`), default `oec`.
    #[serde(default)]
    pub recovery: Option<Recovery>,
    /// Scheduler (`SchedulerKind::from_str`), default `min-delay`.
    #[serde(default)]
    pub scheduler: Option<Scheduler>,
    /// CoDel on the predicted uplink queue at braid's ingress (`braid_proto::aqm`), default off:
    /// for bulk flows over long fat uplinks, where a passenger's TCP would otherwise fill the
    /// modems' buffers until a burst is lost at once.
    #[serde(default)]
    pub aqm: bool,
}

impl SessionSettings {
    /// The recovery scheme in force.
    pub fn recovery(&self) -> RecoveryKind {
        self.recovery.map_or(RecoveryKind::Oec, |r| r.0)
    }

    /// The scheduler in force.
    pub fn scheduler(&self) -> SchedulerKind {
        self.scheduler.map_or(SchedulerKind::MinDelay, |s| s.0)
    }

    /// Puts these settings into a new session's configuration.
    pub fn configure(&self, scfg: &mut SessionConfig) {
        scfg.recovery = self.recovery();
        scfg.scheduler = self.scheduler();
        scfg.aqm.enabled = self.aqm;
    }

    /// Applies these settings to a running session (SIGHUP).
    pub fn apply(&self, session: &mut Session) {
        session.set_recovery(self.recovery());
        session.set_scheduler(self.scheduler());
        session.set_aqm(self.aqm);
    }
}

/// A recovery scheme name, checked while parsing so the error carries the line.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(try_from = "String")]
pub struct Recovery(pub RecoveryKind);

impl TryFrom<String> for Recovery {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse().map(Recovery).map_err(|e| format!("{e}"))
    }
}

/// A scheduler name, checked while parsing.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(try_from = "String")]
pub struct Scheduler(pub SchedulerKind);

impl TryFrom<String> for Scheduler {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse().map(Scheduler).map_err(|e| format!("{e}"))
    }
}

/// The TUN MTU for a path MTU: what is left after the outer IPv4/UDP headers, braid's largest
/// header and the AEAD reserve.
pub fn tun_mtu_for(path_mtu: u16) -> Option<u16> {
    let over = OUTER_IPV4_UDP + braid_proto::wire::MAX_CARRIER_OVERHEAD + AEAD_RESERVE;
    usize::from(path_mtu).checked_sub(over).filter(|m| *m >= 576).map(|m| m as u16)
}

/// The TUN MTU in force: the configured one if it fits, else the computed one.
fn effective_mtu(tun: &TunConfig, path_mtu: Option<u16>) -> anyhow::Result<u16> {
    let path = path_mtu.unwrap_or(DEFAULT_PATH_MTU);
    let max = tun_mtu_for(path).with_context(|| format!("path_mtu: {path} is too small for braid's overhead"))?;
    match tun.mtu {
        None => Ok(max),
        Some(m) if m > max => {
            bail!("tun.mtu: {m} exceeds {max}, the most a path MTU of {path} leaves after braid's overhead")
        }
        Some(m) if m < 576 => bail!("tun.mtu: {m} is below 576, the IPv4 minimum"),
        Some(m) => Ok(m),
    }
}

impl ClientConfig {
    /// Reads and checks a client configuration file.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("in {}", path.display()))
    }

    /// Parses and checks a client configuration, resolving the server's name.
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        let c = Self::parse_unresolved(text)?;
        c.server_addr()?;
        Ok(c)
    }

    /// Parses and checks a client configuration except for resolving `server`, which may query DNS:
    /// what the fuzz target drives, so that millions of inputs send no traffic.
    pub fn parse_unresolved(text: &str) -> anyhow::Result<Self> {
        let c: ClientConfig = toml::from_str(text)?;
        if c.uplink.is_empty() {
            bail!("uplink: at least one [[uplink]] is needed");
        }
        if c.uplink.len() > braid_proto::wire::FeedbackRepr::MAX_LINKS {
            bail!("uplink: at most {} uplinks", braid_proto::wire::FeedbackRepr::MAX_LINKS);
        }
        for (i, u) in c.uplink.iter().enumerate() {
            if c.uplink[..i].iter().any(|o| o.name == u.name) {
                bail!("uplink[{i}].name: {:?} is used twice", u.name);
            }
            if u.interface.is_empty() || u.interface.len() > 15 || u.interface.contains('/') {
                bail!("uplink[{i}].interface: {:?} is not a Linux interface name", u.interface);
            }
            if !(u.up_kbps.is_finite() && u.up_kbps >= 0.0 && u.down_kbps.is_finite() && u.down_kbps >= 0.0) {
                bail!("uplink[{i}]: up_kbps and down_kbps must be non-negative numbers");
            }
            if let Err(e) = Metering::new(u.coding_budget, u.backup) {
                bail!("uplink[{i}].coding_budget: {e}");
            }
        }
        c.mtu()?;
        if c.rekey_s == 0 || c.rejoin_s == 0 {
            bail!("rekey_s and rejoin_s: must be at least 1");
        }
        Ok(c)
    }

    /// Reads the key files.
    pub fn keys(&self) -> anyhow::Result<ClientKeys> {
        let secret = super::keys::read_private_key(&self.private_key).context("private_key")?;
        let psk =
            self.preshared_key.as_deref().map(super::keys::read_secret_file).transpose().context("preshared_key")?;
        Ok(ClientKeys { secret, server: self.server_public_key.0, psk })
    }

    /// The AEAD in force.
    pub fn cipher(&self) -> CipherSuite {
        self.cipher.map(|c| c.0).unwrap_or_default()
    }

    /// The server's address, resolved.
    pub fn server_addr(&self) -> anyhow::Result<SocketAddr> {
        self.server
            .to_socket_addrs()
            .with_context(|| format!("server: {:?} is not host:port", self.server))?
            .find(SocketAddr::is_ipv4)
            .with_context(|| format!("server: {:?} has no IPv4 address", self.server))
    }

    /// The TUN MTU in force.
    pub fn mtu(&self) -> anyhow::Result<u16> {
        effective_mtu(&self.tun, self.path_mtu)
    }

    /// The control socket path.
    pub fn control_path(&self) -> PathBuf {
        self.control.clone().unwrap_or_else(|| PathBuf::from("/run/braid/client.sock"))
    }
}

impl ServerConfig {
    /// Reads and checks a server configuration file.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("in {}", path.display()))
    }

    /// Parses and checks a server configuration.
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        let c: ServerConfig = toml::from_str(text)?;
        if c.max_sessions == 0 {
            bail!("max_sessions: must be at least 1");
        }
        if c.max_sessions > MAX_SESSIONS {
            bail!(
                "max_sessions: {} is more than {MAX_SESSIONS} (session ids are 16 bits; at most half are used so that a free one is found at once)",
                c.max_sessions
            );
        }
        if c.session_idle_s == 0 {
            bail!("session_idle_s: must be at least 1");
        }
        if c.peer.is_empty() {
            bail!("peer: at least one [[peer]] (a vehicle's name and public key) is needed");
        }
        for (i, p) in c.peer.iter().enumerate() {
            if c.peer[..i].iter().any(|o| o.name == p.name) {
                bail!("peer[{i}].name: {:?} is used twice", p.name);
            }
            if c.peer[..i].iter().any(|o| o.public_key.0 == p.public_key.0) {
                bail!("peer[{i}].public_key: the same key as another peer");
            }
            if p.uplink.len() > braid_proto::wire::FeedbackRepr::MAX_LINKS {
                bail!("peer[{i}].uplink: at most {} uplinks", braid_proto::wire::FeedbackRepr::MAX_LINKS);
            }
            for (j, u) in p.uplink.iter().enumerate() {
                if let Err(e) = Metering::new(u.coding_budget, u.backup) {
                    bail!("peer[{i}].uplink[{j}].coding_budget: {e}");
                }
            }
        }
        c.mtu()?;
        Ok(c)
    }

    /// Reads the key files: the server's static key and the peers with their pre-shared keys.
    pub fn keys(&self) -> anyhow::Result<(StaticSecret, Vec<PeerConfig>)> {
        let secret = super::keys::read_private_key(&self.private_key).context("private_key")?;
        let peers = self
            .peer
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let psk = p
                    .preshared_key
                    .as_deref()
                    .map(super::keys::read_secret_file)
                    .transpose()
                    .with_context(|| format!("peer[{i}].preshared_key"))?;
                Ok(PeerConfig { name: p.name.clone(), public: p.public_key.0, psk })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok((secret, peers))
    }

    /// The TUN MTU in force.
    pub fn mtu(&self) -> anyhow::Result<u16> {
        effective_mtu(&self.tun, self.path_mtu)
    }

    /// The control socket path.
    pub fn control_path(&self) -> PathBuf {
        self.control.clone().unwrap_or_else(|| PathBuf::from("/run/braid/server.sock"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLIENT: &str = r#"
server = "192.0.2.1:7700"
private_key = "/etc/braid/client.key"
server_public_key = "hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo="
tun = { name = "braid0", address = "10.77.0.2/24" }
[[uplink]]
name = "lte1"
interface = "wwan0"
up_kbps = 2000
[[uplink]]
name = "wifi"
interface = "wlan0"
[session]
recovery = "oec"
scheduler = "min-delay"
"#;

    const SERVER: &str = r#"
listen = "0.0.0.0:7700"
private_key = "/etc/braid/server.key"
tun = { name = "braid0", address = "10.77.0.1/24" }
[[peer]]
name = "bus-17"
public_key = "hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo="
[[peer]]
name = "bus-18"
public_key = "3p7bfXt9wbTTW2HC7OQ1Nz+DQ8hbeGdNrfx+FG+IK08="
"#;

    #[test]
    fn client_example_parses() {
        let c = ClientConfig::parse(CLIENT).unwrap();
        assert_eq!(c.uplink.len(), 2);
        assert_eq!(c.tun.address, Ipv4Cidr { addr: Ipv4Addr::new(10, 77, 0, 2), prefix: 24 });
        assert_eq!(c.mtu().unwrap(), 1500 - 28 - braid_proto::wire::MAX_CARRIER_OVERHEAD as u16 - 16);
        assert_eq!(c.session.recovery(), RecoveryKind::Oec);
        assert!(!c.session.aqm, "AQM is off unless asked for");
        let on =
            ClientConfig::parse(&CLIENT.replace("scheduler = \"min-delay\"", "scheduler = \"min-delay\"\naqm = true"));
        assert!(on.unwrap().session.aqm);
        let e = format!(
            "{:#}",
            ClientConfig::parse(&CLIENT.replace("scheduler = \"min-delay\"", "aqm = \"yes\"")).unwrap_err()
        );
        assert!(e.contains("aqm") || e.contains("boolean"), "{e}");
    }

    #[test]
    fn server_example_parses() {
        let c = ServerConfig::parse(SERVER).unwrap();
        assert_eq!(c.max_sessions, 1024);
        assert_eq!(c.peer[0].name, "bus-17");
        let e = format!("{:#}", ServerConfig::parse(&SERVER.replace("hSDw", "h_Dw")).unwrap_err());
        assert!(e.contains("public_key") && e.contains("base64"), "{e}");
        let e = format!("{:#}", ServerConfig::parse(&SERVER.replace("bus-18", "bus-17")).unwrap_err());
        assert!(e.contains("peer[1].name"), "{e}");
    }

    fn err(text: &str) -> String {
        format!("{:#}", ClientConfig::parse(text).unwrap_err())
    }

    #[test]
    fn unknown_key_is_named_with_its_line() {
        let e = err(&CLIENT.replace("up_kbps = 2000", "up_kbs = 2000"));
        assert!(e.contains("up_kbs") && e.contains("line 9"), "{e}");
    }

    #[test]
    fn bad_values_are_named() {
        let e = err(&CLIENT.replace("\"oec\"", "\"zip\""));
        assert!(e.contains("zip") && e.contains("line 14"), "{e}");
        let e = err(&CLIENT.replace("10.77.0.2/24", "10.77.0.2"));
        assert!(e.contains("ADDRESS/PREFIX"), "{e}");
        let e = err(&CLIENT.replace("name = \"wifi\"", "name = \"lte1\""));
        assert!(e.contains("uplink[1].name"), "{e}");
        let e = err(&CLIENT.replace("tun = { name = \"braid0\",", "tun = { mtu = 1500, name = \"braid0\","));
        assert!(e.contains("tun.mtu"), "{e}");
        let e = err(&CLIENT.replace("192.0.2.1:7700", "nowhere"));
        assert!(e.contains("server"), "{e}");
        let e = err(&CLIENT.replace("up_kbps = 2000", "up_kbps = 2000\ncoding_budget = -1"));
        assert!(e.contains("uplink[0].coding_budget") && e.contains(">= 0"), "{e}");
    }

    #[test]
    fn uplinks_are_unmetered_unless_they_say() {
        let c = ClientConfig::parse(CLIENT).unwrap();
        assert_eq!(c.uplink[0].metering(), Metering::default());
        let c = ClientConfig::parse(
            &CLIENT
                .replace("up_kbps = 2000", "up_kbps = 2000\ncoding_budget = 0.25")
                .replace("interface = \"wlan0\"", "interface = \"wlan0\"\nbackup = true\ncoding_budget = inf"),
        )
        .unwrap();
        assert_eq!(c.uplink[0].metering(), Metering { coding_budget: Some(0.25), backup: false });
        assert_eq!(c.uplink[1].metering(), Metering { coding_budget: None, backup: true });
        let s =
            ServerConfig::parse(&SERVER.replace(
                "name = \"bus-17\"",
                "name = \"bus-17\"\nuplink = [{ coding_budget = 0.5 }, { backup = true }]",
            ))
            .unwrap();
        assert_eq!(s.peer[0].uplink[0].metering().coding_budget, Some(0.5));
        assert!(s.peer[0].uplink[1].metering().backup);
        let e = format!(
            "{:#}",
            ServerConfig::parse(
                &SERVER.replace("name = \"bus-18\"", "name = \"bus-18\"\nuplink = [{ coding_budget = nan }]")
            )
            .unwrap_err()
        );
        assert!(e.contains("peer[1].uplink[0].coding_budget"), "{e}");
    }
}
