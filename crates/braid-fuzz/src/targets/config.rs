//! The daemons' TOML configuration parser (`braid_config::config`).
//!
//! Parsing never queries DNS (the client looks its servers up when it joins); the target uses
//! `ClientConfig::parse_unresolved`, which says so in its name.

use super::{Target, Verdict, text};
use braid_config::config::{ClientConfig, ServerConfig};

/// Client and server configuration files.
pub(super) const DAEMON_CONFIG: Target = Target {
    name: "daemon-config",
    about: "braid client/server TOML config: ClientConfig::parse_unresolved, ServerConfig::parse, mtu()",
    text: true,
    max_len: 4096,
    run,
    seeds,
};

fn run(input: &[u8]) -> Verdict {
    let t = text(input);
    let mut ok = false;
    if let Ok(c) = ClientConfig::parse_unresolved(&t) {
        ok = true;
        let m = c.mtu().expect("a parsed config has an MTU");
        assert!(m >= 576);
        assert!(!c.server.0.is_empty(), "a parsed config has a server");
        let _ = c.control_path();
        let _ = (c.session.recovery(), c.session.scheduler());
    }
    if let Ok(c) = ServerConfig::parse(&t) {
        ok = true;
        let m = c.mtu().expect("a parsed config has an MTU");
        assert!(m >= 576);
        let _ = (c.session.recovery(), c.session.scheduler());
    }
    Verdict::from_ok(ok)
}

fn seeds() -> Vec<Vec<u8>> {
    [
        r#"server = "192.0.2.1:7700"
private_key = "/etc/braid/client.key"
server_public_key = "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE="
preshared_key = "/etc/braid/psk"
cipher = "aes-256-gcm"
rekey_s = 60
rejoin_s = 3
tun = { name = "braid0", address = "10.77.0.2/24" }
path_mtu = 1500
metrics = "127.0.0.1:9100"
control = "/run/braid/client.sock"
[[uplink]]
name = "lte1"
interface = "wwan0"
up_kbps = 2000
down_kbps = 8000.5
weight = 3
[[uplink]]
name = "wifi"
interface = "wlan0"
[session]
recovery = "fec:25"
scheduler = "wrr:auto"
"#,
        r#"server = "192.0.2.1:7700"
private_key = "client.key"
server_public_key = "AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI="
[tun]
name = "braid0"
address = "10.77.0.2/32"
mtu = 1300
[[uplink]]
name = "a"
interface = "eth1"
[session]
recovery = "rlnc"
scheduler = "eat"
"#,
        r#"listen = "0.0.0.0:7700"
private_key = "/etc/braid/server.key"
handshake_load = 32
tun = { name = "braid0", address = "10.77.0.1/24", mtu = 1380 }
path_mtu = 1500
max_sessions = 16
session_idle_s = 60
metrics = "[::1]:9101"
[session]
recovery = "fountain"
scheduler = "min-delay"
[[peer]]
name = "bus-1"
public_key = "AwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwM="
preshared_key = "/etc/braid/bus-1.psk"
allowed_ips = ["10.77.0.2/32", "10.1.0.0/24"]
[[peer]]
name = "bus-2"
public_key = "BAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQ="
allowed_ips = ["10.77.0.3", "fd00:2::/64"]
"#,
        "listen = \"0.0.0.0:7700\"\nprivate_key = \"k\"\ntun = { name = \"braid0\", address = \"10.77.0.1/24\" }\n[[peer]]\nname = \"v\"\npublic_key = \"BQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQU=\"\nallowed_ips = [\"10.77.0.2\"]\n",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect()
}
