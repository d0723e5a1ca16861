//! `braid client`: the vehicle gateway. One session, one UDP socket per uplink.
//!
//! The session exists once a Noise IKpsk2 handshake with the server has finished
//! (braid_proto::crypto); the server names its id. The client rekeys on the running session every
//! `rekey_s`, and handshakes again when it hears nothing authentic for `rejoin_s` or the server
//! says it does not know the session (it restarted): the new session replaces the old one. When
//! the server does not answer those handshakes either, the client moves to the next server of its
//! list, looking its name up again ([`super::servers`]).

use super::config::{ClientConfig, UplinkConfig};
use super::control::{Request, Response};
use super::netwatch::{IfChange, IfState};
use super::servers::{self, ServerChoice};
use super::status::{DaemonStatus, MonthlyUsage, session_status};
use super::usage::Usage;
use super::{Clock, Input, control, metrics, netwatch, spawn_signals, tun, uplink};
use anyhow::Context;
use braid_proto::crypto::{Initiator, InitiatorEvent, Reject, RejectCounts, TAG_LEN};
use braid_proto::wire::{Header, PacketType};
use braid_proto::{LinkConfig, LinkId, Role, SealedDatagramError, SealedSession, Session};
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
    /// The family of `socket` (true: IPv6).
    v6: bool,
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

/// How long the first initiation waits for its response before the next one (on the next
/// uplink): short, so a dead first uplink costs little.
const HANDSHAKE_RETRY: Duration = Duration::from_secs(1);
/// The longest wait between retries. Each retry doubles the wait up to this, so on an uplink
/// whose round trip exceeds a second (bufferbloated cellular, satellite) the retries do not
/// outpace the responses; those still come back to a pending initiation (the initiator keeps
/// [`braid_proto::crypto::MAX_PENDING`] of them), which is what lets such a handshake finish.
const HANDSHAKE_RETRY_MAX: Duration = Duration::from_secs(4);

/// The wait after the `sent`-th initiation since the last success (1, 2, 4, 4, ... s).
fn retry_interval(sent: u32) -> Duration {
    HANDSHAKE_RETRY.saturating_mul(1 << sent.saturating_sub(1).min(2)).min(HANDSHAKE_RETRY_MAX)
}

/// The client's state, owned by its loop.
struct Client {
    path: PathBuf,
    clock: Clock,
    cfg: ClientConfig,
    mtu: u16,
    keyed: Option<SealedSession>,
    initiator: Initiator,
    /// When the pending initiation was sent.
    initiated_at: Option<braid_proto::Instant>,
    /// The uplink the next initiation goes on (rotates, so a dead uplink does not stall set-up).
    next_hs_link: usize,
    /// Initiations sent since the last handshake finished (the retry backoff).
    hs_sent: u32,
    /// An uplink that just received a cookie: the next initiation goes on it, at once, with
    /// the cookie's mac2 (a server under load answers nothing else with a handshake).
    cookie_retry: Option<usize>,
    uplinks: Vec<Uplink>,
    tun: Arc<AsyncDevice>,
    /// The servers and the one in use.
    servers: ServerChoice,
    /// When the server in use is to be looked up (at start, and after it was given up).
    resolve_due: Option<braid_proto::Instant>,
    buf: Vec<u8>,
    tx: mpsc::Sender<Input>,
    send_errors: u64,
    garbage: u64,
    rejected: RejectCounts,
    /// Protocol versions of other braids already warned about ([`super::note_other_version`]).
    other_versions: std::sync::atomic::AtomicU8,
    handshakes: u64,
    hints: u64,
    /// The uplinks' monthly allowances (`monthly_budget`).
    usage: super::usage::Usage,
    /// When the allowances are next counted, and saved.
    usage_due: braid_proto::Instant,
    usage_saved: braid_proto::Instant,
    /// Location awareness (`[location]`), when on.
    location: Option<Location>,
}

/// How often the learned location map is written to disk (and at shutdown).
const MAP_SAVE_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

/// The client's location awareness: where the map lives, and the map between sessions.
struct Location {
    settings: braid_config::config::LocationSettings,
    cfg: braid_proto::location::LocationConfig,
    /// The map read at start, until the first session takes it; a new session takes its
    /// predecessor's.
    map: Option<braid_proto::location::QualityMap>,
    saved_at: braid_proto::Instant,
}

impl Location {
    /// Writes the map out, warning (not failing) if it cannot.
    fn save(&mut self, map: &braid_proto::location::QualityMap, now: braid_proto::Instant) {
        self.saved_at = now;
        if let Err(e) = super::gps::save_map(&self.settings.map, map, &self.cfg) {
            tracing::warn!(map = %self.settings.map.display(), error = %e, "location map not saved");
        }
    }
}

/// How often the uplinks' monthly usage is counted and their metering adjusted.
const USAGE_EVERY: Duration = Duration::from_secs(1);

/// Runs `braid client --config PATH` until SIGTERM.
pub fn run(path: &Path) -> anyhow::Result<()> {
    let cfg = ClientConfig::load(path)?;
    super::runtime()?.block_on(run_async(path.to_path_buf(), cfg))
}

fn link_config(i: usize, u: &UplinkConfig, server: Option<SocketAddr>) -> LinkConfig {
    let mut l = LinkConfig::new(LinkId(i as u8), server, u.up_kbps * 1e3, u.down_kbps * 1e3);
    l.weight = u.weight;
    l.metering = u.metering();
    // Checked when the file was read (braid-config), so always a valid name.
    l.name = braid_proto::wire::LinkName::new(&u.name).ok();
    l
}

/// Wall-clock nanoseconds since the Unix epoch: the handshake's timestamp (WireGuard's TAI64N).
fn wall_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

async fn run_async(path: PathBuf, cfg: ClientConfig) -> anyhow::Result<()> {
    let mtu = cfg.mtu()?;
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
    let location = cfg.location.clone().filter(|l| l.enabled).map(|settings| {
        let lcfg = braid_proto::location::LocationConfig { enabled: true, ..Default::default() };
        let map = super::gps::load_map(&settings.map, &lcfg);
        super::gps::spawn(settings.gpsd.clone(), tx.clone());
        Location { settings, cfg: lcfg, map: Some(map), saved_at: clock.now() }
    });
    let servers = ServerChoice::new(cfg.server.0.clone());
    tracing::info!(servers = ?servers.entries(), mtu, tun = %cfg.tun.name, cipher = %cfg.cipher(), "client started");
    super::notify::notify_or_log("READY=1");

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
            v6: false,
        })
        .collect();
    let buf = vec![0u8; usize::from(mtu) + braid_proto::wire::MAX_CARRIER_OVERHEAD + TAG_LEN];
    let usage = Usage::load(&cfg.state_dir(), &cfg.uplink, std::time::SystemTime::now());
    let mut client = Client {
        path,
        clock,
        cfg,
        mtu,
        keyed: None,
        initiator,
        initiated_at: None,
        next_hs_link: 0,
        hs_sent: 0,
        cookie_retry: None,
        uplinks,
        tun,
        servers,
        resolve_due: Some(braid_proto::Instant::ZERO),
        buf,
        tx,
        send_errors: 0,
        garbage: 0,
        rejected: RejectCounts::default(),
        other_versions: std::sync::atomic::AtomicU8::new(0),
        handshakes: 0,
        hints: 0,
        usage,
        usage_due: braid_proto::Instant::ZERO,
        usage_saved: braid_proto::Instant::ZERO,
        location,
    };
    let span = tracing::info_span!("client");
    client.run(rx).instrument(span).await;
    client.count_usage();
    client.usage.save();
    let now = client.clock.now();
    if let (Some(loc), Some(k)) = (client.location.as_mut(), client.keyed.as_ref()) {
        loc.save(k.engine().location_map(), now);
    }
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
            let engine = self.keyed.as_ref().and_then(|k| k.poll_timeout());
            let usage = self.usage.active().then_some(self.usage_due);
            let next = [engine, self.handshake_due(), self.resolve_due, usage].into_iter().flatten().min();
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
                && k.poll_timeout().is_some_and(|t| t <= now)
            {
                k.handle_timeout(now);
            }
            if self.resolve_due.is_some_and(|t| t <= now) {
                self.resolve(now).await;
            }
            if self.usage.active() && self.usage_due <= now {
                self.usage_due = now + USAGE_EVERY;
                self.count_usage();
                if now.saturating_duration_since(self.usage_saved) >= super::usage::SAVE_EVERY {
                    self.usage_saved = now;
                    self.usage.save();
                }
            }
            if self.handshake_due().is_some_and(|t| t <= self.clock.now()) {
                self.initiate(self.clock.now()).await;
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
                    if let Err(e) = k.handle_tun_packet(now, &p) {
                        tracing::debug!(error = %e, "passenger packet refused");
                    }
                }
                None => tracing::trace!("no session yet: passenger packet dropped"),
            },
            Input::Datagram { uplink, from, data, at } => {
                let Some(up) = self.uplinks.get(uplink) else { return true };
                let id = up.id;
                match Header::parse(&data) {
                    Err(e) => {
                        self.rejected.count(Reject::Malformed);
                        super::note_other_version(&self.other_versions, &e, from);
                    }
                    Ok((h, _)) if h.ptype == PacketType::Handshake => self.on_handshake(now, &data),
                    Ok(_) => {
                        let Some(k) = self.keyed.as_mut() else {
                            self.rejected.count(Reject::UnknownSession);
                            return true;
                        };
                        // The engine gets the kernel's receive time (its estimators time
                        // arrivals); the crypto layer's timers run on the loop's now.
                        match k.handle_datagram(now, at, Some(id), from, &data) {
                            Ok(()) => {}
                            Err(SealedDatagramError::Rejected(r)) => {
                                self.rejected.count(r);
                                tracing::trace!(%from, reason = %r, "datagram rejected");
                            }
                            Err(SealedDatagramError::Engine(e)) => {
                                self.garbage += 1;
                                tracing::debug!(%from, error = %e, "authentic datagram refused by the engine");
                            }
                        }
                    }
                }
            }
            Input::Control(req, reply) => {
                let _ = reply.send(self.control(req));
            }
            Input::Net(change) => self.on_net(change),
            Input::Position(pos) => {
                if let Some(k) = self.keyed.as_mut() {
                    k.handle_position(now, pos);
                    if let Some(loc) = self.location.as_mut().filter(|l| now >= l.saved_at + MAP_SAVE_EVERY) {
                        loc.save(k.engine().location_map(), now);
                    }
                }
            }
            Input::Reload => self.reload(),
            Input::Shutdown => {
                super::notify::notify_or_log("STOPPING=1");
                return false;
            }
        }
        true
    }

    /// When the next initiation is due: a retry of a pending one, the first one, a rekey, or a
    /// rejoin after silence. `None` while no uplink has a socket.
    fn handshake_due(&self) -> Option<braid_proto::Instant> {
        if !self.uplinks.iter().any(|u| u.socket.is_some()) {
            return None;
        }
        if self.cookie_retry.is_some() {
            return Some(braid_proto::Instant::from_micros(0));
        }
        if let Some(at) = self.initiated_at {
            return Some(at + retry_interval(self.hs_sent));
        }
        let Some(k) = self.keyed.as_ref() else { return Some(braid_proto::Instant::from_micros(0)) };
        let rekey = k.channel().keys_born() + Duration::from_secs(self.cfg.rekey_s);
        let rejoin = k.channel().last_authentic() + Duration::from_secs(self.cfg.rejoin_s);
        Some(rekey.min(rejoin))
    }

    /// Looks the server in use up. A new address (another server, or the name moved) ends the
    /// session with the old one and rebinds the uplinks' sockets for its family; a failed lookup
    /// moves on to the next server after [`servers::RESOLVE_RETRY`].
    async fn resolve(&mut self, now: braid_proto::Instant) {
        let entry = self.servers.entry().to_string();
        let known = self.uplinks.iter().filter_map(|u| u.ifstate.as_ref()).filter(|s| s.up);
        let (mut have_v4, mut have_v6) = (false, false);
        for s in known {
            have_v4 |= s.usable(false);
            have_v6 |= s.usable(true);
        }
        if !(have_v4 || have_v6) {
            // No interface reported yet: either family may do.
            (have_v4, have_v6) = (true, true);
        }
        match servers::resolve(&entry, have_v4, have_v6).await {
            Ok(addr) => {
                self.resolve_due = None;
                if !self.servers.handle_resolved(addr) {
                    tracing::info!(server = %entry, %addr, "server looked up again: same address");
                    return;
                }
                tracing::info!(server = %entry, %addr, "server address");
                if self.keyed.take().is_some() {
                    tracing::info!("the session with the previous server is left");
                }
                self.initiated_at = None;
                for i in 0..self.uplinks.len() {
                    self.bind_uplink(i);
                }
            }
            Err(e) => {
                self.servers.advance();
                tracing::warn!(
                    server = %entry,
                    error = %crate::cli::error_chain(&e),
                    next = %self.servers.entry(),
                    "cannot look the server up; trying again in {} s",
                    servers::RESOLVE_RETRY.as_secs()
                );
                self.resolve_due = Some(now + servers::RESOLVE_RETRY);
            }
        }
    }

    /// Sends an initiation on the uplink that just got a cookie, else on the next uplink that
    /// has a socket, or gives the server up when it left [`servers::FAILOVER_AFTER`] of them
    /// unanswered.
    async fn initiate(&mut self, now: braid_proto::Instant) {
        let Some(server) = self.servers.addr() else { return };
        let rejoin = Duration::from_secs(self.cfg.rejoin_s);
        let silent =
            self.keyed.as_ref().is_none_or(|k| now.saturating_duration_since(k.channel().last_authentic()) >= rejoin);
        if self.servers.handle_initiation(silent) {
            let gone = self.servers.entry().to_string();
            self.servers.advance();
            // Its session went with it: ask the next one for a new session (id 0), which a
            // load balancer in front of several servers may send to any live one, instead of
            // the old id, which it would route to the dead server again.
            if self.keyed.take().is_some() {
                tracing::info!("the session with the silent server is left");
            }
            tracing::warn!(
                server = %gone,
                next = %self.servers.entry(),
                "the server does not answer; moving to the next (looking its name up again)"
            );
            self.initiated_at = None;
            self.resolve_due = Some(now);
            return;
        }
        let n = self.uplinks.len();
        let cookie = self.cookie_retry.take().filter(|&i| self.uplinks.get(i).is_some_and(|u| u.socket.is_some()));
        let rotated = || (0..n).map(|k| (self.next_hs_link + k) % n).find(|&i| self.uplinks[i].socket.is_some());
        let Some(i) = cookie.or_else(rotated) else {
            return;
        };
        if cookie.is_none() {
            self.next_hs_link = (i + 1) % n;
        }
        let wanted = self.keyed.as_ref().map_or(0, |k| k.config().session_id);
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
        self.hs_sent = self.hs_sent.saturating_add(1);
        tracing::debug!(uplink = %self.uplinks[i].cfg.name, wanted = format_args!("{wanted:04x}"), "handshake initiation");
        if let Some(sock) = self.uplinks[i].socket.clone()
            && sock.send_to(&out[..len], server).await.is_err()
        {
            self.send_errors += 1;
        }
    }

    /// A handshake datagram from the server.
    fn on_handshake(&mut self, now: braid_proto::Instant, data: &[u8]) {
        match self.initiator.handle(now, data) {
            Err(r) => self.rejected.count(r),
            Ok(InitiatorEvent::CookieStored { link }) => {
                self.servers.handle_answer();
                // The server is under load and answers only initiations whose mac2 proves the
                // source address: retry at once on the uplink the cookie is for (once per
                // initiation, the initiator refuses a second cookie for the same one).
                self.cookie_retry = Some(usize::from(link.0));
                tracing::info!(uplink = link.0, "cookie received; retrying the handshake with it");
            }
            Ok(InitiatorEvent::UnknownSession(id)) => {
                let ours = self.keyed.as_ref().map(|k| k.config().session_id);
                if ours != Some(id) {
                    self.rejected.count(Reject::Malformed);
                    return;
                }
                self.hints += 1;
                self.servers.handle_answer();
                if self.initiated_at.is_none() {
                    // Due at once: the loop sends it after this batch.
                    self.hs_sent = 0;
                    self.initiated_at = Some(now.saturating_sub(HANDSHAKE_RETRY));
                    tracing::info!(
                        session = format_args!("{id:04x}"),
                        "server does not know the session; joining again"
                    );
                }
            }
            Ok(InitiatorEvent::Established(e)) => {
                self.handshakes += 1;
                self.servers.handle_answer();
                self.initiated_at = None;
                self.hs_sent = 0;
                if let Some(k) = self.keyed.as_mut().filter(|k| e.continued && k.config().session_id == e.session) {
                    k.channel_mut().rekey(&e.keys, now, true);
                    tracing::info!(session = format_args!("{:04x}", e.session), "session rekeyed");
                    return;
                }
                // What the old session carried counts before its counters go.
                self.count_usage();
                self.usage.new_session();
                let mut session = self.new_session(e.session, now);
                for i in 0..self.cfg.uplink.len() {
                    session.set_link_request(LinkId(i as u8), self.usage.stage(i).request());
                }
                if let Some(loc) = self.location.as_mut() {
                    // The map outlives sessions: a new one takes the last one's, or the saved one.
                    let map = match self.keyed.as_ref() {
                        Some(k) => k.engine().location_map().clone(),
                        None => loc.map.take().unwrap_or_default(),
                    };
                    session.set_location_map(map);
                }
                self.keyed = Some(SealedSession::new(session, &e.keys, now));
                tracing::info!(session = format_args!("{:04x}", e.session), cipher = %e.keys.suite, "session established");
            }
        }
    }

    fn new_session(&self, id: u32, now: braid_proto::Instant) -> Session {
        let mut scfg = super::session_config(Role::Client, id, &self.cfg.session, self.mtu);
        scfg.location.enabled = self.location.is_some();
        let links: Vec<LinkConfig> = self
            .cfg
            .uplink
            .iter()
            .enumerate()
            .map(|(i, u)| {
                let mut l = link_config(i, u, self.servers.addr());
                l.metering = self.usage.metering(i, l.metering);
                l
            })
            .collect();
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
        while let Some(sealed) = k.poll_transmit(self.clock.now(), &mut self.buf) {
            any = true;
            let Ok(t) = sealed else {
                // The buffer has room for the tag (sized at start), so the keys expired (the
                // rekeys failed for REJECT_AFTER): dropped until a handshake succeeds.
                self.send_errors += 1;
                continue;
            };
            let Some(dest) = t.destination.or(self.servers.addr()) else {
                self.send_errors += 1;
                continue;
            };
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
            batching = Some(idx);
            if let Err(e) = batch.push(sock, dest, &self.buf[..t.len]).await {
                self.send_errors += 1;
                tracing::trace!(link = %t.link, error = %e, "send failed");
            }
        }
        self.send_errors += finish_batch(&mut self.uplinks, batching).await;
        while let Some(p) = k.poll_deliver() {
            any = true;
            deliver(&self.tun, &p).await;
        }
        while let Some(e) = k.poll_event() {
            let uplinks = &self.uplinks;
            super::log_event(e, None, |id| {
                uplinks.get(usize::from(id.0)).map_or_else(|| id.to_string(), |u| u.cfg.name.clone())
            });
        }
        any
    }

    /// An uplink's interface changed: (re)bind or drop its socket.
    fn on_net(&mut self, change: IfChange) {
        for i in 0..self.uplinks.len() {
            if self.uplinks[i].cfg.interface != change.name {
                continue;
            }
            let up = &mut self.uplinks[i];
            let old = std::mem::replace(&mut up.ifstate, change.state.clone());
            let same = match (&old, &change.state) {
                (Some(o), Some(n)) => o.ifindex == n.ifindex && o.addrs == n.addrs && o.up == n.up,
                _ => false,
            };
            if up.socket.is_some() && same {
                continue;
            }
            let had = up.socket.is_some();
            up.close();
            self.bind_uplink(i);
            // The link lifecycle hears of it at once: an interface that appears (or gets an
            // address) is probed now; one that vanished is down now and its in-flight packets
            // are re-sent on the others, without waiting for silence to tell.
            let (now, id, bound) = (self.clock.now(), self.uplinks[i].id, self.uplinks[i].socket.is_some());
            if let Some(k) = self.keyed.as_mut() {
                if bound {
                    k.handle_link_present(now, id);
                } else if had {
                    k.handle_link_gone(now, id);
                }
            }
        }
    }

    /// (Re)binds uplink `i`'s socket for the server in use, if its interface is usable for that
    /// server's family; drops it otherwise. Waits while no server address is known.
    fn bind_uplink(&mut self, i: usize) {
        let Some(v6) = self.servers.addr().map(|a| a.is_ipv6()) else { return };
        let (clock, tx) = (self.clock, self.tx.clone());
        let up = &mut self.uplinks[i];
        let _s = tracing::info_span!("uplink", name = %up.cfg.name, interface = %up.cfg.interface).entered();
        let Some(addrs) = up.ifstate.as_ref().filter(|s| s.usable(v6)).map(|s| s.addrs.clone()) else {
            if up.socket.is_some() {
                tracing::warn!(state = ?up.ifstate, v6, "uplink lost; waiting for it to come back");
            } else {
                tracing::info!(state = ?up.ifstate, v6, "waiting for the uplink's interface");
            }
            up.close();
            return;
        };
        if up.socket.is_some() && up.v6 == v6 {
            return;
        }
        up.close();
        let bound = uplink::bind_to_interface(&up.cfg.interface, v6).and_then(|sock| {
            let rx = uplink::BatchReceiver::new(&sock)?;
            let batch = uplink::GsoBatch::new(&sock)?;
            Ok((sock, rx, batch))
        });
        match bound {
            Ok((sock, rx, batch)) => {
                let sock = Arc::new(sock);
                up.generation += 1;
                up.reader = Some(uplink::spawn_reader(sock.clone(), rx, clock, i, tx));
                up.batch = Some(batch);
                up.socket = Some(sock);
                up.v6 = v6;
                tracing::info!(?addrs, generation = up.generation, v6, "uplink socket bound");
            }
            Err(e) => tracing::warn!(error = %e, "cannot set up the uplink socket; will retry on the next change"),
        }
    }

    fn find_link(&self, name: &str) -> Option<LinkId> {
        self.uplinks
            .iter()
            .find(|u| u.cfg.name == name || u.id.to_string() == name || u.id.0.to_string() == name)
            .map(|u| u.id)
    }

    fn control(&mut self, req: Request) -> Response {
        if let Some(p) = req.peer() {
            return Response::err(format!(
                "--peer {p:?}: this is a client, with one session to its server; --peer names a vehicle on a server"
            ));
        }
        match req {
            Request::PeerAdd { .. } | Request::PeerRemove { .. } => Response::err(
                "braid peer: this is a client, with one session to its server; vehicles are listed on a server",
            ),
            Request::Status { .. } => Response { ok: true, error: None, status: Some(self.status()) },
            Request::SetWeight { link, weight, .. } => match self.find_link(&link) {
                Some(id) => {
                    if let Some(u) = self.uplinks.get_mut(usize::from(id.0)) {
                        u.cfg.weight = weight;
                    }
                    if let Some(c) = self.cfg.uplink.get_mut(usize::from(id.0)) {
                        c.weight = weight;
                    }
                    if let Some(k) = self.keyed.as_mut() {
                        k.set_link_weight(id, weight);
                    }
                    Response::ok()
                }
                None => Response::err(format!("no uplink named {link:?}")),
            },
            Request::SetRecovery { name, .. } => {
                self.cfg.session.recovery = Some(name);
                if let Some(k) = self.keyed.as_mut() {
                    k.set_recovery(name.0);
                }
                tracing::info!(recovery = %name.0, "recovery switched");
                Response::ok()
            }
            Request::SetScheduler { name, .. } => {
                self.cfg.session.scheduler = Some(name);
                if let Some(k) = self.keyed.as_mut() {
                    k.set_scheduler(name.0);
                }
                tracing::info!(scheduler = %name.0, "scheduler switched");
                Response::ok()
            }
        }
    }

    fn status(&self) -> DaemonStatus {
        let now = self.clock.now();
        let sessions = self
            .keyed
            .iter()
            .map(|k| {
                let mut s = session_status(k, now, |id| match self.uplinks.get(usize::from(id.0)) {
                    Some(u) => (u.cfg.name.clone(), Some(u.cfg.interface.clone()), u.socket.is_some()),
                    None => (id.to_string(), None, false),
                });
                s.peer = match self.servers.addr() {
                    Some(a) if a.to_string() != self.servers.entry() => format!("{} ({a})", self.servers.entry()),
                    _ => self.servers.entry().to_string(),
                };
                for (i, u) in s.uplinks.iter_mut().enumerate() {
                    u.monthly = self.usage.report(i).map(|(used_bytes, budget_bytes, stage)| MonthlyUsage {
                        used_bytes,
                        budget_bytes,
                        stage: stage.to_string(),
                    });
                }
                s.cipher = k.channel().suite().to_string();
                s.key_age_s = now.saturating_duration_since(k.channel().keys_born()).as_secs_f64();
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

    /// Counts the uplinks' bytes into their monthly allowances and applies any change of stage.
    fn count_usage(&mut self) {
        let Some(k) = self.keyed.as_mut() else { return };
        let mut counters = vec![braid_proto::session::LinkCounters::default(); self.cfg.uplink.len()];
        for l in k.link_status(self.clock.now()) {
            if let Some(c) = counters.get_mut(usize::from(l.id.0)) {
                *c = l.counters;
            }
        }
        for change in self.usage.account(&counters, std::time::SystemTime::now()) {
            if let Some(u) = self.cfg.uplink.get(change.uplink) {
                let id = LinkId(change.uplink as u8);
                k.set_link_metering(id, change.stage.metering(u.metering()));
                k.set_link_request(id, change.stage.request());
            }
        }
    }

    /// SIGHUP: re-reads the file and applies the session settings, weights and metering; the rest (TUN,
    /// uplinks, server) needs a restart.
    fn reload(&mut self) {
        let cfg = match ClientConfig::load(&self.path) {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(error = %crate::cli::error_chain(&e), "reload refused; keeping the running settings");
                return;
            }
        };
        if let Some(k) = self.keyed.as_mut() {
            cfg.session.apply(k);
        }
        for u in &cfg.uplink {
            if let Some(id) = self.find_link(&u.name) {
                if let Some(k) = self.keyed.as_mut() {
                    k.set_link_weight(id, u.weight);
                    k.set_link_metering(id, self.usage.metering(usize::from(id.0), u.metering()));
                }
                if let Some(c) = self.cfg.uplink.get_mut(usize::from(id.0)) {
                    c.weight = u.weight;
                    c.coding_budget = u.coding_budget;
                    c.backup = u.backup;
                }
            }
        }
        // Counting is by bytes whatever the allowance, so one count after the change both keeps
        // the bytes so far and applies the new allowance's stage.
        self.usage.reconfigure(&self.cfg.state_dir(), &cfg.uplink);
        for u in &mut self.cfg.uplink {
            if let Some(new) = cfg.uplink.iter().find(|n| n.name == u.name) {
                u.monthly_budget = new.monthly_budget;
                u.billing_day = new.billing_day;
            }
        }
        self.count_usage();
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
