//! Two [`TcpHost`]s joined by a virtual pipe on virtual time: fixed delay, optional serialisation
//! rate (unbounded queue), seeded random loss, and hooks that drop, delay (reorder) or rewrite
//! chosen packets. The event loop fails the test if it ever spins at one instant.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

use braid_proto::Instant;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::host::{FailReason, FlowEvent, FlowId, HostConfig, TcpHost, Transfer};

/// The riders' address (the vehicle side).
pub(crate) const RIDER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
/// The web server's address, in another subnet.
pub(crate) const WEB: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 2);

/// One end of the pipe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Side {
    Rider,
    Web,
}

impl Side {
    fn other(self) -> Side {
        match self {
            Side::Rider => Side::Web,
            Side::Web => Side::Rider,
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// How a flow ended: `Ok((host, at, bytes))` if completed, `Err((host, at, reason))` if failed.
pub(crate) type Outcome = Result<(Side, Instant, u64), (Side, Instant, FailReason)>;

/// Which way a flow's data goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dir {
    /// Web to rider.
    Down,
    /// Rider to web.
    Up,
}

/// Decides per packet (sender side, index of the packet in that direction, bytes).
pub(crate) type Hook<T> = Box<dyn FnMut(Side, u64, &[u8]) -> T>;
/// Rewrites a packet in flight.
pub(crate) type Mangle = Box<dyn FnMut(Side, u64, &mut Vec<u8>)>;

/// The pipe between the hosts; the same in both directions.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pipe {
    pub(crate) delay: Duration,
    /// Serialisation rate in bit/s; `None` for infinitely fast.
    pub(crate) rate_bps: Option<u64>,
    /// Probability that a packet is lost.
    pub(crate) loss: f64,
    pub(crate) seed: u64,
}

impl Pipe {
    /// 20 ms one way, 10 Mbit/s, no loss.
    pub(crate) fn lan() -> Pipe {
        Pipe { delay: Duration::from_millis(20), rate_bps: Some(10_000_000), loss: 0.0, seed: 1 }
    }
}

/// Host configurations for the two ends with seed `seed`.
pub(crate) fn configs(seed: u64) -> (HostConfig, HostConfig) {
    let mut rider = HostConfig::new(RIDER, 24);
    rider.seed = seed;
    let mut web = HostConfig::new(WEB, 24);
    web.seed = seed.wrapping_add(1000);
    (rider, web)
}

/// The web port a flow listens on (the port identifies the flow).
pub(crate) fn port_of(flow: FlowId) -> u16 {
    1000 + (flow.0 % 60_000) as u16
}

pub(crate) struct Net {
    pub(crate) rider: TcpHost,
    pub(crate) web: TcpHost,
    pub(crate) now: Instant,
    pipe: Pipe,
    pub(crate) drop: Option<Hook<bool>>,
    pub(crate) extra_delay: Option<Hook<Duration>>,
    pub(crate) mangle: Option<Mangle>,
    /// Packets in flight by (arrival, sequence) → (destination, bytes).
    in_flight: BTreeMap<(Instant, u64), (Side, Vec<u8>)>,
    seq: u64,
    busy_until: [Instant; 2],
    sent: [u64; 2],
    rng: ChaCha8Rng,
    /// Every event, in order, with the host that reported it.
    pub(crate) events: Vec<(Side, FlowEvent)>,
    /// The first terminal event of each flow (see [`Net::outcome`]).
    outcomes: BTreeMap<FlowId, Outcome>,
    /// When each flow was started.
    pub(crate) started: BTreeMap<FlowId, Instant>,
    /// Steps taken without virtual time advancing.
    same_instant_steps: u32,
    /// Most sockets each host held at once.
    pub(crate) peak_sockets: [usize; 2],
    /// FNV-1a over every packet sent, for determinism checks; only kept if `hash_trace`.
    pub(crate) trace_hash: u64,
    pub(crate) hash_trace: bool,
    pub(crate) packets_sent: u64,
    /// Drop-tail queue: a packet that would wait longer than this behind the rate is dropped
    /// (none: unbounded).
    pub(crate) queue_limit: Option<Duration>,
    /// Packets `queue_limit` dropped.
    pub(crate) queue_drops: usize,
}

impl Net {
    pub(crate) fn new(pipe: Pipe, rider: HostConfig, web: HostConfig) -> Net {
        Net {
            rider: TcpHost::new(rider),
            web: TcpHost::new(web),
            now: Instant::ZERO,
            pipe,
            drop: None,
            extra_delay: None,
            mangle: None,
            in_flight: BTreeMap::new(),
            seq: 0,
            busy_until: [Instant::ZERO; 2],
            sent: [0; 2],
            rng: ChaCha8Rng::seed_from_u64(pipe.seed),
            queue_limit: None,
            queue_drops: 0,
            events: Vec::new(),
            outcomes: BTreeMap::new(),
            started: BTreeMap::new(),
            same_instant_steps: 0,
            peak_sockets: [0; 2],
            trace_hash: 0xcbf2_9ce4_8422_2325,
            hash_trace: false,
            packets_sent: 0,
        }
    }

    /// Default hosts (seed 7) on `pipe`.
    pub(crate) fn with_pipe(pipe: Pipe) -> Net {
        let (r, w) = configs(7);
        Net::new(pipe, r, w)
    }

    pub(crate) fn host(&mut self, side: Side) -> &mut TcpHost {
        match side {
            Side::Rider => &mut self.rider,
            Side::Web => &mut self.web,
        }
    }

    /// Start a flow of `size` bytes (`None`: bulk) now: the web side listens, the rider connects.
    pub(crate) fn start(&mut self, flow: FlowId, dir: Dir, size: Option<u64>) {
        let (web_t, rider_t) = match (dir, size) {
            (Dir::Down, Some(n)) => (Transfer::Send(n), Transfer::Receive(n)),
            (Dir::Up, Some(n)) => (Transfer::Receive(n), Transfer::Send(n)),
            (Dir::Down, None) => (Transfer::SendForever, Transfer::ReceiveForever),
            (Dir::Up, None) => (Transfer::ReceiveForever, Transfer::SendForever),
        };
        let port = port_of(flow);
        self.web.listen(flow, port, web_t).expect("listen");
        self.rider.connect(self.now, flow, SocketAddrV4::new(WEB, port), rider_t).expect("connect");
        self.started.insert(flow, self.now);
    }

    /// Advance to the next instant something happens, if it is not after `end`.
    pub(crate) fn step(&mut self, end: Instant) -> bool {
        let next =
            [self.in_flight.keys().next().map(|k| k.0), self.rider.poll_at(self.now), self.web.poll_at(self.now)]
                .into_iter()
                .flatten()
                .min();
        let Some(next) = next else { return false };
        if next > end {
            return false;
        }
        assert!(next >= self.now, "time went backwards: {next:?} < {:?}", self.now);
        if next == self.now {
            self.same_instant_steps += 1;
            assert!(self.same_instant_steps < 20, "event loop spins at {:?}", self.now);
        } else {
            self.same_instant_steps = 0;
        }
        self.now = next;
        while let Some(entry) = self.in_flight.first_entry() {
            if entry.key().0 > self.now {
                break;
            }
            let (to, packet) = entry.remove();
            let now = self.now;
            self.host(to).handle_packet(now, &packet);
        }
        for side in [Side::Rider, Side::Web] {
            let now = self.now;
            // Poll only when due: this checks that poll_at is never late.
            if self.host(side).poll_at(now).is_some_and(|t| t <= now) {
                self.host(side).poll(now);
            }
            while let Some(packet) = self.host(side).poll_transmit() {
                self.send(side, packet);
            }
            while let Some(event) = self.host(side).poll_event() {
                let outcome = match event {
                    FlowEvent::Completed { at, bytes, .. } => Some(Ok((side, at, bytes))),
                    FlowEvent::Failed { at, reason, .. } => Some(Err((side, at, reason))),
                    FlowEvent::Established { .. } => None,
                };
                if let Some(outcome) = outcome {
                    self.outcomes.entry(event.flow()).or_insert(outcome);
                }
                self.events.push((side, event));
            }
            let count = self.host(side).socket_count();
            let peak = &mut self.peak_sockets[side.index()];
            *peak = (*peak).max(count);
        }
        true
    }

    /// Put a packet from `from` on the pipe.
    fn send(&mut self, from: Side, mut packet: Vec<u8>) {
        if self.hash_trace {
            for b in &packet {
                self.trace_hash = (self.trace_hash ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3);
            }
        }
        self.packets_sent += 1;
        let index = self.sent[from.index()];
        self.sent[from.index()] += 1;
        if let Some(drop) = &mut self.drop
            && drop(from, index, &packet)
        {
            return;
        }
        if self.pipe.loss > 0.0 && self.rng.random::<f64>() < self.pipe.loss {
            return;
        }
        if let Some(mangle) = &mut self.mangle {
            mangle(from, index, &mut packet);
        }
        let mut depart = self.now.max(self.busy_until[from.index()]);
        if self.queue_limit.is_some_and(|limit| depart > self.now + limit) {
            self.queue_drops += 1;
            return;
        }
        if let Some(rate) = self.pipe.rate_bps {
            depart += Duration::from_nanos(packet.len() as u64 * 8 * 1_000_000_000 / rate);
            self.busy_until[from.index()] = depart;
        }
        let extra = self.extra_delay.as_mut().map_or(Duration::ZERO, |f| f(from, index, &packet));
        let arrive = depart + self.pipe.delay + extra;
        self.in_flight.insert((arrive, self.seq), (from.other(), packet));
        self.seq += 1;
    }

    /// Run until `stop` holds or nothing happens before `end`; returns whether `stop` held.
    pub(crate) fn run_until(&mut self, end: Instant, mut stop: impl FnMut(&Net) -> bool) -> bool {
        loop {
            if stop(self) {
                return true;
            }
            if !self.step(end) {
                return stop(self);
            }
        }
    }

    /// Run until every started flow has an outcome, or `end`.
    pub(crate) fn run_flows(&mut self, end: Instant) -> bool {
        self.run_until(end, |net| net.started.keys().all(|f| net.outcome(*f).is_some()))
    }

    /// Run until both hosts have nothing left to do (or `end`).
    pub(crate) fn run_idle(&mut self, end: Instant) {
        while self.step(end) {}
    }

    /// The first terminal event of `flow`.
    pub(crate) fn outcome(&self, flow: FlowId) -> Option<Outcome> {
        self.outcomes.get(&flow).copied()
    }

    /// Flow completion time (connect to last byte read), if the flow completed.
    pub(crate) fn fct(&self, flow: FlowId) -> Option<Duration> {
        match self.outcome(flow)? {
            Ok((_, at, _)) => Some(at - self.started[&flow]),
            Err(_) => None,
        }
    }

    /// Every failure reported, for assertion messages.
    pub(crate) fn failures(&self) -> Vec<(Side, FlowEvent)> {
        self.events.iter().filter(|(_, e)| matches!(e, FlowEvent::Failed { .. })).copied().collect()
    }
}

/// Virtual time `s` seconds after the origin.
pub(crate) fn secs(s: f64) -> Instant {
    Instant::from_secs_f64(s)
}
