//! The testbed's network (docs/design.md 7), one instance per contender so that contenders can run side
//! by side without meeting each other:
//!
//! ```text
//!  riders ──veth── van ══ up<i> ⇄ emulator ⇄ dn<i> ══ lan ──veth── web
//!  10.0.0.2      10.0.0.1   172.16.<i>.2   172.16.<i>.1   192.0.2.1   10.9.0.1   10.9.0.2
//!  (passengers)  (gateway: braid client,      (one per uplink,   (braid server, (nginx, iperf3)
//!                 kcptun client, MPTCP host)   TUN on each side)  kcptun server)
//! ```
//!
//! Uplink `i` is a pair of TUN devices, `up<i>` in `van` and `dn<i>` in `lan`, joined by the
//! user-space [`Emulator`]; any IP packet crosses it, whoever sends it. The van reaches the server
//! address 192.0.2.1 over every uplink (one route each, lower metric for lower index); a contender
//! adds the routes that make passengers' traffic take its path.

use crate::emulator::{Clock, EmulatedLink, Emulator, LinkReport};
use crate::netns::Netns;
use anyhow::Context;
use braid_sim::scenario::LinkSpec;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use tun_rs::{DeviceBuilder, SyncDevice};

/// A passenger device.
pub const RIDER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
/// The gateway's address on the passengers' LAN.
pub const VAN_LAN: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
/// The passengers' subnet.
pub const RIDERS_NET: &str = "10.0.0.0/24";
/// The braid server's (and kcptun server's) public address, on the lan namespace's loopback.
pub const SERVER: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
/// The remote web and iperf3 server.
pub const WEB: Ipv4Addr = Ipv4Addr::new(10, 9, 0, 2);

/// The van's address on uplink `i`.
pub fn uplink_addr(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(172, 16, i as u8, 2)
}

/// The van-side interface of uplink `i`.
pub fn uplink_dev(i: usize) -> String {
    format!("up{i}")
}

/// One contender's network, torn down (emulator stopped, namespaces and the processes in them
/// removed) on drop.
pub struct Topology {
    /// Passenger devices.
    pub riders: Netns,
    /// The vehicle's gateway, with one interface per uplink.
    pub van: Netns,
    /// The wired side: braid server, kcptun server.
    pub lan: Netns,
    /// Remote servers.
    pub web: Netns,
    /// The uplinks' specs, in scenario order.
    pub links: Vec<LinkSpec>,
    /// Files of this contender (configs, logs).
    pub dir: PathBuf,
    emulator: Option<Emulator>,
    clock: Clock,
}

impl Topology {
    /// Builds the namespaces and starts the emulated `links` with the run's `seed`; `tag` tells
    /// concurrent contenders apart (a few characters).
    pub fn build(tag: &str, links: &[LinkSpec], seed: u64, dir: &Path) -> anyhow::Result<Topology> {
        anyhow::ensure!(
            !links.is_empty() && links.len() <= 16,
            "the testbed carries 1 to 16 uplinks, not {}",
            links.len()
        );
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let riders = Netns::create(tag, "riders")?;
        let van = Netns::create(tag, "van")?;
        let lan = Netns::create(tag, "lan")?;
        let web = Netns::create(tag, "web")?;
        let veth = |a: &Netns, an: &str, b: &Netns, bn: &str| {
            crate::netns::run(&[
                "ip",
                "link",
                "add",
                an,
                "netns",
                a.name(),
                "type",
                "veth",
                "peer",
                bn,
                "netns",
                b.name(),
            ])
        };
        veth(&riders, "r0", &van, "v0")?;
        veth(&lan, "l0", &web, "w0")?;
        riders
            .sh(&format!("ip addr add {RIDER}/24 dev r0 && ip link set r0 up && ip route add default via {VAN_LAN}"))?;
        van.sh(&format!("ip addr add {VAN_LAN}/24 dev v0 && ip link set v0 up"))?;
        lan.sh(&format!("ip addr add 10.9.0.1/24 dev l0 && ip link set l0 up && ip addr add {SERVER}/32 dev lo"))?;
        web.sh(&format!("ip addr add {WEB}/24 dev w0 && ip link set w0 up && ip route add default via 10.9.0.1"))?;
        // No offload settings needed: a TUN device opened without IFF_VNET_HDR cannot take GSO
        // super-packets, so the kernel segments before the emulator sees them; it carries the
        // packets an uplink would.
        let mut emulated = Vec::new();
        for (i, l) in links.iter().enumerate() {
            let (up, dn) = (uplink_dev(i), format!("dn{i}"));
            let van_dev = open_tun(&van, &up)?;
            let lan_dev = open_tun(&lan, &dn)?;
            van.sh(&format!(
                "ip addr add {}/24 dev {up} && ip link set {up} up && ip route add {SERVER} dev {up} metric {}",
                uplink_addr(i),
                10 + i
            ))?;
            lan.sh(&format!("ip addr add 172.16.{i}.1/24 dev {dn} && ip link set {dn} up"))?;
            emulated.push(EmulatedLink { spec: l.clone(), seed, van: van_dev, lan: lan_dev });
        }
        let clock = Clock::start();
        let emulator = Emulator::start(emulated, clock)?;
        Ok(Topology {
            riders,
            van,
            lan,
            web,
            links: links.to_vec(),
            dir: dir.to_path_buf(),
            emulator: Some(emulator),
            clock,
        })
    }

    /// Each link's realised drive-by pass, in link order (`None` for an ordinary link, and
    /// after [`Topology::stop`]).
    pub fn drive_passes(&self) -> Vec<Option<std::sync::Arc<braid_sim::link::driveby::DrivePass>>> {
        self.emulator.as_ref().map(|e| e.passes().to_vec()).unwrap_or_default()
    }

    /// The emulator's clock (time 0 = when the links started).
    pub fn clock(&self) -> Clock {
        self.clock
    }

    /// The emulated links' counters so far.
    pub fn link_report(&self) -> Vec<LinkReport> {
        self.emulator.as_ref().map(Emulator::report).unwrap_or_default()
    }

    /// The best single uplink, as an operator would pick it for plain TCP: the highest down
    /// capacity after loss, the shorter delay on a tie.
    pub fn best_uplink(&self) -> usize {
        best_uplink(&self.links)
    }

    /// Stops the emulator; the links' final counters. The namespaces go on drop.
    pub fn stop(&mut self) -> Vec<LinkReport> {
        self.emulator.take().map(Emulator::stop).unwrap_or_default()
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        // The emulator's threads hold the TUN devices (and with them the namespaces): stop them
        // first; the namespaces and the processes inside go with the fields.
        if let Some(e) = self.emulator.take() {
            e.stop();
        }
    }
}

/// See [`Topology::best_uplink`]. A drive-by link is not a candidate while a link that is always
/// there exists: it is out of range most of the time (a vehicle's default route is its cellular
/// modem; WiFi joins when an access point is in range), and plain TCP or MPTCP's first subflow
/// started over it would find no path.
pub fn best_uplink(links: &[LinkSpec]) -> usize {
    let steady = links.iter().any(|l| l.drive_by.is_none());
    let score = |l: &LinkSpec| {
        if steady && l.drive_by.is_some() {
            return f64::NEG_INFINITY;
        }
        l.down.rate.mean_kbps() * (1.0 - l.down.loss.mean_loss())
    };
    (0..links.len())
        .max_by(|&a, &b| {
            score(&links[a]).total_cmp(&score(&links[b])).then(links[b].down.delay.cmp(&links[a].down.delay))
        })
        .unwrap_or(0)
}

/// Packets a TUN device queues for its emulator thread (the kernel default is 500).
const TUN_TX_QUEUE: u32 = 10_000;

fn open_tun(ns: &Netns, name: &str) -> anyhow::Result<SyncDevice> {
    let name = name.to_string();
    ns.enter(move || {
        DeviceBuilder::new()
            .name(&name)
            .mtu(1500)
            // The link's own queue is the model's drop-tail queue; the TUN's queue only has to
            // absorb an emulator thread that the host scheduled late, so it is made deep enough
            // that such a hiccup never turns into a loss the scenario did not ask for.
            .tx_queue_len(TUN_TX_QUEUE)
            .build_sync()
            .with_context(|| format!("creating TUN {name} (needs /dev/net/tun and CAP_NET_ADMIN)"))
    })
}

#[cfg(test)]
mod tests {
    use super::best_uplink;
    use braid_sim::scenario::Scenario;

    fn links(extra: &str) -> Vec<braid_sim::scenario::LinkSpec> {
        let text = format!(
            r#"
name = "t"
duration_s = 10
[vehicle]
speed_kmh = 50
[[link]]
name = "wifi"
drive_by = {{ aps_m = [100] }}
down = {{ delay_ms = 10, queue_kb = 300 }}
up = {{ delay_ms = 10, queue_kb = 300 }}
{extra}
[workload]
kind = "bulk"
[[scheme]]
name = "default"
"#
        );
        Scenario::from_str(&text, std::path::Path::new(".")).unwrap().links
    }

    #[test]
    fn a_drive_by_link_is_the_best_uplink_only_when_nothing_else_is_always_there() {
        assert_eq!(best_uplink(&links("")), 0);
        let lte = r#"
[[link]]
name = "lte"
down = { rate_kbps = 5000, delay_ms = 40, queue_kb = 100 }
up = { rate_kbps = 2000, delay_ms = 40, queue_kb = 100 }
"#;
        assert_eq!(best_uplink(&links(lte)), 1);
    }
}
