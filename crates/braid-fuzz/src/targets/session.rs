//! A live client/server [`Session`] pair fed arbitrary and mutated-valid datagrams through
//! [`Session::handle_datagram`], interleaved with passenger packets and time, on a virtual clock;
//! and the same pair sealed ([`SealedSession`], as the daemons run it), whose datagrams go through
//! the open path first.
//!
//! Input: a configuration byte (recovery scheme of each end, scheduler), then a program read by
//! [`super::Ops`]; the low three bits of each tag pick the operation:
//! - `0`: a datagram (16-bit length, bytes) reaches the server from client address `tag >> 3 & 1`;
//! - `1`: a datagram reaches the client on link `tag >> 3 & 3` (links 2 and 3 do not exist);
//! - `2`: time advances by a 16-bit number of ms; both ends handle their timeouts and transmit; with
//!   bit 3 set what they transmit reaches the peer (the pair is live), else it is lost;
//! - `3`: a passenger packet (16-bit length, bytes) enters the client (bit 3 set) or the server;
//! - `4`: a datagram reaches the server from an address it has never seen (a roaming modem);
//! - `5..=7`: time advances by an 8-bit number of ms, live.
//!
//! The seeds are transcripts of honest runs under every recovery scheme with some datagrams lost:
//! every datagram as an explicit operation, so mutations corrupt real traffic in a real context.
//! A transcript replays exactly (the engine is deterministic), reaching coded, NACK and probe
//! paths with a valid header. The sealed target's transcripts carry sealed datagrams, so its
//! mutants are valid sealed datagrams changed, and arbitrary bytes meet the open path.

use super::{Ops, OpsWriter, Target, Verdict};
use braid_proto::crypto::{CipherSuite, REKEY_AFTER, SessionKeys};
use braid_proto::{
    Instant, LinkConfig, LinkId, RecoveryKind, Role, SchedulerKind, SealedSession, Session, SessionConfig,
};
use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::Duration;

/// The session pair.
pub(super) const PAIR: Target = Target {
    name: "session-pair",
    about: "Session::handle_datagram on a live client/server pair: arbitrary and mutated transcripts",
    text: false,
    max_len: 1 << 16,
    run: |d| run(d, false),
    seeds: || transcripts(false).iter().map(|(program, _)| program.clone()).collect(),
};

/// The session pair sealed, as the daemons run it.
pub(super) const SEALED_PAIR: Target = Target {
    name: "sealed-pair",
    about: "SealedSession::handle_datagram (open, then the engine) on a live pair: arbitrary and mutated sealed transcripts",
    text: false,
    max_len: 1 << 16,
    run: |d| run(d, true),
    seeds: || transcripts(true).iter().map(|(program, _)| program.clone()).collect(),
};

/// The datagrams the honest transcripts carried, for the wire targets' seeds.
pub(super) fn captured_datagrams() -> Vec<Vec<u8>> {
    transcripts(false).iter().flat_map(|(_, d)| d.iter().cloned()).collect()
}

/// The keys of the pairs' `epoch` (a handshake would have agreed them).
pub(super) fn pair_keys(epoch: u8) -> SessionKeys {
    SessionKeys { suite: CipherSuite::ChaCha20Poly1305, send: [0x11 ^ epoch; 32], recv: [0x22 ^ epoch; 32] }
}

const RECOVERIES: [RecoveryKind; 8] = [
    RecoveryKind::Oec,
    RecoveryKind::Rlnc { ahead_percent: 0.0 },
    RecoveryKind::Rlnc { ahead_percent: 5.0 },
    RecoveryKind::Fountain,
    RecoveryKind::Arq,
    RecoveryKind::Fec { percent: 50.0 },
    RecoveryKind::Dup,
    RecoveryKind::None,
];
const SCHEDULERS: [SchedulerKind; 4] =
    [SchedulerKind::MinDelay, SchedulerKind::RoundRobin, SchedulerKind::Wrr { auto: true }, SchedulerKind::Eat];

/// Most datagrams one end may want sent at one instant; more means `poll_transmit` never ends.
const MAX_TRANSMITS: usize = 100_000;

fn addr(s: &str) -> SocketAddr {
    s.parse().expect("literal address")
}

pub(super) struct Pair {
    /// Through the open and seal path (`sealed`), or straight into the engines.
    sealed: bool,
    /// Rekeys so far.
    epoch: u8,
    pub(super) client: SealedSession,
    pub(super) server: SealedSession,
    pub(super) now: Instant,
    server_addr: SocketAddr,
    pub(super) client_addrs: [SocketAddr; 2],
    /// Datagrams in flight: (to the server?, link, bytes).
    pub(super) in_flight: Vec<(bool, LinkId, Vec<u8>)>,
    buf: Vec<u8>,
}

impl Pair {
    pub(super) fn new(config: u8, sealed: bool) -> Self {
        let cfg = |role, rec: usize| {
            let mut c = SessionConfig::new(role);
            c.session_id = 0xabcd;
            c.recovery = RECOVERIES[rec % RECOVERIES.len()];
            c.scheduler = SCHEDULERS[usize::from(config >> 6)];
            c.seed = u64::from(config);
            c
        };
        let server_addr = addr("192.0.2.1:7700");
        let links: Vec<LinkConfig> = (0..2).map(|i| LinkConfig::new(LinkId(i), Some(server_addr), 2e6, 4e6)).collect();
        let client = Session::new(cfg(Role::Client, usize::from(config & 7)), &links, Instant::ZERO);
        let server = Session::new(cfg(Role::Server, usize::from(config >> 3 & 7)), &[], Instant::ZERO);
        Pair {
            sealed,
            epoch: 0,
            client: SealedSession::new(client, &pair_keys(0), Instant::ZERO),
            server: SealedSession::new(server, &pair_keys(0).mirror(), Instant::ZERO),
            now: Instant::ZERO,
            server_addr,
            client_addrs: [addr("198.51.100.1:5000"), addr("198.51.100.2:5000")],
            in_flight: Vec::new(),
            buf: vec![0u8; 4096],
        }
    }

    pub(super) fn server_receives(&mut self, from: SocketAddr, d: &[u8]) -> bool {
        let now = self.now;
        if self.sealed {
            self.server.handle_datagram(now, now, None, from, d).is_ok()
        } else {
            Session::handle_datagram(&mut self.server, now, None, from, d).is_ok()
        }
    }

    fn client_receives(&mut self, link: LinkId, d: &[u8]) -> bool {
        let (now, from) = (self.now, self.server_addr);
        if self.sealed {
            self.client.handle_datagram(now, now, Some(link), from, d).is_ok()
        } else {
            Session::handle_datagram(&mut self.client, now, Some(link), from, d).is_ok()
        }
    }

    /// Time passes: timeouts, then everything both ends want sent goes in flight.
    pub(super) fn advance(&mut self, by: Duration) {
        self.now += by;
        if self.sealed && self.now.saturating_duration_since(self.client.channel().keys_born()) >= REKEY_AFTER {
            // A handshake on the running session, as the client daemon starts every REKEY_AFTER.
            self.epoch = self.epoch.wrapping_add(1);
            let keys = pair_keys(self.epoch);
            self.client.channel_mut().rekey(&keys, self.now, true);
            self.server.channel_mut().rekey(&keys.mirror(), self.now, false);
        }
        self.client.handle_timeout(self.now);
        self.server.handle_timeout(self.now);
        for to_server in [true, false] {
            let s = if to_server { &mut self.client } else { &mut self.server };
            let mut n = 0;
            loop {
                let t = if self.sealed {
                    match s.poll_transmit(self.now, &mut self.buf) {
                        Some(Ok(t)) => t,
                        // The server seals with its old keys until the client used the new
                        // ones, and a long jump in time may have expired them: lost, as in the
                        // daemon.
                        Some(Err(_)) if !to_server => continue,
                        Some(Err(e)) => panic!("the client's keys are renewed before use: {e}"),
                        None => break,
                    }
                } else {
                    match Session::poll_transmit(s, self.now, &mut self.buf) {
                        Some(t) => t,
                        None => break,
                    }
                };
                n += 1;
                assert!(n < MAX_TRANSMITS, "poll_transmit does not run dry");
                assert!(t.len <= self.buf.len());
                self.in_flight.push((to_server, t.link, self.buf[..t.len].to_vec()));
            }
            while s.poll_deliver().is_some() {}
            while s.poll_event().is_some() {}
            let _ = s.poll_timeout();
        }
    }

    /// Delivers what is in flight to the peers.
    pub(super) fn deliver(&mut self) {
        for (to_server, link, d) in std::mem::take(&mut self.in_flight) {
            if to_server {
                let from = self.client_addrs[usize::from(link.0) % 2];
                self.server_receives(from, &d);
            } else {
                self.client_receives(link, &d);
            }
        }
    }
}

fn run(input: &[u8], sealed: bool) -> Verdict {
    let mut ops = Ops::new(input);
    let mut p = Pair::new(ops.u8(), sealed);
    let mut accepted = false;
    while !ops.done() {
        let tag = ops.u8();
        match tag & 7 {
            0 => {
                let from = p.client_addrs[usize::from(tag >> 3 & 1)];
                accepted |= p.server_receives(from, ops.chunk());
            }
            1 => accepted |= p.client_receives(LinkId(tag >> 3 & 3), ops.chunk()),
            2 => {
                p.advance(Duration::from_millis(u64::from(ops.u16())));
                if tag & 8 != 0 {
                    p.deliver();
                } else {
                    p.in_flight.clear();
                }
            }
            3 => {
                let pkt = ops.chunk();
                let s = if tag & 8 != 0 { &mut p.client } else { &mut p.server };
                let _ = s.handle_tun_packet(p.now, pkt);
            }
            4 => {
                let from = SocketAddr::from(([203, 0, 113, tag >> 3], 6000 + u16::from(tag)));
                accepted |= p.server_receives(from, ops.chunk());
            }
            _ => {
                p.advance(Duration::from_millis(u64::from(ops.u8())));
                p.deliver();
            }
        }
    }
    Verdict::from_ok(accepted)
}

/// An honest run: the program that replays it, and the datagrams it carried.
type Transcript = (Vec<u8>, Vec<Vec<u8>>);

/// Honest runs, one per recovery scheme, built once for each path.
pub(super) fn transcripts(sealed: bool) -> &'static [Transcript] {
    static PLAIN: OnceLock<Vec<Transcript>> = OnceLock::new();
    static SEALED: OnceLock<Vec<Transcript>> = OnceLock::new();
    let record_all = || (0..RECOVERIES.len() as u8).map(|r| record(r | (r << 3) | ((r % 4) << 6), sealed)).collect();
    if sealed { SEALED.get_or_init(record_all) } else { PLAIN.get_or_init(record_all) }
}

/// Runs an honest exchange with every seventh datagram lost and writes it down as a program.
fn record(config: u8, sealed: bool) -> Transcript {
    let mut w = OpsWriter::default();
    w.u8(config);
    let mut p = Pair::new(config, sealed);
    let mut carried = Vec::new();
    let mut counter = 0u32;
    for step in 0..60u16 {
        if (10..40).contains(&step) {
            let pkt: Vec<u8> = (0..(40 + step * 23) % 1200).map(|i| (i as u8) ^ (step as u8)).collect();
            let to_client = step % 3 != 0;
            w.u8(if to_client { 3 | 8 } else { 3 }).chunk(&pkt);
            let s = if to_client { &mut p.client } else { &mut p.server };
            s.handle_tun_packet(p.now, &pkt).expect("seed packets fit");
        }
        let ms = if step < 55 { 5 } else { 400 };
        w.u8(2).u16(ms);
        p.advance(Duration::from_millis(u64::from(ms)));
        for (to_server, link, d) in std::mem::take(&mut p.in_flight) {
            counter += 1;
            if counter.is_multiple_of(7) {
                continue;
            }
            if to_server {
                w.u8(link.0 << 3).chunk(&d);
                p.server_receives(p.client_addrs[usize::from(link.0)], &d);
            } else {
                w.u8(1 | link.0 << 3).chunk(&d);
                p.client_receives(link, &d);
            }
            carried.push(d);
        }
    }
    (w.0, carried)
}
