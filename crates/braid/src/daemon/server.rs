//! `braid server`: one session per vehicle, demultiplexed by the session id of the clear header,
//! spread over worker threads ([`super::worker`]).
//!
//! A session exists only after a vehicle listed in `[[peer]]` completed a Noise IKpsk2 handshake
//! (braid_proto::crypto); the server names its id. Every datagram of a session is opened (AEAD,
//! replay window) before the engine sees it, so the engine adopts an uplink's new address only
//! from an authentic datagram. Handshake datagrams travel on their own small queue from the
//! socket readers to the coordinator, dropped (and counted) when it is full, so a flood of
//! initiations cannot crowd out the sessions' traffic (WireGuard keeps handshakes on a separate
//! queue for the same reason). The Diffie-Hellman work of a handshake (the Noise responder's four
//! X25519 operations, 0.15 ms at a time on a 2020s core) runs on a thread of its own at nice 19
//! ([`KeyExchange`]), so that a worker woken by an established vehicle's packet takes the core
//! from it at once rather than waiting for it to finish. The checks before it (`mac1`, under load
//! `mac2` or a cookie reply, the per-source rate limit: [`Gate`]) run on the coordinator: with
//! them on that thread too, a flood of forged initiations on a host whose cores other work kept
//! busy waited there for the scraps of time nice 19 gets, filled the queue, and a vehicle's retry
//! with its cookie was dropped or waited behind them (`security_netns`'s 20,000/s spoofed flood
//! with two busy loops on both cores: joins took 0.6-1.6 s, or the server did not answer 4,096
//! initiations within 5 s, against 0.08-0.09 s with the checks here).
//!
//! That thread holds nothing the data path waits for: it owns the responder only while it works
//! on it, and the coordinator, which shares the runtime's locks with the workers (waking a
//! worker's task from outside the runtime's threads, timers, I/O registrations), runs at the
//! ordinary policy. A coordinator at `SCHED_IDLE`, switched out holding one of those locks on a
//! host whose cores other work kept busy, held up every worker until it got a core again: with
//! eight busy loops beside the namespace test of live vehicles the server went silent for seconds
//! in 3 runs of 4. Nice 19 rather than `SCHED_IDLE` for the key exchanges: on a host whose cores
//! are busy they go slowly, but they go, so vehicles still join and rekey.
//!
//! The coordinator here owns what all sessions share: the handshake responder (keys, cookies,
//! replay of initiations), the list of vehicles (SIGHUP, `braid peer add|remove`), the per-vehicle
//! settings (`braid set --peer`) and the control socket. It makes each new session and hands it
//! to the vehicle's worker, which runs it from then on; a rekey's keys go the same way.
//!
//! Passenger packets are routed by each `[[peer]]`'s `allowed_ips` (cryptokey routing,
//! [`braid_config::allowed_ips`]): towards a vehicle by destination, and out of a vehicle's
//! session only from a source that routes back to that vehicle; nothing is learned from traffic.

use super::config::{PeerEntry, ServerConfig};
use super::control::{Request, Response};
use super::peers::{PeerChanges, PeerTable, plan};
use super::status::DaemonStatus;
use super::worker::{
    Adopted, Answer, Ask, Counters, Shared, WORK_QUEUE, Which, Work, Worker, worker_of, worker_of_peer,
};
use super::{Clock, Input, control, metrics, spawn_signals, tun, uplink};
use anyhow::Context;
use arc_swap::ArcSwap;
use braid_proto::crypto::{DuplicateKey, Gate, PeerConfig, Reject, Responder, Screened};
use braid_proto::{RecoveryKind, Role, SchedulerKind, SealedSession, Session};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::Duration;
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, oneshot};

/// Handshake datagrams waiting for the coordinator; beyond this they are dropped as rate limited.
/// Room for a fleet of a thousand joining at once (WireGuard's Linux module queues 4,096): above
/// `handshake_load` initiations a second each costs the coordinator only a MAC check and a cookie
/// reply, and one dropped here costs its vehicle a second before it asks again. At most about 1 MB
/// (the datagrams are copied out of the receive buffers).
const HANDSHAKE_QUEUE: usize = 4096;
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

struct Server {
    cfg: ServerConfig,
    path: PathBuf,
    mtu: u16,
    clock: Clock,
    /// The running sessions: id -> the vehicle's index. Session `id` runs on worker
    /// `worker_of(id)`, which is its vehicle's (`worker_of_peer`).
    sessions: HashMap<u32, usize>,
    /// The session of each vehicle (by index in the responder's list).
    by_peer: HashMap<usize, u32>,
    /// The listed vehicles by index (the responder's), and the routes of their `allowed_ips`;
    /// the workers read the copy in `shared`, replaced after every change.
    peers: PeerTable,
    shared: Arc<Shared>,
    /// Each worker's queue.
    workers: Vec<mpsc::Sender<Work>>,
    /// Where handshake replies leave (the first worker's socket: they all share the address).
    sock: Arc<UdpSocket>,
    /// The handshakes' counts (the workers keep the sessions').
    counters: Counters,
    /// The checks before a handshake's Diffie-Hellman, on the coordinator itself ([`Gate`]).
    gate: Gate,
    /// The handshake responder, lent to [`KeyExchange`] for each handshake that passed `gate`.
    responder: Arc<std::sync::Mutex<Responder>>,
    keyx: KeyExchange,
    /// Per-vehicle settings (`braid set --peer`), by `[[peer]]` name.
    overrides: HashMap<String, Override>,
}

/// Runs `braid server --config PATH` until SIGTERM.
pub fn run(path: &Path) -> anyhow::Result<()> {
    let cfg = ServerConfig::load(path)?;
    super::runtime_with(cfg.workers())?.block_on(run_async(path.to_path_buf(), cfg))
}

async fn run_async(path: PathBuf, cfg: ServerConfig) -> anyhow::Result<()> {
    let mtu = cfg.mtu()?;
    let n = cfg.workers();
    let (secret, peers) = cfg.keys()?;
    let mut seed = [0u8; 32];
    let mut gate_seed = [0u8; 32];
    for s in [&mut seed, &mut gate_seed] {
        getrandom::fill(s).map_err(|e| anyhow::anyhow!("OS random source: {e}"))?;
    }
    let responder = Responder::new(secret, peers, seed);
    let mut gate = Gate::new(&responder.public_key(), gate_seed);
    gate.set_load_threshold(cfg.handshake_load);
    let (tx, rx) = mpsc::channel(64);
    let (hs_tx, hs_rx) = mpsc::channel(HANDSHAKE_QUEUE);
    let (gone_tx, gone_rx) = mpsc::unbounded_channel();
    let socks: Vec<Arc<UdpSocket>> = uplink::listen_group(cfg.listen, n)
        .with_context(|| format!("listen: cannot bind {}", cfg.listen))?
        .into_iter()
        .map(Arc::new)
        .collect();
    let clock = Clock::new();
    // A queue of the TUN device per worker: each reads and writes its own.
    let tuns = match tun::open_queues(&cfg.tun, mtu, n, true) {
        Ok(t) => t,
        Err(e) => {
            tracing::warn!(error = %e, "tun: no segmentation offload; one write per passenger packet");
            tun::open_queues(&cfg.tun, mtu, n, false)?
        }
    };
    let peers = PeerTable::new(cfg.peer.clone());
    let shared = Arc::new(Shared {
        peers: ArcSwap::from_pointee(peers.clone()),
        idle_s: AtomicU64::new(cfg.session_idle_s),
        unroutable: AtomicU64::new(0),
        handed_over: AtomicU64::new(0),
        hs_dropped: AtomicU64::new(0),
        other_versions: AtomicU8::new(0),
    });
    let mut queues = Vec::with_capacity(n);
    let mut inboxes = Vec::with_capacity(n);
    for _ in 0..n {
        let (wtx, wrx) = mpsc::channel(WORK_QUEUE);
        queues.push(wtx);
        inboxes.push(wrx);
    }
    for (i, ((sock, inbox), tun)) in socks.iter().zip(inboxes).zip(&tuns).enumerate() {
        let receiver = uplink::BatchReceiver::new(sock).context("listen: setting up batched receive")?;
        let worker = Worker::new(i, shared.clone(), clock, sock.clone(), tun.clone(), mtu, gone_tx.clone())
            .context("listen: setting up batched send")?;
        super::worker::spawn_reader(i, sock.clone(), receiver, clock, queues.clone(), hs_tx.clone(), shared.clone());
        tokio::spawn(worker.run(inbox));
    }
    for tun in &tuns {
        let routing = shared.clone();
        tun::spawn_routed(tun.clone(), mtu, queues.clone(), move |packet| {
            let (w, peer) = super::worker::route_tun(&routing, &packet, n)?;
            Some((w, Work::Tun { peer, packet }))
        });
    }
    let _control = control::spawn(&cfg.control_path(), tx.clone())?;
    if let Some(addr) = cfg.metrics {
        metrics::spawn(addr, tx.clone()).await?;
    }
    spawn_signals(tx).context("installing signal handlers")?;
    tracing::info!(listen = %cfg.listen, mtu, tun = %cfg.tun.name, peers = cfg.peer.len(), workers = n, "server started");
    super::notify::notify_or_log("READY=1");
    let mut server = Server {
        cfg,
        path,
        mtu,
        clock,
        sessions: HashMap::new(),
        by_peer: HashMap::new(),
        peers,
        shared,
        workers: queues,
        sock: socks[0].clone(),
        counters: Counters::default(),
        gate,
        responder: Arc::new(std::sync::Mutex::new(responder)),
        keyx: KeyExchange::spawn().context("starting the handshake thread")?,
        overrides: HashMap::new(),
    };
    // This thread is the coordinator from here on, at the ordinary policy (the module's doc says
    // why not below the data path); the key exchanges' thread is below it.
    server.run(rx, hs_rx, gone_rx).await;
    tracing::info!("server stopped");
    Ok(())
}

/// The nice value of the handshakes' key-exchange thread: the lowest, below the data path.
const KEY_EXCHANGE_NICE: i32 = 19;

/// A job for the [`KeyExchange`] thread.
type Job = Box<dyn FnOnce() + Send>;

/// The thread that does the handshakes' Diffie-Hellman work, at nice [`KEY_EXCHANGE_NICE`] (the
/// module's doc says why). On the runtime's threads at the ordinary priority, a worker that an
/// established vehicle's packet woke was seen to wait 0.3 ms and more for its core, once per
/// handshake, while the coordinator finished an X25519 operation: with 1,000 vehicles joining, a
/// ping through the server waited up to 3-5 ms (the kernel's 4 ms tick at 250 Hz) where an idle
/// server answered in 0.3. At nice 19 the kernel hands the core to the woken worker at once.
struct KeyExchange {
    jobs: std::sync::mpsc::Sender<Job>,
}

impl KeyExchange {
    fn spawn() -> std::io::Result<Self> {
        let (jobs, rx) = std::sync::mpsc::channel::<Job>();
        std::thread::Builder::new().name("braid-keyx".into()).spawn(move || {
            // setpriority on one thread (its id): Linux's nice values are per thread.
            if let Err(e) = rustix::process::setpriority_process(Some(rustix::thread::gettid()), KEY_EXCHANGE_NICE) {
                tracing::warn!(error = %e, "handshake thread: cannot lower its priority; it competes with the data path");
            }
            for job in rx {
                // A job that panics (a bug) loses its handshake, not the thread: the coordinator
                // sees its answer dropped.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
            }
        })?;
        Ok(KeyExchange { jobs })
    }

    /// Runs `f` on the thread; `None` if it panicked (or the thread is gone).
    async fn run<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
        let (tx, rx) = oneshot::channel();
        self.jobs
            .send(Box::new(move || {
                let _ = tx.send(f());
            }))
            .ok()?;
        rx.await.ok()
    }
}

/// Locks the responder for the coordinator or the [`KeyExchange`] thread; one that panicked
/// holding it (a bug, logged by `Server::key_exchange`) leaves it usable, as the next
/// handshake needs it.
fn lock(responder: &std::sync::Mutex<Responder>) -> std::sync::MutexGuard<'_, Responder> {
    responder.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether to answer an initiation with a stale timestamp, given the peer's running session (id,
/// last authentic datagram) if any and the session the initiation asks to continue.
fn answer_stale(running: Option<(u32, braid_proto::Instant)>, wanted: u32, now: braid_proto::Instant) -> bool {
    match running {
        None => true,
        Some((id, last_rx)) => wanted == id || now.saturating_duration_since(last_rx) >= STALE_TIMESTAMP_IDLE,
    }
}

impl Server {
    async fn run(
        &mut self,
        mut rx: mpsc::Receiver<Input>,
        mut hs_rx: mpsc::Receiver<Input>,
        mut gone: mpsc::UnboundedReceiver<u32>,
    ) {
        loop {
            tokio::select! {
                biased;
                i = rx.recv() => match i {
                    Some(i) => if !self.handle(i).await { return },
                    None => return,
                },
                Some(id) = gone.recv() => self.forget(id),
                Some(i) = hs_rx.recv() => {
                    if let Input::Datagram { from, data, .. } = i {
                        self.handle_handshake(self.clock.now(), from, data).await;
                    }
                }
            }
        }
    }

    async fn handle(&mut self, input: Input) -> bool {
        match input {
            Input::Control(req, reply) => {
                let _ = reply.send(self.control(req).await);
            }
            Input::Reload => self.reload().await,
            Input::Shutdown => {
                super::notify::notify_or_log("STOPPING=1");
                return false;
            }
            Input::Tun(_) | Input::Datagram { .. } | Input::Net(_) | Input::Position(_) => {}
        }
        true
    }

    /// A worker's session `id` expired: its vehicle has none now.
    fn forget(&mut self, id: u32) {
        if let Some(peer) = self.sessions.remove(&id)
            && self.by_peer.get(&peer) == Some(&id)
        {
            self.by_peer.remove(&peer);
        }
    }

    /// Gives the workers the current list of vehicles and routes.
    fn publish(&self) {
        self.shared.peers.store(Arc::new(self.peers.clone()));
    }

    /// Sends `w` to worker `i` (false once the worker is gone: the server is stopping).
    async fn send(&self, i: usize, w: Work) -> bool {
        self.workers[i].send(w).await.is_ok()
    }

    /// Asks every worker (`make` builds each one's request) and collects their answers.
    async fn ask_all(&self, make: impl Fn() -> Ask) -> Vec<Answer> {
        let mut waiting = Vec::with_capacity(self.workers.len());
        for i in 0..self.workers.len() {
            let (tx, rx) = oneshot::channel();
            if self.send(i, Work::Ask(make(), tx)).await {
                waiting.push(rx);
            }
        }
        let mut answers = Vec::with_capacity(waiting.len());
        for rx in waiting {
            if let Ok(a) = rx.await {
                answers.push(a);
            }
        }
        answers
    }

    /// Asks the worker of the vehicle at `peer`.
    async fn ask(&self, peer: usize, ask: Ask) -> Answer {
        let (tx, rx) = oneshot::channel();
        if !self.send(worker_of_peer(peer, self.workers.len()), Work::Ask(ask, tx)).await {
            return Answer::default();
        }
        rx.await.unwrap_or_default()
    }

    /// A handshake initiation: a new session, a rekey of a running one, or a cookie reply.
    async fn handle_handshake(&mut self, now: braid_proto::Instant, from: std::net::SocketAddr, data: bytes::Bytes) {
        // The cheap checks here, at the ordinary priority (the gate refuses anything but an
        // initiation as malformed): under a flood of forged initiations each costs a MAC and a
        // cookie reply, and only those that pass wait for the key exchanges' thread (below the
        // data path), so a vehicle's retry with its cookie never queues behind them there.
        let mut out = [0u8; 256];
        let outcome = match self.gate.screen(now, from, &data, &mut out) {
            Ok(Screened::Pass) => match self.key_exchange(move |r| r.handle_screened(&data)).await {
                Some(outcome) => outcome,
                None => return,
            },
            Ok(Screened::CookieReply(n)) => {
                self.counters.cookie_replies += 1;
                self.counters.rejected.count(Reject::RateLimited);
                self.reply(&out[..n], from).await;
                return;
            }
            Err(r) => Err(r),
        };
        let p = match outcome {
            Ok(p) => p,
            Err(r) => {
                self.counters.rejected.count(r);
                tracing::debug!(%from, reason = %r, "handshake refused");
                return;
            }
        };
        let peer = p.peer;
        let name = self.name(peer).to_string();
        if !p.fresh {
            // Whether to answer an initiation whose timestamp is not newer than the peer's last
            // one ([`STALE_TIMESTAMP_IDLE`] says why): its worker knows when the running
            // session last heard from the vehicle.
            let running = self.ask(peer, Ask::Running { peer }).await.running;
            if !answer_stale(running, p.wanted, now) {
                self.counters.rejected.count(Reject::Replay);
                tracing::debug!(peer = %name, %from, "initiation not newer than the last one; its session is live");
                return;
            }
            tracing::info!(peer = %name, %from, "initiation older than the last one accepted (a clock went back?); answered");
        }
        let continued = p.wanted != 0 && self.sessions.get(&p.wanted) == Some(&peer);
        let id = if continued {
            p.wanted
        } else {
            let free = if self.sessions.len() >= self.cfg.max_sessions && !self.by_peer.contains_key(&peer) {
                None
            } else {
                self.fresh_id(peer)
            };
            let Some(id) = free else {
                self.counters.refused += 1;
                tracing::warn!(peer = %name, "session refused: max_sessions reached");
                return;
            };
            id
        };
        let suite = p.suite;
        let Some((response, out)) = self
            .key_exchange(move |r| {
                if !p.fresh && !continued {
                    // From now on the peer's initiations need only be newer than this one.
                    r.accept_stale(&p);
                }
                let mut out = [0u8; 256];
                let response = r.respond(now, p, id, continued, &mut out);
                (response, out)
            })
            .await
        else {
            return;
        };
        let (n, keys) = match response {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!(peer = %name, error = %e, "cannot write the handshake response");
                return;
            }
        };
        self.counters.handshakes += 1;
        // The worker has the session (or its new keys) before the vehicle has the response, so
        // the vehicle's first datagram under them finds it: the readers queue that datagram
        // behind this.
        let worker = worker_of(id, self.workers.len());
        if continued {
            self.send(worker, Work::Rekey { id, keys: Box::new(keys) }).await;
            self.reply(&out[..n], from).await;
            tracing::info!(peer = %name, session = format_args!("{id:04x}"), %from, "session rekeyed");
            return;
        }
        // A new session; the peer's old one (a vehicle that restarted) goes: the worker, the
        // same one, replaces it.
        if let Some(old) = self.by_peer.insert(peer, id) {
            self.sessions.remove(&old);
        }
        self.sessions.insert(id, peer);
        let mut session = self.new_session(id, &name, now);
        // The server meters its own sends on the vehicle's uplinks, applied as it learns them.
        if let Some(entry) = self.peers.entry(peer) {
            meter(&mut session, entry);
        }
        let session = SealedSession::new(session, &keys, now);
        let weights = self.overrides.get(&name).map(|o| o.weights.clone()).unwrap_or_default();
        self.send(worker, Work::Adopt(Box::new(Adopted { id, peer, session, weights }))).await;
        self.reply(&out[..n], from).await;
        tracing::info!(peer = %name, session = format_args!("{id:04x}"), worker, %from, cipher = %suite, "new session");
    }

    /// Runs `f` on the responder on the [`KeyExchange`] thread and waits for it; `None` (logged)
    /// if it panicked there.
    async fn key_exchange<T: Send + 'static>(&self, f: impl FnOnce(&mut Responder) -> T + Send + 'static) -> Option<T> {
        let responder = self.responder.clone();
        let r = self.keyx.run(move || f(&mut lock(&responder))).await;
        if r.is_none() {
            tracing::error!("a handshake's computation failed (a bug: please report it); the handshake is dropped");
        }
        r
    }

    /// The responder, for the coordinator's own changes (vehicles, load threshold); the guard is
    /// never held across an await, so a handshake's computation never waits for it.
    fn responder(&self) -> std::sync::MutexGuard<'_, Responder> {
        lock(&self.responder)
    }

    /// Sends a handshake reply.
    async fn reply(&mut self, d: &[u8], to: std::net::SocketAddr) {
        if self.sock.send_to(d, to).await.is_err() {
            self.counters.send_errors += 1;
        }
    }

    /// A session id for a new session of the vehicle at `peer` ([`fresh_id`]).
    fn fresh_id(&self, peer: usize) -> Option<u32> {
        let (prefix, mask) = self.cfg.session_ids();
        let n = self.workers.len();
        fresh_id(prefix, mask, n, worker_of_peer(peer, n), |id| self.sessions.contains_key(&id))
    }

    fn new_session(&self, id: u32, peer: &str, now: braid_proto::Instant) -> Session {
        let scfg = super::session_config(Role::Server, id, &self.cfg.session, self.mtu);
        let mut session = Session::new(scfg, &[], now);
        if let Some(o) = self.overrides.get(peer) {
            o.apply(&mut session);
        }
        session
    }

    async fn control(&mut self, req: Request) -> Response {
        let peer = match req.peer() {
            Some(name) if self.peers.find(name).is_none() => {
                return Response::err(format!("no vehicle {name:?} in [[peer]]"));
            }
            p => p.map(str::to_string),
        };
        // The sessions the request concerns: the named vehicle's, or all.
        let which = match peer.as_deref().and_then(|n| self.peers.find(n)) {
            Some(i) => Which::Peer(i),
            None => Which::All,
        };
        match req {
            Request::PeerAdd { entry } => self.add_peer(*entry),
            Request::PeerRemove { name } => self.remove_peer(&name).await,
            Request::Status { .. } => {
                let mut status = self.status().await;
                if let Some(n) = peer.as_deref() {
                    status.sessions.retain(|s| s.peer == n);
                }
                Response { ok: true, error: None, status: Some(status) }
            }
            Request::SetWeight { link, weight, .. } => {
                // By number (link<N> or N), or by the name the vehicles report for their uplinks.
                let n = match link.trim_start_matches("link").parse::<u8>() {
                    Ok(n) => Some(n),
                    Err(_) => {
                        let named = self.ask_all(|| Ask::LinksNamed { which, name: link.clone() }).await;
                        let mut ids = named.into_iter().flat_map(|a| a.links);
                        let first = ids.next();
                        // One number for the name: a name that means different links on
                        // different vehicles is refused without --peer.
                        first.filter(|f| ids.all(|o| o == *f))
                    }
                };
                let Some(n) = n else {
                    return Response::err(format!(
                        "no uplink {link:?}: use link<N>, N, or the name a connected vehicle reports (with --peer if it means different links on different vehicles)"
                    ));
                };
                let hits: usize =
                    self.ask_all(|| Ask::SetWeight { which, link: n, weight }).await.iter().map(|a| a.hits).sum();
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
                let kind = name.0;
                self.ask_all(|| Ask::SetRecovery { which, kind, keep: HashSet::new() }).await;
                match peer {
                    Some(p) => self.overrides.entry(p).or_default().recovery = Some(kind),
                    None => {
                        self.cfg.session.recovery = Some(name);
                        self.overrides.values_mut().for_each(|o| o.recovery = None);
                    }
                }
                Response::ok()
            }
            Request::SetScheduler { name, .. } => {
                let kind = name.0;
                self.ask_all(|| Ask::SetScheduler { which, kind, keep: HashSet::new() }).await;
                match peer {
                    Some(p) => self.overrides.entry(p).or_default().scheduler = Some(kind),
                    None => {
                        self.cfg.session.scheduler = Some(name);
                        self.overrides.values_mut().for_each(|o| o.scheduler = None);
                    }
                }
                Response::ok()
            }
        }
    }

    /// The whole server: the workers' sessions and counters with the handshakes'.
    async fn status(&self) -> DaemonStatus {
        let mut c = self.counters;
        let mut sessions = Vec::with_capacity(self.sessions.len());
        for a in self.ask_all(|| Ask::Status).await {
            c += a.counters;
            sessions.extend(a.sessions);
        }
        sessions.sort_by_key(|s| s.id);
        c.unroutable += self.shared.unroutable.load(Ordering::Relaxed);
        c.rejected.rate_limited += self.shared.hs_dropped.load(Ordering::Relaxed);
        DaemonStatus {
            role: "server".into(),
            uptime_s: self.clock.now().as_secs_f64(),
            rejected: c.rejected.into(),
            handshakes: c.handshakes,
            cookie_replies: c.cookie_replies,
            unknown_session_hints: c.hints,
            garbage_datagrams: c.garbage,
            sessions_refused: c.refused,
            sessions_expired: c.expired,
            unroutable_packets: c.unroutable,
            passenger_dropped: super::status::PassengerDropped {
                source_not_allowed: c.passenger.source_not_allowed,
                not_ip: c.passenger.not_ip,
            },
            send_errors: c.send_errors,
            handed_over: self.shared.handed_over.load(Ordering::Relaxed),
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
    /// `private_key`, `tun`, `metrics` and `workers` take a restart.
    async fn reload(&mut self) {
        let loaded = ServerConfig::load(&self.path).and_then(|c| {
            let (_, keys) = c.keys().with_context(|| format!("in {}", self.path.display()))?;
            Ok((c, keys))
        });
        let (c, keys) = match loaded {
            Ok(x) => x,
            Err(e) => {
                tracing::error!(error = %crate::cli::error_chain(&e), "reload refused; keeping the running settings");
                return;
            }
        };
        let changes = plan(&self.peers, &self.responder(), &c.peer, &keys);
        let (removed, changed, added) = (changes.removed.len(), changes.changed.len(), changes.added.len());
        if !changes.is_empty() {
            self.apply_peer_changes(changes).await;
        }
        let peers = &self.peers;
        self.overrides.retain(|name, _| peers.find(name).is_some());
        // The vehicles whose `braid set --peer` setting outranks the file's.
        let kept = |pick: fn(&Override) -> bool| -> HashSet<usize> {
            self.overrides.iter().filter(|(_, o)| pick(o)).filter_map(|(n, _)| self.peers.find(n)).collect()
        };
        let old = &self.cfg.session;
        if c.session.recovery() != old.recovery() {
            let (kind, keep) = (c.session.recovery(), kept(|o| o.recovery.is_some()));
            self.ask_all(|| Ask::SetRecovery { which: Which::All, kind, keep: keep.clone() }).await;
        }
        let old = &self.cfg.session;
        if c.session.scheduler() != old.scheduler() {
            let (kind, keep) = (c.session.scheduler(), kept(|o| o.scheduler.is_some()));
            self.ask_all(|| Ask::SetScheduler { which: Which::All, kind, keep: keep.clone() }).await;
        }
        if c.session.aqm != self.cfg.session.aqm {
            let on = c.session.aqm;
            self.ask_all(|| Ask::SetAqm(on)).await;
        }
        if c.workers() != self.workers.len() {
            tracing::warn!(running = self.workers.len(), file = c.workers(), "workers changes at the next restart");
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
        self.gate.set_load_threshold(c.handshake_load);
        self.shared.idle_s.store(c.session_idle_s, Ordering::Relaxed);
        self.cfg.session = c.session;
        self.cfg.max_sessions = c.max_sessions;
        self.cfg.session_idle_s = c.session_idle_s;
    }

    /// Removes, changes and adds vehicles; the sessions of the others are not touched.
    async fn apply_peer_changes(&mut self, changes: PeerChanges) {
        for i in changes.removed {
            self.end_vehicle(i).await;
        }
        for (i, entry) in changes.changed {
            if self.by_peer.contains_key(&i) {
                // Uplinks no longer listed go back to unmetered.
                let before = self.peers.entry(i).map_or(0, |e| e.uplink.len());
                let meterings = entry.uplink.iter().map(|u| u.metering()).collect();
                self.ask(i, Ask::Meter { peer: i, meterings, before }).await;
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
        self.publish();
    }

    /// Lists a vehicle: it may join at once, and the server routes its `allowed_ips` to it
    /// (published to the workers by the caller).
    fn admit(&mut self, entry: PeerEntry, keys: PeerConfig) -> Result<usize, DuplicateKey> {
        let i = self.responder().add_peer(keys)?;
        tracing::info!(peer = %entry.name, allowed_ips = ?entry.allowed_ips.0.iter().map(ToString::to_string).collect::<Vec<_>>(), "vehicle added");
        self.peers.set(i, entry);
        Ok(i)
    }

    /// Unlists the vehicle at index `i`: its session ends at once (its next datagram gets an
    /// unknown-session hint, and its initiations are refused), its routes go.
    async fn end_vehicle(&mut self, i: usize) {
        self.responder().remove_peer(i);
        let name = self.peers.remove(i).map(|e| e.name).unwrap_or_default();
        self.publish();
        let session = self.by_peer.remove(&i).and_then(|id| self.sessions.remove(&id).map(|_| id));
        if let Some(id) = session {
            self.send(worker_of(id, self.workers.len()), Work::End { id }).await;
        }
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
            return Response::err(format!("peer {name:?}: {}", crate::cli::error_chain(&e)));
        }
        let keys = match entry.keys() {
            Ok(k) => k,
            Err(e) => return Response::err(format!("peer {name:?}: preshared_key: {}", crate::cli::error_chain(&e))),
        };
        let added = self.admit(entry, keys);
        self.publish();
        match added {
            Ok(_) => Response::ok(),
            Err(e) => Response::err(format!("peer {name:?}: {e}")),
        }
    }

    /// `braid peer remove`.
    async fn remove_peer(&mut self, name: &str) -> Response {
        let Some(i) = self.peers.find(name) else { return Response::err(format!("no vehicle {name:?} in [[peer]]")) };
        self.end_vehicle(i).await;
        self.overrides.remove(name);
        Response::ok()
    }
}

/// A random session id not `taken` (never 0: a client asks for 0 when it wants a new one), in
/// the server's part of the id space (`prefix | low`, `low` within `mask`: `server_id` in the
/// high bits, so that a load balancer can route by it) and on `worker` of `workers` (`id %
/// workers`). `max_sessions` is at most half the server's part, so a random draw is free at least
/// half the time when the vehicles spread evenly over the workers; `None` only when the worker's
/// share is full.
fn fresh_id(prefix: u32, mask: u32, workers: usize, worker: usize, taken: impl Fn(u32) -> bool) -> Option<u32> {
    let free = |id: u32| id != 0 && worker_of(id, workers) == worker && !taken(id);
    for _ in 0..64 * workers {
        let mut b = [0u8; 4];
        // Without OS randomness ids are still unique (checked below), only guessable, and a
        // guessed id gains nothing without the session's keys.
        let _ = getrandom::fill(&mut b);
        let id = prefix | (u32::from_le_bytes(b) & mask);
        if free(id) {
            return Some(id);
        }
    }
    (0..=mask).map(|low| prefix | low).find(|id| free(*id))
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
    fn fresh_ids_land_on_the_vehicles_worker_in_the_servers_part() {
        // server_id 3 of 4 bits: ids 0x3000..=0x3fff.
        let (prefix, mask) = (0x3000, 0x0fff);
        for workers in 1..=3 {
            for worker in 0..workers {
                let mut taken = HashSet::new();
                for _ in 0..200 {
                    let id = fresh_id(prefix, mask, workers, worker, |id| taken.contains(&id)).expect("a free id");
                    assert_eq!(id & !mask, prefix, "{id:#x}");
                    assert_eq!(worker_of(id, workers), worker, "{id:#x}");
                    assert!(id != 0 && taken.insert(id), "{id:#x} handed out twice");
                }
            }
        }
        // A worker's share full: none, rather than an id of another worker or a reused one.
        let (prefix, mask) = (0, 0x0f);
        let taken: HashSet<u32> = (0..=mask).filter(|id| worker_of(*id, 2) == 1).collect();
        assert_eq!(fresh_id(prefix, mask, 2, 1, |id| taken.contains(&id)), None);
        assert!(fresh_id(prefix, mask, 2, 0, |id| taken.contains(&id)).is_some_and(|id| id % 2 == 0 && id != 0));
    }

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
