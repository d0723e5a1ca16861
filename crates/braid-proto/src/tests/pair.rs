//! A pair harness (after quinn-proto's `tests/util.rs`): a client and a server session on a
//! virtual clock, joined by links whose in-flight datagrams a test can drop, delay or reorder.
//!
//! The sessions are [`SealedSession`]s, as in the daemons: the links carry sealed datagrams, and
//! both ends change keys every [`REKEY_AFTER`] as a handshake on the running session would. The
//! drop rule sees each datagram opened (by a wiretap holding the receiver's keys), so a test can
//! pick datagrams by what they carry.

use crate::crypto::{CipherSuite, REKEY_AFTER, SecureChannel, SessionKeys};
use crate::link::LinkId;
use crate::session::{LinkConfig, Role, SealedSession, Session, SessionConfig};
use crate::time::Instant;
use bytes::Bytes;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::SocketAddr;
use std::time::Duration;

/// Direction of travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Dir {
    /// Client to server.
    Up,
    /// Server to client.
    Down,
}

/// One emulated link: fixed one-way delay per direction, serialisation at a rate, and a drop rule.
pub struct PairLink {
    pub delay: Duration,
    pub rate_bps: f64,
    busy_until: [Instant; 2],
    pub up: bool,
    /// A drop-tail buffer, in time at `rate_bps`: a datagram that would wait longer than this
    /// to be sent is dropped, as a modem's full buffer drops it (`None`: unbounded).
    pub queue_limit: Option<Duration>,
    /// Datagrams this link's full buffer dropped, both directions.
    pub overflows: u64,
}

/// A datagram in flight: arrival time, launch order, direction, link, bytes.
type InFlight = Reverse<(Instant, u64, Dir, u8, Vec<u8>)>;

type DropFn = Box<dyn FnMut(Dir, LinkId, u64, &[u8]) -> bool>;
type JitterFn = Box<dyn FnMut(Dir, LinkId, u64) -> Duration>;

pub struct Pair {
    pub client: SealedSession,
    pub server: SealedSession,
    pub now: Instant,
    /// Opens what travels up (the server's keys) and down (the client's) for the drop rule.
    taps: [SecureChannel; 2],
    next_rekey: Instant,
    /// Rekeys so far.
    pub key_epoch: u8,
    pub links: Vec<PairLink>,
    in_flight: BinaryHeap<InFlight>,
    counter: u64,
    /// Returns true to drop a datagram (direction, link, per-pair counter, bytes).
    pub drop: DropFn,
    /// Extra delay per datagram (reordering).
    pub jitter: JitterFn,
    pub client_addrs: Vec<SocketAddr>,
    pub server_addr: SocketAddr,
    pub delivered_up: Vec<Bytes>,
    pub delivered_down: Vec<Bytes>,
    pub dropped: u64,
    /// What a link's full buffer dropped ([`PairLink::queue_limit`]): direction and the datagram
    /// as opened.
    pub overflowed: Vec<(Dir, Vec<u8>)>,
    /// Server clock = virtual time + this (the sessions' clocks need not agree).
    pub server_offset: Duration,
    /// The client's process is stopped ([`Pair::stall_client`]): it neither sends nor runs its
    /// timers.
    client_stopped: bool,
    /// Links whose datagrams wait for the client's receive task ([`Pair::stall_client`]), and
    /// what waits, each with its arrival time (link, time, bytes).
    client_unread: Vec<u8>,
    client_backlog: Vec<(u8, Instant, Vec<u8>)>,
}

pub fn addr(s: &str) -> SocketAddr {
    s.parse().expect("test address")
}

impl Pair {
    /// Links given as (one-way delay ms, rate kbit/s), each session told its rates.
    pub fn new(links: &[(u64, f64)], cfg: impl Fn(Role) -> SessionConfig) -> Self {
        Self::with_bootstrap(links, cfg, true)
    }

    /// As [`Pair::new`]; with `bootstrap` false the sessions are not told the links' rates (a
    /// daemon whose `[[uplink]]`s give no `up_kbps` / `down_kbps`).
    pub fn with_bootstrap(links: &[(u64, f64)], cfg: impl Fn(Role) -> SessionConfig, bootstrap: bool) -> Self {
        Self::with_bootstraps(links, cfg, &vec![bootstrap; links.len()])
    }

    /// As [`Pair::with_bootstrap`], told each link's rates or not, link by link.
    pub fn with_bootstraps(links: &[(u64, f64)], cfg: impl Fn(Role) -> SessionConfig, bootstrap: &[bool]) -> Self {
        let server_addr = addr("192.0.2.1:7700");
        let client_addrs: Vec<SocketAddr> =
            (0..links.len()).map(|i| addr(&format!("198.51.100.{}:5000", i + 1))).collect();
        let lc: Vec<LinkConfig> = links
            .iter()
            .enumerate()
            .map(|(i, &(_, kbps))| {
                let hint = if bootstrap[i] { 1000.0 } else { 0.0 };
                LinkConfig::new(LinkId(i as u8), Some(server_addr), kbps * hint, kbps * hint)
            })
            .collect();
        let server_offset = Duration::from_secs(3600);
        let keys = pair_keys(0);
        let client = Session::new(cfg(Role::Client), &lc, Instant::ZERO);
        let server = Session::new(cfg(Role::Server), &[], Instant::ZERO + server_offset);
        Pair {
            client: SealedSession::new(client, &keys, Instant::ZERO),
            server: SealedSession::new(server, &keys.mirror(), Instant::ZERO + server_offset),
            now: Instant::ZERO,
            taps: [SecureChannel::new(&keys.mirror(), Instant::ZERO), SecureChannel::new(&keys, Instant::ZERO)],
            next_rekey: Instant::ZERO + REKEY_AFTER,
            key_epoch: 0,
            links: links
                .iter()
                .map(|&(d, kbps)| PairLink {
                    delay: Duration::from_millis(d),
                    rate_bps: kbps * 1000.0,
                    busy_until: [Instant::ZERO; 2],
                    up: true,
                    queue_limit: None,
                    overflows: 0,
                })
                .collect(),
            in_flight: BinaryHeap::new(),
            counter: 0,
            drop: Box::new(|_, _, _, _| false),
            jitter: Box::new(|_, _, _| Duration::ZERO),
            client_addrs,
            server_addr,
            delivered_up: Vec::new(),
            delivered_down: Vec::new(),
            dropped: 0,
            overflowed: Vec::new(),
            server_offset,
            client_stopped: false,
            client_unread: Vec::new(),
            client_backlog: Vec::new(),
        }
    }

    pub fn server_now(&self) -> Instant {
        self.now + self.server_offset
    }

    /// New keys at both ends (and the taps), as a handshake on the running session: the client
    /// seals with them at once, the server once they opened a datagram (WireGuard 6.1).
    fn rekey(&mut self) {
        self.key_epoch = self.key_epoch.wrapping_add(1);
        let keys = pair_keys(self.key_epoch);
        let snow = self.server_now();
        self.client.channel_mut().rekey(&keys, self.now, true);
        self.server.channel_mut().rekey(&keys.mirror(), snow, false);
        self.taps[Dir::Up as usize].rekey(&keys.mirror(), self.now, false);
        self.taps[Dir::Down as usize].rekey(&keys, self.now, true);
        self.next_rekey = self.now + REKEY_AFTER;
    }

    /// Drains both sessions' transmissions into the links.
    fn flush(&mut self) {
        let mut buf = vec![0u8; 2048];
        loop {
            let mut any = false;
            while !self.client_stopped
                && let Some(t) = self.client.poll_transmit(self.now, &mut buf)
            {
                let t = t.expect("keys renewed before they expire");
                self.launch(Dir::Up, t.link, buf[..t.len].to_vec());
                any = true;
            }
            let snow = self.server_now();
            while let Some(t) = self.server.poll_transmit(snow, &mut buf) {
                let t = t.expect("keys renewed before they expire");
                self.launch(Dir::Down, t.link, buf[..t.len].to_vec());
                any = true;
            }
            while let Some(p) = self.client.poll_deliver() {
                self.delivered_down.push(p);
            }
            while let Some(p) = self.server.poll_deliver() {
                self.delivered_up.push(p);
            }
            if !any {
                break;
            }
        }
    }

    fn launch(&mut self, dir: Dir, link: LinkId, bytes: Vec<u8>) {
        self.counter += 1;
        let n = self.counter;
        let mut plain = Vec::new();
        // Every datagram is opened once, in the order it was sealed: the tap's replay window
        // never refuses one, so a failure here is a sealing defect.
        self.taps[dir as usize].open(self.now, &bytes, &mut plain).expect("the tap opens what was sealed");
        let Some(l) = self.links.get_mut(link.0 as usize) else { return };
        if !l.up || (self.drop)(dir, link, n, &plain) {
            self.dropped += 1;
            return;
        }
        let d = dir as usize;
        let start = l.busy_until[d].max(self.now);
        if l.queue_limit.is_some_and(|q| start - self.now > q) {
            self.dropped += 1;
            l.overflows += 1;
            self.overflowed.push((dir, plain));
            return;
        }
        let tx = Duration::from_micros(((bytes.len() + 28) as f64 * 8.0 * 1e6 / l.rate_bps) as u64);
        l.busy_until[d] = start + tx;
        let arrive = start + tx + l.delay + (self.jitter)(dir, link, n);
        self.in_flight.push(Reverse((arrive, n, dir, link.0, bytes)));
    }

    /// Runs until virtual time `until`, delivering datagrams and firing timers in order.
    pub fn run_until(&mut self, until: Instant) {
        let mut same_instant = 0u32;
        let mut last = self.now;
        loop {
            if self.now == last {
                same_instant += 1;
                assert!(
                    same_instant < 100_000,
                    "event loop spins at {:?}: client timers {:?}, server timers {:?}",
                    self.now,
                    self.client.timers(),
                    self.server.timers()
                );
            } else {
                same_instant = 0;
                last = self.now;
            }
            self.flush();
            let next_net = self.in_flight.peek().map(|Reverse((t, ..))| *t);
            let next_c = self.client.poll_timeout().filter(|_| !self.client_stopped);
            let next_s = self.server.poll_timeout().map(|t| t.saturating_sub(self.server_offset));
            let next = [next_net, next_c, next_s, Some(self.next_rekey)].into_iter().flatten().min();
            let Some(next) = next.filter(|&t| t <= until) else {
                self.now = until;
                break;
            };
            self.now = self.now.max(next);
            if self.now >= self.next_rekey {
                self.rekey();
            }
            while let Some(Reverse((t, ..))) = self.in_flight.peek() {
                if *t > self.now {
                    break;
                }
                let Reverse((_, _, dir, link, bytes)) = self.in_flight.pop().expect("peeked");
                match dir {
                    Dir::Up => {
                        let from = self.client_addrs[link as usize];
                        let snow = self.server_now();
                        let _ = self.server.handle_datagram(snow, snow, None, from, &bytes);
                    }
                    Dir::Down if self.client_unread.contains(&link) => {
                        self.client_backlog.push((link, self.now, bytes));
                    }
                    Dir::Down => {
                        let (now, link) = (self.now, Some(LinkId(link)));
                        let _ = self.client.handle_datagram(now, now, link, self.server_addr, &bytes);
                    }
                }
            }
            if !self.client_stopped {
                self.client.handle_timeout(self.now);
            }
            let snow = self.server_now();
            self.server.handle_timeout(snow);
        }
    }

    pub fn send_up(&mut self, p: &[u8]) {
        self.client.handle_tun_packet(self.now, p).expect("fits");
    }

    pub fn send_down(&mut self, p: &[u8]) {
        let snow = self.server_now();
        self.server.handle_tun_packet(snow, p).expect("fits");
    }

    pub fn advance(&mut self, d: Duration) {
        let t = self.now + d;
        self.run_until(t);
    }

    /// Stops the client's process for `d` (a loaded machine, which the daemons share with
    /// everything else, does this for tens of milliseconds and more), then lets it go on as a
    /// daemon often does: its overdue timers run and what they send leaves before its receive
    /// tasks have handed over the datagrams that queued in the kernel meanwhile, which come
    /// after, each with the kernel's receive time. With `lagging`, the receive tasks of the other
    /// links hand theirs over before the timers run, and that link's task only after the given
    /// time (its thread was not scheduled yet).
    pub fn stall_client(&mut self, d: Duration, lagging: Option<(LinkId, Duration)>) {
        self.client_stopped = true;
        self.client_unread = (0..self.links.len() as u8).collect();
        self.advance(d);
        self.client_stopped = false;
        let mut first = Vec::new();
        if let Some((late, _)) = lagging {
            self.client_unread = vec![late.0];
            let (lag, now): (Vec<_>, Vec<_>) = self.client_backlog.drain(..).partition(|b| b.0 == late.0);
            self.client_backlog = lag;
            first = now;
        }
        self.hand_over(first);
        self.client.handle_timeout(self.now);
        let mut buf = vec![0u8; 2048];
        while let Some(t) = self.client.poll_transmit(self.now, &mut buf) {
            let t = t.expect("keys renewed before they expire");
            self.launch(Dir::Up, t.link, buf[..t.len].to_vec());
        }
        if let Some((_, lag)) = lagging {
            self.advance(lag);
        }
        self.client_unread.clear();
        let backlog = std::mem::take(&mut self.client_backlog);
        self.hand_over(backlog);
    }

    /// Hands datagrams that waited for the client's receive tasks to it, with their arrival times.
    fn hand_over(&mut self, backlog: Vec<(u8, Instant, Vec<u8>)>) {
        for (link, at, bytes) in backlog {
            let _ = self.client.handle_datagram(self.now, at, Some(LinkId(link)), self.server_addr, &bytes);
        }
    }
}

/// The keys of the pair's `epoch`: fixed, since only their being real matters here.
fn pair_keys(epoch: u8) -> SessionKeys {
    SessionKeys { suite: CipherSuite::ChaCha20Poly1305, send: [epoch; 32], recv: [epoch ^ 0x80; 32] }
}

/// A recognisable passenger packet: its index in the first 8 bytes, then filler.
pub fn packet(i: u64, len: usize) -> Vec<u8> {
    let mut p = vec![(i % 251) as u8; len.max(8)];
    p[..8].copy_from_slice(&i.to_be_bytes());
    p
}

pub fn index_of(p: &[u8]) -> u64 {
    u64::from_be_bytes(p[..8].try_into().expect("8 bytes"))
}
