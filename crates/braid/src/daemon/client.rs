//! `braid client`: the vehicle gateway. One session, one UDP socket per uplink.
//!
//! The session exists once a Noise IKpsk2 handshake with the server has finished
//! (braid_proto::crypto); the server names its id. The client rekeys on the running session every
//! `rekey_s`, and handshakes again when it hears nothing authentic for `rejoin_s` or the server
//! says it does not know the session (it restarted): the new session replaces the old one.

use super::config::{ClientConfig, UplinkConfig};
use super::control::{Request, Response};
use super::netwatch::{IfChange, IfState};
use super::status::{DaemonStatus, session_status};
use super::{Clock, Input, control, metrics, netwatch, spawn_signals, tun, uplink};
use anyhow::Context;
use braid_proto::crypto::{Initiator, InitiatorEvent, Reject, RejectCounts, SecureChannel, TAG_LEN};
use braid_proto::wire::{Header, PacketType};
use braid_proto::{LinkConfig, LinkId, RecoveryKind, Role, SchedulerKind, Session, SessionConfig};
use bytes::Bytes;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::Instrument;
use tun_rs::AsyncDevice;

/// One configured uplink and its socket, if its interface is usable.
struct Uplink {
    cfg: UplinkConfig,
    id: LinkId,
    socket: Option<Arc<UdpSocket>>,
    /// Datagrams waiting to leave together through `socket` (GSO); there whenever `socket` is.
    batch: Option<uplink::GsoBatch>,
    reader: Option<JoinHandle<()>>,
    generation: u64,
    ifstate: Option<IfState>,
}

impl Uplink {
    fn close(&mut self) {
        if let Some(r) = self.reader.take() {
            r.abort();
        }
        self.socket = None;
        self.batch = None;
    }
}

/// Sends what uplink `idx` has batched; 1 if that failed (for the error counter), else 0.
async fn finish_batch(uplinks: &mut [Uplink], idx: Option<usize>) -> u64 {
    let Some(up) = idx.and_then(|i| uplinks.get_mut(i)) else { return 0 };
    let (Some(sock), Some(batch)) = (up.socket.as_ref(), up.batch.as_mut()) else { return 0 };
    match batch.finish(sock).await {
        Ok(()) => 0,
        Err(e) => {
            tracing::trace!(uplink = %up.cfg.name, error = %e, "send failed");
            1
        }
    }
}

/// How long an initiation waits for its response before the next one (on the next uplink).
const HANDSHAKE_RETRY: Duration = Duration::from_secs(1);

/// A session keyed by a finished handshake.
struct Keyed {
    session: Session,
    channel: SecureChannel,
}

/// The client's state, owned by its loop.
struct Client {
    path: PathBuf,
    clock: Clock,
    cfg: ClientConfig,
    mtu: u16,
    keyed: Option<Keyed>,
    initiator: Initiator,
    /// When the pending initiation was sent.
    initiated_at: Option<braid_proto::Instant>,
    /// The uplink the next initiation goes on (rotates, so a dead uplink does not stall set-up).
    next_hs_link: usize,
    uplinks: Vec<Uplink>,
    tun: Arc<AsyncDevice>,
    server: SocketAddr,
    buf: Vec<u8>,
    scratch: Vec<u8>,
    tx: mpsc::Sender<Input>,
    send_errors: u64,
    garbage: u64,
    rejected: RejectCounts,
    handshakes: u64,
    hints: u64,
}

/// Runs `braid client --config PATH` until SIGTERM.
pub fn run(path: &Path) -> anyhow::Result<()> {
    let cfg = ClientConfig::load(path)?;
    super::runtime()?.block_on(run_async(path.to_path_buf(), cfg))
}

fn link_config(i: usize, u: &UplinkConfig, server: SocketAddr) -> LinkConfig {
    let mut l = LinkConfig::new(LinkId(i as u8), Some(server), u.up_kbps * 1e3, u.down_kbps * 1e3);
    l.weight = u.weight;
    l.metering = u.metering();
    l
}

/// Wall-clock nanoseconds since the Unix epoch: the handshake's timestamp (WireGuard's TAI64N).
fn wall_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

async fn run_async(path: PathBuf, cfg: ClientConfig) -> anyhow::Result<()> {
    let mtu = cfg.mtu()?;
    let server = cfg.server_addr()?;
    let keys = cfg.keys()?;
    // The handshake's randomness, drawn from the OS here: the daemon may, the engine must not.
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(|e| anyhow::anyhow!("OS random source: {e}"))?;
    let initiator = Initiator::new(keys.secret, keys.server, keys.psk, cfg.cipher(), seed);
    let clock = Clock::new();

    let (tx, rx) = mpsc::channel(4096);
    let tun = tun::open(&cfg.tun, mtu)?;
    tun::spawn_reader(tun.clone(), mtu, tx.clone());
    let _control = control::spawn(&cfg.control_path(), tx.clone())?;
    if let Some(addr) = cfg.metrics {
        metrics::spawn(addr, tx.clone()).await?;
    }
    spawn_signals(tx.clone()).context("installing signal handlers")?;
    netwatch::spawn(cfg.uplink.iter().map(|u| u.interface.clone()).collect(), tx.clone());
    tracing::info!(%server, mtu, tun = %cfg.tun.name, cipher = %cfg.cipher(), "client started");

    let uplinks = cfg
        .uplink
        .iter()
        .enumerate()
        .map(|(i, u)| Uplink {
            cfg: u.clone(),
            id: LinkId(i as u8),
            socket: None,
            batch: None,
            reader: None,
            generation: 0,
            ifstate: None,
        })
        .collect();
    let buf = vec![0u8; usize::from(mtu) + braid_proto::wire::MAX_CARRIER_OVERHEAD + TAG_LEN];
    let mut client = Client {
        path,
        clock,
        cfg,
        mtu,
        keyed: None,
        initiator,
        initiated_at: None,
        next_hs_link: 0,
        uplinks,
        tun,
        server,
        buf,
        scratch: Vec::with_capacity(65536),
        tx,
        send_errors: 0,
        garbage: 0,
        rejected: RejectCounts::default(),
        handshakes: 0,
        hints: 0,
    };
    let span = tracing::info_span!("client", server = %server);
    client.run(rx).instrument(span).await;
    for u in &mut client.uplinks {
        u.close();
    }
    tracing::info!("client stopped");
    Ok(())
}

impl Client {
    async fn run(&mut self, mut rx: mpsc::Receiver<Input>) {
        let mut idle_spins = 0u32;
        loop {
            let engine = self.keyed.as_ref().and_then(|k| k.session.poll_timeout());
            let next = match (engine, self.handshake_due()) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let deadline = next.map(|t| self.clock.tokio_instant(t));
            let first = tokio::select! {
                i = rx.recv() => match i { Some(i) => Some(i), None => return },
                _ = sleep_until(deadline) => None,
            };
            let inputs = super::queued_batch(first, &mut rx);
            let had_input = !inputs.is_empty();
            for input in inputs {
                if !self.handle(input) {
                    return;
                }
            }
            let now = self.clock.now();
            if let Some(k) = self.keyed.as_mut()
                && k.session.poll_timeout().is_some_and(|t| t <= now)
            {
                k.session.handle_timeout(now);
            }
            if self.handshake_due().is_some_and(|t| t <= now) {
                self.initiate(now).await;
            }
            let progressed = self.flush().await;
            // A timer that stays due without anything to do would spin: yield a little.
            idle_spins = if had_input || progressed { 0 } else { idle_spins + 1 };
            if idle_spins > 16 {
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
        }
    }

    /// Handles one input; false to stop.
    fn handle(&mut self, input: Input) -> bool {
        let now = self.clock.now();
        match input {
            Input::Tun(p) => match self.keyed.as_mut() {
                Some(k) => {
                    if let Err(e) = k.session.handle_tun_packet(now, &p) {
                        tracing::debug!(error = %e, "passenger packet refused");
                    }
                }
                None => tracing::trace!("no session yet: passenger packet dropped"),
            },
            Input::Datagram { uplink, from, data, at } => {
                let Some(up) = self.uplinks.get(uplink) else { return true };
                let id = up.id;
                match Header::parse(&data) {
                    Err(_) => self.rejected.count(Reject::Malformed),
                    Ok((h, _)) if h.ptype == PacketType::Handshake => self.on_handshake(now, &data),
                    Ok(_) => {
                        let Some(k) = self.keyed.as_mut() else {
                            self.rejected.count(Reject::UnknownSession);
                            return true;
                        };
                        // The engine gets the kernel's receive time (its estimators time
                        // arrivals); the crypto layer's timers run on the loop's now.
                        if let Err(r) = k.channel.open(now, &data, &mut self.scratch) {
                            self.rejected.count(r);
                            tracing::trace!(%from, reason = %r, "datagram rejected");
                        } else if let Err(e) = k.session.handle_datagram(at, Some(id), from, &self.scratch) {
                            self.garbage += 1;
                            tracing::debug!(%from, error = %e, "authentic datagram refused by the engine");
                        }
                    }
                }
            }
            Input::Control(req, reply) => {
                let _ = reply.send(self.control(req));
            }
            Input::Net(change) => self.on_net(change),
            Input::Reload => self.reload(),
            Input::Shutdown => return false,
        }
        true
    }

    /// When the next initiation is due: a retry of a pending one, the first one, a rekey, or a
    /// rejoin after silence. `None` while no uplink has a socket.
    fn handshake_due(&self) -> Option<braid_proto::Instant> {
        if !self.uplinks.iter().any(|u| u.socket.is_some()) {
            return None;
        }
        if let Some(at) = self.initiated_at {
            return Some(at + HANDSHAKE_RETRY);
        }
        let Some(k) = self.keyed.as_ref() else { return Some(braid_proto::Instant::from_micros(0)) };
        let rekey = k.channel.keys_born() + Duration::from_secs(self.cfg.rekey_s);
        let rejoin = k.channel.last_authentic() + Duration::from_secs(self.cfg.rejoin_s);
        Some(rekey.min(rejoin))
    }

    /// Sends an initiation on the next uplink that has a socket.
    async fn initiate(&mut self, now: braid_proto::Instant) {
        let n = self.uplinks.len();
        let Some(i) = (0..n).map(|k| (self.next_hs_link + k) % n).find(|&i| self.uplinks[i].socket.is_some()) else {
            return;
        };
        self.next_hs_link = (i + 1) % n;
        let wanted = self.keyed.as_ref().map_or(0, |k| k.session.config().session_id);
        let id = self.uplinks[i].id;
        let mut out = [0u8; 256];
        let len = match self.initiator.initiate(now, wall_ns(), wanted, id, &mut out) {
            Ok(len) => len,
            Err(e) => {
                tracing::error!(error = %e, "cannot write a handshake initiation");
                return;
            }
        };
        self.initiated_at = Some(now);
        tracing::debug!(uplink = %self.uplinks[i].cfg.name, wanted = format_args!("{wanted:04x}"), "handshake initiation");
        if let Some(sock) = self.uplinks[i].socket.clone()
            && sock.send_to(&out[..len], self.server).await.is_err()
        {
            self.send_errors += 1;
        }
    }

    /// A handshake datagram from the server.
    fn on_handshake(&mut self, now: braid_proto::Instant, data: &[u8]) {
        match self.initiator.handle(now, data) {
            Err(r) => self.rejected.count(r),
            Ok(InitiatorEvent::CookieStored) => {
                // The server is under load: the next initiation (on the retry timer) carries mac2.
                tracing::info!("cookie received; retrying the handshake with it");
            }
            Ok(InitiatorEvent::UnknownSession(id)) => {
                let ours = self.keyed.as_ref().map(|k| k.session.config().session_id);
                if ours != Some(id) {
                    self.rejected.count(Reject::Malformed);
                    return;
                }
                self.hints += 1;
                if self.initiated_at.is_none() {
                    // Due at once: the loop sends it after this batch.
                    self.initiated_at = Some(now.saturating_sub(HANDSHAKE_RETRY));
                    tracing::info!(
                        session = format_args!("{id:04x}"),
                        "server does not know the session; joining again"
                    );
                }
            }
            Ok(InitiatorEvent::Established(e)) => {
                self.handshakes += 1;
                self.initiated_at = None;
                if let Some(k) =
                    self.keyed.as_mut().filter(|k| e.continued && k.session.config().session_id == e.session)
                {
                    k.channel.rekey(&e.keys, now, true);
                    tracing::info!(session = format_args!("{:04x}", e.session), "session rekeyed");
                    return;
                }
                let session = self.new_session(e.session, now);
                self.keyed = Some(Keyed { session, channel: SecureChannel::new(&e.keys, now) });
                tracing::info!(session = format_args!("{:04x}", e.session), cipher = %e.keys.suite, "session established");
            }
        }
    }

    fn new_session(&self, id: u32, now: braid_proto::Instant) -> Session {
        let mut seed = [0u8; 8];
        // A failed OS RNG only makes coding choices predictable, which is harmless here.
        let _ = getrandom::fill(&mut seed);
        let mut scfg = SessionConfig::new(Role::Client);
        scfg.session_id = id;
        scfg.seed = u64::from_le_bytes(seed);
        self.cfg.session.configure(&mut scfg);
        scfg.max_packet = usize::from(self.mtu);
        let links: Vec<LinkConfig> =
            self.cfg.uplink.iter().enumerate().map(|(i, u)| link_config(i, u, self.server)).collect();
        Session::new(scfg, &links, now)
    }

    /// Writes out everything the session has to send and deliver. True if anything went out.
    async fn flush(&mut self) -> bool {
        let mut any = false;
        let Some(k) = self.keyed.as_mut() else { return false };
        // Consecutive datagrams on one uplink leave together (GSO); a change of uplink sends
        // what the previous one batched, and whatever is left goes before the loop waits again.
        let mut batching: Option<usize> = None;
        // The clock is read per datagram: the engine stamps each one with `now` and the peer's
        // estimators compare the span of those stamps with the span of the arrivals (PluriBus
        // 5.2's send rate). One `now` for a whole flush, which takes a while when many datagrams
        // go out, squeezes the stamps together, so the link can look outpaced by its sender and
        // its capacity estimate fall.
        while let Some(t) = k.session.poll_transmit(self.clock.now(), &mut self.buf) {
            any = true;
            let dest = t.destination.unwrap_or(self.server);
            let idx = usize::from(t.link.0);
            if batching.is_some_and(|b| b != idx) {
                self.send_errors += finish_batch(&mut self.uplinks, batching.take()).await;
            }
            let Some(up) = self.uplinks.get_mut(idx) else {
                self.send_errors += 1;
                continue;
            };
            let (Some(sock), Some(batch)) = (up.socket.as_ref(), up.batch.as_mut()) else {
                // The interface is gone: the datagram is lost like on a dead modem, and the engine
                // moves the data elsewhere once it notices.
                self.send_errors += 1;
                continue;
            };
            let Ok(n) = k.channel.seal(&mut self.buf, t.len) else {
                // The buffer has room for the tag (sized at start): cannot happen; drop, not panic.
                self.send_errors += 1;
                continue;
            };
            batching = Some(idx);
            if let Err(e) = batch.push(sock, dest, &self.buf[..n]).await {
                self.send_errors += 1;
                tracing::trace!(link = %t.link, error = %e, "send failed");
            }
        }
        self.send_errors += finish_batch(&mut self.uplinks, batching).await;
        while let Some(p) = k.session.poll_deliver() {
            any = true;
            deliver(&self.tun, &p).await;
        }
        while let Some(e) = k.session.poll_event() {
            tracing::info!(event = ?e, "session event");
        }
        any
    }

    /// An uplink's interface changed: (re)bind or drop its socket.
    fn on_net(&mut self, change: IfChange) {
        for (i, up) in self.uplinks.iter_mut().enumerate() {
            if up.cfg.interface != change.name {
                continue;
            }
            let _s = tracing::info_span!("uplink", name = %up.cfg.name, interface = %up.cfg.interface).entered();
            let old = std::mem::replace(&mut up.ifstate, change.state.clone());
            let Some(new) = change.state.as_ref().filter(|s| s.usable()) else {
                if up.socket.is_some() {
                    tracing::warn!(state = ?change.state, "uplink lost; waiting for it to come back");
                } else {
                    tracing::info!(state = ?change.state, "waiting for the uplink's interface");
                }
                up.close();
                continue;
            };
            let same = old.as_ref().is_some_and(|o| o.ifindex == new.ifindex && o.addrs == new.addrs);
            if up.socket.is_some() && same {
                continue;
            }
            up.close();
            let bound = uplink::bind_to_interface(&up.cfg.interface).and_then(|sock| {
                let rx = uplink::BatchReceiver::new(&sock)?;
                let batch = uplink::GsoBatch::new(&sock)?;
                Ok((sock, rx, batch))
            });
            match bound {
                Ok((sock, rx, batch)) => {
                    let sock = Arc::new(sock);
                    up.generation += 1;
                    up.reader = Some(uplink::spawn_reader(sock.clone(), rx, self.clock, i, self.tx.clone()));
                    up.batch = Some(batch);
                    up.socket = Some(sock);
                    tracing::info!(addrs = ?new.addrs, generation = up.generation, "uplink socket bound");
                }
                Err(e) => tracing::warn!(error = %e, "cannot set up the uplink socket; will retry on the next change"),
            }
        }
    }

    fn find_link(&self, name: &str) -> Option<LinkId> {
        self.uplinks
            .iter()
            .find(|u| u.cfg.name == name || u.id.to_string() == name || u.id.0.to_string() == name)
            .map(|u| u.id)
    }

    fn control(&mut self, req: Request) -> Response {
        match req {
            Request::Status => Response { ok: true, error: None, status: Some(self.status()) },
            Request::SetWeight { link, weight } => match self.find_link(&link) {
                Some(id) => {
                    if let Some(u) = self.uplinks.get_mut(usize::from(id.0)) {
                        u.cfg.weight = weight;
                    }
                    if let Some(c) = self.cfg.uplink.get_mut(usize::from(id.0)) {
                        c.weight = weight;
                    }
                    if let Some(k) = self.keyed.as_mut() {
                        k.session.set_link_weight(id, weight);
                    }
                    Response::ok()
                }
                None => Response::err(format!("no uplink named {link:?}")),
            },
            Request::SetRecovery { name } => match name.parse::<RecoveryKind>() {
                Ok(r) => {
                    self.cfg.session.recovery = Some(super::config::Recovery(r));
                    if let Some(k) = self.keyed.as_mut() {
                        k.session.set_recovery(r);
                    }
                    tracing::info!(recovery = %r, "recovery switched");
                    Response::ok()
                }
                Err(e) => Response::err(e),
            },
            Request::SetScheduler { name } => match name.parse::<SchedulerKind>() {
                Ok(s) => {
                    self.cfg.session.scheduler = Some(super::config::Scheduler(s));
                    if let Some(k) = self.keyed.as_mut() {
                        k.session.set_scheduler(s);
                    }
                    tracing::info!(scheduler = %s, "scheduler switched");
                    Response::ok()
                }
                Err(e) => Response::err(e),
            },
        }
    }

    fn status(&self) -> DaemonStatus {
        let now = self.clock.now();
        let sessions = self
            .keyed
            .iter()
            .map(|k| {
                let mut s = session_status(&k.session, now, |id| match self.uplinks.get(usize::from(id.0)) {
                    Some(u) => (u.cfg.name.clone(), Some(u.cfg.interface.clone()), u.socket.is_some()),
                    None => (id.to_string(), None, false),
                });
                s.peer = self.server.to_string();
                s.cipher = k.channel.suite().to_string();
                s.key_age_s = now.saturating_duration_since(k.channel.keys_born()).as_secs_f64();
                s
            })
            .collect();
        DaemonStatus {
            role: "client".into(),
            uptime_s: now.as_secs_f64(),
            garbage_datagrams: self.garbage,
            send_errors: self.send_errors,
            rejected: self.rejected.into(),
            handshakes: self.handshakes,
            unknown_session_hints: self.hints,
            sessions,
            ..Default::default()
        }
    }

    /// SIGHUP: re-reads the file and applies the session settings, weights and metering; the rest (TUN,
    /// uplinks, server) needs a restart.
    fn reload(&mut self) {
        let cfg = match ClientConfig::load(&self.path) {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(error = format_args!("{e:#}"), "reload refused; keeping the running settings");
                return;
            }
        };
        if let Some(k) = self.keyed.as_mut() {
            cfg.session.apply(&mut k.session);
        }
        for u in &cfg.uplink {
            if let Some(id) = self.find_link(&u.name) {
                if let Some(k) = self.keyed.as_mut() {
                    k.session.set_link_weight(id, u.weight);
                    k.session.set_link_metering(id, u.metering());
                }
                if let Some(c) = self.cfg.uplink.get_mut(usize::from(id.0)) {
                    c.weight = u.weight;
                    c.coding_budget = u.coding_budget;
                    c.backup = u.backup;
                }
            }
        }
        self.cfg.session = cfg.session.clone();
        tracing::info!(
            recovery = %cfg.session.recovery(),
            scheduler = %cfg.session.scheduler(),
            aqm = cfg.session.aqm,
            "settings reloaded"
        );
    }
}

/// Sleeps until `deadline`, or forever without one.
pub(super) async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// Writes a passenger packet to the TUN device; a failure loses this packet only.
pub(super) async fn deliver(tun: &AsyncDevice, p: &Bytes) {
    if let Err(e) = tun.send(p).await {
        tracing::debug!(error = %e, "tun write failed");
    }
}
