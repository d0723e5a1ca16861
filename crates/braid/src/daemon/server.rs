//! `braid server`: one listening socket, one session per vehicle, demultiplexed by the session id
//! of the clear header.
//!
//! A session exists only after a vehicle listed in `[[peer]]` completed a Noise IKpsk2 handshake
//! (braid_proto::crypto); the server names its id. Every datagram of a session is opened (AEAD,
//! replay window) before the engine sees it, so the engine adopts an uplink's new address only
//! from an authentic datagram. Handshake datagrams travel on their own small queue from the
//! socket reader, dropped (and counted) when it is full, so a flood of initiations cannot crowd
//! out the sessions' traffic (WireGuard keeps handshakes on a separate queue for the same reason).
//!
//! Passenger packets are routed by each `[[peer]]`'s `allowed_ips` (cryptokey routing,
//! [`super::allowed_ips`]): towards a vehicle by destination, and out of a vehicle's session only
//! from a source that routes back to that vehicle; nothing is learned from traffic.

use super::client::{deliver, sleep_until};
use super::config::{PeerEntry, ServerConfig};
use super::control::{Request, Response};
use super::peers::{PeerChanges, PeerTable, plan};
use super::status::{DaemonStatus, session_status};
use super::{Clock, Input, control, metrics, spawn_signals, tun, uplink};
use anyhow::Context;
use braid_proto::crypto::{
    DuplicateKey, HandshakeKind, InitiationOutcome, PeerConfig, PendingResponse, RateLimiter, Reject, RejectCounts,
    Responder, TAG_LEN, unknown_session_hint,
};
use braid_proto::wire::{Header, PacketType};
use braid_proto::{RecoveryKind, Role, SchedulerKind, SealedDatagramError, SealedSession, Session};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use tun_rs::AsyncDevice;

/// How often idle sessions are looked for.
const HOUSEKEEPING: Duration = Duration::from_secs(1);

/// Handshake datagrams waiting for the loop; beyond this they are dropped as rate limited.
const HANDSHAKE_QUEUE: usize = 256;
/// Most handshake datagrams the loop takes per turn, so the sessions' traffic goes first. An
/// accepted initiation costs four X25519 operations (about 0.2 ms): at 16 a turn an established
/// vehicle's packets waited up to 3 ms behind a fleet joining at once (bench-fleet's join-time
/// p50 was 5 ms against 0.2 ms idle); at 2 they wait at most about 0.4 ms, and handshakes still
/// get every turn, which comes at once when nothing else is queued.
const HANDSHAKES_PER_TURN: usize = 2;
/// How long a peer's session must have been silent (nothing authentic received) before the
/// server answers an initiation whose timestamp is not newer than the last one accepted. Such an
/// initiation is either a replay or a client whose clock went back (a gateway without a
/// real-time clock after a reboot, or one whose clock was once ahead): refusing it for ever, as a
/// strict TAI64N check does, locks that client out until its clock passes the old stamp or the
/// server restarts. A replay answered as a new session replaces only a session that has been
/// silent this long (its vehicle would rejoin at once on an unknown-session hint), and the
/// replayer cannot use the session (it lacks the ephemeral key). The client rejoins after
/// `rejoin_s` (default 5 s) of silence, so this matches when a genuine client asks again.
const STALE_TIMESTAMP_IDLE: Duration = Duration::from_secs(5);

struct Vehicle {
    session: SealedSession,
    /// Index in the responder's peer list.
    peer: usize,
    last_rx: braid_proto::Instant,
    /// The deadline this session has in the server's timer heap, if any.
    due: Option<braid_proto::Instant>,
    /// Packets from this vehicle dropped because their source is not in its `allowed_ips`.
    source_not_allowed: u64,
}

/// Passenger packets dropped by the server, by reason.
#[derive(Default)]
struct PassengerDrops {
    /// Out of a session with a source outside the vehicle's `allowed_ips`.
    source_not_allowed: u64,
    /// Out of a session and not an IPv4 or IPv6 packet.
    not_ip: u64,
}

/// What `braid set --peer` gave one vehicle: it outlives the session, so a vehicle that joins
/// again keeps it, and a SIGHUP's settings for the fleet do not undo it.
#[derive(Debug, Default)]
struct Override {
    recovery: Option<RecoveryKind>,
    scheduler: Option<SchedulerKind>,
    /// (link id, weight).
    weights: Vec<(u8, u32)>,
}

impl Override {
    fn apply(&self, session: &mut Session) {
        if let Some(r) = self.recovery {
            session.set_recovery(r);
        }
        if let Some(s) = self.scheduler {
            session.set_scheduler(s);
        }
        self.apply_weights(session);
    }

    /// The weights only: what a link that appears later needs.
    fn apply_weights(&self, session: &mut Session) {
        for &(link, w) in &self.weights {
            session.set_link_weight(braid_proto::LinkId(link), w);
        }
    }
}

#[derive(Default)]
struct Counters {
    garbage: u64,
    refused: u64,
    expired: u64,
    unroutable: u64,
    send_errors: u64,
    rejected: RejectCounts,
    handshakes: u64,
    cookie_replies: u64,
    hints: u64,
    passenger: PassengerDrops,
}

struct Server {
    cfg: ServerConfig,
    path: PathBuf,
    mtu: u16,
    clock: Clock,
    sessions: HashMap<u32, Vehicle>,
    /// The sessions' next deadlines, earliest first. An entry whose deadline is no longer its
    /// session's `due` is stale and skipped, so a wakeup costs the sessions that are due, not a
    /// scan of the fleet.
    timers: BinaryHeap<Reverse<(braid_proto::Instant, u32)>>,
    /// The listed vehicles by index (the responder's), and the routes of their `allowed_ips`.
    peers: PeerTable,
    sock: Arc<UdpSocket>,
    /// Datagrams waiting to leave together (GSO).
    batch: uplink::GsoBatch,
    tun: Arc<AsyncDevice>,
    buf: Vec<u8>,
    counters: Counters,
    next_housekeeping: braid_proto::Instant,
    responder: Responder,
    /// The session of each peer (by index in the responder's list).
    by_peer: HashMap<usize, u32>,
    /// Per-source limit on unknown-session hints.
    hint_limiter: RateLimiter,
    /// Handshake datagrams the reader dropped because their queue was full.
    hs_dropped: Arc<AtomicU64>,
    /// Handshake replies to send.
    outbox: Vec<(Vec<u8>, std::net::SocketAddr)>,
    /// Per-vehicle settings (`braid set --peer`), by `[[peer]]` name.
    overrides: HashMap<String, Override>,
}

/// Runs `braid server --config PATH` until SIGTERM.
pub fn run(path: &Path) -> anyhow::Result<()> {
    let cfg = ServerConfig::load(path)?;
    super::runtime()?.block_on(run_async(path.to_path_buf(), cfg))
}

async fn run_async(path: PathBuf, cfg: ServerConfig) -> anyhow::Result<()> {
    let mtu = cfg.mtu()?;
    let (secret, peers) = cfg.keys()?;
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(|e| anyhow::anyhow!("OS random source: {e}"))?;
    let mut responder = Responder::new(secret, peers, seed);
    responder.set_load_threshold(cfg.handshake_load);
    let (tx, rx) = mpsc::channel(4096);
    let (hs_tx, hs_rx) = mpsc::channel(HANDSHAKE_QUEUE);
    let hs_dropped = Arc::new(AtomicU64::new(0));
    let sock = Arc::new(uplink::listen(cfg.listen).with_context(|| format!("listen: cannot bind {}", cfg.listen))?);
    let receiver = uplink::BatchReceiver::new(&sock).context("listen: setting up batched receive")?;
    let batch = uplink::GsoBatch::new(&sock).context("listen: setting up batched send")?;
    let clock = Clock::new();
    let tun = tun::open(&cfg.tun, mtu)?;
    tun::spawn_reader(tun.clone(), mtu, tx.clone());
    spawn_reader(sock.clone(), receiver, clock, tx.clone(), hs_tx, hs_dropped.clone());
    let _control = control::spawn(&cfg.control_path(), tx.clone())?;
    if let Some(addr) = cfg.metrics {
        metrics::spawn(addr, tx.clone()).await?;
    }
    spawn_signals(tx).context("installing signal handlers")?;
    tracing::info!(listen = %cfg.listen, mtu, tun = %cfg.tun.name, peers = cfg.peer.len(), "server started");
    super::notify::notify_or_log("READY=1");
    let buf = vec![0u8; usize::from(mtu) + braid_proto::wire::MAX_CARRIER_OVERHEAD + TAG_LEN];
    let peers = PeerTable::new(cfg.peer.clone());
    let mut server = Server {
        cfg,
        path,
        mtu,
        clock,
        sessions: HashMap::new(),
        timers: BinaryHeap::new(),
        peers,
        batch,
        sock,
        tun,
        buf,
        counters: Counters::default(),
        next_housekeeping: clock.now() + HOUSEKEEPING,
        responder,
        by_peer: HashMap::new(),
        hint_limiter: RateLimiter::new(braid_proto::crypto::handshake::RATE_LIMITER_ENTRIES),
        hs_dropped,
        outbox: Vec::new(),
        overrides: HashMap::new(),
    };
    server.run(rx, hs_rx).await;
    tracing::info!("server stopped");
    Ok(())
}

/// Reads the listening socket: handshake datagrams go to their own bounded queue (dropped and
/// counted when it is full), everything else to the loop's input channel.
fn spawn_reader(
    sock: Arc<UdpSocket>,
    mut rx: uplink::BatchReceiver,
    clock: Clock,
    tx: mpsc::Sender<Input>,
    hs_tx: mpsc::Sender<Input>,
    dropped: Arc<AtomicU64>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut batch = Vec::with_capacity(quinn_udp::BATCH_SIZE);
        loop {
            match rx.recv(&sock, &clock, &mut batch).await {
                Ok(()) => {
                    for uplink::Received { from, data, at } in batch.drain(..) {
                        let handshake = Header::parse(&data).is_ok_and(|(h, _)| h.ptype == PacketType::Handshake);
                        let input = Input::Datagram { uplink: 0, from, data, at };
                        if handshake {
                            if hs_tx.try_send(input).is_err() {
                                dropped.fetch_add(1, Ordering::Relaxed);
                            }
                        } else if tx.send(input).await.is_err() {
                            return;
                        }
                    }
                }
                Err(e) => {
                    tracing::debug!(error = %e, "receive failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    })
}

/// Whether to answer an initiation with a stale timestamp, given the peer's running session (id,
/// last authentic datagram) if any and the session the initiation asks to continue.
fn answer_stale(running: Option<(u32, braid_proto::Instant)>, wanted: u32, now: braid_proto::Instant) -> bool {
    match running {
        None => true,
        Some((id, last_rx)) => wanted == id || now.saturating_duration_since(last_rx) >= STALE_TIMESTAMP_IDLE,
    }
}

/// Source and destination of a passenger packet.
fn addrs(p: &[u8]) -> Option<(IpAddr, IpAddr)> {
    match p.first()? >> 4 {
        4 if p.len() >= 20 => {
            let a = |o: usize| IpAddr::V4(Ipv4Addr::new(p[o], p[o + 1], p[o + 2], p[o + 3]));
            Some((a(12), a(16)))
        }
        6 if p.len() >= 40 => {
            let a = |o: usize| IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(&p[o..o + 16]).unwrap_or_default()));
            Some((a(8), a(24)))
        }
        _ => None,
    }
}

impl Server {
    async fn run(&mut self, mut rx: mpsc::Receiver<Input>, mut hs_rx: mpsc::Receiver<Input>) {
        let mut dirty: HashSet<u32> = HashSet::new();
        let mut idle_spins = 0u32;
        loop {
            let next = self.next_deadline();
            let deadline = next.map_or(self.next_housekeeping, |n| n.min(self.next_housekeeping));
            let (first, handshakes) = tokio::select! {
                biased;
                i = rx.recv() => match i { Some(i) => (Some(i), 0), None => return },
                i = hs_rx.recv() => (i, 1),
                _ = sleep_until(Some(self.clock.tokio_instant(deadline))) => (None, 0),
            };
            let mut inputs = super::queued_batch(first, &mut rx);
            // At most HANDSHAKES_PER_TURN, however few other inputs came with them.
            for _ in handshakes..HANDSHAKES_PER_TURN {
                let Ok(i) = hs_rx.try_recv() else { break };
                inputs.push(i);
            }
            let had_input = !inputs.is_empty();
            for input in inputs {
                if !self.handle(input, &mut dirty) {
                    return;
                }
            }
            for (d, to) in self.outbox.drain(..) {
                if self.sock.send_to(&d, to).await.is_err() {
                    self.counters.send_errors += 1;
                }
            }
            let now = self.clock.now();
            while let Some(&Reverse((t, id))) = self.timers.peek()
                && t <= now
            {
                self.timers.pop();
                if let Some(v) = self.sessions.get_mut(&id).filter(|v| v.due == Some(t)) {
                    v.due = None;
                    v.session.handle_timeout(now);
                    dirty.insert(id);
                }
            }
            let mut progressed = false;
            for id in dirty.drain() {
                progressed |= self.flush(id).await;
                self.schedule(id);
            }
            if now >= self.next_housekeeping {
                self.expire(now);
                self.next_housekeeping = now + HOUSEKEEPING;
            }
            idle_spins = if had_input || progressed { 0 } else { idle_spins + 1 };
            if idle_spins > 16 {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
    }

    fn handle(&mut self, input: Input, dirty: &mut HashSet<u32>) -> bool {
        let now = self.clock.now();
        match input {
            Input::Tun(p) => {
                // The vehicle whose allowed_ips hold the destination, if it has a session.
                let peer = addrs(&p).and_then(|(_, d)| self.peers.route(d));
                let id = peer.and_then(|peer| self.by_peer.get(&peer).copied());
                match id.and_then(|id| self.sessions.get_mut(&id).map(|v| (id, v))) {
                    Some((id, v)) => {
                        if v.session.handle_tun_packet(now, &p).is_ok() {
                            dirty.insert(id);
                        }
                    }
                    None => self.counters.unroutable += 1,
                }
            }
            Input::Datagram { from, data, at, .. } => self.handle_datagram(now, at, from, &data, dirty),
            Input::Control(req, reply) => {
                let settles = !matches!(req, Request::Status { .. });
                let _ = reply.send(self.control(req));
                if settles {
                    // A setting may have moved any session's deadlines.
                    self.schedule_all();
                }
            }
            Input::Net(_) | Input::Position(_) => {}
            Input::Reload => {
                self.reload();
                self.schedule_all();
            }
            Input::Shutdown => {
                super::notify::notify_or_log("STOPPING=1");
                return false;
            }
        }
        true
    }

    /// A datagram from the socket, received by the kernel at `at`: a handshake, or a sealed
    /// datagram of a session. The engine gets `at` (its estimators time arrivals); the crypto
    /// layer's timers and the idle timer run on the loop's `now`.
    fn handle_datagram(
        &mut self,
        now: braid_proto::Instant,
        at: braid_proto::Instant,
        from: std::net::SocketAddr,
        data: &[u8],
        dirty: &mut HashSet<u32>,
    ) {
        let Ok((h, _)) = Header::parse(data) else {
            self.counters.rejected.count(Reject::Malformed);
            return;
        };
        if h.ptype == PacketType::Handshake {
            self.handle_handshake(now, from, data);
            return;
        }
        let Some(v) = self.sessions.get_mut(&h.session) else {
            self.counters.rejected.count(Reject::UnknownSession);
            self.hint(now, &h, from);
            return;
        };
        // Opened first: only an authentic datagram lets the engine follow the uplink to `from`.
        match v.session.handle_datagram(now, at, None, from, data) {
            Ok(()) => v.last_rx = now,
            // The engine counts what it drops.
            Err(SealedDatagramError::Engine(_)) => self.counters.garbage += 1,
            Err(SealedDatagramError::Rejected(r)) => {
                self.counters.rejected.count(r);
                // Answered as for an unknown session, so a prober cannot tell live session ids from
                // dead ones. A genuine vehicle that gets such a hint for its live session (a forged
                // datagram from its address, or its keys expired) handshakes naming that session,
                // which the server continues as a rekey: nothing is lost.
                self.hint(now, &h, from);
                return;
            }
        }
        dirty.insert(h.session);
    }

    /// The earliest deadline of any session, dropping the stale entries in front of it.
    fn next_deadline(&mut self) -> Option<braid_proto::Instant> {
        while let Some(&Reverse((t, id))) = self.timers.peek() {
            if self.sessions.get(&id).is_some_and(|v| v.due == Some(t)) {
                return Some(t);
            }
            self.timers.pop();
        }
        None
    }

    /// Files session `id`'s next deadline in the timer heap (after anything that may have moved it).
    fn schedule(&mut self, id: u32) {
        let Some(v) = self.sessions.get_mut(&id) else { return };
        let due = v.session.poll_timeout();
        if due == v.due {
            return;
        }
        v.due = due;
        if let Some(t) = due {
            self.timers.push(Reverse((t, id)));
        }
        // Stale entries leave as their deadlines pass; a busy fleet moves deadlines faster than
        // that, so the heap is rebuilt from the sessions when it outgrows them.
        if self.timers.len() > 4 * self.sessions.len() + 1024 {
            self.timers = self.sessions.iter().filter_map(|(id, v)| v.due.map(|t| Reverse((t, *id)))).collect();
        }
    }

    /// Every session's deadline again (a setting changed, vehicles came or went).
    fn schedule_all(&mut self) {
        for v in self.sessions.values_mut() {
            v.due = v.session.poll_timeout();
        }
        self.timers = self.sessions.iter().filter_map(|(id, v)| v.due.map(|t| Reverse((t, *id)))).collect();
    }

    /// Tells the sender of a datagram that did not open that the session is unknown, so a vehicle
    /// whose session this server forgot (a restart) joins again at once; limited per source, and
    /// smaller than what triggered it.
    fn hint(&mut self, now: braid_proto::Instant, h: &Header, from: std::net::SocketAddr) {
        let mut out = [0u8; 16];
        if self.hint_limiter.allow(now, from.ip())
            && let Some(n) = unknown_session_hint(now, h.session, h.link, &mut out)
        {
            self.counters.hints += 1;
            self.outbox.push((out[..n].to_vec(), from));
        }
    }

    /// Whether to answer an initiation whose timestamp is not newer than the peer's last one
    /// ([`STALE_TIMESTAMP_IDLE`] says why): a rekey of the peer's running session (harmless: the
    /// new keys serve only once the client uses them), or the peer's session silent for
    /// [`STALE_TIMESTAMP_IDLE`] or absent.
    fn stale_ok(&self, now: braid_proto::Instant, p: &PendingResponse) -> bool {
        let running = self.by_peer.get(&p.peer).and_then(|id| self.sessions.get(id).map(|v| (*id, v.last_rx)));
        answer_stale(running, p.wanted, now)
    }

    /// A handshake initiation: a new session, a rekey of a running one, or a cookie reply.
    fn handle_handshake(&mut self, now: braid_proto::Instant, from: std::net::SocketAddr, data: &[u8]) {
        if !matches!(HandshakeKind::of(data), Ok((_, HandshakeKind::Initiation))) {
            self.counters.rejected.count(Reject::Malformed);
            return;
        }
        let mut out = [0u8; 256];
        let p = match self.responder.handle_initiation(now, from, data, &mut out) {
            Ok(InitiationOutcome::Accepted(p)) => p,
            Ok(InitiationOutcome::CookieReply(n)) => {
                self.counters.cookie_replies += 1;
                self.counters.rejected.count(Reject::RateLimited);
                self.outbox.push((out[..n].to_vec(), from));
                return;
            }
            Err(r) => {
                self.counters.rejected.count(r);
                tracing::debug!(%from, reason = %r, "handshake refused");
                return;
            }
        };
        let peer = p.peer;
        let name = self.name(peer).to_string();
        if !p.fresh {
            if !self.stale_ok(now, &p) {
                self.counters.rejected.count(Reject::Replay);
                tracing::debug!(peer = %name, %from, "initiation not newer than the last one; its session is live");
                return;
            }
            tracing::info!(peer = %name, %from, "initiation older than the last one accepted (a clock went back?); answered");
        }
        let continued = p.wanted != 0 && self.sessions.get(&p.wanted).is_some_and(|v| v.peer == peer);
        let id = if continued {
            p.wanted
        } else {
            if self.sessions.len() >= self.cfg.max_sessions && !self.by_peer.contains_key(&peer) {
                self.counters.refused += 1;
                tracing::warn!(peer = %name, "session refused: max_sessions reached");
                return;
            }
            self.fresh_id()
        };
        let suite = p.suite;
        if !p.fresh && !continued {
            // From now on the peer's initiations need only be newer than this one.
            self.responder.accept_stale(&p);
        }
        let (n, keys) = match self.responder.respond(now, p, id, continued, &mut out) {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!(peer = %name, error = %e, "cannot write the handshake response");
                return;
            }
        };
        self.counters.handshakes += 1;
        self.outbox.push((out[..n].to_vec(), from));
        if let Some(v) = self.sessions.get_mut(&id).filter(|_| continued) {
            v.session.channel_mut().rekey(&keys, now, false);
            tracing::info!(peer = %name, session = format_args!("{id:04x}"), %from, "session rekeyed");
            self.schedule(id);
            return;
        }
        // A new session; the peer's old one (a vehicle that restarted) goes.
        if let Some(old) = self.by_peer.insert(peer, id) {
            self.sessions.remove(&old);
        }
        let mut session = self.new_session(id, &name, now);
        // The server meters its own sends on the vehicle's uplinks, applied as it learns them.
        if let Some(entry) = self.peers.entry(peer) {
            meter(&mut session, entry);
        }
        let session = SealedSession::new(session, &keys, now);
        self.sessions.insert(id, Vehicle { session, peer, last_rx: now, due: None, source_not_allowed: 0 });
        self.schedule(id);
        tracing::info!(peer = %name, session = format_args!("{id:04x}"), %from, cipher = %suite, "new session");
    }

    /// A random session id not in use (never 0: a client asks for 0 when it wants a new one),
    /// in this server's part of the id space (`server_id` in the high bits, so that a load
    /// balancer can route by it). `max_sessions` is at most half that part, so a random draw is
    /// free at least half the time; the scan after 64 draws only runs if the OS has no randomness.
    fn fresh_id(&self) -> u32 {
        let (prefix, mask) = self.cfg.session_ids();
        let free = |id: u32| id != 0 && !self.sessions.contains_key(&id);
        for _ in 0..64 {
            let mut b = [0u8; 4];
            // Without OS randomness ids are still unique (checked below), only guessable, and a
            // guessed id gains nothing without the session's keys.
            let _ = getrandom::fill(&mut b);
            let id = prefix | (u32::from_le_bytes(b) & mask);
            if free(id) {
                return id;
            }
        }
        // Some id is always free: there are never more than max_sessions <= mask / 2 sessions.
        (0..=mask).map(|low| prefix | low).find(|id| free(*id)).unwrap_or(prefix | mask)
    }

    fn new_session(&self, id: u32, peer: &str, now: braid_proto::Instant) -> Session {
        let scfg = super::session_config(Role::Server, id, &self.cfg.session, self.mtu);
        let mut session = Session::new(scfg, &[], now);
        if let Some(o) = self.overrides.get(peer) {
            o.apply(&mut session);
        }
        session
    }

    async fn flush(&mut self, id: u32) -> bool {
        let Some(v) = self.sessions.get_mut(&id) else { return false };
        let mut any = false;
        // The clock is read per datagram, as on the client (`Client::flush` says why).
        while let Some(sealed) = v.session.poll_transmit(self.clock.now(), &mut self.buf) {
            any = true;
            let Ok(t) = sealed else {
                // The buffer has room for the tag (sized above), so the keys expired: the
                // vehicle's rekeys have failed for REJECT_AFTER; nothing goes out until one works.
                self.counters.send_errors += 1;
                continue;
            };
            let Some(dest) = t.destination else { continue };
            if self.batch.push(&self.sock, dest, &self.buf[..t.len]).await.is_err() {
                self.counters.send_errors += 1;
            }
        }
        if self.batch.finish(&self.sock).await.is_err() {
            self.counters.send_errors += 1;
        }
        while let Some(p) = v.session.poll_deliver() {
            any = true;
            // Only from the vehicle's own networks (cryptokey routing): the source must route
            // back to this vehicle, or the packet is dropped and counted.
            match addrs(&p) {
                Some((src, _)) if self.peers.route(src) == Some(v.peer) => deliver(&self.tun, &p).await,
                Some((src, _)) => {
                    v.source_not_allowed += 1;
                    self.counters.passenger.source_not_allowed += 1;
                    tracing::debug!(session = format_args!("{id:04x}"), %src, "source not in the vehicle's allowed_ips; dropped");
                }
                None => self.counters.passenger.not_ip += 1,
            }
        }
        while let Some(e) = v.session.poll_event() {
            super::log_event(e, Some(&format!("{id:04x}")), |l| uplink_name(&v.session, l));
            // The server learns a vehicle's links from its traffic: a weight set for one of them
            // with `braid set --peer` takes hold when it appears.
            if let braid_proto::Event::LinkAddress(..) = e
                && let Some(o) = self.peers.entry(v.peer).and_then(|e| self.overrides.get(&e.name))
            {
                o.apply_weights(&mut v.session);
            }
        }
        any
    }

    /// Drops sessions idle longer than `session_idle_s` and the routes that led to them.
    fn expire(&mut self, now: braid_proto::Instant) {
        let idle = Duration::from_secs(self.cfg.session_idle_s);
        let before = self.sessions.len();
        let peers = &self.peers;
        self.sessions.retain(|id, v| {
            let keep = now.saturating_duration_since(v.last_rx) < idle && !v.session.is_closed();
            if !keep {
                let name = peers.entry(v.peer).map_or("", |e| e.name.as_str());
                tracing::info!(session = format_args!("{id:04x}"), peer = %name, "session expired");
            }
            keep
        });
        if self.sessions.len() != before {
            self.counters.expired += (before - self.sessions.len()) as u64;
            let live = &self.sessions;
            self.by_peer.retain(|_, id| live.contains_key(id));
        }
    }

    fn control(&mut self, req: Request) -> Response {
        let peer = match req.peer() {
            Some(name) if self.peers.find(name).is_none() => {
                return Response::err(format!("no vehicle {name:?} in [[peer]]"));
            }
            p => p.map(str::to_string),
        };
        // The sessions the request concerns: the named vehicle's, or all.
        let wanted = peer.as_deref().and_then(|n| self.peers.find(n));
        let chosen = |v: &Vehicle| peer.is_none() || wanted == Some(v.peer);
        match req {
            Request::PeerAdd { entry } => self.add_peer(*entry),
            Request::PeerRemove { name } => self.remove_peer(&name),
            Request::Status { .. } => {
                let mut status = self.status();
                if let Some(n) = peer.as_deref() {
                    status.sessions.retain(|s| s.peer == n);
                }
                Response { ok: true, error: None, status: Some(status) }
            }
            Request::SetWeight { link, weight, .. } => {
                // By number (link<N> or N), or by the name the vehicles report for their uplinks.
                let by_name = || {
                    let mut ids =
                        self.sessions.values().filter(|v| chosen(v)).flat_map(|v| {
                            v.session.link_ids().into_iter().filter(|&l| uplink_name(&v.session, l) == link)
                        });
                    let first = ids.next();
                    // One number for the name: a name that means different links on different
                    // vehicles is refused without --peer.
                    first.filter(|f| ids.all(|o| o == *f)).map(|l| l.0)
                };
                let Some(n) = link.trim_start_matches("link").parse::<u8>().ok().or_else(by_name) else {
                    return Response::err(format!(
                        "no uplink {link:?}: use link<N>, N, or the name a connected vehicle reports (with --peer if it means different links on different vehicles)"
                    ));
                };
                let hits = self
                    .sessions
                    .values_mut()
                    .filter(|v| chosen(v))
                    .map(|v| v.session.set_link_weight(braid_proto::LinkId(n), weight))
                    .filter(|hit| *hit)
                    .count();
                if let Some(p) = peer {
                    let o = self.overrides.entry(p).or_default();
                    o.weights.retain(|(l, _)| *l != n);
                    o.weights.push((n, weight));
                    // Kept for the vehicle's next session even if it has none now.
                    return Response::ok();
                }
                self.overrides.values_mut().for_each(|o| o.weights.retain(|(l, _)| *l != n));
                if hits == 0 { Response::err(format!("no session has link {n}")) } else { Response::ok() }
            }
            Request::SetRecovery { name, .. } => {
                let k = name.0;
                self.sessions.values_mut().filter(|v| chosen(v)).for_each(|v| v.session.set_recovery(k));
                match peer {
                    Some(p) => self.overrides.entry(p).or_default().recovery = Some(k),
                    None => {
                        self.cfg.session.recovery = Some(name);
                        self.overrides.values_mut().for_each(|o| o.recovery = None);
                    }
                }
                Response::ok()
            }
            Request::SetScheduler { name, .. } => {
                let k = name.0;
                self.sessions.values_mut().filter(|v| chosen(v)).for_each(|v| v.session.set_scheduler(k));
                match peer {
                    Some(p) => self.overrides.entry(p).or_default().scheduler = Some(k),
                    None => {
                        self.cfg.session.scheduler = Some(name);
                        self.overrides.values_mut().for_each(|o| o.scheduler = None);
                    }
                }
                Response::ok()
            }
        }
    }

    fn status(&self) -> DaemonStatus {
        let now = self.clock.now();
        let mut sessions: Vec<_> = self
            .sessions
            .values()
            .map(|v| {
                let mut s = session_status(&v.session, now, |id| (uplink_name(&v.session, id), None, true));
                s.peer = self.name(v.peer).to_string();
                s.cipher = v.session.channel().suite().to_string();
                s.key_age_s = now.saturating_duration_since(v.session.channel().keys_born()).as_secs_f64();
                s.source_not_allowed = v.source_not_allowed;
                s
            })
            .collect();
        sessions.sort_by_key(|s| s.id);
        let mut rejected = self.counters.rejected;
        rejected.rate_limited += self.hs_dropped.load(Ordering::Relaxed);
        DaemonStatus {
            role: "server".into(),
            uptime_s: now.as_secs_f64(),
            rejected: rejected.into(),
            handshakes: self.counters.handshakes,
            cookie_replies: self.counters.cookie_replies,
            unknown_session_hints: self.counters.hints,
            garbage_datagrams: self.counters.garbage,
            sessions_refused: self.counters.refused,
            sessions_expired: self.counters.expired,
            unroutable_packets: self.counters.unroutable,
            passenger_dropped: super::status::PassengerDropped {
                source_not_allowed: self.counters.passenger.source_not_allowed,
                not_ip: self.counters.passenger.not_ip,
            },
            send_errors: self.counters.send_errors,
            sessions,
        }
    }

    /// The name of the vehicle at index `peer` (empty once it is removed).
    fn name(&self, peer: usize) -> &str {
        self.peers.entry(peer).map_or("", |e| e.name.as_str())
    }

    /// SIGHUP: the file again. The list of vehicles is compared with the running one and only
    /// the vehicles whose entry changed are touched ([`super::peers`]); the fleet's session
    /// settings are applied only where they changed, so that every other session keeps its
    /// scheduler's and recovery's state (a `braid set --peer` setting stays too). `listen`,
    /// `private_key`, `tun` and `metrics` take a restart.
    fn reload(&mut self) {
        let loaded = ServerConfig::load(&self.path).and_then(|c| {
            let (_, keys) = c.keys().with_context(|| format!("in {}", self.path.display()))?;
            Ok((c, keys))
        });
        let (c, keys) = match loaded {
            Ok(x) => x,
            Err(e) => {
                tracing::error!(error = format_args!("{e:#}"), "reload refused; keeping the running settings");
                return;
            }
        };
        let changes = plan(&self.peers, &self.responder, &c.peer, &keys);
        let (removed, changed, added) = (changes.removed.len(), changes.changed.len(), changes.added.len());
        if !changes.is_empty() {
            self.apply_peer_changes(changes);
        }
        let peers = &self.peers;
        self.overrides.retain(|name, _| peers.find(name).is_some());
        let old = &self.cfg.session;
        let recovery = (c.session.recovery() != old.recovery()).then(|| c.session.recovery());
        let scheduler = (c.session.scheduler() != old.scheduler()).then(|| c.session.scheduler());
        let aqm = (c.session.aqm != old.aqm).then_some(c.session.aqm);
        for v in self.sessions.values_mut() {
            let o = self.peers.entry(v.peer).and_then(|e| self.overrides.get(&e.name));
            if let Some(r) = recovery.filter(|_| o.is_none_or(|o| o.recovery.is_none())) {
                v.session.set_recovery(r);
            }
            if let Some(s) = scheduler.filter(|_| o.is_none_or(|o| o.scheduler.is_none())) {
                v.session.set_scheduler(s);
            }
            if let Some(a) = aqm {
                v.session.set_aqm(a);
            }
        }
        tracing::info!(
            recovery = %c.session.recovery(),
            scheduler = %c.session.scheduler(),
            aqm = c.session.aqm,
            added,
            removed,
            changed,
            "settings reloaded"
        );
        self.responder.set_load_threshold(c.handshake_load);
        self.cfg.session = c.session;
        self.cfg.max_sessions = c.max_sessions;
        self.cfg.session_idle_s = c.session_idle_s;
    }

    /// Removes, changes and adds vehicles; the sessions of the others are not touched.
    fn apply_peer_changes(&mut self, changes: PeerChanges) {
        for i in changes.removed {
            self.end_vehicle(i);
        }
        for (i, entry) in changes.changed {
            if let Some(v) = self.by_peer.get(&i).and_then(|id| self.sessions.get_mut(id)) {
                // Uplinks no longer listed go back to unmetered.
                let before = self.peers.entry(i).map_or(0, |e| e.uplink.len());
                for l in entry.uplink.len()..before {
                    v.session.set_link_metering(braid_proto::LinkId(l as u8), braid_proto::Metering::default());
                }
                meter(&mut v.session, &entry);
            }
            tracing::info!(peer = %entry.name, "vehicle changed; its session stays");
            self.peers.set(i, entry);
        }
        for (entry, keys) in changes.added {
            let name = entry.name.clone();
            if let Err(e) = self.admit(entry, keys) {
                tracing::error!(peer = %name, error = %e, "vehicle not added");
            }
        }
    }

    /// Lists a vehicle: it may join at once, and the server routes its `allowed_ips` to it.
    fn admit(&mut self, entry: PeerEntry, keys: PeerConfig) -> Result<usize, DuplicateKey> {
        let i = self.responder.add_peer(keys)?;
        tracing::info!(peer = %entry.name, allowed_ips = ?entry.allowed_ips.0.iter().map(ToString::to_string).collect::<Vec<_>>(), "vehicle added");
        self.peers.set(i, entry);
        Ok(i)
    }

    /// Unlists the vehicle at index `i`: its session ends at once (its next datagram gets an
    /// unknown-session hint, and its initiations are refused), its routes go.
    fn end_vehicle(&mut self, i: usize) {
        self.responder.remove_peer(i);
        let name = self.peers.remove(i).map(|e| e.name).unwrap_or_default();
        let session = self.by_peer.remove(&i).and_then(|id| self.sessions.remove(&id).map(|_| id));
        tracing::info!(peer = %name, session = ?session.map(|id| format!("{id:04x}")), "vehicle removed; its session and routes are gone");
    }

    /// `braid peer add`: checked against the running list as a file's entries are.
    fn add_peer(&mut self, entry: PeerEntry) -> Response {
        let name = entry.name.clone();
        if self.peers.find(&name).is_some() {
            return Response::err(format!("vehicle {name:?} is listed already (braid peer remove it first)"));
        }
        let mut list: Vec<PeerEntry> = self.peers.entries().cloned().collect();
        list.push(entry.clone());
        if let Err(e) = ServerConfig::check_peers(&list, "") {
            return Response::err(format!("peer {name:?}: {e:#}"));
        }
        let keys = match entry.keys() {
            Ok(k) => k,
            Err(e) => return Response::err(format!("peer {name:?}: preshared_key: {e:#}")),
        };
        match self.admit(entry, keys) {
            Ok(_) => Response::ok(),
            Err(e) => Response::err(format!("peer {name:?}: {e}")),
        }
    }

    /// `braid peer remove`.
    fn remove_peer(&mut self, name: &str) -> Response {
        let Some(i) = self.peers.find(name) else { return Response::err(format!("no vehicle {name:?} in [[peer]]")) };
        self.end_vehicle(i);
        self.overrides.remove(name);
        Response::ok()
    }
}

/// The vehicle's name for its uplink `id`, as its probes carry it, or `link<N>` until one has
/// (and when two of its uplinks claim the same name, or a name that is another uplink's number).
fn uplink_name(s: &Session, id: braid_proto::LinkId) -> String {
    let number = id.to_string();
    match s.peer_link_name(id) {
        Some(n)
            if n == number
                || (s
                    .link_ids()
                    .iter()
                    .all(|&o| o == id || (s.peer_link_name(o) != Some(n) && o.to_string() != n))) =>
        {
            n.to_string()
        }
        _ => number,
    }
}

/// The server's metering of its sends on a vehicle's uplinks (`[[peer.uplink]]`, by position).
fn meter(session: &mut Session, entry: &PeerEntry) {
    for (i, u) in entry.uplink.iter().enumerate() {
        session.set_link_metering(braid_proto::LinkId(i as u8), u.metering());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_proto::Instant;

    #[test]
    fn a_client_whose_clock_went_back_is_not_locked_out() {
        let t = Instant::from_micros(100_000_000);
        // No session (the server restarted, or the vehicle's expired): answered.
        assert!(answer_stale(None, 0, t));
        // A rekey of the running session: answered (its keys serve only once the client uses them).
        assert!(answer_stale(Some((7, t)), 7, t));
        // A new session while the running one is live: refused, a replay must not disturb it...
        assert!(!answer_stale(Some((7, t)), 0, t + Duration::from_secs(1)));
        // ...but once it has been silent for STALE_TIMESTAMP_IDLE, the client rejoining is let in.
        assert!(answer_stale(Some((7, t)), 0, t + STALE_TIMESTAMP_IDLE));
    }
}
