//! Watches the uplinks' interfaces: present or not, up or down, which IPv4 addresses.
//!
//! A blocking thread waits on netlink notifications (through `if-addrs`' `IfChangeNotifier`) with
//! a 500 ms timeout, and after each wake-up re-reads the state of the watched interfaces from
//! `/sys/class/net` and `getifaddrs`: netlink makes changes seen at once, the poll makes sure none
//! is missed (a notifier that cannot be opened degrades to polling alone).

use super::Input;
use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Duration;
use tokio::sync::mpsc;

/// How often the interfaces are re-read when netlink says nothing.
pub const POLL: Duration = Duration::from_millis(500);

/// What an interface looks like now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IfState {
    /// Kernel interface index (changes when the device is re-created, e.g. a modem re-enumerated).
    pub ifindex: u32,
    /// Whether the link is operationally up.
    pub up: bool,
    /// Its IPv4 and global IPv6 addresses, sorted (link-local IPv6 addresses, which every
    /// interface that is up has, reach no server).
    pub addrs: Vec<IpAddr>,
}

impl IfState {
    /// Whether an uplink socket towards a server of this family (`v6`) can work through it: up,
    /// with an address of that family.
    pub fn usable(&self, v6: bool) -> bool {
        self.up && self.addrs.iter().any(|a| a.is_ipv6() == v6)
    }
}

/// Whether `a` is an IPv6 link-local address (fe80::/10).
fn link_local_v6(a: &std::net::Ipv6Addr) -> bool {
    a.segments()[0] & 0xffc0 == 0xfe80
}

/// An interface changed; `state` is `None` when it does not exist.
#[derive(Debug, Clone)]
pub struct IfChange {
    /// Interface name.
    pub name: String,
    /// Its new state.
    pub state: Option<IfState>,
}

fn read_sys(name: &str, file: &str) -> Option<String> {
    std::fs::read_to_string(format!("/sys/class/net/{name}/{file}")).ok().map(|s| s.trim().to_string())
}

/// Reads the state of the named interfaces.
pub fn read_states(names: &[String]) -> HashMap<String, Option<IfState>> {
    let all = if_addrs::get_if_addrs().unwrap_or_default();
    names
        .iter()
        .map(|name| {
            let state = read_sys(name, "ifindex").and_then(|i| i.parse().ok()).map(|ifindex| {
                // "unknown" is what many point-to-point and modem drivers report while working.
                let oper = read_sys(name, "operstate").unwrap_or_default();
                let up = !matches!(oper.as_str(), "down" | "lowerlayerdown" | "notpresent" | "dormant");
                let mut addrs: Vec<IpAddr> = all
                    .iter()
                    .filter(|i| &i.name == name)
                    .filter_map(|i| match &i.addr {
                        if_addrs::IfAddr::V4(a) => Some(IpAddr::V4(a.ip)),
                        if_addrs::IfAddr::V6(a) if !link_local_v6(&a.ip) => Some(IpAddr::V6(a.ip)),
                        _ => None,
                    })
                    .collect();
                addrs.sort();
                IfState { ifindex, up, addrs }
            });
            (name.clone(), state)
        })
        .collect()
}

/// Starts watching `names`; the first report of each comes at once.
pub fn spawn(names: Vec<String>, tx: mpsc::Sender<Input>) {
    std::thread::Builder::new()
        .name("braid-netwatch".into())
        .spawn(move || {
            let mut notifier = if_addrs::IfChangeNotifier::new()
                .map_err(|e| tracing::warn!(error = %e, "no netlink notifier; polling interfaces every 500 ms"))
                .ok();
            let mut last: HashMap<String, Option<IfState>> = HashMap::new();
            let mut first = true;
            loop {
                let now = read_states(&names);
                for (name, state) in &now {
                    if first || last.get(name) != Some(state) {
                        let change = IfChange { name: name.clone(), state: state.clone() };
                        if tx.blocking_send(Input::Net(change)).is_err() {
                            return;
                        }
                    }
                }
                first = false;
                last = now;
                match notifier.as_mut() {
                    Some(n) => {
                        let _ = n.wait(Some(POLL));
                    }
                    None => std::thread::sleep(POLL),
                }
            }
        })
        .map(|_| ())
        .unwrap_or_else(|e| tracing::error!(error = %e, "cannot start the interface watcher"));
}
