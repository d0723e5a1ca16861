//! The server's workers: each owns a share of the sessions, their timers and a listening socket
//! of its own, and runs on whichever of the runtime's threads is free, in parallel with the
//! others.
//!
//! A session lives on one worker for its whole life: worker `session_id % workers`. The
//! coordinator ([`super::server`]) picks a vehicle's worker from its `[[peer]]` index
//! (`index % workers`) and hands it session ids that land there, so every session of a vehicle
//! (a rejoin, a rekey) stays on the same worker, and the TUN side finds the worker from a
//! passenger's destination address without asking anyone (its vehicle, by `allowed_ips`, then
//! the index). The workers' sockets share the listening address (`SO_REUSEPORT`), and a BPF
//! program on the group has the kernel deliver each datagram to its session's worker's socket
//! ([`super::uplink::listen_group`]); a reader hands any datagram of another worker's session
//! (should the kernel have refused the program) to that worker over its queue. Nothing is shared
//! on the data path but the read-mostly vehicle table. The TUN
//! device has a queue per worker too (`IFF_MULTI_QUEUE`): a worker writes its passenger packets to
//! its own, and each queue's reader hands what it reads to the destination's worker.

use super::client::sleep_until;
use super::peers::PeerTable;
use super::status::SessionStatus;
use super::{Clock, uplink};
use arc_swap::ArcSwap;
use braid_proto::crypto::{RateLimiter, Reject, RejectCounts, SessionKeys, unknown_session_hint};
use braid_proto::wire::{Header, PacketType};
use braid_proto::{Metering, RecoveryKind, SchedulerKind, SealedDatagramError, SealedSession, Session};
use bytes::Bytes;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::Duration;
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, oneshot};
use tun_rs::AsyncDevice;

/// How often idle sessions are looked for.
const HOUSEKEEPING: Duration = Duration::from_secs(1);

/// Inputs waiting for one worker; its readers wait when it is full.
pub(super) const WORK_QUEUE: usize = 4096;

/// The worker that owns session `id` among `workers`.
pub fn worker_of(id: u32, workers: usize) -> usize {
    id as usize % workers.max(1)
}

/// The worker that owns the sessions of the vehicle at `[[peer]]` index `peer`.
pub fn worker_of_peer(peer: usize, workers: usize) -> usize {
    peer % workers.max(1)
}

/// What the workers and the coordinator share: read on the data path, written only when the
/// list of vehicles or a setting changes.
pub(super) struct Shared {
    /// The vehicles and the routes of their `allowed_ips`, replaced whole on a change.
    pub peers: ArcSwap<PeerTable>,
    /// `session_idle_s`, which SIGHUP may change.
    pub idle_s: AtomicU64,
    /// Passenger packets from the TUN device whose destination is no vehicle's.
    pub unroutable: AtomicU64,
    /// Datagrams read on one worker's socket and handed to their session's worker.
    pub handed_over: AtomicU64,
    /// Handshake datagrams the readers dropped because the coordinator's queue was full.
    pub hs_dropped: AtomicU64,
    /// Protocol versions of other braids already warned about ([`super::note_other_version`]).
    pub other_versions: AtomicU8,
}

/// Something for a worker to do.
pub(super) enum Work {
    /// A datagram of one of its sessions (by id), received by the kernel at `at`.
    Datagram { from: SocketAddr, data: Bytes, at: braid_proto::Instant },
    /// A passenger packet for the vehicle at `peer`.
    Tun { peer: usize, packet: Bytes },
    /// A new session, the vehicle's only one from now on.
    Adopt(Box<Adopted>),
    /// New keys for a running session.
    Rekey { id: u32, keys: Box<SessionKeys> },
    /// The session ends now (its vehicle was removed, or a new session replaced it).
    End { id: u32 },
    /// A request from the coordinator and where to answer it.
    Ask(Ask, oneshot::Sender<Answer>),
}

/// A session the coordinator made for a worker.
pub(super) struct Adopted {
    pub id: u32,
    pub peer: usize,
    pub session: SealedSession,
    /// The vehicle's `braid set --peer` weights, for the links it brings up later.
    pub weights: Vec<(u8, u32)>,
}

/// Which sessions a request concerns.
#[derive(Debug, Clone, Copy)]
pub(super) enum Which {
    /// Every session.
    All,
    /// The vehicle at this index.
    Peer(usize),
}

impl Which {
    fn holds(self, peer: usize) -> bool {
        match self {
            Which::All => true,
            Which::Peer(p) => p == peer,
        }
    }
}

/// A request from the coordinator to a worker.
pub(super) enum Ask {
    /// The sessions' status and the worker's counters.
    Status,
    /// The session of the vehicle at `peer` and when it last received an authentic datagram.
    Running { peer: usize },
    /// The link ids the chosen sessions' vehicles report under the name `name`.
    LinksNamed { which: Which, name: String },
    /// A link weight, kept for the vehicle's later links when `which` names it, and dropped from
    /// every vehicle's kept weights otherwise.
    SetWeight { which: Which, link: u8, weight: u32 },
    /// A recovery scheme, for the chosen sessions except those of the vehicles listed in `keep`.
    SetRecovery { which: Which, kind: RecoveryKind, keep: HashSet<usize> },
    /// A scheduler, likewise.
    SetScheduler { which: Which, kind: SchedulerKind, keep: HashSet<usize> },
    /// The AQM setting for every session.
    SetAqm(bool),
    /// The server's metering of its sends on the uplinks of the vehicle at `peer`, by position;
    /// `before` uplinks were metered until now (those beyond the new list go back to unmetered).
    Meter { peer: usize, meterings: Vec<Metering>, before: usize },
}

/// A worker's answer.
#[derive(Default)]
pub(super) struct Answer {
    pub sessions: Vec<SessionStatus>,
    pub counters: Counters,
    /// [`Ask::Running`]: the session id and its last authentic datagram.
    pub running: Option<(u32, braid_proto::Instant)>,
    /// [`Ask::LinksNamed`].
    pub links: Vec<u8>,
    /// [`Ask::SetWeight`]: how many sessions had the link.
    pub hits: usize,
}

/// A struct of counts that sum field by field (`+=`, one worker's into the whole server's): the
/// sum is generated from the field list, so a count added to the struct is summed with the rest.
macro_rules! counts {
    ($(#[$m:meta])* $vis:vis struct $name:ident { $($(#[$fm:meta])* $f:ident: $t:ty,)* }) => {
        $(#[$m])*
        #[derive(Default, Clone, Copy)]
        $vis struct $name { $($(#[$fm])* pub $f: $t,)* }

        impl std::ops::AddAssign for $name {
            fn add_assign(&mut self, o: $name) {
                $(self.$f += o.$f;)*
            }
        }
    };
}

counts! {
    /// Passenger packets dropped by the server, by reason.
    pub(super) struct PassengerDrops {
        /// Out of a session with a source outside the vehicle's `allowed_ips`.
        source_not_allowed: u64,
        /// Out of a session and not an IPv4 or IPv6 packet.
        not_ip: u64,
    }
}

counts! {
    /// A worker's counters (the coordinator keeps the handshakes' in the same shape).
    pub(super) struct Counters {
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
}

struct Vehicle {
    session: SealedSession,
    /// Index in the responder's peer list.
    peer: usize,
    last_rx: braid_proto::Instant,
    /// The deadline this session has in the worker's timer heap, if any.
    due: Option<braid_proto::Instant>,
    /// Packets from this vehicle dropped because their source is not in its `allowed_ips`.
    source_not_allowed: u64,
    /// Its `braid set --peer` weights, applied to links as they appear.
    weights: Vec<(u8, u32)>,
}

/// One worker: its sessions, their timers, its socket.
pub(super) struct Worker {
    index: usize,
    shared: Arc<Shared>,
    clock: Clock,
    /// Each session boxed: a `Vehicle` is about 4 KB, and when the table grew past 224, 448 and
    /// 896 sessions (hashbrown doubles at 7/8 full) moving them all held up every session of the
    /// worker for 1.0, 1.9 and 3.7 ms, while a thousand vehicles joined; moving pointers takes
    /// microseconds.
    sessions: HashMap<u32, Box<Vehicle>>,
    /// The session of each of its vehicles (by `[[peer]]` index).
    by_peer: HashMap<usize, u32>,
    /// The sessions' next deadlines, earliest first. An entry whose deadline is no longer its
    /// session's `due` is stale and skipped, so a wakeup costs the sessions that are due, not a
    /// scan of the fleet.
    timers: BinaryHeap<Reverse<(braid_proto::Instant, u32)>>,
    sock: Arc<UdpSocket>,
    /// Datagrams waiting to leave together (GSO).
    batch: uplink::GsoBatch,
    tun: Arc<AsyncDevice>,
    /// Passenger packets waiting to be written to `tun` together.
    tun_batch: super::tun::TunBatch,
    buf: Vec<u8>,
    counters: Counters,
    next_housekeeping: braid_proto::Instant,
    /// Per-source limit on unknown-session hints.
    hint_limiter: RateLimiter,
    /// Hints to send.
    outbox: Vec<(Vec<u8>, SocketAddr)>,
    /// Sessions that ended here, for the coordinator's table.
    gone: mpsc::UnboundedSender<u32>,
}

impl Worker {
    /// Worker `index`, sending from `sock`; `gone` learns of each session that expires here.
    pub fn new(
        index: usize,
        shared: Arc<Shared>,
        clock: Clock,
        sock: Arc<UdpSocket>,
        tun: Arc<AsyncDevice>,
        mtu: u16,
        gone: mpsc::UnboundedSender<u32>,
    ) -> std::io::Result<Self> {
        let batch = uplink::GsoBatch::new(&sock)?;
        Ok(Worker {
            index,
            shared,
            clock,
            sessions: HashMap::new(),
            by_peer: HashMap::new(),
            timers: BinaryHeap::new(),
            sock,
            batch,
            tun,
            tun_batch: super::tun::TunBatch::default(),
            buf: vec![0u8; usize::from(mtu) + braid_proto::wire::MAX_CARRIER_OVERHEAD + braid_proto::crypto::TAG_LEN],
            counters: Counters::default(),
            next_housekeeping: clock.now() + HOUSEKEEPING,
            hint_limiter: RateLimiter::new(braid_proto::crypto::handshake::RATE_LIMITER_ENTRIES),
            outbox: Vec::new(),
            gone,
        })
    }

    /// Runs until every sender of `rx` is gone.
    pub async fn run(mut self, mut rx: mpsc::Receiver<Work>) {
        let mut dirty: HashSet<u32> = HashSet::new();
        let mut idle_spins = 0u32;
        let mut inputs = Vec::with_capacity(super::INPUT_BATCH);
        loop {
            let next = self.next_deadline();
            let deadline = next.map_or(self.next_housekeeping, |n| n.min(self.next_housekeeping));
            let first = tokio::select! {
                biased;
                w = rx.recv() => match w { Some(w) => Some(w), None => return },
                _ = sleep_until(Some(self.clock.tokio_instant(deadline))) => None,
            };
            inputs.extend(first);
            while inputs.len() < super::INPUT_BATCH
                && let Ok(w) = rx.try_recv()
            {
                inputs.push(w);
            }
            let had_input = !inputs.is_empty();
            for w in inputs.drain(..) {
                self.handle(w, &mut dirty);
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
            // The passenger packets of every session flushed above, in one batch: a vehicle's
            // flows coalesce across the datagrams of this round.
            self.tun_batch.send(&self.tun).await;
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

    fn handle(&mut self, w: Work, dirty: &mut HashSet<u32>) {
        let now = self.clock.now();
        match w {
            Work::Datagram { from, data, at } => self.handle_datagram(now, at, from, &data, dirty),
            Work::Tun { peer, packet } => {
                match self.by_peer.get(&peer).and_then(|id| self.sessions.get_mut(id).map(|v| (*id, v))) {
                    Some((id, v)) => {
                        if v.session.handle_tun_packet(now, &packet).is_ok() {
                            dirty.insert(id);
                        }
                    }
                    None => self.counters.unroutable += 1,
                }
            }
            Work::Adopt(a) => {
                let Adopted { id, peer, session, weights } = *a;
                if let Some(old) = self.by_peer.insert(peer, id).filter(|old| *old != id) {
                    self.sessions.remove(&old);
                }
                self.sessions.insert(
                    id,
                    Box::new(Vehicle { session, peer, last_rx: now, due: None, source_not_allowed: 0, weights }),
                );
                self.schedule(id);
            }
            Work::Rekey { id, keys } => {
                if let Some(v) = self.sessions.get_mut(&id) {
                    v.session.channel_mut().rekey(&keys, now, false);
                    self.schedule(id);
                }
            }
            Work::End { id } => {
                if let Some(v) = self.sessions.remove(&id)
                    && self.by_peer.get(&v.peer) == Some(&id)
                {
                    self.by_peer.remove(&v.peer);
                }
            }
            Work::Ask(ask, reply) => {
                let settles = !matches!(ask, Ask::Status | Ask::Running { .. } | Ask::LinksNamed { .. });
                let _ = reply.send(self.ask(ask, now));
                if settles {
                    // A setting may have moved any session's deadlines.
                    self.schedule_all();
                }
            }
        }
    }

    fn ask(&mut self, ask: Ask, now: braid_proto::Instant) -> Answer {
        let mut a = Answer::default();
        match ask {
            Ask::Status => {
                let peers = self.shared.peers.load();
                a.sessions = self
                    .sessions
                    .values()
                    .map(|v| {
                        let mut s = super::status::session_status(&v.session, now, |l| {
                            (uplink_name(&v.session, l), None, true)
                        });
                        s.peer = peers.entry(v.peer).map_or("", |e| e.name.as_str()).to_string();
                        s.cipher = v.session.channel().suite().to_string();
                        s.key_age_s = now.saturating_duration_since(v.session.channel().keys_born()).as_secs_f64();
                        s.source_not_allowed = v.source_not_allowed;
                        s.worker = Some(self.index);
                        s
                    })
                    .collect();
                a.counters = self.counters;
            }
            Ask::Running { peer } => {
                a.running = self.by_peer.get(&peer).and_then(|id| self.sessions.get(id).map(|v| (*id, v.last_rx)));
            }
            Ask::LinksNamed { which, name } => {
                for v in self.sessions.values().filter(|v| which.holds(v.peer)) {
                    a.links.extend(
                        v.session.link_ids().into_iter().filter(|&l| uplink_name(&v.session, l) == name).map(|l| l.0),
                    );
                }
            }
            Ask::SetWeight { which, link, weight } => {
                for v in self.sessions.values_mut() {
                    if which.holds(v.peer) {
                        a.hits += usize::from(v.session.set_link_weight(braid_proto::LinkId(link), weight));
                    }
                    v.weights.retain(|(l, _)| *l != link);
                    if let Which::Peer(p) = which
                        && p == v.peer
                    {
                        v.weights.push((link, weight));
                    }
                }
            }
            Ask::SetRecovery { which, kind, keep } => {
                for v in self.sessions.values_mut().filter(|v| which.holds(v.peer) && !keep.contains(&v.peer)) {
                    v.session.set_recovery(kind);
                }
            }
            Ask::SetScheduler { which, kind, keep } => {
                for v in self.sessions.values_mut().filter(|v| which.holds(v.peer) && !keep.contains(&v.peer)) {
                    v.session.set_scheduler(kind);
                }
            }
            Ask::SetAqm(on) => self.sessions.values_mut().for_each(|v| v.session.set_aqm(on)),
            Ask::Meter { peer, meterings, before } => {
                if let Some(v) = self.by_peer.get(&peer).and_then(|id| self.sessions.get_mut(id)) {
                    for l in meterings.len()..before {
                        v.session.set_link_metering(braid_proto::LinkId(l as u8), Metering::default());
                    }
                    for (l, m) in meterings.into_iter().enumerate() {
                        v.session.set_link_metering(braid_proto::LinkId(l as u8), m);
                    }
                }
            }
        }
        a
    }

    /// A sealed datagram of one of this worker's sessions, received by the kernel at `at`. The
    /// engine gets `at` (its estimators time arrivals); the crypto layer's timers and the idle
    /// timer run on the loop's `now`.
    fn handle_datagram(
        &mut self,
        now: braid_proto::Instant,
        at: braid_proto::Instant,
        from: SocketAddr,
        data: &[u8],
        dirty: &mut HashSet<u32>,
    ) {
        let h = match Header::parse(data) {
            Ok((h, _)) => h,
            Err(e) => {
                self.counters.rejected.count(Reject::Malformed);
                super::note_other_version(&self.shared.other_versions, &e, from);
                return;
            }
        };
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

    /// Tells the sender of a datagram that did not open that the session is unknown, so a vehicle
    /// whose session this server forgot (a restart) joins again at once; limited per source, and
    /// smaller than what triggered it.
    fn hint(&mut self, now: braid_proto::Instant, h: &Header, from: SocketAddr) {
        let mut out = [0u8; 16];
        if self.hint_limiter.allow(now, from.ip())
            && let Some(n) = unknown_session_hint(now, h.session, h.link, &mut out)
        {
            self.counters.hints += 1;
            self.outbox.push((out[..n].to_vec(), from));
        }
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

    /// Every session's deadline again (a setting changed).
    fn schedule_all(&mut self) {
        for v in self.sessions.values_mut() {
            v.due = v.session.poll_timeout();
        }
        self.timers = self.sessions.iter().filter_map(|(id, v)| v.due.map(|t| Reverse((t, *id)))).collect();
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
        let mut peers = None;
        while let Some(p) = v.session.poll_deliver() {
            any = true;
            // Only from the vehicle's own networks (cryptokey routing): the source must route
            // back to this vehicle, or the packet is dropped and counted.
            let table = peers.get_or_insert_with(|| self.shared.peers.load());
            match addrs(&p) {
                Some((src, _)) if table.route(src) == Some(v.peer) => self.tun_batch.push(&self.tun, &p).await,
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
            if let braid_proto::Event::LinkAddress(..) = e {
                for &(link, w) in &v.weights {
                    v.session.set_link_weight(braid_proto::LinkId(link), w);
                }
            }
        }
        any
    }

    /// Drops sessions idle longer than `session_idle_s` and the routes that led to them.
    fn expire(&mut self, now: braid_proto::Instant) {
        let idle = Duration::from_secs(self.shared.idle_s.load(Ordering::Relaxed));
        let before = self.sessions.len();
        let peers = self.shared.peers.load();
        let gone = &self.gone;
        self.sessions.retain(|id, v| {
            let keep = now.saturating_duration_since(v.last_rx) < idle && !v.session.is_closed();
            if !keep {
                let name = peers.entry(v.peer).map_or("", |e| e.name.as_str());
                tracing::info!(session = format_args!("{id:04x}"), peer = %name, "session expired");
                let _ = gone.send(*id);
            }
            keep
        });
        if self.sessions.len() != before {
            self.counters.expired += (before - self.sessions.len()) as u64;
            let live = &self.sessions;
            self.by_peer.retain(|_, id| live.contains_key(id));
        }
    }
}

/// Reads one of the listening sockets: handshake datagrams go to the coordinator's bounded queue
/// (dropped and counted when it is full), every other datagram to the queue of the worker that
/// owns its session (by the id in its clear header; a datagram too short to have one goes to
/// this socket's worker, which counts it).
pub(super) fn spawn_reader(
    index: usize,
    sock: Arc<UdpSocket>,
    mut rx: uplink::BatchReceiver,
    clock: Clock,
    workers: Vec<mpsc::Sender<Work>>,
    hs_tx: mpsc::Sender<super::Input>,
    shared: Arc<Shared>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut batch = Vec::with_capacity(quinn_udp::BATCH_SIZE);
        loop {
            match rx.recv(&sock, &clock, &mut batch).await {
                Ok(()) => {
                    for uplink::Received { from, data, at } in batch.drain(..) {
                        let header = Header::parse(&data).ok().map(|(h, _)| h);
                        if header.is_some_and(|h| h.ptype == PacketType::Handshake) {
                            let input = super::Input::Datagram { uplink: 0, from, data, at };
                            if hs_tx.try_send(input).is_err() {
                                shared.hs_dropped.fetch_add(1, Ordering::Relaxed);
                            }
                            continue;
                        }
                        let owner = header.map_or(index, |h| worker_of(h.session, workers.len()));
                        if owner != index {
                            shared.handed_over.fetch_add(1, Ordering::Relaxed);
                        }
                        if workers[owner].send(Work::Datagram { from, data, at }).await.is_err() {
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

/// The worker a passenger packet from the TUN device goes to: that of the vehicle whose
/// `allowed_ips` hold its destination, with the vehicle's index; `None` (counted) for no vehicle's.
pub(super) fn route_tun(shared: &Shared, packet: &[u8], workers: usize) -> Option<(usize, usize)> {
    let peer = addrs(packet).and_then(|(_, d)| shared.peers.load().route(d));
    match peer {
        Some(p) => Some((worker_of_peer(p, workers), p)),
        None => {
            shared.unroutable.fetch_add(1, Ordering::Relaxed);
            None
        }
    }
}

/// Source and destination of a passenger packet.
pub(super) fn addrs(p: &[u8]) -> Option<(IpAddr, IpAddr)> {
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

/// The vehicle's name for its uplink `id`, as its probes carry it, or `link<N>` until one has
/// (and when two of its uplinks claim the same name, or a name that is another uplink's number).
pub(super) fn uplink_name(s: &Session, id: braid_proto::LinkId) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vehicles_sessions_land_on_its_worker() {
        // The coordinator draws ids until worker_of(id) is the vehicle's worker; here every id
        // of a vehicle's worker maps back to it, and the vehicles spread over the workers.
        for workers in 1..=4 {
            for peer in 0..16 {
                let w = worker_of_peer(peer, workers);
                assert!(w < workers);
                let ids: Vec<u32> = (1..=0xffffu32).filter(|&id| worker_of(id, workers) == w).take(50).collect();
                assert!(ids.iter().all(|&id| worker_of(id, workers) == w));
            }
            let used: HashSet<usize> = (0..workers).map(|p| worker_of_peer(p, workers)).collect();
            assert_eq!(used.len(), workers, "{workers} vehicles take every worker");
        }
        // A zero count (never configured: the setting is checked) still names a worker.
        assert_eq!(worker_of(7, 0), 0);
    }
}
