//! The daemons' configuration files (TOML).
//!
//! Every table refuses unknown keys (`deny_unknown_fields`) and every value that the engine would
//! refuse is checked while parsing, so a bad file fails at start with the toml crate's message: the
//! line, the column and the key.

use crate::allowed_ips::{AllowedIps, RouteTable};
use anyhow::{Context, bail};
use braid_proto::crypto::{CipherSuite, PeerConfig, PublicKey, StaticSecret};
use braid_proto::{Metering, RecoveryKind, SchedulerKind, Session, SessionConfig};
use serde::{Deserialize, Serialize};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};

/// Outer IPv4 + UDP header bytes around every braid datagram.
pub const OUTER_IPV4_UDP: usize = 28;
/// Outer IPv6 + UDP header bytes around every braid datagram.
pub const OUTER_IPV6_UDP: usize = 48;
/// Bytes kept free for the AEAD tag that seals every datagram.
pub const AEAD_RESERVE: usize = braid_proto::crypto::TAG_LEN;
/// Path MTU assumed when the file does not say.
pub const DEFAULT_PATH_MTU: u16 = 1500;

/// `braid client` configuration.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientConfig {
    /// The server, `host:port` (`[v6 address]:port` for an IPv6 literal), or several of them
    /// (`server = ["a:7700", "b:7700"]`, also spelled `servers`): the client moves to the next
    /// when the one in use stops answering, and looks the name up again each time.
    #[serde(alias = "servers")]
    pub server: ServerList,
    /// This vehicle's private key file (`braid genkey`; mode 600).
    pub private_key: PathBuf,
    /// The server's public key (`braid pubkey`), base64.
    pub server_public_key: Key,
    /// A pre-shared key file (optional; `braid genkey` makes one), the same on the server's
    /// `[[peer]]` entry for this vehicle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preshared_key: Option<PathBuf>,
    /// The transport AEAD: `chacha20-poly1305` (default) or `aes-256-gcm`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_mtu: Option<u16>,
    /// One entry per uplink.
    #[serde(default)]
    pub uplink: Vec<UplinkConfig>,
    /// Engine settings.
    #[serde(default)]
    pub session: SessionSettings,
    /// Control socket path (default `/run/braid/client.sock`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control: Option<PathBuf>,
    /// Prometheus endpoint address; off when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<SocketAddr>,
    /// Allows `metrics` on an address other than loopback (the endpoint has no authentication).
    #[serde(default)]
    pub metrics_public: bool,
    /// Where the client keeps what must outlive a restart (each uplink's data used this billing
    /// period, `usage.json`), default `/var/lib/braid`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_dir: Option<PathBuf>,
    /// Location awareness (`[location]`): off when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<LocationSettings>,
}

/// The client's `[location]` table: location awareness (braid_proto::location; docs/drive-by.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LocationSettings {
    /// Learn where each uplink is good and act on it (default true once the table is there).
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// gpsd's address, `host:port` (default `127.0.0.1:2947`).
    #[serde(default = "default_gpsd")]
    pub gpsd: String,
    /// Where the learned map is kept across restarts (default `/var/lib/braid/location.json`).
    #[serde(default = "default_location_map")]
    pub map: PathBuf,
}

fn default_true() -> bool {
    true
}

fn default_gpsd() -> String {
    "127.0.0.1:2947".into()
}

fn default_location_map() -> PathBuf {
    PathBuf::from("/var/lib/braid/location.json")
}

/// The client's servers, in the order they are tried; at least one, each `host:port`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "OneOrMany", into = "Vec<String>")]
pub struct ServerList(pub Vec<String>);

impl From<ServerList> for Vec<String> {
    fn from(l: ServerList) -> Vec<String> {
        l.0
    }
}

/// `server = "a:7700"` or `server = ["a:7700", "b:7700"]`.
#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl TryFrom<OneOrMany> for ServerList {
    type Error = String;
    fn try_from(v: OneOrMany) -> Result<Self, String> {
        let list = match v {
            OneOrMany::One(s) => vec![s],
            OneOrMany::Many(l) => l,
        };
        if list.is_empty() {
            return Err("at least one server (host:port) is needed".into());
        }
        for s in &list {
            check_host_port(s)?;
        }
        Ok(ServerList(list))
    }
}

/// Checks the form `host:port` or `[v6 address]:port` without looking anything up.
fn check_host_port(s: &str) -> Result<(), String> {
    if s.parse::<SocketAddr>().is_ok() {
        return Ok(());
    }
    let Some((host, port)) = s.rsplit_once(':') else {
        return Err(format!("{s:?} is not host:port (e.g. \"vpn.example.net:7700\" or \"[2001:db8::1]:7700\")"));
    };
    if host.contains(':') || host.starts_with('[') {
        return Err(format!("{s:?}: an IPv6 address goes in brackets, [2001:db8::1]:7700"));
    }
    if host.is_empty() || host.len() > 253 || host.chars().any(|c| !(c.is_ascii_alphanumeric() || c == '-' || c == '.'))
    {
        return Err(format!("{s:?}: {host:?} is not a host name or address"));
    }
    if port.parse::<u16>().ok().filter(|p| *p != 0).is_none() {
        return Err(format!("{s:?}: port {port:?} is not 1..=65535"));
    }
    Ok(())
}

/// `braid server` configuration.
#[derive(Debug, Clone, Serialize, Deserialize)]
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control: Option<PathBuf>,
    /// Prometheus endpoint address; off when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<SocketAddr>,
    /// Allows `metrics` on an address other than loopback (the endpoint has no authentication).
    #[serde(default)]
    pub metrics_public: bool,
    /// This server's number among the servers behind one load balancer that routes by session
    /// id: it makes the high `server_id_bits` bits of every session id it hands out.
    #[serde(default)]
    pub server_id: u16,
    /// How many high bits of the 16-bit session id carry `server_id` (0, the default: none, the
    /// whole id space is this server's). At most 8.
    #[serde(default)]
    pub server_id_bits: u8,
    /// Worker threads that carry the sessions (default 1). A vehicle's sessions always run on
    /// the same worker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<usize>,
}

/// Most worker threads a server may be configured for.
pub const MAX_WORKERS: usize = 64;

/// Most session id bits a server id may take: 8 leave 256 ids per server.
pub const MAX_SERVER_ID_BITS: u8 = 8;

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
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeerEntry {
    /// Its name in status and logs.
    pub name: String,
    /// Its public key, base64.
    pub public_key: Key,
    /// A pre-shared key file, if the vehicle uses one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preshared_key: Option<PathBuf>,
    /// The passenger networks behind the vehicle, IPv4 and IPv6 (its tunnel address among
    /// them): the server routes these to it and takes from it only packets from these.
    pub allowed_ips: AllowedIps,
    /// How the server meters its sends on the vehicle's uplinks, by position.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub uplink: Vec<PeerUplink>,
}

impl PeerEntry {
    /// The vehicle as the handshake knows it: name, public key and pre-shared key (read from its
    /// file, whose permissions are checked).
    pub fn keys(&self) -> anyhow::Result<PeerConfig> {
        let psk = self.preshared_key.as_deref().map(super::keys::read_secret_file).transpose()?;
        Ok(PeerConfig { name: self.name.clone(), public: self.public_key.0, psk })
    }
}

/// A base64 public key, checked while parsing so the error carries the line. A key of small order
/// (all zeros among them) is refused: nobody holds its secret, and every Diffie-Hellman with it
/// gives a result everybody knows, so it would let anyone in as that peer.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Key(pub PublicKey);

impl TryFrom<String> for Key {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        let k = super::keys::parse_public(&s).map_err(|e| format!("{e:#}"))?;
        if k.is_low_order() {
            return Err(format!(
                "{s:?} is a key of small order (all zeros or another point whose Diffie-Hellman results are public); \
                 use the output of `braid pubkey`"
            ));
        }
        Ok(Key(k))
    }
}

impl From<Key> for String {
    fn from(k: Key) -> String {
        super::keys::encode_key(&k.0.0)
    }
}

/// An AEAD name, checked while parsing.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Cipher(pub CipherSuite);

impl TryFrom<String> for Cipher {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse().map(Cipher)
    }
}

impl From<Cipher> for String {
    fn from(c: Cipher) -> String {
        c.0.to_string()
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
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TunConfig {
    /// Interface name.
    pub name: String,
    /// Address with prefix length, IPv4 or IPv6 (`10.77.0.2/24`, `fd77::2/64`), or a list of
    /// them for a dual-stack tunnel (`["10.77.0.2/24", "fd77::2/64"]`): at most one IPv4.
    pub address: TunAddresses,
    /// MTU; computed from the path MTU and braid's overhead when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u16>,
}

/// An IPv4 address and prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Ipv4Cidr {
    /// The address.
    pub addr: Ipv4Addr,
    /// The prefix length.
    pub prefix: u8,
}

/// The TUN device's addresses: at most one IPv4, any number of IPv6, at least one in all.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "AddressOneOrMany", into = "Vec<String>")]
pub struct TunAddresses {
    /// The IPv4 address.
    pub v4: Option<Ipv4Cidr>,
    /// The IPv6 addresses with their prefix lengths.
    pub v6: Vec<(Ipv6Addr, u8)>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum AddressOneOrMany {
    One(String),
    Many(Vec<String>),
}

impl From<TunAddresses> for Vec<String> {
    fn from(a: TunAddresses) -> Vec<String> {
        a.v4.map(String::from).into_iter().chain(a.v6.iter().map(|(addr, p)| format!("{addr}/{p}"))).collect()
    }
}

impl TryFrom<String> for TunAddresses {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        AddressOneOrMany::One(s).try_into()
    }
}

impl TryFrom<AddressOneOrMany> for TunAddresses {
    type Error = String;
    fn try_from(v: AddressOneOrMany) -> Result<Self, String> {
        let list = match v {
            AddressOneOrMany::One(s) => vec![s],
            AddressOneOrMany::Many(l) => l,
        };
        let mut out = TunAddresses { v4: None, v6: Vec::new() };
        for s in list {
            let (a, p) = s
                .split_once('/')
                .ok_or_else(|| format!("{s:?} is not ADDRESS/PREFIX, e.g. 10.77.0.2/24 or fd77::2/64"))?;
            match a.parse::<IpAddr>() {
                Ok(IpAddr::V4(_)) if out.v4.is_some() => return Err(format!("{s:?}: at most one IPv4 address")),
                Ok(IpAddr::V4(_)) => out.v4 = Some(Ipv4Cidr::try_from(s.clone())?),
                Ok(IpAddr::V6(addr)) => {
                    let prefix = p
                        .parse::<u8>()
                        .ok()
                        .filter(|p| *p <= 128)
                        .ok_or_else(|| format!("prefix {p:?} is not 0..=128"))?;
                    out.v6.push((addr, prefix));
                }
                Err(_) => return Err(format!("{a:?} is not an IPv4 or IPv6 address")),
            }
        }
        if out.v4.is_none() && out.v6.is_empty() {
            return Err("at least one address is needed".into());
        }
        Ok(out)
    }
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

impl From<Ipv4Cidr> for String {
    fn from(c: Ipv4Cidr) -> String {
        format!("{}/{}", c.addr, c.prefix)
    }
}

/// One uplink of the client.
#[derive(Debug, Clone, Serialize, Deserialize)]
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coding_budget: Option<f64>,
    /// Carries traffic only when no non-backup uplink is usable; otherwise only a keepalive probe
    /// every 30 s.
    #[serde(default)]
    pub backup: bool,
    /// The uplink's monthly data allowance (`"30GB"`, `"500 MiB"`, or a number of bytes), counted
    /// both ways over braid's datagrams with their IP and UDP headers, kept across restarts in
    /// `state_dir`. At 90 % of it coding stops on this uplink; at 100 % it becomes a backup uplink
    /// until `billing_day` starts the next period. Absent: no allowance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monthly_budget: Option<ByteSize>,
    /// The day of the month (1 to 28, UTC) on which `monthly_budget` starts again (default 1).
    #[serde(default = "default_billing_day")]
    pub billing_day: u8,
}

fn default_billing_day() -> u8 {
    1
}

/// A number of bytes, written `"30GB"`, `"30 GiB"`, `"500MB"`, `"1.5 TB"` (SI units are powers of
/// 1000, as carriers bill; `KiB`, `MiB`, `GiB` and `TiB` powers of 1024) or as a plain number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "SizeText", into = "u64")]
pub struct ByteSize(pub u64);

impl From<ByteSize> for u64 {
    fn from(b: ByteSize) -> u64 {
        b.0
    }
}

/// `"30GB"` or `30000000000`.
#[derive(Deserialize)]
#[serde(untagged)]
enum SizeText {
    Number(u64),
    Text(String),
}

impl TryFrom<SizeText> for ByteSize {
    type Error = String;
    fn try_from(v: SizeText) -> Result<Self, String> {
        match v {
            SizeText::Number(n) => Ok(ByteSize(n)),
            SizeText::Text(t) => t.parse(),
        }
    }
}

impl std::str::FromStr for ByteSize {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        let t = text.trim();
        let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
        let (number, unit) = (&t[..split], t[split..].trim());
        let bad = || format!("{text:?} is not a size such as \"30GB\", \"500 MiB\" or a number of bytes");
        let value: f64 = number.parse().map_err(|_| bad())?;
        let scale: f64 = match unit.to_ascii_lowercase().as_str() {
            "" | "b" => 1.0,
            "kb" | "k" => 1e3,
            "mb" | "m" => 1e6,
            "gb" | "g" => 1e9,
            "tb" | "t" => 1e12,
            "kib" => 1024.0,
            "mib" => 1024f64.powi(2),
            "gib" => 1024f64.powi(3),
            "tib" => 1024f64.powi(4),
            _ => return Err(bad()),
        };
        let bytes = value * scale;
        if !bytes.is_finite() || bytes >= u64::MAX as f64 {
            return Err(bad());
        }
        Ok(ByteSize(bytes.round() as u64))
    }
}

impl UplinkConfig {
    /// Its metering, checked while parsing.
    pub fn metering(&self) -> Metering {
        Metering::new(self.coding_budget, self.backup).unwrap_or_default()
    }
}

/// How the server meters what it sends on one of a vehicle's uplinks: `[[peer.uplink]]`, one per
/// `[[uplink]]` of the vehicle's file, in the same order (the server knows uplinks by position).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeerUplink {
    /// As the vehicle's `coding_budget`, for what the server sends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
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
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionSettings {
    /// Loss-recovery scheme ([`braid_proto::scheme`]: `oec`, `fec:10`, ...), default `auto` (braid's general setting: OEC's coding, CoDel only for bulk loads on long paths, `braid_proto::recovery::Auto`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery: Option<Recovery>,
    /// Scheduler ([`braid_proto::scheme`]: `min-delay`, `wrr:auto`, ...), default `min-delay`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler: Option<Scheduler>,
    /// CoDel on the predicted uplink queue at braid's ingress (`braid_proto::aqm`), default off:
    /// for bulk flows over long fat uplinks, where a passenger's TCP would otherwise fill the
    /// modems' buffers until a burst is lost at once.
    #[serde(default)]
    pub aqm: bool,
    /// A fixed hold time of the sequencing buffer, ms (0 to 10000); derived from the uplinks'
    /// delay spread when absent (braid_proto's `HoldConfig`). Read when a session starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_ms: Option<f64>,
}

impl SessionSettings {
    /// The recovery scheme in force.
    pub fn recovery(&self) -> RecoveryKind {
        self.recovery.map_or(RecoveryKind::Auto, |r| r.0)
    }

    /// The scheduler in force.
    pub fn scheduler(&self) -> SchedulerKind {
        self.scheduler.map_or(SchedulerKind::MinDelay, |s| s.0)
    }

    /// Checks what serde cannot: `hold_ms` within 0..=10000.
    pub fn check(&self) -> anyhow::Result<()> {
        if let Some(ms) = self.hold_ms
            && !(0.0..=10_000.0).contains(&ms)
        {
            bail!("session.hold_ms: {ms} is not within 0..=10000");
        }
        Ok(())
    }

    /// Puts these settings into a new session's configuration.
    pub fn configure(&self, scfg: &mut SessionConfig) {
        scfg.recovery = self.recovery();
        scfg.scheduler = self.scheduler();
        scfg.aqm.enabled = self.aqm;
        scfg.hold.fixed = self.hold();
    }

    /// The fixed hold time, if one is set.
    pub fn hold(&self) -> Option<std::time::Duration> {
        self.hold_ms.map(|ms| std::time::Duration::from_secs_f64(ms / 1e3))
    }

    /// Applies these settings to a running session (SIGHUP).
    pub fn apply(&self, session: &mut Session) {
        session.set_recovery(self.recovery());
        session.set_scheduler(self.scheduler());
        session.set_aqm(self.aqm);
    }
}

/// A config newtype over one of braid-proto's scheme kinds: parsed by the one grammar
/// ([`braid_proto::scheme`]) while the file is read, so the error carries the line, and written
/// back as the same name.
macro_rules! scheme_name {
    ($(#[$doc:meta])* $name:ident($kind:ty)) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(pub $kind);

        impl TryFrom<String> for $name {
            type Error = braid_proto::scheme::SchemeError;
            fn try_from(s: String) -> Result<Self, Self::Error> {
                s.parse()
            }
        }

        impl std::str::FromStr for $name {
            type Err = braid_proto::scheme::SchemeError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                s.parse().map($name)
            }
        }

        impl From<$name> for String {
            fn from(n: $name) -> String {
                n.0.to_string()
            }
        }
    };
}

scheme_name! {
    /// A recovery scheme name ([`braid_proto::scheme`]), checked while parsing so the error
    /// carries the line; written back as the same name.
    Recovery(RecoveryKind)
}

scheme_name! {
    /// A scheduler name ([`braid_proto::scheme`]), checked while parsing.
    Scheduler(SchedulerKind)
}

/// ", line N" for the first line of `text` that mentions `needle` (for errors found after
/// parsing, which the toml crate cannot place), or nothing.
fn line_of(text: &str, needle: &str) -> String {
    text.lines().position(|l| l.contains(needle)).map(|n| format!(" (line {})", n + 1)).unwrap_or_default()
}

/// The metrics endpoint has no authentication: it listens on loopback unless `metrics_public`
/// says otherwise, so a typo such as `0.0.0.0` does not publish the fleet's telemetry.
fn check_metrics(text: &str, addr: Option<SocketAddr>, public: bool) -> anyhow::Result<()> {
    match addr {
        Some(a) if !a.ip().is_loopback() && !public => bail!(
            "metrics{}: {a} is not a loopback address and the endpoint has no authentication; \
             set `metrics_public = true` to serve it there anyway",
            line_of(text, "metrics")
        ),
        _ => Ok(()),
    }
}

/// The TUN MTU for a path MTU: what is left after the outer IPv6 (`v6`) or IPv4 and UDP
/// headers, braid's largest header and the AEAD reserve.
pub fn tun_mtu_over(path_mtu: u16, v6: bool) -> Option<u16> {
    let outer = if v6 { OUTER_IPV6_UDP } else { OUTER_IPV4_UDP };
    let over = outer + braid_proto::wire::MAX_CARRIER_OVERHEAD + AEAD_RESERVE;
    usize::from(path_mtu).checked_sub(over).filter(|m| *m >= 576).map(|m| m as u16)
}

/// The least MTU of a link that carries IPv6 (RFC 8200 section 5).
pub const IPV6_MIN_MTU: u16 = 1280;

/// The TUN MTU in force: the configured one if it fits, else the computed one. `outer_v6`: the
/// outer transport is (or may be) IPv6, whose header is 20 bytes longer.
fn effective_mtu(tun: &TunConfig, path_mtu: Option<u16>, outer_v6: bool) -> anyhow::Result<u16> {
    let path = path_mtu.unwrap_or(DEFAULT_PATH_MTU);
    let max =
        tun_mtu_over(path, outer_v6).with_context(|| format!("path_mtu: {path} is too small for braid's overhead"))?;
    let m = match tun.mtu {
        None => max,
        Some(m) if m > max => {
            bail!("tun.mtu: {m} exceeds {max}, the most a path MTU of {path} leaves after braid's overhead")
        }
        Some(m) if m < 576 => bail!("tun.mtu: {m} is below 576, the IPv4 minimum"),
        Some(m) => m,
    };
    if !tun.address.v6.is_empty() && m < IPV6_MIN_MTU {
        bail!(
            "tun.mtu: {m} is below {IPV6_MIN_MTU}, the IPv6 minimum, and tun.address has an IPv6 address (raise path_mtu or tun.mtu)"
        );
    }
    Ok(m)
}

/// A configuration of the required keys only, turned into the full type through serde so that
/// every other key gets the default a file that leaves it out gets.
fn with_defaults<R: Serialize, C: serde::de::DeserializeOwned>(required: R) -> C {
    // Invariant: `R` serializes to a table holding every key of `C` that has no default, with
    // the types `C` reads (the constructors below pass typed values, never free text).
    let table = toml::Table::try_from(required).expect("the required keys serialize to a table");
    table.try_into().expect("the required keys, typed as the configuration reads them, make a valid configuration")
}

impl ClientConfig {
    /// A client configuration with the required keys and every other one at its default, for
    /// programs that write configuration files (the testbed): set fields, then [`Self::to_toml`].
    pub fn new(server: String, private_key: PathBuf, server_public_key: PublicKey, tun: TunConfig) -> Self {
        #[derive(Serialize)]
        struct Required {
            server: String,
            private_key: PathBuf,
            server_public_key: Key,
            tun: TunConfig,
        }
        with_defaults(Required { server, private_key, server_public_key: Key(server_public_key), tun })
    }

    /// The configuration as a file `braid client --config` reads back unchanged.
    pub fn to_toml(&self) -> anyhow::Result<String> {
        toml::to_string(self).context("writing the client configuration")
    }

    /// Reads and checks a client configuration file.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("in {}", path.display()))
    }

    /// Parses and checks a client configuration. The servers' names are not looked up here: the
    /// client does that when it (re)joins, and retries a name that does not resolve yet.
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        Self::parse_unresolved(text)
    }

    /// Parses and checks a client configuration without any DNS query: what the fuzz target
    /// drives, so that millions of inputs send no traffic.
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
            if let Err(e) = braid_proto::wire::LinkName::new(&u.name) {
                bail!("uplink[{i}].name: {:?}: {e} (the server labels the uplink by it)", u.name);
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
            if u.monthly_budget == Some(ByteSize(0)) {
                bail!(
                    "uplink[{i}].monthly_budget: must be more than 0 (use backup = true for an uplink kept in reserve)"
                );
            }
            if !(1..=28).contains(&u.billing_day) {
                bail!("uplink[{i}].billing_day: {} is not a day 1 to 28 (every month has those)", u.billing_day);
            }
        }
        c.mtu()?;
        c.session.check()?;
        if c.rekey_s == 0 || c.rejoin_s == 0 {
            bail!("rekey_s and rejoin_s: must be at least 1");
        }
        check_metrics(text, c.metrics, c.metrics_public)?;
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

    /// The TUN MTU in force: over an outer IPv6 when a server is an IPv6 address (a name that
    /// resolves to IPv6 only needs `path_mtu` 20 bytes lower, or `tun.mtu`).
    pub fn mtu(&self) -> anyhow::Result<u16> {
        let v6 = self.server.0.iter().any(|s| s.parse::<SocketAddr>().is_ok_and(|a| a.is_ipv6()));
        effective_mtu(&self.tun, self.path_mtu, v6)
    }

    /// The control socket path.
    pub fn control_path(&self) -> PathBuf {
        self.control.clone().unwrap_or_else(|| PathBuf::from("/run/braid/client.sock"))
    }

    /// The state directory (`state_dir`).
    pub fn state_dir(&self) -> PathBuf {
        self.state_dir.clone().unwrap_or_else(|| PathBuf::from("/var/lib/braid"))
    }
}

impl ServerConfig {
    /// A server configuration with the required keys and every other one at its default (see
    /// [`ClientConfig::new`]).
    pub fn new(listen: SocketAddr, private_key: PathBuf, tun: TunConfig, peer: Vec<PeerEntry>) -> Self {
        #[derive(Serialize)]
        struct Required {
            listen: SocketAddr,
            private_key: PathBuf,
            tun: TunConfig,
            peer: Vec<PeerEntry>,
        }
        with_defaults(Required { listen, private_key, tun, peer })
    }

    /// The configuration as a file `braid server --config` reads back unchanged.
    pub fn to_toml(&self) -> anyhow::Result<String> {
        toml::to_string(self).context("writing the server configuration")
    }

    /// Checks a list of `[[peer]]` entries as a file's are checked: names and keys used once, at
    /// most [`braid_proto::wire::FeedbackRepr::MAX_LINKS`] uplinks with valid metering, and no
    /// network in two vehicles' `allowed_ips`. `text` is the file the list came from (for line
    /// numbers; empty for a list that came from elsewhere, such as `braid peer add`).
    pub fn check_peers(peers: &[PeerEntry], text: &str) -> anyhow::Result<()> {
        for (i, p) in peers.iter().enumerate() {
            if peers[..i].iter().any(|o| o.name == p.name) {
                bail!("peer[{i}].name: {:?} is used twice", p.name);
            }
            if peers[..i].iter().any(|o| o.public_key.0 == p.public_key.0) {
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
        if let Some((net, a, b)) = RouteTable::duplicate(peers.iter().map(|p| &p.allowed_ips.0[..])) {
            bail!(
                "peer[{b}].allowed_ips{}: {net} is also peer[{a}]'s ({:?}); a network belongs to one vehicle",
                line_of(text, &net.to_string()),
                peers[a].name
            );
        }
        Ok(())
    }

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
        if c.server_id_bits > MAX_SERVER_ID_BITS {
            bail!("server_id_bits: {} is more than {MAX_SERVER_ID_BITS}", c.server_id_bits);
        }
        if u32::from(c.server_id) >> c.server_id_bits != 0 {
            bail!("server_id: {} does not fit in server_id_bits = {}", c.server_id, c.server_id_bits);
        }
        let most = MAX_SESSIONS >> c.server_id_bits;
        if c.max_sessions > most {
            bail!(
                "max_sessions: {} is more than {most} (session ids are 16 bits, {} of them this server's; at most half are used so that a free one is found at once)",
                c.max_sessions,
                16 - c.server_id_bits
            );
        }
        if c.session_idle_s == 0 {
            bail!("session_idle_s: must be at least 1");
        }
        if let Some(w) = c.workers
            && !(1..=MAX_WORKERS).contains(&w)
        {
            bail!("workers: {w} is not between 1 and {MAX_WORKERS}");
        }
        if c.peer.is_empty() {
            bail!("peer: at least one [[peer]] (a vehicle's name and public key) is needed");
        }
        Self::check_peers(&c.peer, text)?;
        c.mtu()?;
        check_metrics(text, c.metrics, c.metrics_public)?;
        c.session.check()?;
        Ok(c)
    }

    /// Reads the key files: the server's static key and the peers with their pre-shared keys.
    pub fn keys(&self) -> anyhow::Result<(StaticSecret, Vec<PeerConfig>)> {
        let secret = super::keys::read_private_key(&self.private_key).context("private_key")?;
        let peers = self
            .peer
            .iter()
            .enumerate()
            .map(|(i, p)| p.keys().with_context(|| format!("peer[{i}].preshared_key")))
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok((secret, peers))
    }

    /// The TUN MTU in force: over an outer IPv6 when `listen` is an IPv6 address (`[::]` takes
    /// IPv4 vehicles too, whose datagrams are then 20 bytes smaller than they could be).
    pub fn mtu(&self) -> anyhow::Result<u16> {
        effective_mtu(&self.tun, self.path_mtu, self.listen.is_ipv6())
    }

    /// The control socket path.
    pub fn control_path(&self) -> PathBuf {
        self.control.clone().unwrap_or_else(|| PathBuf::from("/run/braid/server.sock"))
    }

    /// The worker threads in force: `workers`, or 1. One is the default because on the 2-core
    /// machine the fleet benchmark runs on, with its emulator sharing the cores, two workers did
    /// not deliver more than one on the whole (docs/fleet.md); a server with cores to spare sets
    /// more.
    pub fn workers(&self) -> usize {
        self.workers.unwrap_or(1).clamp(1, MAX_WORKERS)
    }

    /// The session ids this server hands out: `prefix | low` for `low` in `0..=mask`, the prefix
    /// being `server_id` in the high `server_id_bits` bits.
    pub fn session_ids(&self) -> (u32, u32) {
        let low_bits = 16 - u32::from(self.server_id_bits);
        (u32::from(self.server_id) << low_bits, (1 << low_bits) - 1)
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
allowed_ips = ["10.77.0.2/32", "10.17.0.0/24", "2001:db8:17::/48"]
[[peer]]
name = "bus-18"
public_key = "3p7bfXt9wbTTW2HC7OQ1Nz+DQ8hbeGdNrfx+FG+IK08="
allowed_ips = ["10.77.0.3", "10.18.0.0/24"]
"#;

    #[test]
    fn client_example_parses() {
        let c = ClientConfig::parse(CLIENT).unwrap();
        assert_eq!(c.uplink.len(), 2);
        assert_eq!(c.tun.address.v4, Some(Ipv4Cidr { addr: Ipv4Addr::new(10, 77, 0, 2), prefix: 24 }));
        assert!(c.tun.address.v6.is_empty());
        assert_eq!(c.server, ServerList(vec!["192.0.2.1:7700".into()]));
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

    fn server_err(text: &str) -> String {
        format!("{:#}", ServerConfig::parse(text).unwrap_err())
    }

    #[test]
    fn allowed_ips_are_checked_with_key_and_line() {
        let c = ServerConfig::parse(SERVER).unwrap();
        assert_eq!(c.peer[1].allowed_ips.0.len(), 2);
        let e = server_err(&SERVER.replace("\"10.18.0.0/24\"", "\"10.18.0.1/24\""));
        assert!(e.contains("allowed_ips") && e.contains("line 12") && e.contains("host bits"), "{e}");
        let e = server_err(&SERVER.replace("[\"10.77.0.3\", \"10.18.0.0/24\"]", "[]"));
        assert!(e.contains("allowed_ips") && e.contains("line 12"), "{e}");
        let e = server_err(&SERVER.replace("allowed_ips = [\"10.77.0.3\", \"10.18.0.0/24\"]\n", ""));
        assert!(e.contains("allowed_ips"), "{e}");
        let e = server_err(&SERVER.replace("\"10.18.0.0/24\"", "\"10.17.0.0/24\""));
        assert!(e.contains("peer[1].allowed_ips") && e.contains("line 8") && e.contains("bus-17"), "{e}");
    }

    #[test]
    fn low_order_keys_are_refused_with_key_and_line() {
        let zero = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
        let e = server_err(&SERVER.replace("3p7bfXt9wbTTW2HC7OQ1Nz+DQ8hbeGdNrfx+FG+IK08=", zero));
        assert!(e.contains("public_key") && e.contains("line 11") && e.contains("small order"), "{e}");
        let e = err(&CLIENT.replace("hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo=", zero));
        assert!(e.contains("server_public_key") && e.contains("line 4") && e.contains("small order"), "{e}");
    }

    #[test]
    fn public_metrics_need_saying_so() {
        let with = |m: &str| SERVER.replacen("[[peer]]", &format!("{m}\n[[peer]]"), 1);
        assert!(ServerConfig::parse(&with("metrics = \"127.0.0.1:9477\"")).is_ok());
        assert!(ServerConfig::parse(&with("metrics = \"[::1]:9477\"")).is_ok());
        let e = server_err(&with("metrics = \"0.0.0.0:9477\""));
        assert!(e.contains("metrics") && e.contains("line 5") && e.contains("metrics_public"), "{e}");
        assert!(ServerConfig::parse(&with("metrics = \"0.0.0.0:9477\"\nmetrics_public = true")).is_ok());
        let e = err(&CLIENT.replacen("[[uplink]]", "metrics = \"10.0.0.1:9477\"\n[[uplink]]", 1));
        assert!(e.contains("metrics_public"), "{e}");
    }

    #[test]
    fn written_configs_read_back_the_same() {
        let mut c = ClientConfig::parse(CLIENT).unwrap();
        c.session.hold_ms = Some(30.0);
        c.session.recovery = Some("fec:12.5".parse().unwrap());
        c.session.scheduler = Some("wrr:auto".parse().unwrap());
        c.control = Some("/tmp/c.sock".into());
        let text = c.to_toml().unwrap();
        let back = ClientConfig::parse(&text).unwrap_or_else(|e| panic!("{text}\n{e:#}"));
        assert_eq!(format!("{back:?}"), format!("{c:?}"), "{text}");
        assert_eq!(back.session.hold(), Some(std::time::Duration::from_millis(30)));
        let s = ServerConfig::parse(SERVER).unwrap();
        let text = s.to_toml().unwrap();
        let back = ServerConfig::parse(&text).unwrap_or_else(|e| panic!("{text}\n{e:#}"));
        assert_eq!(format!("{back:?}"), format!("{s:?}"), "{text}");
    }

    #[test]
    fn constructors_give_the_defaults_of_a_file_without_the_key() {
        let tun =
            TunConfig { name: "braid0".into(), address: "10.77.0.2/24".to_string().try_into().unwrap(), mtu: None };
        let key = c_key();
        let c = ClientConfig::new("192.0.2.1:7700".into(), "/k".into(), key, tun.clone());
        assert_eq!((c.rekey_s, c.rejoin_s, c.uplink.len(), c.session.hold_ms), (120, 5, 0, None));
        let allowed_ips = crate::allowed_ips::AllowedIps(vec!["10.77.0.2/32".to_string().try_into().unwrap()]);
        let peer = PeerEntry {
            name: "van".into(),
            public_key: Key(key),
            preshared_key: None,
            allowed_ips,
            uplink: Vec::new(),
        };
        let s = ServerConfig::new("0.0.0.0:7700".parse().unwrap(), "/k".into(), tun, vec![peer]);
        assert_eq!((s.max_sessions, s.session_idle_s), (1024, 120));
        assert!(ServerConfig::parse(&s.to_toml().unwrap()).is_ok());
    }

    fn c_key() -> PublicKey {
        ClientConfig::parse(CLIENT).unwrap().server_public_key.0
    }

    #[test]
    fn hold_ms_is_checked() {
        let e = err(&CLIENT.replace("scheduler = \"min-delay\"", "hold_ms = -3"));
        assert!(e.contains("session.hold_ms"), "{e}");
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
        // The name travels to the server, which labels the uplink's metrics by it.
        let e = err(&CLIENT.replace("name = \"wifi\"", "name = \"wifi \\\"2\\\"\""));
        assert!(e.contains("uplink[1].name") && e.contains("A-Z a-z 0-9"), "{e}");
        let e = err(&CLIENT.replace("tun = { name = \"braid0\",", "tun = { mtu = 1500, name = \"braid0\","));
        assert!(e.contains("tun.mtu"), "{e}");
        let e = err(&CLIENT.replace("192.0.2.1:7700", "nowhere"));
        assert!(e.contains("server"), "{e}");
    }

    #[test]
    fn several_servers_and_ipv6_addresses() {
        let c =
            ClientConfig::parse(&CLIENT.replace(
                "server = \"192.0.2.1:7700\"",
                "servers = [\"vpn-a.example.net:7700\", \"[2001:db8::1]:7700\"]",
            ))
            .unwrap();
        assert_eq!(c.server.0, ["vpn-a.example.net:7700", "[2001:db8::1]:7700"]);
        // An IPv6 server: the outer header is 20 bytes longer, so is the overhead.
        assert_eq!(c.mtu().unwrap(), ClientConfig::parse(CLIENT).unwrap().mtu().unwrap() - 20);
        let c = ClientConfig::parse(&CLIENT.replace("192.0.2.1:7700", "unresolvable.invalid:7700")).unwrap();
        assert_eq!(c.server.0, ["unresolvable.invalid:7700"], "names are looked up when joining, not when parsing");
        let e = err(&CLIENT.replace("\"192.0.2.1:7700\"", "[]"));
        assert!(e.contains("at least one server") && e.contains("line 2"), "{e}");
        let e = err(&CLIENT.replace("192.0.2.1:7700", "2001:db8::1:7700"));
        assert!(e.contains("brackets"), "{e}");
        let e = err(&CLIENT.replace("192.0.2.1:7700", "a.example:0"));
        assert!(e.contains("port"), "{e}");
        let e = err(&CLIENT.replace("server = \"192.0.2.1:7700\"", "server = \"a:1\"\nservers = [\"b:2\"]"));
        assert!(e.contains("duplicate") || e.contains("servers"), "{e}");

        let dual = CLIENT.replace("\"10.77.0.2/24\"", "[\"10.77.0.2/24\", \"fd77::2/64\"]");
        let c = ClientConfig::parse(&dual).unwrap();
        assert_eq!(c.tun.address.v6, [("fd77::2".parse().unwrap(), 64)]);
        assert!(c.tun.address.v4.is_some());
        let c = ClientConfig::parse(&CLIENT.replace("10.77.0.2/24", "fd77::2/64")).unwrap();
        assert!(c.tun.address.v4.is_none() && c.tun.address.v6.len() == 1);
        let e = err(&CLIENT.replace("10.77.0.2/24", "fd77::2/129"));
        assert!(e.contains("0..=128"), "{e}");
        let e = err(&CLIENT.replace("\"10.77.0.2/24\"", "[\"10.77.0.2/24\", \"10.77.0.3/24\"]"));
        assert!(e.contains("at most one IPv4"), "{e}");
        let e = err(&dual.replace("tun = { name = \"braid0\",", "tun = { mtu = 1200, name = \"braid0\","));
        assert!(e.contains("1280"), "{e}");

        let s = ServerConfig::parse(&SERVER.replace("0.0.0.0:7700", "[::]:7700")).unwrap();
        assert!(s.listen.is_ipv6());
        assert_eq!(s.mtu().unwrap(), ServerConfig::parse(SERVER).unwrap().mtu().unwrap() - 20);
    }

    #[test]
    fn server_id_takes_the_high_bits_of_session_ids() {
        let c = ServerConfig::parse(SERVER).unwrap();
        assert_eq!(c.session_ids(), (0, 0xffff));
        let with = |extra: &str| ServerConfig::parse(&format!("{extra}\n{SERVER}"));
        let c = with("server_id = 3\nserver_id_bits = 4\nmax_sessions = 2048").unwrap();
        assert_eq!(c.session_ids(), (0x3000, 0x0fff));
        let e = format!("{:#}", with("server_id = 16\nserver_id_bits = 4").unwrap_err());
        assert!(e.contains("server_id: 16"), "{e}");
        let e = format!("{:#}", with("server_id_bits = 4\nmax_sessions = 2049").unwrap_err());
        assert!(e.contains("max_sessions") && e.contains("2048"), "{e}");
        let e = format!("{:#}", with("server_id_bits = 9").unwrap_err());
        assert!(e.contains("server_id_bits"), "{e}");
    }

    #[test]
    fn workers_default_to_one_and_are_checked() {
        let with = |extra: &str| ServerConfig::parse(&format!("{extra}\n{SERVER}"));
        assert_eq!(ServerConfig::parse(SERVER).unwrap().workers(), 1);
        assert_eq!(with("workers = 3").unwrap().workers(), 3);
        for bad in ["workers = 0", "workers = 65"] {
            let e = format!("{:#}", with(bad).unwrap_err());
            assert!(e.contains("workers") && e.contains("64"), "{e}");
        }
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
