//! A fleet of emulated vehicles against a real `braid server` (`scripts/bench-fleet.sh`).
//!
//! Each vehicle is a braid-proto client [`Session`] with its own Noise handshake ([`Initiator`])
//! and its own UDP socket, bound to its own loopback address (127.1.x.y, so the server's
//! per-source handshake limits see a fleet, not one host); all of them are tokio tasks of this one
//! process. Vehicle `i`'s key is derived from `i`, so `fleet keys N` can print the public keys for
//! the server's `[[peer]]` list.
//!
//! `fleet run` measures, in order:
//! 1. an established vehicle's (vehicle 0's) ping round trip through the server (ICMP echo to the
//!    server's tunnel address, answered by the server's kernel), idle;
//! 2. the same while N other vehicles join at once, and how fast they join (handshakes/s);
//! 3. the server's memory per idle session (its RSS before the first and after the last join);
//! 4. aggregate throughput and per-vehicle fairness (Jain's index) with LOAD vehicles each
//!    offering the same rate of 1,200-byte passenger packets, counted by the server (`braid
//!    status`: packets each vehicle's session delivered to its TUN device).
//!    By default the load is pre-sealed ([`measure_presealed`]): every datagram of the phase is
//!    built and sealed before it starts, and the phase only sends them, so that the emulator's
//!    cost per packet is the kernel's send alone; `FLEET_LOAD=live` has the vehicles' sessions
//!    generate and seal it as it goes ([`measure_load`]).
//!
//! After the join it prints the slowest pings of the window, each with how far into the join it
//! was sent and how many vehicles had joined by then. `FLEET_JOIN_RATE` (vehicles a second) has
//! the N join at that fixed rate rather than all at once.
//!
//! The vehicles other than vehicle 0 stand for other hosts: their sessions run on this process's
//! main thread and their handshakes' Diffie-Hellman work on a thread of its own ([`Handshakes`]),
//! so that one vehicle's key exchange does not hold up another's timers. While they join and idle
//! both threads run at `SCHED_IDLE`, so that on a machine whose cores the server shares with them
//! their handshakes' Diffie-Hellman work waits for the server's threads and vehicle 0's rather
//! than the other way round (on a real network it runs on other machines' cores). A nice value is not
//! enough for that: Linux lets a running nice-19 thread finish its time slice (milliseconds)
//! before a woken ordinary thread gets its core, and switches from a `SCHED_IDLE` one at once.
//! `FLEET_SCHED=nice` runs them at nice [`FLEET_NICE`] (or the environment's `FLEET_NICE`)
//! instead. Vehicle 0 runs in a process of its own (`fleet probe`, started by `fleet run`), as it
//! would on a host of its own, at a low real-time priority (SCHED_FIFO 10; `FLEET_PROBE_RT=0`:
//! the ordinary priority), so that its pings' replies wait neither for a core the server or
//! other work holds nor for the joining vehicles' process; it pings every [`PING_EVERY`]
//! (`FLEET_PING_MS`).
//!
//! ```text
//! fleet keys N
//! fleet run SERVER:PORT SERVER_PUBKEY N SERVER_PID CONTROL_SOCKET [LOAD [MBIT_PER_VEHICLE [SECS]]]
//! fleet probe SERVER:PORT SERVER_PUBKEY PING_EVERY_US ORIGIN_MONOTONIC_US
//! ```

use braid_proto::crypto::{CipherSuite, Initiator, InitiatorEvent, PublicKey, SecureChannel, StaticSecret, TAG_LEN};
use braid_proto::{LinkConfig, LinkId, Role, Session, SessionConfig};
use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use thread_priority::{
    NormalThreadSchedulePolicy, ThreadPriority, ThreadSchedulePolicy, set_thread_priority_and_policy, thread_native_id,
};
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, watch};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// Passenger packet size of the load phase (IPv4 + UDP + payload).
const LOAD_PACKET: usize = 1200;
/// Ping interval of vehicle 0 (the environment's `FLEET_PING_MS` overrides it): every 5 ms, so
/// that a join of a second gives a p99 of 200 samples rather than its worst ping.
const PING_EVERY: Duration = Duration::from_millis(5);
/// How long an initiation waits for its answer before the next.
const HANDSHAKE_RETRY: Duration = Duration::from_secs(1);
/// The nice value of the thread that runs the vehicles other than vehicle 0 while they join and
/// idle with `FLEET_SCHED=nice` (the lowest); the environment's `FLEET_NICE` overrides it.
const FLEET_NICE: i32 = 19;

/// Vehicle `i`'s static key: derived from `i`, so that `keys` and `run` agree.
fn secret(i: usize) -> StaticSecret {
    let mut b = [0x5au8; 32];
    // Not the first byte: X25519 clamping clears its low bits.
    b[8..16].copy_from_slice(&(i as u64 + 1).to_le_bytes());
    StaticSecret::from_bytes(b)
}

fn vehicle_name(i: usize) -> String {
    format!("veh-{i:04}")
}

/// Vehicle `i`'s source address on loopback, and its passenger (tunnel) address.
fn addresses(i: usize) -> (Ipv4Addr, Ipv4Addr) {
    let (hi, lo) = ((i / 250) as u8, (i % 250) as u8 + 2);
    (Ipv4Addr::new(127, 1, hi, lo), Ipv4Addr::new(10, 77, hi + 1, lo))
}

fn b64(k: &[u8; 32]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(k)
}

fn checksum(b: &[u8]) -> u16 {
    let mut s: u32 = b.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))).sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// An IPv4 packet from `src` to `dst` carrying `payload` of protocol `proto`.
fn ipv4(src: Ipv4Addr, dst: Ipv4Addr, proto: u8, payload: &[u8]) -> Vec<u8> {
    let mut p = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, proto, 0, 0];
    p[2..4].copy_from_slice(&((20 + payload.len()) as u16).to_be_bytes());
    p.extend_from_slice(&src.octets());
    p.extend_from_slice(&dst.octets());
    let c = checksum(&p);
    p[10..12].copy_from_slice(&c.to_be_bytes());
    p.extend_from_slice(payload);
    p
}

fn echo_request(src: Ipv4Addr, dst: Ipv4Addr, id: u16, seq: u16) -> Vec<u8> {
    let mut icmp = vec![8, 0, 0, 0];
    icmp.extend_from_slice(&id.to_be_bytes());
    icmp.extend_from_slice(&seq.to_be_bytes());
    icmp.extend_from_slice(&[0x42; 56]);
    let c = checksum(&icmp);
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    ipv4(src, dst, 1, &icmp)
}

/// The sequence number of an ICMP echo reply with identifier `id`.
fn echo_reply_seq(p: &[u8], id: u16) -> Option<u16> {
    let ihl = usize::from(p.first()? & 0x0f) * 4;
    let icmp = p.get(ihl..)?;
    (p.get(9) == Some(&1) && icmp.len() >= 8 && icmp[0] == 0 && u16::from_be_bytes([icmp[4], icmp[5]]) == id)
        .then(|| u16::from_be_bytes([icmp[6], icmp[7]]))
}

/// The load phase's passenger packet from `tunnel`: UDP to the discard range, which the server's
/// namespace blackholes. With its UDP checksum, as a host's stack sends it (the server's TUN
/// batching coalesces a flow's packets only where the checksums are right).
fn load_packet(tunnel: Ipv4Addr) -> Vec<u8> {
    let dst = Ipv4Addr::new(198, 18, 0, 1);
    let mut udp = vec![0u8; LOAD_PACKET - 20];
    udp[0..2].copy_from_slice(&40000u16.to_be_bytes());
    udp[2..4].copy_from_slice(&9u16.to_be_bytes());
    udp[4..6].copy_from_slice(&((LOAD_PACKET - 20) as u16).to_be_bytes());
    // RFC 768: over the pseudo-header (addresses, protocol, UDP length) and the datagram.
    let mut pseudo = Vec::with_capacity(12 + udp.len());
    pseudo.extend_from_slice(&tunnel.octets());
    pseudo.extend_from_slice(&dst.octets());
    pseudo.extend_from_slice(&[0, 17]);
    pseudo.extend_from_slice(&((LOAD_PACKET - 20) as u16).to_be_bytes());
    pseudo.extend_from_slice(&udp);
    let c = match checksum(&pseudo) {
        0 => 0xffff,
        c => c,
    };
    udp[6..8].copy_from_slice(&c.to_be_bytes());
    ipv4(tunnel, dst, 17, &udp)
}

/// What a vehicle is asked to do.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    /// Nothing but what the session does by itself.
    Idle,
    /// Offer passenger packets at this many bits per second.
    Load(f64),
    /// Hand what sealing needs (socket, keys, where the sequence numbers stand) to the pre-sealed
    /// load generator and stop (the loading vehicles only; the others stay idle).
    Handoff,
    /// Stop.
    Stop,
}

/// The server's tunnel address, which vehicle 0 pings (bench-fleet.sh's `tun` address).
const SERVER_TUNNEL: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);

/// Whether vehicle 0's process runs at SCHED_FIFO 10 (`FLEET_PROBE_RT=0`: the ordinary priority).
fn probe_rt() -> bool {
    std::env::var("FLEET_PROBE_RT").map_or(true, |v| v != "0")
}

/// The monotonic clock (`CLOCK_MONOTONIC`, which `std::time::Instant` reads on Linux) in
/// microseconds: vehicle 0's process and this one count their times from the same instant.
fn monotonic_us() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec as u64 * 1_000_000 + t.tv_nsec as u64 / 1000
}

/// What vehicles report.
enum Report {
    Joined {
        i: usize,
        after: Duration,
        attempts: u32,
        cookies: u32,
    },
    Failed {
        i: usize,
        error: String,
    },
    /// A ping's round trip, with when it was sent.
    Rtt(std::time::Instant, Duration),
}

impl Report {
    /// One line of vehicle 0's process's output, times counted from `origin` in microseconds.
    fn line(&self, origin: std::time::Instant) -> String {
        match self {
            Report::Joined { i, after, attempts, cookies } => {
                format!("joined {i} {} {attempts} {cookies}", after.as_micros())
            }
            Report::Failed { i, error } => format!("failed {i} {}", error.replace('\n', " ")),
            Report::Rtt(at, d) => format!("rtt {} {}", at.saturating_duration_since(origin).as_micros(), d.as_micros()),
        }
    }

    /// The report of one of [`Report::line`]'s lines; `None` for anything else.
    fn parse(line: &str, origin: std::time::Instant) -> Option<Report> {
        let mut w = line.split(' ');
        let us = |x: Option<&str>| x.and_then(|v| v.parse::<u64>().ok()).map(Duration::from_micros);
        match w.next()? {
            "joined" => Some(Report::Joined {
                i: w.next()?.parse().ok()?,
                after: us(w.next())?,
                attempts: w.next()?.parse().ok()?,
                cookies: w.next()?.parse().ok()?,
            }),
            "failed" => {
                let i = w.next()?.parse().ok()?;
                Some(Report::Failed { i, error: w.collect::<Vec<_>>().join(" ") })
            }
            "rtt" => Some(Report::Rtt(origin + us(w.next())?, us(w.next())?)),
            _ => None,
        }
    }
}

/// `fleet probe SERVER:PORT SERVER_PUBKEY PING_EVERY_US ORIGIN_MONOTONIC_US`: vehicle 0 in a
/// process of its own (`fleet run` starts it), its reports one per line on stdout, until killed.
async fn probe(args: &[String]) -> Result<(), Error> {
    let [server, key, every, origin_mono] = args else {
        return Err("usage: fleet probe SERVER:PORT SERVER_PUBKEY PING_EVERY_US ORIGIN_MONOTONIC_US".into());
    };
    let server_pub = PublicKey(braid::decode_key(key).ok_or("server public key: not 32 bytes of base64")?);
    let since = Duration::from_micros(monotonic_us().saturating_sub(origin_mono.parse()?));
    let origin = std::time::Instant::now().checked_sub(since).ok_or("the run's origin is before boot")?;
    let v = Vehicle {
        i: 0,
        server: server.parse()?,
        server_pub,
        ping_to: Some(SERVER_TUNNEL),
        ping_every: Duration::from_micros(every.parse()?),
        loads: false,
        origin,
        handoff: None,
        handshakes: None,
    };
    let (_phase_tx, phase_rx) = watch::channel(Phase::Idle);
    let (rep_tx, mut rep_rx) = mpsc::unbounded_channel();
    let sent = Arc::new(AtomicU64::new(0));
    tokio::spawn(v.run(phase_rx, rep_tx, sent));
    let mut out = std::io::stdout().lock();
    while let Some(r) = rep_rx.recv().await {
        writeln!(out, "{}", r.line(origin))?;
        out.flush()?;
    }
    Ok(())
}

struct Vehicle {
    i: usize,
    server: SocketAddr,
    server_pub: PublicKey,
    /// The server's tunnel address, pinged by vehicle 0.
    ping_to: Option<Ipv4Addr>,
    /// How often vehicle 0 pings.
    ping_every: Duration,
    /// Whether it offers load in the load phase.
    loads: bool,
    origin: std::time::Instant,
    /// Where a loading vehicle hands itself over on [`Phase::Handoff`].
    handoff: Option<mpsc::UnboundedSender<Handoff>>,
    /// The thread that does the handshake's Diffie-Hellman work of the vehicles that join
    /// together (none: this vehicle's own, vehicle 0 in its own process).
    handshakes: Option<Handshakes>,
}

/// A job for the [`Handshakes`] thread.
type Job = Box<dyn FnOnce() + Send>;

/// The joining vehicles' handshake computations, on a thread of their own beside the one that
/// runs their sessions. On one thread, a thousand vehicles' Diffie-Hellman work held up the
/// sessions of the vehicles that had already joined: their first datagrams left 128-260 ms after
/// the server's answer (loopback capture), and their next timers, late by up to 190 ms, fired
/// together once the last handshake was done, 1,500 datagrams in 30 ms (65,000 a second,
/// against a steady 7,000), behind which vehicle 0's pings waited 6-13 ms in the server. Each
/// vehicle stands for a host with a core of its own, where one vehicle's key exchange never
/// delays another's timers.
///
/// An answer from the server is taken before any new initiation: in the order they came, the
/// thousand initiations went first and the server's answers to the early ones waited behind
/// them, so that the vehicles came up 300 in 36 ms once they were done, where the server had
/// answered about one a millisecond (and a real vehicle takes its answer when it comes).
#[derive(Clone)]
struct Handshakes(Arc<(std::sync::Mutex<Jobs>, std::sync::Condvar)>);

/// The [`Handshakes`] thread's queues: answers to take, initiations to make.
#[derive(Default)]
struct Jobs {
    answers: std::collections::VecDeque<Job>,
    initiations: std::collections::VecDeque<Job>,
}

impl Handshakes {
    /// Starts the thread, at `SCHED_IDLE` (`idle`) or at nice `nice`, as the vehicles' own. It
    /// runs until the process ends.
    fn spawn(idle: bool, nice: i32) -> std::io::Result<Self> {
        let h = Handshakes(Arc::default());
        let queues = h.0.clone();
        std::thread::Builder::new().name("fleet-handshakes".into()).spawn(move || {
            step_aside(idle, nice);
            let (lock, ready) = &*queues;
            loop {
                let job = {
                    let mut q = lock.lock().unwrap_or_else(|p| p.into_inner());
                    loop {
                        if let Some(j) = q.answers.pop_front().or_else(|| q.initiations.pop_front()) {
                            break j;
                        }
                        q = ready.wait(q).unwrap_or_else(|p| p.into_inner());
                    }
                };
                job();
                // The core back to the server between two computations (as the vehicles'
                // thread did between handshakes): at SCHED_IDLE this thread still keeps a core
                // for the rest of its time slice on Linux 6.x (EEVDF) while a server thread
                // it woke waits.
                std::thread::yield_now();
            }
        })?;
        Ok(h)
    }

    /// Runs `f` on the thread (before any initiation if it takes an `answer`) and waits for its
    /// result.
    async fn run<T: Send + 'static>(&self, answer: bool, f: impl FnOnce() -> T + Send + 'static) -> Result<T, Error> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move || {
            let _ = tx.send(f());
        });
        {
            let mut q = self.0.0.lock().unwrap_or_else(|p| p.into_inner());
            if answer { q.answers.push_back(job) } else { q.initiations.push_back(job) }
        }
        self.0.1.notify_one();
        Ok(rx.await.map_err(|_| "the handshake thread dropped a job")?)
    }
}

/// A loading vehicle's sending state, handed from its session to the pre-sealed generator: its
/// datagrams go on where its session's stopped, so that the server's session and anti-replay
/// window take them as the next ones.
struct Handoff {
    i: usize,
    sock: std::net::UdpSocket,
    session: u32,
    channel: SecureChannel,
    /// Link 0's next link sequence number: the AEAD counter (crypto/channel.rs derives the nonce
    /// from it), which the server's replay window wants above every one it has seen.
    next_link_seq: u32,
    /// The next data sequence number (the session's first transmissions so far).
    next_data_seq: u64,
    tunnel: Ipv4Addr,
}

impl Vehicle {
    fn now(&self) -> braid_proto::Instant {
        braid_proto::Instant::from_micros(self.origin.elapsed().as_micros() as u64)
    }

    async fn run(
        self,
        mut phase: watch::Receiver<Phase>,
        reports: mpsc::UnboundedSender<Report>,
        sent: Arc<AtomicU64>,
    ) {
        if let Err(e) = self.drive(&mut phase, &reports, &sent).await {
            let _ = reports.send(Report::Failed { i: self.i, error: e.to_string() });
        }
    }

    /// Runs a handshake computation (one that takes the server's `answer`, or an initiation) on
    /// the [`Handshakes`] thread, or here if there is none.
    async fn compute<T: Send + 'static>(
        &self,
        answer: bool,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, Error> {
        match &self.handshakes {
            Some(h) => h.run(answer, f).await,
            None => Ok(f()),
        }
    }

    async fn drive(
        &self,
        phase: &mut watch::Receiver<Phase>,
        reports: &mpsc::UnboundedSender<Report>,
        sent: &AtomicU64,
    ) -> Result<(), Error> {
        let (src, tunnel) = addresses(self.i);
        let sock = UdpSocket::bind((src, 0)).await?;
        let mut seed = [0u8; 32];
        seed[..8].copy_from_slice(&(self.i as u64 ^ 0xf1ee7).to_le_bytes());
        let mut init = Initiator::new(secret(self.i), self.server_pub, None, CipherSuite::default(), seed);
        let start = std::time::Instant::now();
        let (mut attempts, mut cookies) = (0u32, 0u32);
        let mut rbuf = vec![0u8; 65536];
        let established = 'join: loop {
            let wall = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_nanos() as u64;
            let now = self.now();
            let initiation;
            (init, initiation) = self
                .compute(false, move || {
                    let mut out = [0u8; 256];
                    let r = init.initiate(now, wall, 0, LinkId(0), &mut out).map(|n| out[..n].to_vec());
                    (init, r)
                })
                .await?;
            attempts += 1;
            sock.send_to(&initiation?, self.server).await?;
            let deadline = tokio::time::Instant::now() + HANDSHAKE_RETRY;
            loop {
                let Ok(r) = tokio::time::timeout_at(deadline, sock.recv_from(&mut rbuf)).await else { break };
                let (len, _) = r?;
                let (now, reply) = (self.now(), rbuf[..len].to_vec());
                let event;
                (init, event) = self
                    .compute(true, move || {
                        let e = init.handle(now, &reply);
                        (init, e)
                    })
                    .await?;
                match event {
                    Ok(InitiatorEvent::Established(e)) => break 'join e,
                    // Under load: the next initiation carries the cookie; send it at once.
                    Ok(InitiatorEvent::CookieStored { .. }) => {
                        cookies += 1;
                        continue 'join;
                    }
                    _ => {}
                }
            }
            if start.elapsed() > Duration::from_secs(300) {
                return Err("no session within 300 s".into());
            }
        };
        let _ = reports.send(Report::Joined { i: self.i, after: start.elapsed(), attempts, cookies });
        let now = self.now();
        let mut cfg = SessionConfig::new(Role::Client);
        cfg.session_id = established.session;
        cfg.seed = self.i as u64;
        cfg.max_packet = 1400;
        let mut session = Session::new(cfg, &[LinkConfig::new(LinkId(0), Some(self.server), 100e6, 100e6)], now);
        let mut channel = SecureChannel::new(&established.keys, now);
        let mut buf = vec![0u8; 1400 + braid_proto::wire::MAX_CARRIER_OVERHEAD + TAG_LEN];
        let mut scratch = Vec::with_capacity(65536);
        let load_packet = load_packet(tunnel);
        let mut next_load: Option<braid_proto::Instant> = None;
        let mut next_ping: Option<braid_proto::Instant> = self.ping_to.map(|_| now);
        let mut pings: HashMap<u16, braid_proto::Instant> = HashMap::new();
        let mut seq = 0u16;
        let mut next_link_seq = 0u32;
        let mut current = *phase.borrow();
        loop {
            let due = [session.poll_timeout(), next_load, next_ping].into_iter().flatten().min();
            let sleep = due.map(|d| self.origin + Duration::from_micros(d.as_micros()));
            tokio::select! {
                r = sock.recv_from(&mut rbuf) => {
                    let (len, from) = r?;
                    if channel.open(self.now(), &rbuf[..len], &mut scratch).is_ok() {
                        let _ = session.handle_datagram(self.now(), Some(LinkId(0)), from, &scratch);
                    }
                }
                _ = async { match sleep { Some(t) => tokio::time::sleep_until(t.into()).await, None => std::future::pending().await } } => {}
                r = phase.changed() => {
                    if r.is_err() { return Ok(()) }
                    current = *phase.borrow();
                    match current {
                        Phase::Stop => return Ok(()),
                        Phase::Handoff if self.loads => {
                            if let Some(h) = &self.handoff {
                                let sock = sock.into_std()?;
                                sock.set_nonblocking(false)?;
                                let data = session.stats().data_sent;
                                let _ = h.send(Handoff { i: self.i, sock, session: established.session, channel, next_link_seq, next_data_seq: data, tunnel });
                                return Ok(());
                            }
                        }
                        Phase::Handoff => {}
                        Phase::Load(_) if self.loads => next_load = Some(self.now()),
                        Phase::Load(_) => {}
                        Phase::Idle => next_load = None,
                    }
                }
            }
            let now = self.now();
            if session.poll_timeout().is_some_and(|t| t <= now) {
                session.handle_timeout(now);
            }
            if let (Phase::Load(bps), Some(t)) = (current, next_load) {
                let every = Duration::from_secs_f64(LOAD_PACKET as f64 * 8.0 / bps);
                let mut t = t;
                // Catch up after a late wake-up, but at most a burst of 16.
                for _ in 0..16 {
                    if t > now {
                        break;
                    }
                    if session.handle_tun_packet(now, &load_packet).is_ok() {
                        sent.fetch_add(1, Ordering::Relaxed);
                    }
                    t += every;
                }
                next_load = Some(if t <= now { now + every } else { t });
            }
            if let (Some(dst), Some(t)) = (self.ping_to, next_ping)
                && t <= now
            {
                seq = seq.wrapping_add(1);
                let _ = session.handle_tun_packet(now, &echo_request(tunnel, dst, 0xb1d, seq));
                pings.insert(seq, now);
                next_ping = Some(now + self.ping_every);
            }
            while let Some(t) = session.poll_transmit(self.now(), &mut buf) {
                let dest = t.destination.unwrap_or(self.server);
                if let Ok((h, _)) = braid_proto::wire::Header::parse(&buf[..t.len])
                    && h.link == LinkId(0)
                {
                    next_link_seq = h.link_seq + 1;
                }
                if let Ok(n) = channel.seal(self.now(), &mut buf, t.len) {
                    let _ = sock.send_to(&buf[..n], dest).await;
                }
            }
            while let Some(p) = session.poll_deliver() {
                if let Some(s) = echo_reply_seq(&p, 0xb1d)
                    && let Some(at) = pings.remove(&s)
                {
                    let sent = self.origin + Duration::from_micros(at.as_micros());
                    let _ = reports.send(Report::Rtt(sent, self.now().saturating_duration_since(at)));
                }
            }
        }
    }
}

/// Sets the calling thread's scheduling policy (leaving `SCHED_IDLE` again needs root, which the
/// benchmark has); a failure is printed and the run goes on.
fn set_policy(policy: NormalThreadSchedulePolicy) {
    let policy = ThreadSchedulePolicy::Normal(policy);
    if let Err(e) = set_thread_priority_and_policy(thread_native_id(), ThreadPriority::Min, policy) {
        eprintln!("fleet: cannot set this thread's policy to {policy:?}: {e:?}");
    }
}

/// Lowers the calling thread below the server's, as the joining vehicles' threads run: to
/// `SCHED_IDLE` (`idle`), or else to nice `nice`.
fn step_aside(idle: bool, nice: i32) {
    if idle {
        set_policy(NormalThreadSchedulePolicy::Idle);
    } else {
        set_nice(nice);
    }
}

/// Moves vehicle 0's thread to SCHED_FIFO at a low priority (as the testbed's link threads); a
/// failure is printed and the run goes on at the ordinary priority.
fn promote_probe() {
    let policy = ThreadSchedulePolicy::Realtime(thread_priority::RealtimeThreadSchedulePolicy::Fifo);
    let prio = thread_priority::ThreadPriorityValue::try_from(10u8).map(ThreadPriority::Crossplatform);
    if let Err(e) = prio
        .map_err(|e| format!("{e:?}"))
        .and_then(|p| set_thread_priority_and_policy(thread_native_id(), p, policy).map_err(|e| format!("{e:?}")))
    {
        eprintln!("fleet: vehicle 0's thread stays at the ordinary priority: {e}");
    }
}

/// Sets the calling thread's nice value; a failure (raising it back needs CAP_SYS_NICE) is
/// printed and the run goes on.
fn set_nice(nice: i32) {
    if let Err(e) = rustix::process::setpriority_process(Some(rustix::thread::gettid()), nice) {
        eprintln!("fleet: cannot set this thread's nice value to {nice}: {e}");
    }
}

/// The server's resident memory, bytes.
fn rss(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|k| k.parse::<u64>().ok())
        .map_or(0, |k| k * 1024)
}

/// CPU seconds (user + system) a process used.
fn cpu_seconds(pid: &str) -> f64 {
    let (u, s) = cpu_split(pid);
    u + s
}

/// CPU seconds a process used, user and system apart.
fn cpu_split(pid: &str) -> (f64, f64) {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = s.rsplit_once(')').map_or("", |(_, r)| r);
    // Fields 14 and 15 (utime, stime) are the 12th and 13th after the command name. Every field
    // counts, the state letter (field 3) too: dropping what does not parse as a number shifted
    // them by one, to stime and cutime, which left the server's user time (its crypto) out.
    let f: Vec<f64> = after.split_whitespace().map(|x| x.parse().unwrap_or(0.0)).collect();
    (f.get(11).unwrap_or(&0.0) / 100.0, f.get(12).unwrap_or(&0.0) / 100.0)
}

/// The CPU seconds (user, system) of each thread of process `pid`, by thread id and name.
fn thread_cpu(pid: u32) -> HashMap<u32, (String, f64, f64)> {
    let mut out = HashMap::new();
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return out };
    for e in dir.flatten() {
        let Some(tid) = e.file_name().to_str().and_then(|t| t.parse::<u32>().ok()) else { continue };
        let name = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm")).unwrap_or_default();
        let (u, s) = cpu_split(&format!("{pid}/task/{tid}"));
        out.insert(tid, (name.trim().to_string(), u, s));
    }
    out
}

/// The UDP counters of the network namespace process `pid` is in (`/proc/PID/net/snmp`):
/// datagrams received, receive errors and those of them for a full receive buffer.
fn udp_counters(pid: u32) -> (u64, u64, u64) {
    let s = std::fs::read_to_string(format!("/proc/{pid}/net/snmp")).unwrap_or_default();
    let mut rows = s.lines().filter(|l| l.starts_with("Udp:"));
    let (Some(names), Some(values)) = (rows.next(), rows.next()) else { return (0, 0, 0) };
    let field = |want: &str| {
        names
            .split_whitespace()
            .zip(values.split_whitespace())
            .find(|(n, _)| *n == want)
            .and_then(|(_, v)| v.parse().ok())
    };
    (field("InDatagrams").unwrap_or(0), field("InErrors").unwrap_or(0), field("RcvbufErrors").unwrap_or(0))
}

/// Datagrams the kernel dropped at the sockets bound to `port` (the server's, one per worker) in
/// the network namespace of process `pid`, for a full receive buffer (`/proc/PID/net/udp`, the
/// `drops` column). The namespace's own counters cannot tell them apart from the drops at the
/// emulated vehicles' sockets, which do not read during the pre-sealed load.
fn socket_drops(pid: u32, port: u16) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/net/udp")).unwrap_or_default();
    let want = format!(":{port:04X}");
    s.lines()
        .skip(1)
        .filter(|l| l.split_whitespace().nth(1).is_some_and(|local| local.ends_with(&want)))
        .filter_map(|l| l.split_whitespace().last()?.parse::<u64>().ok())
        .sum()
}

/// Packets the kernel dropped because a core's input backlog (`net.core.netdev_max_backlog`)
/// was full, summed over the cores (`/proc/net/softnet_stat`, second column; the whole machine).
fn backlog_drops() -> u64 {
    let s = std::fs::read_to_string("/proc/net/softnet_stat").unwrap_or_default();
    s.lines().filter_map(|l| l.split_whitespace().nth(1)).filter_map(|v| u64::from_str_radix(v, 16).ok()).sum()
}

/// Prints where the server's CPU went over a phase of `el` seconds (per thread, from `before`),
/// and what the kernel dropped on the way to it.
fn report_server_side(
    pid: u32,
    port: u16,
    el: f64,
    before: &HashMap<u32, (String, f64, f64)>,
    udp0: (u64, u64, u64),
    drops0: (u64, u64),
) {
    let after = thread_cpu(pid);
    let mut threads: Vec<(u32, String, f64, f64)> = after
        .iter()
        .map(|(tid, (name, u, s))| {
            let (u0, s0) = before.get(tid).map_or((0.0, 0.0), |b| (b.1, b.2));
            (*tid, name.clone(), u - u0, s - s0)
        })
        .filter(|t| t.2 + t.3 > 0.0)
        .collect();
    threads.sort_by(|a, b| (b.2 + b.3).total_cmp(&(a.2 + a.3)));
    let list: Vec<String> =
        threads.iter().map(|(tid, n, u, s)| format!("{n}/{tid} {:.2}+{:.2}", u / el, s / el)).collect();
    println!("server threads, cores user+system: {}", list.join(", "));
    let udp = udp_counters(pid);
    println!(
        "dropped at the server's sockets (full receive buffer): {} datagrams (or GRO buffers); namespace: {} received, {} receive errors; {} dropped at full input backlogs (machine)",
        socket_drops(pid, port) - drops0.0,
        udp.0 - udp0.0,
        udp.1 - udp0.1,
        backlog_drops() - drops0.1
    );
}

/// The server's sessions, as `braid status` reports them over its control socket.
fn sessions(control: &str) -> Result<Vec<serde_json::Value>, Error> {
    let mut s = std::os::unix::net::UnixStream::connect(control)?;
    s.write_all(b"{\"cmd\":\"status\"}\n")?;
    let mut line = String::new();
    std::io::BufReader::new(s).read_line(&mut line)?;
    let v: serde_json::Value = serde_json::from_str(&line)?;
    Ok(v["status"]["sessions"].as_array().cloned().unwrap_or_default())
}

/// Packets each vehicle's session delivered to the server's TUN device, by vehicle name.
fn delivered(control: &str) -> Result<HashMap<String, u64>, Error> {
    Ok(sessions(control)?
        .iter()
        .map(|x| (x["peer"].as_str().unwrap_or_default().to_string(), x["delivered"].as_u64().unwrap_or(0)))
        .collect())
}

/// Datagrams the server received, all sessions together.
fn received(control: &str) -> Result<u64, Error> {
    Ok(sessions(control)?
        .iter()
        .flat_map(|x| x["uplinks"].as_array().cloned().unwrap_or_default())
        .map(|u| u["datagrams_received"].as_u64().unwrap_or(0))
        .sum())
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Collects vehicle 0's round trips for `secs`, handling join reports meanwhile.
async fn collect(
    rx: &mut mpsc::UnboundedReceiver<Report>,
    until: tokio::time::Instant,
    rtts: &mut Vec<(std::time::Instant, Duration)>,
    joined: &mut Vec<(usize, Duration, u32, u32)>,
    failed: &mut Vec<(usize, String)>,
    stop_when_joined: Option<usize>,
) {
    loop {
        if stop_when_joined.is_some_and(|n| joined.len() + failed.len() >= n) {
            return;
        }
        match tokio::time::timeout_at(until, rx.recv()).await {
            Ok(Some(Report::Rtt(at, d))) => rtts.push((at, d)),
            Ok(Some(Report::Joined { i, after, attempts, cookies })) => joined.push((i, after, attempts, cookies)),
            Ok(Some(Report::Failed { i, error })) => failed.push((i, error)),
            Ok(None) | Err(_) => return,
        }
    }
}

fn summary(name: &str, pings: &[(std::time::Instant, Duration)]) -> (f64, f64) {
    let mut rtts: Vec<Duration> = pings.iter().map(|p| p.1).collect();
    let rtts = &mut rtts[..];
    rtts.sort();
    let (p50, p99) = (ms(percentile(rtts, 0.5)), ms(percentile(rtts, 0.99)));
    println!(
        "{name}: {} pings, p50 {p50:.2} ms, p99 {p99:.2} ms, max {:.2} ms",
        rtts.len(),
        ms(*rtts.last().unwrap_or(&Duration::ZERO))
    );
    (p50, p99)
}

async fn run(args: &[String]) -> Result<(), Error> {
    if args.len() < 5 {
        return Err(
            "usage: fleet run SERVER:PORT SERVER_PUBKEY N SERVER_PID CONTROL [LOAD [MBIT_PER_VEHICLE [SECS]]]".into()
        );
    }
    let server: SocketAddr = args[0].parse()?;
    let server_pub = PublicKey(braid::decode_key(&args[1]).ok_or("server public key: not 32 bytes of base64")?);
    let n: usize = args[2].parse()?;
    let pid: u32 = args[3].parse()?;
    let control = args[4].clone();
    let load: usize = args.get(5).map_or(Ok(50), |s| s.parse())?;
    let mbit: f64 = args.get(6).map_or(Ok(4.0), |s| s.parse())?;
    let secs: f64 = args.get(7).map_or(Ok(5.0), |s| s.parse())?;
    let (origin, origin_mono) = (std::time::Instant::now(), monotonic_us());
    let (phase_tx, phase_rx) = watch::channel(Phase::Idle);
    let (rep_tx, mut rep_rx) = mpsc::unbounded_channel();
    let sent = Arc::new(AtomicU64::new(0));
    let ping_every = match std::env::var("FLEET_PING_MS") {
        Ok(v) => v
            .parse::<f64>()
            .ok()
            .filter(|ms| *ms >= 0.1)
            .map(|ms| Duration::from_secs_f64(ms / 1e3))
            .ok_or_else(|| format!("FLEET_PING_MS: {v:?} is not a number of milliseconds (at least 0.1)"))?,
        Err(_) => PING_EVERY,
    };
    // FLEET_JOIN_RATE (vehicles/s): the N join at that fixed rate rather than all at once.
    let join_rate = match std::env::var("FLEET_JOIN_RATE") {
        Ok(v) => Some(
            v.parse::<f64>()
                .ok()
                .filter(|r| *r > 0.0)
                .ok_or_else(|| format!("FLEET_JOIN_RATE: {v:?} is not a positive number of vehicles a second"))?,
        ),
        Err(_) => None,
    };
    println!("vehicle 0 pings every {:.1} ms", ms(ping_every));
    if let Some(r) = join_rate {
        println!("the others join at {r:.0} a second");
    }
    // The others do not ping: vehicle 0 does, in its own process.
    // FLEET_LOAD=live: the loading vehicles' sessions generate and seal the load as it goes.
    let presealed = match std::env::var("FLEET_LOAD").as_deref() {
        Ok("presealed") | Err(_) => true,
        Ok("live") => false,
        Ok(v) => return Err(format!("FLEET_LOAD: {v:?} is neither presealed nor live").into()),
    };
    let own_nice = rustix::process::getpriority_process(Some(rustix::thread::gettid())).unwrap_or(0);
    let fleet_nice = match std::env::var("FLEET_NICE") {
        Ok(v) => v.parse().map_err(|_| format!("FLEET_NICE: {v:?} is not a nice value"))?,
        Err(_) => FLEET_NICE,
    };
    let idle = match std::env::var("FLEET_SCHED").as_deref() {
        Ok("idle") | Err(_) => true,
        Ok("nice") => false,
        Ok(v) => return Err(format!("FLEET_SCHED: {v:?} is neither idle nor nice").into()),
    };
    let handshakes = Handshakes::spawn(idle, fleet_nice)?;
    let (handoff_tx, handoff_rx) = mpsc::unbounded_channel();
    let vehicle = |i: usize| Vehicle {
        i,
        server,
        server_pub,
        ping_to: None,
        ping_every,
        loads: (1..=load).contains(&i),
        origin,
        handoff: presealed.then(|| handoff_tx.clone()),
        handshakes: Some(handshakes.clone()),
    };
    let spawn = |i: usize| tokio::spawn(vehicle(i).run(phase_rx.clone(), rep_tx.clone(), sent.clone()));
    let rss0 = rss(pid);
    let (mut joined, mut failed, mut idle_rtts) = (Vec::new(), Vec::new(), Vec::new());
    // Vehicle 0, the one whose round trips are measured, runs in a process of its own, as a
    // vehicle is a host of its own. On a thread of this process its replies waited up to 27 ms
    // after they reached its socket while the others joined (loopback captures: the server had
    // answered each within 0.3 ms): its thread shares this process's memory map, and the joining
    // vehicles' thread, at SCHED_IDLE, can be preempted holding the map's lock while it sets up a
    // thousand sessions, and a page fault of vehicle 0 then waits for it. Its thread runs at a
    // low real-time priority (FLEET_PROBE_RT=0: the ordinary one), so that a reply that reached
    // its socket does not wait for a core that the server's worker (which just sent it) or a
    // build holds, as it would on a shared 2-core machine.
    let probe_rt = probe_rt();
    println!(
        "vehicle 0 runs in a process of its own at {}",
        if probe_rt { "SCHED_FIFO 10" } else { "the ordinary priority" }
    );
    let mut probe = std::process::Command::new(std::env::current_exe()?)
        .args(["probe", &server.to_string(), &args[1]])
        .arg(ping_every.as_micros().to_string())
        .arg(origin_mono.to_string())
        .stdout(std::process::Stdio::piped())
        .spawn()?;
    let probe_out = probe.stdout.take().ok_or("vehicle 0's process has no stdout")?;
    {
        let reports = rep_tx.clone();
        std::thread::Builder::new().name("fleet-probe-reader".into()).spawn(move || {
            for line in std::io::BufReader::new(probe_out).lines() {
                let Ok(line) = line else { break };
                if let Some(r) = Report::parse(&line, origin) {
                    let _ = reports.send(r);
                }
            }
        })?;
    }
    // This thread runs the other vehicles from here on: below the server and vehicle 0 while
    // they join and idle (Linux keeps nice values per thread, and vehicle 0's thread already
    // exists with its own).
    step_aside(idle, fleet_nice);
    if idle {
        println!("the joining vehicles' threads (sessions, handshakes) run at SCHED_IDLE");
    } else {
        println!("the joining vehicles' threads (sessions, handshakes) run at nice {fleet_nice}");
    }
    let mut tasks = Vec::new();
    let far = tokio::time::Instant::now() + Duration::from_secs(30);
    collect(&mut rep_rx, far, &mut idle_rtts, &mut joined, &mut failed, Some(1)).await;
    if joined.is_empty() {
        return Err(format!("vehicle 0 did not join: {failed:?}").into());
    }
    idle_rtts.clear();
    let idle_until = tokio::time::Instant::now() + Duration::from_secs(5);
    collect(&mut rep_rx, idle_until, &mut idle_rtts, &mut joined, &mut failed, None).await;
    println!("vehicle 0 joined in {:.1} ms", ms(joined[0].1));
    let (_, idle_p99) = summary("established vehicle, idle", &idle_rtts);

    // The other N join at once while vehicle 0 keeps pinging.
    let t = std::time::Instant::now();
    let cpu_join0 = (cpu_seconds(&pid.to_string()), cpu_seconds("self"));
    for i in 1..=n {
        if let Some(rate) = join_rate {
            // Paced: vehicle i starts at (i - 1) / rate.
            tokio::time::sleep_until(tokio::time::Instant::from_std(
                t + Duration::from_secs_f64((i - 1) as f64 / rate),
            ))
            .await;
        }
        tasks.push(spawn(i));
    }
    let mut join_rtts = Vec::new();
    let until = tokio::time::Instant::now() + Duration::from_secs(300);
    collect(&mut rep_rx, until, &mut join_rtts, &mut joined, &mut failed, Some(n + 1)).await;
    let join_s = t.elapsed().as_secs_f64();
    // At least a second of pings, so that a fast join still gives a p99 of 50 samples.
    let at_least = tokio::time::Instant::from_std(t + Duration::from_secs(1));
    collect(&mut rep_rx, at_least, &mut join_rtts, &mut joined, &mut failed, None).await;
    let cpu_join = (cpu_seconds(&pid.to_string()) - cpu_join0.0, cpu_seconds("self") - cpu_join0.1);
    let ok = joined.len() - 1;
    let attempts: u32 = joined[1..].iter().map(|j| j.2).sum();
    let cookies: u32 = joined[1..].iter().map(|j| j.3).sum();
    let mut join_times: Vec<Duration> = joined[1..].iter().map(|j| j.1).collect();
    join_times.sort();
    println!(
        "{ok} of {n} vehicles joined in {join_s:.2} s: {:.0} handshakes/s; {attempts} initiations ({cookies} cookie replies), per-vehicle join time p50 {:.0} ms p99 {:.0} ms; CPU: server {:.2} s, emulator {:.2} s",
        ok as f64 / join_s,
        ms(percentile(&join_times, 0.5)),
        ms(percentile(&join_times, 0.99)),
        cpu_join.0,
        cpu_join.1,
    );
    for (i, e) in failed.iter().take(5) {
        println!("vehicle {i} failed: {e}");
    }
    let (_, join_p99) = summary("established vehicle while the others join (and at least 1 s)", &join_rtts);
    println!("join-time p99 / idle p99: {:.2}", join_p99 / idle_p99.max(1e-9));
    // Where the slowest pings fell: how far into the join, and how many had joined by then.
    let mut slow = join_rtts.clone();
    slow.sort_by_key(|p| std::cmp::Reverse(p.1));
    let when: Vec<String> = slow
        .iter()
        .take(4)
        .map(|(at, d)| {
            let off = at.saturating_duration_since(t);
            // A vehicle's join time counts from its own start, (i - 1) / rate in when paced.
            let start = |i: usize| join_rate.map_or(Duration::ZERO, |r| Duration::from_secs_f64((i - 1) as f64 / r));
            let by = joined[1..].iter().filter(|j| start(j.0) + j.1 <= off).count();
            format!("{:.2} ms at +{:.0} ms ({by} joined)", ms(*d), ms(off))
        })
        .collect();
    println!("slowest pings while the others join: {}", when.join(", "));

    // Idle: the server's memory per session, and the established vehicle's round trip with
    // every session open.
    let settle = tokio::time::Instant::now() + Duration::from_secs(1);
    collect(&mut rep_rx, settle, &mut Vec::new(), &mut joined, &mut failed, None).await;
    let mut full_rtts = Vec::new();
    let cpu_idle0 = (cpu_seconds(&pid.to_string()), cpu_seconds("self"));
    let rx0 = received(&control)?;
    let idle_until = tokio::time::Instant::now() + Duration::from_secs(5);
    collect(&mut rep_rx, idle_until, &mut full_rtts, &mut joined, &mut failed, None).await;
    let cpu_idle = (cpu_seconds(&pid.to_string()) - cpu_idle0.0, cpu_seconds("self") - cpu_idle0.1);
    let rx_rate = (received(&control)? - rx0) as f64 / 5.0;
    let (_, full_p99) = summary("established vehicle, idle, all sessions open", &full_rtts);
    println!(
        "with every session open and idle: the server receives {rx_rate:.0} datagrams/s; CPU s/s: server {:.2}, emulator {:.2}",
        cpu_idle.0 / 5.0,
        cpu_idle.1 / 5.0
    );
    println!("all-open p99 / idle p99: {:.2}", full_p99 / idle_p99.max(1e-9));
    let rss1 = rss(pid);
    let sessions = delivered(&control)?.len();
    println!(
        "server RSS {:.1} MB before, {:.1} MB with {sessions} sessions idle: {:.1} KB per session",
        rss0 as f64 / 1e6,
        rss1 as f64 / 1e6,
        (rss1.saturating_sub(rss0)) as f64 / sessions.max(1) as f64 / 1e3
    );

    // Load: LOAD vehicles offer MBIT each, generated at the process's own priority, so that the
    // cores are shared between the emulator and the server as by any two processes.
    set_policy(NormalThreadSchedulePolicy::Other);
    set_nice(own_nice);
    let load = load.min(n);
    if load > 0 {
        if presealed {
            measure_presealed(&phase_tx, handoff_rx, server, &control, pid, load, mbit, secs, origin).await?;
        } else {
            measure_load(&phase_tx, &sent, &control, pid, load, mbit, secs).await?;
        }
    }
    phase_tx.send(Phase::Stop)?;
    for t in tasks {
        let _ = tokio::time::timeout(Duration::from_secs(2), t).await;
    }
    let _ = probe.kill();
    let _ = probe.wait();
    Ok(())
}

/// The load phase: vehicles 1..=`load` offer `mbit` each for `secs`; prints what the server
/// delivered, per-vehicle fairness and both sides' CPU time.
async fn measure_load(
    phase_tx: &watch::Sender<Phase>,
    sent: &AtomicU64,
    control: &str,
    pid: u32,
    load: usize,
    mbit: f64,
    secs: f64,
) -> Result<(), Error> {
    let before = delivered(control)?;
    let cpu_load0 = (cpu_seconds(&pid.to_string()), cpu_seconds("self"));
    let t = std::time::Instant::now();
    // Vehicles 1..=LOAD offer load; the others stay idle.
    phase_tx.send(Phase::Load(mbit * 1e6))?;
    tokio::time::sleep(Duration::from_secs_f64(secs)).await;
    phase_tx.send(Phase::Idle)?;
    let el = t.elapsed().as_secs_f64();
    let cpu_load = (cpu_seconds(&pid.to_string()) - cpu_load0.0, cpu_seconds("self") - cpu_load0.1);
    let offered = sent.load(Ordering::Relaxed) as f64 * LOAD_PACKET as f64 * 8.0 / el;
    report_load(control, &before, load, mbit, offered, el, cpu_load).await
}

/// Prints what the server delivered over the load phase (`el` seconds, `cpu_load` the CPU
/// seconds of server and emulator) against `before`, its per-vehicle counts at the start.
async fn report_load(
    control: &str,
    before: &HashMap<String, u64>,
    load: usize,
    mbit: f64,
    offered: f64,
    el: f64,
    cpu_load: (f64, f64),
) -> Result<(), Error> {
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = delivered(control)?;
    let rates: Vec<f64> = (1..=load)
        .map(|i| {
            let name = vehicle_name(i);
            let d = after.get(&name).copied().unwrap_or(0).saturating_sub(before.get(&name).copied().unwrap_or(0));
            d as f64 * LOAD_PACKET as f64 * 8.0 / el
        })
        .collect();
    let total: f64 = rates.iter().sum();
    let sq: f64 = rates.iter().map(|r| r * r).sum();
    let jain = if sq > 0.0 { total * total / (rates.len() as f64 * sq) } else { 0.0 };
    let (lo, hi) = rates.iter().fold((f64::MAX, 0.0f64), |(a, b), r| (a.min(*r), b.max(*r)));
    println!(
        "load: {load} vehicles x {mbit} Mbit/s offered ({:.0} Mbit/s taken by the sessions), {:.0} Mbit/s delivered by the server; per vehicle {:.2}..{:.2} Mbit/s, Jain's index {jain:.3}; CPU over {el:.1} s: server {:.2} s, emulator {:.2} s",
        offered / 1e6,
        total / 1e6,
        lo / 1e6,
        hi / 1e6,
        cpu_load.0,
        cpu_load.1
    );
    // The server's cost per bit, which a busy emulator on the same cores does not set: when the
    // cores, not the server, are the limit, workers that scale show the same Mbit/s per core
    // (Mbit delivered per CPU second) at 1 and 2 workers and more cores used, workers that
    // serialize show fewer.
    let server_cores = cpu_load.0 / el;
    println!(
        "load efficiency: server {:.0} Mbit/s per core ({:.2} CPU s per Gbit), using {server_cores:.2} cores; emulator {:.2} cores",
        total / 1e6 / server_cores.max(1e-9),
        cpu_load.0 / (total / 1e9 * el).max(1e-9),
        cpu_load.1 / el
    );
    Ok(())
}

/// Seals `count` data datagrams of vehicle `h`, the k-th stamped as sent at `start + k * every`,
/// into one buffer (every one is `stride` bytes: the same header, body and passenger size).
fn preseal(
    h: &mut Handoff,
    count: usize,
    start: braid_proto::Instant,
    every: Duration,
) -> Result<(Vec<u8>, usize), Error> {
    use braid_proto::wire::{DataRepr, HEADER_LEN, Header, PacketType};
    let packet = load_packet(h.tunnel);
    let body_len = DataRepr { seq: 0, ack: None, payload: &packet }.len();
    let stride = HEADER_LEN + body_len + TAG_LEN;
    let mut out = vec![0u8; stride * count];
    for (k, d) in out.chunks_exact_mut(stride).enumerate() {
        let at = braid_proto::Instant::from_micros(start.as_micros() + (every * k as u32).as_micros() as u64);
        let header = Header {
            ptype: PacketType::Data,
            flags: 0,
            session: h.session,
            link: LinkId(0),
            link_seq: h.next_link_seq.wrapping_add(k as u32),
            timestamp: at.wire_timestamp(),
        };
        let body = DataRepr { seq: ((h.next_data_seq + k as u64) & 0xff_ffff) as u32, ack: None, payload: &packet };
        let n = header.emit(d)?;
        let m = body.emit(&mut d[n..])?;
        h.channel.seal(at, d, n + m)?;
    }
    Ok((out, stride))
}

/// One vehicle of the pre-sealed load: its socket, its datagrams, how many have gone.
struct Preloaded {
    sock: std::net::UdpSocket,
    data: Vec<u8>,
    stride: usize,
    sent: usize,
    /// Its first datagram's time, from the phase's start (the vehicles are spread over one
    /// packet interval).
    offset: Duration,
}

/// Most datagrams in one `sendmmsg` (or one GSO send with `FLEET_GSO=1`).
const SEND_BATCH: usize = 64;
/// Most bytes in one UDP GSO send: the IP length field's limit, less the headers.
const GSO_BYTES_MAX: usize = 65_000;

/// Sends the pre-sealed datagrams from `start` for `secs`, each vehicle's paced at one every
/// `every` (whatever is due when the thread wakes, every `tick`, goes in one batched send per
/// vehicle); returns how many were sent. `gso`: one UDP GSO send per batch rather than one
/// `sendmmsg`; over loopback the server's socket, which enables GRO, then receives the batch
/// as one buffer.
fn send_paced(
    vehicles: &mut [Preloaded],
    server: SocketAddr,
    start: std::time::Instant,
    secs: f64,
    every: Duration,
    tick: Duration,
    gso: bool,
) -> Result<u64, Error> {
    use nix::sys::socket::{MsgFlags, MultiHeaders, SockaddrIn, sendmmsg};
    use std::io::IoSlice;
    use std::os::fd::AsRawFd;
    let SocketAddr::V4(v4) = server else { return Err("the server's address is not IPv4".into()) };
    let dest = SockaddrIn::from(v4);
    let states: Vec<quinn_udp::UdpSocketState> = if gso {
        vehicles.iter().map(|v| quinn_udp::UdpSocketState::new((&v.sock).into())).collect::<Result<_, _>>()?
    } else {
        Vec::new()
    };
    let mut headers = MultiHeaders::<SockaddrIn>::preallocate(SEND_BATCH, None);
    let addrs = vec![Some(dest); SEND_BATCH];
    let end = start + Duration::from_secs_f64(secs);
    let mut total = 0u64;
    let mut next = start;
    while let Some(now) = Some(std::time::Instant::now()).filter(|n| *n < end) {
        for (vi, v) in vehicles.iter_mut().enumerate() {
            let count = v.data.len() / v.stride;
            let since = now.saturating_duration_since(start);
            if since < v.offset {
                continue;
            }
            let due = (((since - v.offset).as_nanos() / every.as_nanos()) as usize + 1).min(count);
            while v.sent < due {
                let n = (due - v.sent).min(SEND_BATCH);
                let bytes = &v.data[v.sent * v.stride..(v.sent + n) * v.stride];
                let done = if gso {
                    // At most 64 KiB in one send (the IP length field): 53 of these datagrams.
                    let n = n.min(states[vi].max_gso_segments()).min(GSO_BYTES_MAX / v.stride).max(1);
                    let bytes = &bytes[..n * v.stride];
                    let t = quinn_udp::Transmit {
                        destination: server,
                        ecn: None,
                        contents: bytes,
                        segment_size: (n > 1).then_some(v.stride),
                        src_ip: None,
                    };
                    states[vi].try_send((&v.sock).into(), &t)?;
                    n
                } else {
                    let slices: Vec<[IoSlice<'_>; 1]> =
                        bytes.chunks_exact(v.stride).map(|d| [IoSlice::new(d)]).collect();
                    sendmmsg(v.sock.as_raw_fd(), &mut headers, &slices, &addrs[..n], [], MsgFlags::empty())?.count()
                };
                v.sent += done;
                total += done as u64;
            }
        }
        next += tick;
        if let Some(d) = next.checked_duration_since(std::time::Instant::now()) {
            std::thread::sleep(d);
        }
    }
    Ok(total)
}

/// The load phase with pre-sealed datagrams (the default; `FLEET_LOAD=live`: [`measure_load`]).
/// Sealing every datagram on the emulator's one thread as it goes cost it 0.6-0.7 of a core at
/// 2 Gbit/s offered and held the server under one core, so the server's scaling could not show
/// on a 2-core machine. Here the loading vehicles hand their sessions' sending state over, every
/// datagram of the phase is sealed beforehand (fresh, increasing link sequence numbers, so the
/// server's replay window takes each once), and the phase only sends them, paced per vehicle
/// and batched per vehicle (`sendmmsg`; `FLEET_GSO=1`: UDP GSO), from one thread. The vehicles'
/// sessions do not answer the server meanwhile (the data needs no answer to be delivered) and
/// end with the phase.
#[allow(clippy::too_many_arguments)]
async fn measure_presealed(
    phase_tx: &watch::Sender<Phase>,
    mut handoffs: mpsc::UnboundedReceiver<Handoff>,
    server: SocketAddr,
    control: &str,
    pid: u32,
    load: usize,
    mbit: f64,
    secs: f64,
    origin: std::time::Instant,
) -> Result<(), Error> {
    let gso = std::env::var("FLEET_GSO").is_ok_and(|v| v == "1");
    let tick = match std::env::var("FLEET_TICK_US") {
        Ok(v) => Duration::from_micros(v.parse().map_err(|_| format!("FLEET_TICK_US: {v:?} is not microseconds"))?),
        Err(_) => Duration::from_millis(1),
    };
    phase_tx.send(Phase::Handoff)?;
    let mut got = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while got.len() < load {
        match tokio::time::timeout_at(deadline, handoffs.recv()).await {
            Ok(Some(h)) => got.push(h),
            _ => return Err(format!("{} of {load} loading vehicles handed over", got.len()).into()),
        }
    }
    got.sort_by_key(|h| h.i);
    let every = Duration::from_secs_f64(LOAD_PACKET as f64 * 8.0 / (mbit * 1e6));
    let count = (secs / every.as_secs_f64()).ceil() as usize + 1;
    // The datagrams are stamped with when they will be sent: the phase starts once they are
    // sealed, estimated from sealing a few first (2 s more for the margin).
    let t_seal = std::time::Instant::now();
    let per = {
        let keys = braid_proto::crypto::SessionKeys { suite: got[0].channel.suite(), send: [7; 32], recv: [7; 32] };
        let now = braid_proto::Instant::from_micros(origin.elapsed().as_micros() as u64);
        let mut probe = Handoff {
            i: 0,
            sock: got[0].sock.try_clone()?,
            session: got[0].session,
            channel: SecureChannel::new(&keys, now),
            next_link_seq: 0,
            next_data_seq: 0,
            tunnel: got[0].tunnel,
        };
        let t = std::time::Instant::now();
        preseal(&mut probe, 2000, now, every)?;
        t.elapsed() / 2000
    };
    let start = std::time::Instant::now() + per * (count * load) as u32 + Duration::from_secs(2);
    let mut vehicles = Vec::new();
    for (j, h) in got.iter_mut().enumerate() {
        let offset = every * j as u32 / load as u32;
        let first = braid_proto::Instant::from_micros((start + offset).duration_since(origin).as_micros() as u64);
        let (data, stride) = preseal(h, count, first, every)?;
        vehicles.push(Preloaded { sock: h.sock.try_clone()?, data, stride, sent: 0, offset });
    }
    let sealed_in = t_seal.elapsed().as_secs_f64();
    let late = std::time::Instant::now().saturating_duration_since(start);
    println!(
        "pre-sealed {} datagrams of {} bytes ({:.1} GB) in {sealed_in:.1} s; sent paced per vehicle, batched by {} every {:.1} ms{}",
        count * load,
        vehicles[0].stride,
        (count * load * vehicles[0].stride) as f64 / 1e9,
        if gso { "UDP GSO" } else { "sendmmsg" },
        ms(tick),
        if late > Duration::ZERO { format!(" (started {:.0} ms after the stamps)", ms(late)) } else { String::new() }
    );
    if let Some(wait) = start.checked_duration_since(std::time::Instant::now()) {
        tokio::time::sleep(wait).await;
    }
    let before = delivered(control)?;
    let (threads0, udp0, drops0) =
        (thread_cpu(pid), udp_counters(pid), (socket_drops(pid, server.port()), backlog_drops()));
    let (server0, split0) = (cpu_seconds(&pid.to_string()), cpu_split("self"));
    let t = std::time::Instant::now();
    let sender = std::thread::Builder::new()
        .name("fleet-load".into())
        .spawn(move || send_paced(&mut vehicles, server, t, secs, every, tick, gso).map_err(|e| e.to_string()))?;
    let sent = tokio::task::spawn_blocking(move || sender.join()).await?.map_err(|_| "the load thread panicked")??;
    let el = t.elapsed().as_secs_f64();
    let split = cpu_split("self");
    let cpu_load = (cpu_seconds(&pid.to_string()) - server0, (split.0 + split.1) - (split0.0 + split0.1));
    // Over loopback a send runs the receiving half of the stack too (up to the server's socket)
    // in the sender's system time.
    println!("emulator CPU over the phase: user {:.2} s, system {:.2} s", split.0 - split0.0, split.1 - split0.1);
    report_server_side(pid, server.port(), el, &threads0, udp0, drops0);
    let offered = sent as f64 * LOAD_PACKET as f64 * 8.0 / el;
    report_load(control, &before, load, mbit, offered, el, cpu_load).await
}

/// The decoding the example needs from the daemon, kept here (braid is a binary crate).
mod braid {
    pub fn decode_key(s: &str) -> Option<[u8; 32]> {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.decode(s.trim()).ok()?.try_into().ok()
    }
}

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("keys") => {
            let n: usize = args.get(1).ok_or("usage: fleet keys N")?.parse()?;
            for i in 0..=n {
                println!("{} {}", vehicle_name(i), b64(&secret(i).public_key().0));
            }
            Ok(())
        }
        Some("run") => {
            // One thread: the server gets the other core.
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            rt.block_on(run(&args[1..]))
        }
        Some("probe") => {
            if probe_rt() {
                promote_probe();
            }
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            rt.block_on(probe(&args[1..]))
        }
        _ => Err("usage: fleet keys N | fleet run ... | fleet probe ...".into()),
    }
}
