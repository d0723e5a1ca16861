//! Which server a vehicle talks to: its list of servers (`server = ["a:7700", "b:7700"]`), the
//! address the one in use resolved to, and when to give up on it.
//!
//! A server is gone when [`FAILOVER_AFTER`] handshake initiations in a row went unanswered while
//! nothing authentic came from it (no session, or a session silent for `rejoin_s`). The client
//! then moves to the next server of the list (the same one when there is only one) and looks its
//! name up again, so a server that moved to another address under the same name is found, and a
//! name that did not resolve at start is retried instead of ending the daemon.

use std::net::SocketAddr;
use std::time::Duration;

/// Unanswered initiations (one a second, `client::HANDSHAKE_RETRY`) after which the server in
/// use is taken for gone: three covers a lost initiation or response on a lossy uplink and still
/// moves within a few seconds.
pub const FAILOVER_AFTER: u32 = 3;

/// How long a failed lookup waits before the next entry is tried.
pub const RESOLVE_RETRY: Duration = Duration::from_secs(2);

/// Longest a lookup may take; the client's loop waits for it (it has no server meanwhile).
pub const RESOLVE_TIMEOUT: Duration = Duration::from_secs(3);

/// The client's servers and the one in use.
#[derive(Debug)]
pub struct ServerChoice {
    entries: Vec<String>,
    /// Index of the entry in use.
    current: usize,
    /// What it resolved to; `None` until it has.
    addr: Option<SocketAddr>,
    /// Initiations sent to it in a row without an answer while nothing authentic came.
    unanswered: u32,
}

impl ServerChoice {
    /// The servers, tried in this order (at least one: the configuration checks it).
    pub fn new(entries: Vec<String>) -> Self {
        ServerChoice { entries, current: 0, addr: None, unanswered: 0 }
    }

    /// The address in use, once resolved.
    pub fn addr(&self) -> Option<SocketAddr> {
        self.addr
    }

    /// The entry in use, as configured (`host:port`).
    pub fn entry(&self) -> &str {
        self.entries.get(self.current).map_or("", String::as_str)
    }

    /// All entries, for the log.
    pub fn entries(&self) -> &[String] {
        &self.entries
    }

    /// An initiation is due; `silent`: nothing authentic has come from the server for
    /// `rejoin_s` (or there is no session). True when [`FAILOVER_AFTER`] went unanswered already
    /// and the server is taken for gone: the caller moves on with [`ServerChoice::advance`]
    /// instead of sending. Else the initiation is counted (when `silent`) and goes out.
    pub fn handle_initiation(&mut self, silent: bool) -> bool {
        if silent && self.unanswered >= FAILOVER_AFTER {
            return true;
        }
        if silent {
            self.unanswered += 1;
        }
        false
    }

    /// The server answered (a handshake finished, a cookie or a hint came).
    pub fn handle_answer(&mut self) {
        self.unanswered = 0;
    }

    /// Gives up on the entry in use: the next one (or the same, alone in the list) is looked up
    /// again before the next initiation. The old address stays in use until then.
    pub fn advance(&mut self) {
        self.current = (self.current + 1) % self.entries.len().max(1);
        self.unanswered = 0;
    }

    /// Sets what the entry in use resolved to; true if that is another address than before.
    pub fn handle_resolved(&mut self, addr: SocketAddr) -> bool {
        let changed = self.addr != Some(addr);
        self.addr = Some(addr);
        changed
    }
}

/// Looks `entry` (`host:port`) up, at most [`RESOLVE_TIMEOUT`]. Of its addresses the first of a
/// family the uplinks have (`have_v4`, `have_v6`) is taken, else the first: the resolver's order
/// already prefers by RFC 6724.
pub async fn resolve(entry: &str, have_v4: bool, have_v6: bool) -> anyhow::Result<SocketAddr> {
    let found: Vec<SocketAddr> = tokio::time::timeout(RESOLVE_TIMEOUT, tokio::net::lookup_host(entry))
        .await
        .map_err(|_| anyhow::anyhow!("no answer within {} s", RESOLVE_TIMEOUT.as_secs()))??
        .collect();
    let usable = |a: &&SocketAddr| if a.is_ipv6() { have_v6 } else { have_v4 };
    found.iter().find(usable).or(found.first()).copied().ok_or_else(|| anyhow::anyhow!("the name has no address"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_silent_server_is_left_after_failover_after_initiations() {
        let mut c = ServerChoice::new(vec!["192.0.2.1:7700".into(), "[2001:db8::1]:7700".into()]);
        assert!(c.handle_resolved("192.0.2.1:7700".parse().unwrap()));
        assert!(!c.handle_resolved("192.0.2.1:7700".parse().unwrap()), "the same address is no change");
        // Rekeys of a session that still hears from its server never count.
        for _ in 0..10 {
            assert!(!c.handle_initiation(false));
        }
        for _ in 0..FAILOVER_AFTER {
            assert!(!c.handle_initiation(true));
        }
        c.handle_answer();
        for _ in 0..FAILOVER_AFTER {
            assert!(!c.handle_initiation(true), "an answer starts the count again");
        }
        assert!(c.handle_initiation(true), "the next one is not sent: the server is gone");
        c.advance();
        assert_eq!(c.entry(), "[2001:db8::1]:7700");
        assert!(!c.handle_initiation(true), "the count starts again for the next server");
        assert!(c.handle_resolved("[2001:db8::1]:7700".parse().unwrap()));
        c.advance();
        assert_eq!(c.entry(), "192.0.2.1:7700", "the list wraps around");
        let mut alone = ServerChoice::new(vec!["vpn.example.net:7700".into()]);
        alone.advance();
        assert_eq!(alone.entry(), "vpn.example.net:7700", "a single server is looked up again");
    }

    #[tokio::test]
    async fn literals_resolve_without_dns_and_keep_a_family_the_uplinks_have() {
        let a = resolve("[2001:db8::1]:7700", true, false).await.expect("literal");
        assert_eq!(a, "[2001:db8::1]:7700".parse().unwrap(), "the only address, even of another family");
        let a = resolve("127.0.0.1:7700", true, true).await.expect("literal");
        assert_eq!(a, "127.0.0.1:7700".parse().unwrap());
    }
}
