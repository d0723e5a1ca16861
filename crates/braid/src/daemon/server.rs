//! `braid server`: one listening socket, one session per vehicle, demultiplexed by the session id
//! of the clear header.

use super::client::{deliver, sleep_until};
use super::config::ServerConfig;
use super::control::{Request, Response};
use super::status::{DaemonStatus, session_status};
use super::{Clock, Input, control, metrics, spawn_signals, tun, uplink};
use anyhow::Context;
use braid_proto::wire::Header;
use braid_proto::{RecoveryKind, Role, SchedulerKind, Session, SessionConfig};
use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use tun_rs::AsyncDevice;

/// How often idle sessions are looked for.
const HOUSEKEEPING: Duration = Duration::from_secs(1);

struct Vehicle {
    session: Session,
    last_rx: braid_proto::Instant,
}

#[derive(Default)]
struct Counters {
    garbage: u64,
    refused: u64,
    expired: u64,
    unroutable: u64,
    send_errors: u64,
}

struct Server {
    cfg: ServerConfig,
    path: PathBuf,
    mtu: u16,
    clock: Clock,
    sessions: HashMap<u32, Vehicle>,
    /// Passenger addresses seen coming out of each session: where the TUN's packets go back to.
    routes: HashMap<IpAddr, u32>,
    sock: Arc<UdpSocket>,
    tun: Arc<AsyncDevice>,
    buf: Vec<u8>,
    counters: Counters,
    next_housekeeping: braid_proto::Instant,
}

/// Runs `braid server --config PATH` until SIGTERM.
pub fn run(path: &Path) -> anyhow::Result<()> {
    let cfg = ServerConfig::load(path)?;
    super::runtime()?.block_on(run_async(path.to_path_buf(), cfg))
}

async fn run_async(path: PathBuf, cfg: ServerConfig) -> anyhow::Result<()> {
    let mtu = cfg.mtu()?;
    let (tx, rx) = mpsc::channel(4096);
    let sock = Arc::new(uplink::listen(cfg.listen).with_context(|| format!("listen: cannot bind {}", cfg.listen))?);
    let tun = tun::open(&cfg.tun, mtu)?;
    tun::spawn_reader(tun.clone(), mtu, tx.clone());
    uplink::spawn_reader(sock.clone(), 0, tx.clone());
    let _control = control::spawn(&cfg.control_path(), tx.clone())?;
    if let Some(addr) = cfg.metrics {
        metrics::spawn(addr, tx.clone()).await?;
    }
    spawn_signals(tx).context("installing signal handlers")?;
    tracing::info!(listen = %cfg.listen, mtu, tun = %cfg.tun.name, "server started");
    let clock = Clock::new();
    let buf = vec![0u8; usize::from(mtu) + braid_proto::wire::MAX_CARRIER_OVERHEAD];
    let mut server = Server {
        cfg,
        path,
        mtu,
        clock,
        sessions: HashMap::new(),
        routes: HashMap::new(),
        sock,
        tun,
        buf,
        counters: Counters::default(),
        next_housekeeping: clock.now() + HOUSEKEEPING,
    };
    server.run(rx).await;
    tracing::info!("server stopped");
    Ok(())
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
    async fn run(&mut self, mut rx: mpsc::Receiver<Input>) {
        let mut dirty: HashSet<u32> = HashSet::new();
        let mut idle_spins = 0u32;
        loop {
            let next = self.sessions.values().filter_map(|v| v.session.poll_timeout()).min();
            let deadline = next.map_or(self.next_housekeeping, |n| n.min(self.next_housekeeping));
            let first = tokio::select! {
                i = rx.recv() => match i { Some(i) => Some(i), None => return },
                _ = sleep_until(Some(self.clock.tokio_instant(deadline))) => None,
            };
            let inputs = super::queued_batch(first, &mut rx);
            let had_input = !inputs.is_empty();
            for input in inputs {
                if !self.handle(input, &mut dirty) {
                    return;
                }
            }
            let now = self.clock.now();
            for (id, v) in &mut self.sessions {
                if v.session.poll_timeout().is_some_and(|t| t <= now) {
                    v.session.handle_timeout(now);
                    dirty.insert(*id);
                }
            }
            let mut progressed = false;
            for id in dirty.drain() {
                progressed |= self.flush(id).await;
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
                let dst = addrs(&p).map(|(_, d)| d);
                let id = dst.and_then(|d| self.routes.get(&d).copied()).filter(|id| self.sessions.contains_key(id));
                // With a single vehicle, its passengers need no learning (a packet towards one not
                // yet heard from, e.g. a ping from the server side, still goes out).
                let id =
                    id.or_else(|| (self.sessions.len() == 1).then(|| self.sessions.keys().next().copied()).flatten());
                match id.and_then(|id| self.sessions.get_mut(&id).map(|v| (id, v))) {
                    Some((id, v)) => {
                        if v.session.handle_tun_packet(now, &p).is_ok() {
                            dirty.insert(id);
                        }
                    }
                    None => self.counters.unroutable += 1,
                }
            }
            Input::Datagram { from, data, .. } => {
                let Ok((h, _)) = Header::parse(&data) else {
                    self.counters.garbage += 1;
                    return true;
                };
                if let Some(v) = self.sessions.get_mut(&h.session) {
                    // The session counts what it drops (malformed, unknown link).
                    if v.session.handle_datagram(now, None, from, &data).is_ok() {
                        v.last_rx = now;
                    }
                    dirty.insert(h.session);
                    return true;
                }
                if self.sessions.len() >= self.cfg.max_sessions {
                    self.counters.refused += 1;
                    return true;
                }
                let mut session = self.new_session(h.session, now);
                match session.handle_datagram(now, None, from, &data) {
                    Ok(()) => {
                        tracing::info!(session = format_args!("{:06x}", h.session), %from, "new session");
                        self.sessions.insert(h.session, Vehicle { session, last_rx: now });
                        dirty.insert(h.session);
                    }
                    Err(_) => self.counters.garbage += 1,
                }
            }
            Input::Control(req, reply) => {
                let _ = reply.send(self.control(req));
            }
            Input::Net(_) => {}
            Input::Reload => self.reload(),
            Input::Shutdown => return false,
        }
        true
    }

    fn new_session(&self, id: u32, now: braid_proto::Instant) -> Session {
        let mut seed = [0u8; 8];
        // A failed OS RNG only makes coding choices predictable, which is harmless here.
        let _ = getrandom::fill(&mut seed);
        let mut scfg = SessionConfig::new(Role::Server);
        scfg.session_id = id;
        scfg.seed = u64::from_le_bytes(seed);
        scfg.recovery = self.cfg.session.recovery();
        scfg.scheduler = self.cfg.session.scheduler();
        scfg.max_packet = usize::from(self.mtu);
        Session::new(scfg, &[], now)
    }

    async fn flush(&mut self, id: u32) -> bool {
        let now = self.clock.now();
        let Some(v) = self.sessions.get_mut(&id) else { return false };
        let mut any = false;
        while let Some(t) = v.session.poll_transmit(now, &mut self.buf) {
            any = true;
            let Some(dest) = t.destination else { continue };
            if self.sock.send_to(&self.buf[..t.len], dest).await.is_err() {
                self.counters.send_errors += 1;
            }
        }
        while let Some(p) = v.session.poll_deliver() {
            any = true;
            if let Some((src, _)) = addrs(&p) {
                self.routes.insert(src, id);
            }
            deliver(&self.tun, &p).await;
        }
        while let Some(e) = v.session.poll_event() {
            tracing::info!(session = format_args!("{id:06x}"), event = ?e, "session event");
        }
        any
    }

    /// Drops sessions idle longer than `session_idle_s` and the routes that led to them.
    fn expire(&mut self, now: braid_proto::Instant) {
        let idle = Duration::from_secs(self.cfg.session_idle_s);
        let before = self.sessions.len();
        self.sessions.retain(|id, v| {
            let keep = now.saturating_duration_since(v.last_rx) < idle && !v.session.is_closed();
            if !keep {
                tracing::info!(session = format_args!("{id:06x}"), "session expired");
            }
            keep
        });
        if self.sessions.len() != before {
            self.counters.expired += (before - self.sessions.len()) as u64;
            let live = &self.sessions;
            self.routes.retain(|_, id| live.contains_key(id));
        }
    }

    fn control(&mut self, req: Request) -> Response {
        match req {
            Request::Status => Response { ok: true, error: None, status: Some(self.status()) },
            Request::SetWeight { link, weight } => {
                let n = link.trim_start_matches("link").parse::<u8>();
                let Ok(n) = n else { return Response::err(format!("no link {link:?}: use link<N> or N")) };
                let hits = self
                    .sessions
                    .values_mut()
                    .map(|v| v.session.set_link_weight(braid_proto::LinkId(n), weight))
                    .filter(|hit| *hit)
                    .count();
                if hits == 0 { Response::err(format!("no session has link {n}")) } else { Response::ok() }
            }
            Request::SetRecovery { name } => match name.parse::<RecoveryKind>() {
                Ok(k) => {
                    self.cfg.session.recovery = Some(super::config::Recovery(k));
                    self.sessions.values_mut().for_each(|v| v.session.set_recovery(k));
                    Response::ok()
                }
                Err(e) => Response::err(e),
            },
            Request::SetScheduler { name } => match name.parse::<SchedulerKind>() {
                Ok(k) => {
                    self.cfg.session.scheduler = Some(super::config::Scheduler(k));
                    self.sessions.values_mut().for_each(|v| v.session.set_scheduler(k));
                    Response::ok()
                }
                Err(e) => Response::err(e),
            },
        }
    }

    fn status(&self) -> DaemonStatus {
        let now = self.clock.now();
        let mut sessions: Vec<_> = self
            .sessions
            .values()
            .map(|v| session_status(&v.session, now, |id| (id.to_string(), None, true)))
            .collect();
        sessions.sort_by_key(|s| s.id);
        DaemonStatus {
            role: "server".into(),
            uptime_s: now.as_secs_f64(),
            garbage_datagrams: self.counters.garbage,
            sessions_refused: self.counters.refused,
            sessions_expired: self.counters.expired,
            unroutable_packets: self.counters.unroutable,
            send_errors: self.counters.send_errors,
            sessions,
        }
    }

    /// SIGHUP: applies the file's session settings to every session and to new ones.
    fn reload(&mut self) {
        match ServerConfig::load(&self.path) {
            Ok(c) => {
                let (r, s) = (c.session.recovery(), c.session.scheduler());
                self.cfg.session = c.session;
                self.cfg.max_sessions = c.max_sessions;
                self.cfg.session_idle_s = c.session_idle_s;
                for v in self.sessions.values_mut() {
                    v.session.set_recovery(r);
                    v.session.set_scheduler(s);
                }
                tracing::info!(recovery = %r, scheduler = %s, "settings reloaded");
            }
            Err(e) => tracing::error!(error = format_args!("{e:#}"), "reload refused; keeping the running settings"),
        }
    }
}
