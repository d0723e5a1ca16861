//! Cryptokey routing (WireGuard 2, "Cryptokey Routing"): each `[[peer]]` lists the passenger
//! networks it may use (`allowed_ips`). The server sends a passenger packet to the vehicle whose
//! list holds its destination (longest prefix first), and takes a packet out of a vehicle's
//! session only if its source routes back to that same vehicle. Nothing is learned from traffic:
//! the table is the configuration, so its size is the configuration's, a vehicle is reachable
//! before it sends anything, and no vehicle can take over another's addresses by sending from
//! them.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;

/// An IPv4 or IPv6 network: address and prefix length, host bits zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Prefix {
    /// The network address (host bits cleared).
    pub addr: IpAddr,
    /// The prefix length (0-32 for IPv4, 0-128 for IPv6).
    pub len: u8,
}

impl Prefix {
    /// Whether `ip` is inside.
    #[cfg(test)]
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(n), IpAddr::V4(a)) => mask4(u32::from(a), self.len) == u32::from(n),
            (IpAddr::V6(n), IpAddr::V6(a)) => mask6(u128::from(a), self.len) == u128::from(n),
            _ => false,
        }
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

fn mask4(a: u32, len: u8) -> u32 {
    if len == 0 { 0 } else { a & (u32::MAX << (32 - u32::from(len))) }
}

fn mask6(a: u128, len: u8) -> u128 {
    if len == 0 { 0 } else { a & (u128::MAX << (128 - u32::from(len))) }
}

impl From<Prefix> for String {
    fn from(p: Prefix) -> String {
        p.to_string()
    }
}

impl From<AllowedIps> for Vec<Prefix> {
    fn from(a: AllowedIps) -> Vec<Prefix> {
        a.0
    }
}

impl TryFrom<String> for Prefix {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        // A bare address is one host (/32 or /128), as in WireGuard's AllowedIPs.
        let (a, l) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s.as_str(), None),
        };
        let addr: IpAddr = a.parse().map_err(|_| format!("{a:?} is not an IPv4 or IPv6 address"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len = match l {
            None => max,
            Some(l) => {
                l.parse::<u8>().ok().filter(|l| *l <= max).ok_or_else(|| format!("prefix {l:?} is not 0..={max}"))?
            }
        };
        let net = match addr {
            IpAddr::V4(a) => IpAddr::V4(mask4(u32::from(a), len).into()),
            IpAddr::V6(a) => IpAddr::V6(mask6(u128::from(a), len).into()),
        };
        if net != addr {
            return Err(format!("{s:?} has host bits set; the network is {net}/{len}"));
        }
        Ok(Prefix { addr: net, len })
    }
}

/// A peer's `allowed_ips`: at least one prefix (a vehicle with none could not be reached).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(try_from = "Vec<Prefix>", into = "Vec<Prefix>")]
pub struct AllowedIps(pub Vec<Prefix>);

impl TryFrom<Vec<Prefix>> for AllowedIps {
    type Error = String;
    fn try_from(v: Vec<Prefix>) -> Result<Self, String> {
        if v.is_empty() {
            return Err("list at least one network, e.g. the vehicle's tunnel address \"10.77.0.2/32\"".into());
        }
        Ok(AllowedIps(v))
    }
}

/// Longest-prefix match from passenger address to peer index, one hash map per prefix length in
/// use, longest first: a lookup costs one probe per distinct length, whatever the fleet's size.
#[derive(Debug, Default, Clone)]
pub struct RouteTable {
    v4: Vec<(u8, HashMap<u32, usize>)>,
    v6: Vec<(u8, HashMap<u128, usize>)>,
}

impl RouteTable {
    /// The table of `peers`' lists (index in the list = peer index). A prefix listed by two peers
    /// is refused by the configuration check ([`RouteTable::duplicate`]); here the first wins.
    pub fn new<'a>(peers: impl IntoIterator<Item = &'a [Prefix]>) -> Self {
        let mut t = RouteTable::default();
        for (i, list) in peers.into_iter().enumerate() {
            for p in list {
                match p.addr {
                    IpAddr::V4(a) => {
                        let m = slot(&mut t.v4, p.len);
                        m.entry(u32::from(a)).or_insert(i);
                    }
                    IpAddr::V6(a) => {
                        let m = slot(&mut t.v6, p.len);
                        m.entry(u128::from(a)).or_insert(i);
                    }
                }
            }
        }
        t
    }

    /// The peer `ip` belongs to: the one whose longest prefix holds it.
    pub fn lookup(&self, ip: IpAddr) -> Option<usize> {
        match ip {
            IpAddr::V4(a) => {
                let a = u32::from(a);
                self.v4.iter().find_map(|(len, m)| m.get(&mask4(a, *len)).copied())
            }
            IpAddr::V6(a) => {
                let a = u128::from(a);
                self.v6.iter().find_map(|(len, m)| m.get(&mask6(a, *len)).copied())
            }
        }
    }

    /// The first prefix listed by two peers, with their indices, if any.
    pub fn duplicate<'a>(peers: impl IntoIterator<Item = &'a [Prefix]>) -> Option<(Prefix, usize, usize)> {
        let mut seen: HashMap<Prefix, usize> = HashMap::new();
        for (i, list) in peers.into_iter().enumerate() {
            for p in list {
                if let Some(&j) = seen.get(p).filter(|&&j| j != i) {
                    return Some((*p, j, i));
                }
                seen.insert(*p, i);
            }
        }
        None
    }
}

/// The map for prefix length `len`, created in order (longest first) if absent.
fn slot<K>(v: &mut Vec<(u8, HashMap<K, usize>)>, len: u8) -> &mut HashMap<K, usize> {
    let i = match v.iter().position(|(l, _)| *l <= len) {
        Some(i) if v[i].0 == len => i,
        Some(i) => {
            v.insert(i, (len, HashMap::new()));
            i
        }
        None => {
            v.push((len, HashMap::new()));
            v.len() - 1
        }
    };
    &mut v[i].1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Prefix {
        Prefix::try_from(s.to_string()).unwrap()
    }

    #[test]
    fn parse_and_contain() {
        assert_eq!(p("10.77.0.2"), p("10.77.0.2/32"));
        assert!(p("10.0.0.0/8").contains("10.200.1.1".parse().unwrap()));
        assert!(!p("10.0.0.0/8").contains("11.0.0.1".parse().unwrap()));
        assert!(p("0.0.0.0/0").contains("192.0.2.1".parse().unwrap()));
        assert!(!p("0.0.0.0/0").contains("::1".parse().unwrap()));
        assert!(p("2001:db8::/32").contains("2001:db8:1::5".parse().unwrap()));
        assert!(Prefix::try_from("10.0.0.1/8".to_string()).unwrap_err().contains("host bits"));
        assert!(Prefix::try_from("10.0.0.0/33".to_string()).unwrap_err().contains("0..=32"));
        assert!(Prefix::try_from("bus".to_string()).is_err());
    }

    #[test]
    fn longest_prefix_wins() {
        let a = [p("10.0.0.0/16"), p("2001:db8::/48")];
        let b = [p("10.0.1.0/24"), p("10.77.0.3/32")];
        let t = RouteTable::new([&a[..], &b[..]]);
        assert_eq!(t.lookup("10.0.2.9".parse().unwrap()), Some(0));
        assert_eq!(t.lookup("10.0.1.9".parse().unwrap()), Some(1));
        assert_eq!(t.lookup("10.77.0.3".parse().unwrap()), Some(1));
        assert_eq!(t.lookup("10.77.0.4".parse().unwrap()), None);
        assert_eq!(t.lookup("2001:db8::7".parse().unwrap()), Some(0));
        assert_eq!(t.lookup("2001:db9::7".parse().unwrap()), None);
        assert_eq!(RouteTable::duplicate([&a[..], &b[..]]), None);
        let c = [p("10.0.1.0/24")];
        assert_eq!(RouteTable::duplicate([&a[..], &b[..], &c[..]]), Some((p("10.0.1.0/24"), 1, 2)));
    }
}
