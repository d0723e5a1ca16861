//! One simulated run: two real braid-proto sessions (the vehicle's gateway and the server), the
//! emulated uplinks between them, and real TCP end hosts (riders behind the gateway, web servers
//! behind the server), all on one virtual clock (docs/design.md 1).
//!
//! ```text
//!  riders (smoltcp) ── client Session ══ link i up/down (LinkModel) ══ server Session ── web (smoltcp)
//! ```
//!
//! The loop is a plain discrete-event simulation: at each step the clock jumps to the earliest of
//! every component's next deadline, everything due then is handled, and packets are pumped between
//! components until nothing moves. All randomness comes from the run's seed.

use crate::host::udp::{cbr_packet, parse_cbr};
use crate::host::{self, FlowEvent, FlowId, HostConfig, TcpHost, Transfer};
use crate::link::driveby::DrivePass;
use crate::link::{Delivery, Enqueue, LinkModel};
use crate::results::{FlowRecord, LinkResult, RunResult};
use crate::scenario::{Congestion, Direction, Scenario, SchemeKind, SchemeSpec, WorkloadSpec};
use crate::workload::FlowPlan;
use braid_proto::crypto::{CipherSuite, REKEY_AFTER, SessionKeys};
use braid_proto::link::{IP_UDP_OVERHEAD, LinkId};
use braid_proto::session::{Event, HoldConfig, LinkConfig, Role, SealedSession, Session, SessionConfig, TransmitKind};
use braid_proto::{Instant, RecoveryKind, SchedulerKind};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::Duration;

/// The server's clock runs this far ahead of the client's, so every run exercises the estimators'
/// clock-offset handling (PluriBus 5.3: d + δ).
pub const SERVER_CLOCK_OFFSET: Duration = Duration::from_secs(7_654);
/// After the last flow arrival, flows get this long to finish before they count as incomplete.
pub const DRAIN: Duration = Duration::from_secs(60);

/// When the workload starts: the client's probes bring the links up first, as a vehicle's
/// gateway is up before riders board.
pub const FIRST_FLOW: Duration = Duration::from_secs(1);

const RIDER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const WEB: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 2);

/// Why a run could not be set up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimError {
    /// A peer contender (plain, mptcp, kcptun) runs only on the real testbed.
    #[error("scheme {scheme:?} is the real-kernel peer {peer:?}; run it with `braid testbed`, not the simulator")]
    PeerInSim {
        /// Scheme name.
        scheme: String,
        /// Peer name.
        peer: String,
    },
}

/// The engine's recovery and scheduler for a scenario scheme; an error for a real-testbed peer.
pub fn engine_scheme(s: &SchemeSpec) -> Result<(RecoveryKind, SchedulerKind), SimError> {
    match &s.kind {
        SchemeKind::Braid { recovery, scheduler } => Ok((*recovery, *scheduler)),
        SchemeKind::Peer(p) => Err(SimError::PeerInSim { scheme: s.name.clone(), peer: p.to_string() }),
    }
}

struct SimLink {
    /// The realised drive-by pass, if this is a drive-by link.
    pass: Option<crate::link::DrivePass>,
    up: LinkModel<InFlight>,
    down: LinkModel<InFlight>,
    true_loss_down: f64,
    down_bytes_per_s: Vec<u64>,
    /// Drive-by links: bytes delivered to the vehicle in each [`crate::link::driveby::STEP`], for
    /// the data carried per pass.
    down_bytes_per_step: Vec<u64>,
}

/// A datagram on a link, with what the simulator needs to score the sender's prediction.
struct InFlight {
    bytes: Vec<u8>,
    sent: Instant,
    predicted_owd_us: Option<u32>,
    /// Global sequence number of a data packet or resend (tracing only).
    seq: Option<u64>,
}

#[derive(Clone, Copy)]
struct FlowState {
    size: u64,
    start: Instant,
    done: Option<Instant>,
    /// An end host gave the flow up (timeouts, a reset).
    failed: bool,
}

/// Runs `scheme` of `scenario` once with `seed`.
pub fn run(
    scenario: &Scenario,
    scheme: &SchemeSpec,
    run: u32,
    seed: u64,
    sweep_value: Option<f64>,
) -> Result<RunResult, SimError> {
    let (recovery, scheduler) = engine_scheme(scheme)?;
    let mut w = World::new(scenario, scheme, recovery, scheduler, seed);
    w.run();
    Ok(w.finish(scheme, run, seed, sweep_value))
}

struct World<'a> {
    sc: &'a Scenario,
    now: Instant,
    client: SealedSession,
    server: SealedSession,
    /// When both ends next switch to new keys, as the daemons do after a handshake every
    /// [`REKEY_AFTER`]; keys older than `REJECT_AFTER` would refuse to seal.
    next_rekey: Instant,
    /// Key epochs so far (each epoch's keys come from the seed and its number).
    key_epoch: u64,
    /// The run's seed.
    seed: u64,
    links: Vec<SimLink>,
    rider: TcpHost,
    web: TcpHost,
    flows: Vec<FlowState>,
    plan: FlowPlan,
    next_cbr: Option<Instant>,
    cbr_seq: u64,
    cbr: CbrStats,
    end_arrivals: Instant,
    /// When the bulk workload's flows open (taken when they do).
    bulk_start: Option<Instant>,
    /// Bulk bytes received by each whole second (index = second), for the goodput series.
    goodput_marks: Vec<u64>,
    /// The passengers' senders' window (kB) and round trip (ms) at each of `goodput_marks`.
    sender_marks: Vec<(f64, f64)>,
    /// Bulk only: the most each flow's receiver was seen to have read. A flow that fails (idle
    /// timeout) is forgotten by its host, but what it delivered before still counts.
    bulk_read: Vec<u64>,
    end: Instant,
    server_addr: SocketAddr,
    client_addrs: Vec<SocketAddr>,
    /// Operator weights per link for `wrr` (NATALIE), applied to both ends' links.
    weights: Vec<u32>,
    buf: Vec<u8>,
    /// Datagrams that could not be sealed (none, unless the rekeying above is broken).
    unsealed: u64,
    datagrams: u64,
    bytes_on_air: u64,
    passenger_bytes_delivered: u64,
    arrival_err_sum_us: f64,
    arrival_err_n: u64,
    arrival_within_10ms: u64,
    /// Bulk only: per flow (by its web-side port), when its receiver last got new data.
    last_data_at: std::collections::HashMap<u16, Instant>,
    /// Bulk only: the longest gap between data deliveries to any flow's receiver.
    longest_stall: Duration,
    /// When the client is next told the vehicle's position (location awareness on, with a
    /// `[vehicle]`): every [`crate::link::driveby::STEP`], as a GPS receiver's fixes come.
    next_position: Option<Instant>,
}

#[derive(Default)]
struct CbrStats {
    sent: u64,
    received: u64,
    delay_sum_us: f64,
    jitter_us: f64,
    last_delay_us: Option<f64>,
}

impl<'a> World<'a> {
    fn new(sc: &'a Scenario, scheme: &SchemeSpec, recovery: RecoveryKind, scheduler: SchedulerKind, seed: u64) -> Self {
        let server_addr: SocketAddr = "192.0.2.1:7700".parse().expect("literal address");
        let client_addrs: Vec<SocketAddr> =
            (0..sc.links.len()).map(|i| SocketAddr::from(([198, 51, 100, (i + 1) as u8], 40_000))).collect();
        let tcp = sc.tcp;
        let mk_cfg = |role: Role| {
            let mut c = SessionConfig::new(role);
            c.recovery = recovery;
            c.scheduler = scheduler;
            c.seed = seed ^ if role == Role::Client { 0xc1 } else { 0x5e };
            c.hold = HoldConfig { fixed: scheme.hold, ..HoldConfig::default() };
            c.aqm.enabled = scheme.aqm;
            c.location.enabled = scheme.location;
            c
        };
        // Scenario weights are relative numbers; the engine takes integers, so keep two decimals.
        let weights: Vec<u32> = match &scheme.weights {
            Some(w) => w.iter().map(|x| (x * 100.0).round().clamp(0.0, f64::from(u32::MAX)) as u32).collect(),
            _ => vec![1; sc.links.len()],
        };
        let client_links: Vec<LinkConfig> = sc
            .links
            .iter()
            .enumerate()
            .map(|(i, l)| {
                // 0: unknown, found from traffic (`rate_known = false`).
                let (up, down) = l.told_rates_kbps().unwrap_or((0.0, 0.0));
                LinkConfig {
                    weight: weights.get(i).copied().unwrap_or(1),
                    ..LinkConfig::new(LinkId(i as u8), Some(server_addr), up * 1e3, down * 1e3)
                }
            })
            .collect();
        let keys = sim_keys(seed, 0);
        let client = Session::new(mk_cfg(Role::Client), &client_links, Instant::ZERO);
        let mut client = SealedSession::new(client, &keys, Instant::ZERO);
        let server = Session::new(mk_cfg(Role::Server), &[], Instant::ZERO + SERVER_CLOCK_OFFSET);
        let mut server = SealedSession::new(server, &keys.mirror(), Instant::ZERO + SERVER_CLOCK_OFFSET);
        // Both ends meter what they send on a link; the server applies it once it learns the link.
        for (i, l) in sc.links.iter().enumerate() {
            client.set_link_metering(LinkId(i as u8), l.metering);
            server.set_link_metering(LinkId(i as u8), l.metering);
        }
        let links = sc
            .links
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let r = l.for_run(seed, i, sc.duration);
                SimLink {
                    up: LinkModel::new(&r.up, seed.wrapping_mul(1_000_003).wrapping_add(2 * i as u64 + 1)),
                    down: LinkModel::new(&r.down, seed.wrapping_mul(1_000_003).wrapping_add(2 * i as u64 + 2)),
                    true_loss_down: r.down.loss.mean_loss(),
                    down_bytes_per_s: Vec::new(),
                    down_bytes_per_step: Vec::new(),
                    pass: r.pass,
                }
            })
            .collect();
        let mtu = client.config().max_packet;
        let host_cfg = |addr: Ipv4Addr, salt: u64| {
            let mut h = HostConfig::new(addr, 24);
            h.mtu = mtu;
            h.congestion = match tcp.congestion {
                Congestion::Reno => host::Congestion::Reno,
                Congestion::Cubic => host::Congestion::Cubic,
            };
            h.initial_rto = tcp.initial_rto;
            h.min_rto = tcp.min_rto;
            h.initial_window = tcp.initial_window;
            h.sack = tcp.sack;
            h.hystart = tcp.hystart;
            h.linux_rto = tcp.linux_rto;
            h.byte_counting = tcp.byte_counting;
            h.rack = tcp.rack;
            h.whole_segments = tcp.whole_segments;
            h.mss_clamp = Some(tcp.mss);
            h.socket_buffer = tcp.buffer_bytes;
            h.seed = seed ^ salt;
            h
        };
        let end_arrivals = Instant::ZERO + sc.duration;
        let end = match sc.workload {
            WorkloadSpec::Flows { .. } => end_arrivals + DRAIN,
            _ => end_arrivals,
        };
        let mut w = World {
            sc,
            now: Instant::ZERO,
            client,
            server,
            next_rekey: Instant::ZERO + REKEY_AFTER,
            key_epoch: 0,
            seed,
            unsealed: 0,
            links,
            rider: TcpHost::new(host_cfg(RIDER, 0x71de)),
            web: TcpHost::new(host_cfg(WEB, 0x3eb)),
            flows: Vec::new(),
            plan: FlowPlan::new(&sc.workload, seed, FIRST_FLOW, sc.duration),
            next_cbr: None,
            cbr_seq: 0,
            cbr: CbrStats::default(),
            end_arrivals,
            end,
            goodput_marks: Vec::new(),
            sender_marks: Vec::new(),
            bulk_read: Vec::new(),
            bulk_start: None,
            server_addr,
            client_addrs,
            weights,
            buf: vec![0u8; 4096],
            datagrams: 0,
            bytes_on_air: 0,
            passenger_bytes_delivered: 0,
            arrival_err_sum_us: 0.0,
            arrival_err_n: 0,
            arrival_within_10ms: 0,
            last_data_at: std::collections::HashMap::new(),
            longest_stall: Duration::ZERO,
            next_position: (scheme.location && sc.vehicle.is_some()).then_some(Instant::ZERO),
        };
        // Let the client's probes bring the links up before passengers start (a vehicle's gateway
        // is up before riders board); the workload starts at 1 s.
        let start = Instant::ZERO + FIRST_FLOW;
        match sc.workload {
            WorkloadSpec::Flows { .. } => {}
            // Opened by `arrivals` when the clock reaches `start`: a host sends its SYN when it
            // is told to connect, and goodput is counted from `start`.
            WorkloadSpec::Bulk { .. } => w.bulk_start = Some(start),
            WorkloadSpec::Cbr { .. } => w.next_cbr = Some(start),
        }
        w
    }

    /// New keys for both ends at once, as a handshake on the running session gives them: the
    /// client (initiator) seals with them at once, the server once it has opened a datagram
    /// sealed with them (WireGuard 6.1), so rekeying is on the simulated path as on the real one.
    fn rekey(&mut self) {
        self.key_epoch += 1;
        let keys = sim_keys(self.seed, self.key_epoch);
        self.client.channel_mut().rekey(&keys, self.now, true);
        let snow = self.server_now();
        self.server.channel_mut().rekey(&keys.mirror(), snow, false);
        self.next_rekey = self.now + REKEY_AFTER;
    }

    fn server_now(&self) -> Instant {
        self.now + SERVER_CLOCK_OFFSET
    }

    /// Opens flow number `flows.len()` at `at`: the rider connects to the web host, which sends
    /// (`Down`) or receives (`Up`) `size` bytes, or streams forever if `size` is `None`.
    fn start_flow_at(&mut self, at: Instant, direction: Direction, size: Option<u64>) {
        let id = self.flows.len() as u64;
        let flow = FlowId(id);
        let port = 1024 + (id % 60_000) as u16;
        let (web_t, rider_t) = match (direction, size) {
            (Direction::Up, Some(n)) => (Transfer::Receive(n), Transfer::Send(n)),
            (Direction::Up, None) => (Transfer::ReceiveForever, Transfer::SendForever),
            (_, Some(n)) => (Transfer::Send(n), Transfer::Receive(n)),
            (_, None) => (Transfer::SendForever, Transfer::ReceiveForever),
        };
        let ok = self.web.listen(flow, port, web_t).is_ok()
            && self.rider.connect(at, flow, SocketAddrV4::new(WEB, port), rider_t).is_ok();
        if !ok {
            tracing::warn!(flow = id, "could not open flow (port reuse); counted as incomplete");
        }
        self.flows.push(FlowState { size: size.unwrap_or(0), start: at, done: None, failed: false });
    }

    fn next_event(&self) -> Instant {
        let mut t = self.end;
        let mut at = |x: Option<Instant>| {
            if let Some(x) = x {
                t = t.min(x)
            }
        };
        at(self.plan.peek_start().map(|t| Instant::ZERO + t));
        at(self.next_cbr);
        at(self.bulk_start);
        at(Some(self.next_rekey));
        at(self.next_position);
        at(self.client.poll_timeout());
        at(self.server.poll_timeout().map(|s| s.saturating_sub(SERVER_CLOCK_OFFSET)));
        at(self.rider.poll_at(self.now));
        at(self.web.poll_at(self.now));
        for l in &self.links {
            at(l.up.poll_timeout());
            at(l.down.poll_timeout());
        }
        t.max(self.now)
    }

    fn run(&mut self) {
        while self.now < self.end {
            self.now = self.next_event();
            self.mark_goodput();
            self.arrivals();
            self.deliveries();
            if self.now >= self.next_rekey {
                self.rekey();
            }
            self.tell_position();
            self.client.handle_timeout(self.now);
            let snow = self.server_now();
            self.server.handle_timeout(snow);
            self.pump();
        }
        self.mark_goodput();
    }

    /// Tells the client where the vehicle is, when a fix is due.
    fn tell_position(&mut self) {
        let (Some(due), Some(v)) = (self.next_position, self.sc.vehicle) else { return };
        if self.now < due {
            return;
        }
        let t = self.now.saturating_duration_since(Instant::ZERO);
        let pos = braid_proto::location::Position { x_m: v.position_m(t), y_m: 0.0, vx_mps: v.speed_mps, vy_mps: 0.0 };
        self.client.handle_position(self.now, pos);
        self.next_position = Some(due + crate::link::driveby::STEP);
    }

    /// Bulk only: the bytes received so far, noted once per second of simulated time. Bytes only
    /// move at events, so the first event at or after a boundary sees what the boundary saw.
    fn mark_goodput(&mut self) {
        if !matches!(self.sc.workload, WorkloadSpec::Bulk { .. }) {
            return;
        }
        while Instant::ZERO + Duration::from_secs(self.goodput_marks.len() as u64) <= self.now.min(self.end) {
            let bytes = self.bulk_bytes();
            self.goodput_marks.push(bytes);
            // Both hosts: a download's sender is the web host, an upload's the rider.
            let (rider, web) = (self.rider.sender_window(), self.web.sender_window());
            self.sender_marks.push(((rider.0 + web.0) as f64 / 1000.0, f64::from(rider.1.max(web.1))));
        }
    }

    /// Bytes the bulk flows' receivers have read, summed over flows (each flow's most seen, so
    /// that the sum never falls when a failed flow is forgotten).
    fn bulk_bytes(&mut self) -> u64 {
        self.bulk_read.resize(self.flows.len(), 0);
        for (i, most) in self.bulk_read.iter_mut().enumerate() {
            let id = FlowId(i as u64);
            *most = (*most).max(self.rider.bytes_received(id) + self.web.bytes_received(id));
        }
        self.bulk_read.iter().sum()
    }

    fn arrivals(&mut self) {
        if let Some(start) = self.bulk_start.filter(|&t| t <= self.now)
            && let WorkloadSpec::Bulk { flows, direction } = self.sc.workload
        {
            self.bulk_start = None;
            for i in 0..flows {
                let d = if direction == Direction::Both && i % 2 == 1 { Direction::Up } else { direction };
                self.start_flow_at(start, d, None);
            }
        }
        while self.plan.peek_start().is_some_and(|t| Instant::ZERO + t <= self.now) {
            let Some(f) = self.plan.next() else { break };
            self.start_flow_at(Instant::ZERO + f.start, f.direction, Some(f.size));
        }
        if let WorkloadSpec::Cbr { direction, rate_kbps, packet_bytes } = self.sc.workload {
            while let Some(t) = self.next_cbr.filter(|&t| t <= self.now) {
                if t >= self.end_arrivals {
                    self.next_cbr = None;
                    break;
                }
                let up = direction == Direction::Up || (direction == Direction::Both && self.cbr_seq % 2 == 1);
                let (src, dst) = if up {
                    (SocketAddrV4::new(RIDER, 5004), SocketAddrV4::new(WEB, 5004))
                } else {
                    (SocketAddrV4::new(WEB, 5004), SocketAddrV4::new(RIDER, 5004))
                };
                let size = (packet_bytes as usize + 28).min(self.client.config().max_packet);
                let p = cbr_packet(src, dst, self.cbr_seq, t, size);
                self.cbr_seq += 1;
                self.cbr.sent += 1;
                let _ = if up {
                    self.client.handle_tun_packet(self.now, &p)
                } else {
                    let snow = self.server_now();
                    self.server.handle_tun_packet(snow, &p)
                };
                let gap = (packet_bytes as f64 + 28.0) * 8.0 / (rate_kbps * 1000.0);
                self.next_cbr = Some(t + Duration::from_secs_f64(gap));
            }
        }
    }

    fn deliveries(&mut self) {
        for i in 0..self.links.len() {
            while let Some(d) = self.links[i].up.poll_deliver(self.now) {
                if let Delivery::Delivered { at, packet } = d {
                    self.score_prediction(&packet, at, true);
                    let snow = self.server_now();
                    let _ = self.server.handle_datagram(snow, snow, None, self.client_addrs[i], &packet.bytes);
                }
            }
            while let Some(d) = self.links[i].down.poll_deliver(self.now) {
                if let Delivery::Delivered { at, packet } = d {
                    self.score_prediction(&packet, at, false);
                    let sec = at.as_micros() / 1_000_000;
                    let series = &mut self.links[i].down_bytes_per_s;
                    if series.len() <= sec as usize {
                        series.resize(sec as usize + 1, 0);
                    }
                    series[sec as usize] += (packet.bytes.len() + IP_UDP_OVERHEAD) as u64;
                    if self.links[i].pass.is_some() {
                        let step = (at.as_micros() / crate::link::driveby::STEP.as_micros() as u64) as usize;
                        let steps = &mut self.links[i].down_bytes_per_step;
                        if steps.len() <= step {
                            steps.resize(step + 1, 0);
                        }
                        steps[step] += (packet.bytes.len() + IP_UDP_OVERHEAD) as u64;
                    }
                    let (now, link) = (self.now, Some(LinkId(i as u8)));
                    tracing::trace!(target: "braid_sim::arrive", now = %self.now, link = i, seq = ?packet.seq, "arrive");
                    let _ = self.client.handle_datagram(now, now, link, self.server_addr, &packet.bytes);
                }
            }
        }
    }

    /// PluriBus 6.3.2: the sender's predicted delivery time against the real one. The prediction
    /// includes the clock offset, which the simulator knows and removes.
    fn score_prediction(&mut self, p: &InFlight, at: Instant, up: bool) {
        let Some(pred) = p.predicted_owd_us else { return };
        let offset = SERVER_CLOCK_OFFSET.as_micros() as u32;
        let pred = if up { pred.wrapping_sub(offset) } else { pred.wrapping_add(offset) } as i32;
        let actual = (at - p.sent).as_micros() as i64;
        let err = (i64::from(pred) - actual).abs() as f64;
        self.arrival_err_sum_us += err;
        self.arrival_err_n += 1;
        if err <= 10_000.0 {
            self.arrival_within_10ms += 1;
        }
    }

    /// Moves packets between hosts, sessions and links until nothing moves at this instant.
    fn pump(&mut self) {
        loop {
            let mut moved = false;
            if self.rider.poll_at(self.now).is_some_and(|t| t <= self.now) {
                self.rider.poll(self.now);
            }
            if self.web.poll_at(self.now).is_some_and(|t| t <= self.now) {
                self.web.poll(self.now);
            }
            while let Some(p) = self.rider.poll_transmit() {
                let _ = self.client.handle_tun_packet(self.now, &p);
                moved = true;
            }
            let snow = self.server_now();
            while let Some(p) = self.web.poll_transmit() {
                let _ = self.server.handle_tun_packet(snow, &p);
                moved = true;
            }
            // Sealed as the daemons seal them: the keys are renewed before they expire, so a
            // datagram that does not seal is a defect, counted and dropped.
            while let Some(t) = self.client.poll_transmit(self.now, &mut self.buf) {
                match t {
                    Ok(t) => self.launch(t.link, t.kind, t.len, true),
                    Err(_) => self.unsealed += 1,
                }
                moved = true;
            }
            while let Some(t) = self.server.poll_transmit(snow, &mut self.buf) {
                match t {
                    Ok(t) => self.launch(t.link, t.kind, t.len, false),
                    Err(_) => self.unsealed += 1,
                }
                moved = true;
            }
            while let Some(p) = self.client.poll_deliver() {
                self.note_data(&p, true);
                self.passenger_bytes_delivered += p.len() as u64;
                if !self.take_cbr(&p) {
                    self.rider.handle_packet(self.now, &p);
                }
                moved = true;
            }
            while let Some(p) = self.server.poll_deliver() {
                self.note_data(&p, false);
                self.passenger_bytes_delivered += p.len() as u64;
                if !self.take_cbr(&p) {
                    self.web.handle_packet(self.now, &p);
                }
                moved = true;
            }
            while self.client.poll_event().is_some() {}
            while let Some(ev) = self.server.poll_event() {
                // The server learns the vehicle's links from traffic; give each its operator weight.
                if let Event::LinkAddress(id, _) = ev
                    && let Some(&w) = self.weights.get(id.0 as usize)
                {
                    self.server.set_link_weight(id, w);
                }
            }
            for host in [&mut self.rider, &mut self.web] {
                while let Some(ev) = host.poll_event() {
                    match ev {
                        FlowEvent::Completed { flow, at, .. } => {
                            if let Some(f) = self.flows.get_mut(flow.0 as usize) {
                                f.done.get_or_insert(at);
                            }
                        }
                        FlowEvent::Failed { flow, .. } => {
                            if let Some(f) = self.flows.get_mut(flow.0 as usize) {
                                f.failed = true;
                            }
                        }
                        FlowEvent::Established { .. } => {}
                    }
                }
            }
            if !moved {
                break;
            }
        }
    }

    fn take_cbr(&mut self, p: &[u8]) -> bool {
        if !matches!(self.sc.workload, WorkloadSpec::Cbr { .. }) {
            return false;
        }
        let Some((_, sent)) = parse_cbr(p) else { return false };
        let d = (self.now - sent).as_micros() as f64;
        self.cbr.received += 1;
        self.cbr.delay_sum_us += d;
        if let Some(last) = self.cbr.last_delay_us {
            // RFC 3550 interarrival jitter estimator.
            self.cbr.jitter_us += ((d - last).abs() - self.cbr.jitter_us) / 16.0;
        }
        self.cbr.last_delay_us = Some(d);
        true
    }

    /// Puts a datagram on `link`'s bottleneck. `--log braid_sim::launch=trace` traces each
    /// downstream one: its kind, whether the drop-tail queue refused it, the bytes queued ahead of
    /// it (`real_q`) and the sending server's modelled queue on the link (`mq_us`), which is
    /// where the queue model and the real buffer part ways.
    fn launch(&mut self, link: LinkId, kind: TransmitKind, len: usize, up: bool) {
        let mq_us = if !up && tracing::enabled!(target: "braid_sim::launch", tracing::Level::TRACE) {
            let t = self.server_now();
            self.server.link_status(t).iter().find(|s| s.id == link).map_or(0, |s| s.queue.as_micros() as u64)
        } else {
            0
        };
        let Some(l) = self.links.get_mut(link.0 as usize) else { return };
        let predicted_owd_us = match kind {
            TransmitKind::Data { predicted_owd_us, .. } => predicted_owd_us,
            _ => None,
        };
        let seq = match kind {
            TransmitKind::Data { seq, .. } | TransmitKind::Resend { seq } => Some(seq),
            _ => None,
        };
        let p = InFlight { bytes: self.buf[..len].to_vec(), sent: self.now, predicted_owd_us, seq };
        let size = len + IP_UDP_OVERHEAD;
        self.datagrams += 1;
        self.bytes_on_air += size as u64;
        let model = if up { &mut l.up } else { &mut l.down };
        let real_q = model.queued_bytes(self.now);
        let dropped = matches!(model.enqueue(self.now, size, p), Enqueue::Dropped(_));
        if !up {
            let k = match kind {
                TransmitKind::Data { .. } => "data",
                TransmitKind::Resend { .. } => "resend",
                TransmitKind::Coded => "coded",
                TransmitKind::Feedback => "fb",
                TransmitKind::Probe => "probe",
            };
            tracing::trace!(target: "braid_sim::launch", now = %self.now, link = link.0, k, ?seq, size, dropped, real_q, mq_us, "launch");
        }
    }

    fn finish(mut self, scheme: &SchemeSpec, run: u32, seed: u64, sweep_value: Option<f64>) -> RunResult {
        let bulk = matches!(self.sc.workload, WorkloadSpec::Bulk { .. });
        let flows: Vec<FlowRecord> = self
            .flows
            .iter()
            .map(|f| FlowRecord {
                size_bytes: f.size,
                start_s: f.start.as_secs_f64(),
                fct_s: f.done.map(|d| (d - f.start).as_secs_f64()),
                // A bulk flow that ran to the end of the run did what it was for.
                incomplete: f.done.is_none() && (!bulk || f.failed),
            })
            .collect();
        let goodput_kbps = match self.sc.workload {
            WorkloadSpec::Bulk { .. } => {
                let secs = (self.end - Instant::from_secs_f64(1.0)).as_secs_f64().max(1e-9);
                Some(self.bulk_bytes() as f64 * 8.0 / secs / 1000.0)
            }
            _ => None,
        };
        let (cs, ss) = (self.client.stats(), self.server.stats());
        tracing::info!(
            scheme = %scheme.name,
            down_residual = ratio(ss.tun_in.saturating_sub(cs.delivered), ss.tun_in),
            up_residual = ratio(cs.tun_in.saturating_sub(ss.delivered), cs.tun_in),
            links = ?self.links.iter().map(|l| (l.up.stats().clone(), l.down.stats().clone())).collect::<Vec<_>>(),
            "run residuals"
        );
        let (cr, sr) = (self.client.reorder_stats(), self.server.reorder_stats());
        tracing::debug!(scheme = %scheme.name, client = ?cs, server = ?ss, client_decoder = ?self.client.decoder_stats(), server_decoder = ?self.server.decoder_stats(), client_reorder = ?cr, server_reorder = ?sr, "run finished");
        let tun_in = cs.tun_in + ss.tun_in;
        let tcp = self.rider.tcp_counters() + self.web.tcp_counters();
        let delivered = cs.delivered + ss.delivered;
        let carriers = cs.data_sent + ss.data_sent + cs.data_resent + ss.data_resent + cs.coded_sent + ss.coded_sent;
        let waited = cr.waited + sr.waited;
        let status = self.client.link_status(self.now);
        let server_status = self.server.link_status(self.server_now());
        let total_data: u64 = status.iter().chain(&server_status).map(|s| s.counters.data_sent).sum();
        let duration_s = self.end.as_secs_f64();
        // `time_in` holds one entry per phase.
        let degraded = |s: &braid_proto::session::LinkStatus| {
            s.time_in
                .iter()
                .find(|(p, _, _)| *p == braid_proto::link::Phase::Degraded)
                .map_or(0.0, |(_, d, _)| d.as_secs_f64())
        };
        let links = self
            .links
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let id = LinkId(i as u8);
                let st = status.iter().find(|s| s.id == id);
                let sst = server_status.iter().find(|s| s.id == id);
                let data = st.map_or(0, |s| s.counters.data_sent) + sst.map_or(0, |s| s.counters.data_sent);
                let (u, d) = (l.up.stats(), l.down.stats());
                let lost = u.random_losses + u.outage_losses + d.random_losses + d.outage_losses;
                let left = lost + u.delivered_packets + d.delivered_packets;
                LinkResult {
                    name: self.sc.links[i].name.clone(),
                    utilisation_down: d.busy.as_secs_f64() / duration_s,
                    utilisation_up: u.busy.as_secs_f64() / duration_s,
                    data_share: if total_data > 0 { data as f64 / total_data as f64 } else { 0.0 },
                    loss: if left > 0 { lost as f64 / left as f64 } else { 0.0 },
                    queue_drops: ratio(u.queue_drops + d.queue_drops, u.offered_packets + d.offered_packets),
                    est_capacity_down_kbps: st.map_or(0.0, |s| s.rx_capacity_bps / 1e3),
                    true_capacity_down_kbps: l.down.true_rate_kbps(self.now),
                    est_loss_down: st.map_or(0.0, |s| s.rx_loss),
                    true_loss_down: l.true_loss_down,
                    down_kbps_series: l.down_bytes_per_s.iter().map(|b| *b as f64 * 8.0 / 1000.0).collect(),
                    degraded_s: st.into_iter().chain(sst).map(degraded).reduce(f64::max),
                }
            })
            .collect();
        RunResult {
            scheme: scheme.name.clone(),
            run,
            seed,
            sweep_value,
            flows,
            goodput_kbps,
            goodput_kbps_series: self
                .goodput_marks
                .windows(2)
                .map(|w| w[1].saturating_sub(w[0]) as f64 * 8.0 / 1000.0)
                .collect(),
            // As each second of the goodput series ends.
            sender_cwnd_kb_series: self.sender_marks.iter().skip(1).map(|m| m.0).collect(),
            sender_rtt_ms_series: self.sender_marks.iter().skip(1).map(|m| m.1).collect(),
            residual_loss: ratio(tun_in.saturating_sub(delivered), tun_in),
            aqm_drops: ratio(cs.aqm_dropped + ss.aqm_dropped, tun_in),
            overhead: ratio(self.bytes_on_air, self.passenger_bytes_delivered),
            coded_fraction: ratio(cs.coded_sent + ss.coded_sent, carriers),
            recovered: cs.recovered + ss.recovered,
            resent: cs.data_resent + ss.data_resent,
            tcp_timeouts: tcp.timeouts,
            tcp_recoveries: tcp.recoveries,
            tcp_spurious_timeouts: tcp.spurious_timeouts,
            late_fraction: ratio(cr.late + sr.late, delivered),
            reordered_fraction: ratio(waited, delivered),
            mean_hold_ms: if waited > 0 { (cr.wait_us + sr.wait_us) as f64 / waited as f64 / 1000.0 } else { 0.0 },
            arrival_error_ms: if self.arrival_err_n > 0 {
                self.arrival_err_sum_us / self.arrival_err_n as f64 / 1000.0
            } else {
                0.0
            },
            arrival_within_10ms: ratio(self.arrival_within_10ms, self.arrival_err_n),
            cbr_loss: (self.cbr.sent > 0)
                .then(|| ratio(self.cbr.sent.saturating_sub(self.cbr.received), self.cbr.sent)),
            cbr_delay_ms: (self.cbr.received > 0).then(|| self.cbr.delay_sum_us / self.cbr.received as f64 / 1000.0),
            cbr_jitter_ms: (self.cbr.received > 1).then_some(self.cbr.jitter_us / 1000.0),
            links,
            pass_share: self.pass_share(),
            longest_stall_ms: matches!(self.sc.workload, WorkloadSpec::Bulk { .. })
                .then(|| self.longest_stall.as_secs_f64() * 1e3),
            wifi_pass_mb: self.wifi_pass_mb(),
            datagrams: self.datagrams,
            simulated_s: duration_s,
        }
    }
}

impl World<'_> {
    /// Bulk only: a passenger packet leaves the tunnel toward the rider (`down`) or the web host;
    /// if it is a TCP segment carrying data, the gap since its flow's previous one is a stall
    /// candidate. Flows are told apart by the web host's port (source going down, destination up).
    fn note_data(&mut self, p: &[u8], down: bool) {
        if !matches!(self.sc.workload, WorkloadSpec::Bulk { .. }) || p.len() < 20 || p[9] != 6 {
            return;
        }
        let ihl = usize::from(p[0] & 0x0f) * 4;
        let total = usize::from(u16::from_be_bytes([p[2], p[3]])).min(p.len());
        if total < ihl + 20 {
            return;
        }
        let tcp = &p[ihl..total];
        let data_off = usize::from(tcp[12] >> 4) * 4;
        if tcp.len() <= data_off {
            return; // a bare acknowledgement
        }
        let port = u16::from_be_bytes(if down { [tcp[0], tcp[1]] } else { [tcp[2], tcp[3]] });
        tracing::trace!(
            target: "braid_sim::pass",
            now = %self.now,
            port,
            tseq = u32::from_be_bytes([tcp[4], tcp[5], tcp[6], tcp[7]]),
            len = tcp.len() - data_off,
            "passenger data"
        );
        if let Some(prev) = self.last_data_at.insert(port, self.now) {
            self.longest_stall = self.longest_stall.max(self.now - prev);
        }
    }

    /// What each pass of each drive-by link carried down to the vehicle, MB, in time order.
    fn wifi_pass_mb(&self) -> Vec<f64> {
        DrivePass::mb_per_pass(
            self.links.iter().filter_map(|l| Some((l.pass.as_ref()?, &l.down_bytes_per_step[..]))),
            Duration::from_micros(self.now.as_micros()),
        )
    }

    /// Bulk bytes delivered over the drive-by links' potential (paper 002 section 5's "theoretical
    /// potential": the integral of the rate the model allows over the run).
    fn pass_share(&mut self) -> Option<f64> {
        if !matches!(self.sc.workload, WorkloadSpec::Bulk { .. }) {
            return None;
        }
        let potential: f64 = self.links.iter().filter_map(|l| l.pass.as_ref()).map(|p| p.potential_bytes()).sum();
        (potential > 0.0).then(|| self.bulk_bytes() as f64 / potential)
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

/// The keys of a simulated session's `epoch`, from the run's seed: the simulator seals with real
/// keys (the datagrams' sizes and the sealing work are the daemon's) but has no handshake to
/// agree on them.
fn sim_keys(seed: u64, epoch: u64) -> SessionKeys {
    use rand::{RngCore, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ epoch.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let (mut send, mut recv) = ([0u8; 32], [0u8; 32]);
    rng.fill_bytes(&mut send);
    rng.fill_bytes(&mut recv);
    SessionKeys { suite: CipherSuite::ChaCha20Poly1305, send, recv }
}

#[cfg(test)]
#[path = "world_tests.rs"]
mod tests;
