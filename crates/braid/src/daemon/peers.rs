//! The server's vehicles while it runs: the `[[peer]]` entries by index (the index the
//! handshake's [`Responder`] gives each vehicle, which the server's tables hold), the routes
//! their `allowed_ips` make, and what a reload or `braid peer add|remove` changes.
//!
//! A change touches only the vehicles it names, as `wg syncconf` does for WireGuard: a vehicle
//! added can join at once, a vehicle removed loses its session and its routes, a vehicle whose
//! `allowed_ips` or uplink metering changed keeps its session, and every other vehicle's session
//! is left alone (no new keys, no reset of its scheduler or recovery state).

use braid_config::allowed_ips::RouteTable;
use braid_config::config::PeerEntry;
use braid_proto::crypto::{PeerConfig, Responder};
use std::net::IpAddr;

/// The vehicles by index, and the routes to them.
#[derive(Debug, Default, Clone)]
pub struct PeerTable {
    /// Index -> entry; `None` where a vehicle was removed (the index may be taken again).
    entries: Vec<Option<PeerEntry>>,
    /// Passenger address -> index, from the entries' `allowed_ips`.
    routes: RouteTable,
}

impl PeerTable {
    /// The table of a file's entries, indexed as the responder built from the same list.
    pub fn new(entries: Vec<PeerEntry>) -> Self {
        let mut t = PeerTable { entries: entries.into_iter().map(Some).collect(), routes: RouteTable::default() };
        t.reroute();
        t
    }

    /// The vehicle at `i`.
    pub fn entry(&self, i: usize) -> Option<&PeerEntry> {
        self.entries.get(i).and_then(Option::as_ref)
    }

    /// The index of the vehicle named `name`.
    pub fn find(&self, name: &str) -> Option<usize> {
        self.entries.iter().position(|e| e.as_ref().is_some_and(|e| e.name == name))
    }

    /// The vehicle whose `allowed_ips` hold `ip` (longest prefix).
    pub fn route(&self, ip: IpAddr) -> Option<usize> {
        self.routes.lookup(ip)
    }

    /// The listed vehicles, in index order.
    pub fn entries(&self) -> impl Iterator<Item = &PeerEntry> {
        self.entries.iter().flatten()
    }

    /// Puts `entry` at index `i` (a new vehicle, or a changed one) and rebuilds the routes.
    pub fn set(&mut self, i: usize, entry: PeerEntry) {
        if self.entries.len() <= i {
            self.entries.resize(i + 1, None);
        }
        self.entries[i] = Some(entry);
        self.reroute();
    }

    /// Removes the vehicle at `i` and its routes.
    pub fn remove(&mut self, i: usize) -> Option<PeerEntry> {
        let e = self.entries.get_mut(i)?.take();
        self.reroute();
        e
    }

    /// Builds the routes again: cheap (one hash insert per listed network), and only on a
    /// change of the list.
    fn reroute(&mut self) {
        self.routes =
            RouteTable::new(self.entries.iter().map(|e| e.as_ref().map_or(&[][..], |e| &e.allowed_ips.0[..])));
    }
}

/// What a new list of vehicles changes in the running one.
#[derive(Debug, Default)]
pub struct PeerChanges {
    /// Indices of vehicles no longer listed, or listed with another key or pre-shared key
    /// (those come back in `added`, under a new session).
    pub removed: Vec<usize>,
    /// Vehicles listed with the same keys whose entry changed (`allowed_ips`, uplink metering):
    /// index and new entry. Their sessions stay.
    pub changed: Vec<(usize, PeerEntry)>,
    /// New vehicles, with their keys.
    pub added: Vec<(PeerEntry, PeerConfig)>,
}

impl PeerChanges {
    /// Whether nothing changes.
    pub fn is_empty(&self) -> bool {
        self.removed.is_empty() && self.changed.is_empty() && self.added.is_empty()
    }
}

/// Compares the running vehicles (`table`, with their keys in `responder`) with a new list
/// (`entries` and their keys `keys`, in the same order, already checked as a file's are), by
/// name: a vehicle is the same vehicle while its name and keys stay.
pub fn plan(table: &PeerTable, responder: &Responder, entries: &[PeerEntry], keys: &[PeerConfig]) -> PeerChanges {
    let mut c = PeerChanges::default();
    let mut kept = vec![false; entries.len()];
    for (i, old) in table.entries.iter().enumerate() {
        let Some(old) = old else { continue };
        let same = entries.iter().position(|e| e.name == old.name).filter(|&j| responder.peer(i) == Some(&keys[j]));
        match same {
            Some(j) => {
                kept[j] = true;
                if !same_entry(old, &entries[j]) {
                    c.changed.push((i, entries[j].clone()));
                }
            }
            None => c.removed.push(i),
        }
    }
    for (j, e) in entries.iter().enumerate() {
        if !kept[j] {
            c.added.push((e.clone(), keys[j].clone()));
        }
    }
    c
}

/// Whether two entries of the same vehicle route and meter alike (the keys are compared
/// loaded, in [`plan`]: a pre-shared key file may change under the same path).
fn same_entry(a: &PeerEntry, b: &PeerEntry) -> bool {
    let json = |e: &PeerEntry| serde_json::to_value((&e.allowed_ips, &e.uplink)).ok();
    json(a) == json(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_proto::crypto::StaticSecret;

    fn entry(name: &str, key: u8, allowed: &[&str]) -> (PeerEntry, PeerConfig) {
        let public = StaticSecret::from_bytes([key; 32]).public_key();
        let e: PeerEntry = serde_json::from_value(serde_json::json!({
            "name": name,
            "public_key": braid_config::keys::encode_key(&public.0),
            "allowed_ips": allowed,
        }))
        .expect("entry");
        let k = e.keys().expect("no psk file");
        (e, k)
    }

    fn fleet(list: &[(PeerEntry, PeerConfig)]) -> (PeerTable, Responder) {
        let t = PeerTable::new(list.iter().map(|(e, _)| e.clone()).collect());
        let r =
            Responder::new(StaticSecret::from_bytes([99; 32]), list.iter().map(|(_, k)| k.clone()).collect(), [1; 32]);
        (t, r)
    }

    fn split(list: &[(PeerEntry, PeerConfig)]) -> (Vec<PeerEntry>, Vec<PeerConfig>) {
        list.iter().cloned().unzip()
    }

    #[test]
    fn a_reload_changes_only_the_vehicles_it_names() {
        let (a, b) = (entry("bus-1", 1, &["10.77.0.2/32"]), entry("bus-2", 2, &["10.77.0.3/32"]));
        let (table, responder) = fleet(&[a.clone(), b.clone()]);
        // The same list: nothing.
        let (e, k) = split(&[a.clone(), b.clone()]);
        assert!(plan(&table, &responder, &e, &k).is_empty());
        // bus-1 removed, bus-3 added, bus-2 untouched (even listed first now).
        let c3 = entry("bus-3", 3, &["10.77.0.4/32"]);
        let (e, k) = split(&[b.clone(), c3.clone()]);
        let p = plan(&table, &responder, &e, &k);
        assert_eq!(p.removed, [0]);
        assert!(p.changed.is_empty());
        assert_eq!(p.added.iter().map(|(e, _)| e.name.as_str()).collect::<Vec<_>>(), ["bus-3"]);
        // bus-2 with another network: changed in place, keeps its session.
        let b2 = entry("bus-2", 2, &["10.77.0.3/32", "192.168.18.0/24"]);
        let (e, k) = split(&[a.clone(), b2]);
        let p = plan(&table, &responder, &e, &k);
        assert!(p.removed.is_empty() && p.added.is_empty());
        assert_eq!(p.changed.len(), 1);
        assert_eq!(p.changed[0].0, 1);
        // bus-1 with a new key: removed and added (a new vehicle under the old name).
        let a2 = entry("bus-1", 7, &["10.77.0.2/32"]);
        let (e, k) = split(&[a2, b]);
        let p = plan(&table, &responder, &e, &k);
        assert_eq!(p.removed, [0]);
        assert_eq!(p.added.len(), 1);
        assert!(p.changed.is_empty());
    }

    #[test]
    fn routes_follow_the_table() {
        let (a, b) = (entry("bus-1", 1, &["10.77.0.2/32"]), entry("bus-2", 2, &["10.77.0.3/32"]));
        let (mut t, _) = fleet(&[a, b]);
        let ip = |s: &str| s.parse::<IpAddr>().expect("ip");
        assert_eq!(t.route(ip("10.77.0.2")), Some(0));
        assert_eq!(t.remove(0).map(|e| e.name), Some("bus-1".into()));
        assert_eq!(t.route(ip("10.77.0.2")), None, "a removed vehicle's routes go with it");
        assert_eq!(t.route(ip("10.77.0.3")), Some(1), "the others' stay");
        let (c, _) = entry("bus-3", 3, &["10.77.0.0/24"]);
        t.set(2, c);
        assert_eq!(t.route(ip("10.77.0.2")), Some(2));
        assert_eq!(t.route(ip("10.77.0.3")), Some(1), "longest prefix first");
        assert_eq!(t.find("bus-3"), Some(2));
        assert_eq!(t.entries().count(), 2);
    }
}
