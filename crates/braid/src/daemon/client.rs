//! `braid client`: the vehicle gateway. One session, one UDP socket per uplink.

use super::config::{ClientConfig, UplinkConfig};
use super::control::{Request, Response};
use super::netwatch::{IfChange, IfState};
use super::status::{DaemonStatus, session_status};
use super::{Clock, Input, control, metrics, netwatch, spawn_signals, tun, uplink};
use anyhow::Context;
use braid_proto::{LinkConfig, LinkId, RecoveryKind, Role, SchedulerKind, Session, SessionConfig};
use bytes::Bytes;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
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
    }
}

/// The client's state, owned by its loop.
struct Client {
    path: PathBuf,
    clock: Clock,
    session: Session,
    uplinks: Vec<Uplink>,
    tun: Arc<AsyncDevice>,
    server: SocketAddr,
    buf: Vec<u8>,
    tx: mpsc::Sender<Input>,
    send_errors: u64,
    garbage: u64,
}

/// Runs `braid client --config PATH` until SIGTERM.
pub fn run(path: &Path) -> anyhow::Result<()> {
    let cfg = ClientConfig::load(path)?;
    super::runtime()?.block_on(run_async(path.to_path_buf(), cfg))
}

fn link_config(i: usize, u: &UplinkConfig, server: SocketAddr) -> LinkConfig {
    let mut l = LinkConfig::new(LinkId(i as u8), Some(server), u.up_kbps * 1e3, u.down_kbps * 1e3);
    l.weight = u.weight;
    l
}

async fn run_async(path: PathBuf, cfg: ClientConfig) -> anyhow::Result<()> {
    let mtu = cfg.mtu()?;
    let server = cfg.server_addr()?;
    // Until the authenticated handshake exists, the client names its session at random (OS RNG:
    // the daemon may use it; only the engine must not).
    let mut rnd = [0u8; 12];
    getrandom::fill(&mut rnd).map_err(|e| anyhow::anyhow!("OS random source: {e}"))?;
    let session_id = u32::from_le_bytes([rnd[0], rnd[1], rnd[2], 0]).max(1);
    let seed = u64::from_le_bytes(rnd[4..12].try_into().unwrap_or_default());
    let clock = Clock::new();
    let mut scfg = SessionConfig::new(Role::Client);
    scfg.session_id = session_id;
    scfg.seed = seed;
    scfg.recovery = cfg.session.recovery();
    scfg.scheduler = cfg.session.scheduler();
    scfg.max_packet = usize::from(mtu);
    let links: Vec<LinkConfig> = cfg.uplink.iter().enumerate().map(|(i, u)| link_config(i, u, server)).collect();
    let session = Session::new(scfg, &links, clock.now());

    let (tx, rx) = mpsc::channel(4096);
    let tun = tun::open(&cfg.tun, mtu)?;
    tun::spawn_reader(tun.clone(), mtu, tx.clone());
    let _control = control::spawn(&cfg.control_path(), tx.clone())?;
    if let Some(addr) = cfg.metrics {
        metrics::spawn(addr, tx.clone()).await?;
    }
    spawn_signals(tx.clone()).context("installing signal handlers")?;
    netwatch::spawn(cfg.uplink.iter().map(|u| u.interface.clone()).collect(), tx.clone());
    tracing::info!(session = format_args!("{session_id:06x}"), %server, mtu, tun = %cfg.tun.name, "client started");

    let uplinks = cfg
        .uplink
        .iter()
        .enumerate()
        .map(|(i, u)| Uplink {
            cfg: u.clone(),
            id: LinkId(i as u8),
            socket: None,
            reader: None,
            generation: 0,
            ifstate: None,
        })
        .collect();
    let buf = vec![0u8; session.min_transmit_buffer()];
    let mut client = Client { path, clock, session, uplinks, tun, server, buf, tx, send_errors: 0, garbage: 0 };
    let span = tracing::info_span!("session", id = format_args!("{session_id:06x}"));
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
            let deadline = self.session.poll_timeout().map(|t| self.clock.tokio_instant(t));
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
            if self.session.poll_timeout().is_some_and(|t| t <= now) {
                self.session.handle_timeout(now);
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
            Input::Tun(p) => {
                if let Err(e) = self.session.handle_tun_packet(now, &p) {
                    tracing::debug!(error = %e, "passenger packet refused");
                }
            }
            Input::Datagram { uplink, from, data, .. } => {
                let Some(up) = self.uplinks.get(uplink) else { return true };
                if let Err(e) = self.session.handle_datagram(now, Some(up.id), from, &data) {
                    self.garbage += 1;
                    tracing::debug!(uplink = %up.cfg.name, %from, error = %e, "datagram dropped");
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

    /// Writes out everything the session has to send and deliver. True if anything went out.
    async fn flush(&mut self) -> bool {
        let now = self.clock.now();
        let mut any = false;
        while let Some(t) = self.session.poll_transmit(now, &mut self.buf) {
            any = true;
            let dest = t.destination.unwrap_or(self.server);
            let sock = self.uplinks.get(usize::from(t.link.0)).and_then(|u| u.socket.clone());
            let Some(sock) = sock else {
                // The interface is gone: the datagram is lost like on a dead modem, and the engine
                // moves the data elsewhere once it notices.
                self.send_errors += 1;
                continue;
            };
            if let Err(e) = sock.send_to(&self.buf[..t.len], dest).await {
                self.send_errors += 1;
                tracing::trace!(link = %t.link, error = %e, "send failed");
            }
        }
        while let Some(p) = self.session.poll_deliver() {
            any = true;
            deliver(&self.tun, &p).await;
        }
        while let Some(e) = self.session.poll_event() {
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
            match uplink::bind_to_interface(&up.cfg.interface) {
                Ok(sock) => {
                    let sock = Arc::new(sock);
                    up.generation += 1;
                    up.reader = Some(uplink::spawn_reader(sock.clone(), i, self.tx.clone()));
                    up.socket = Some(sock);
                    tracing::info!(addrs = ?new.addrs, generation = up.generation, "uplink socket bound");
                }
                Err(e) => tracing::warn!(error = %e, "cannot bind the uplink socket; will retry on the next change"),
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
                Some(id) if self.session.set_link_weight(id, weight) => Response::ok(),
                _ => Response::err(format!("no uplink named {link:?}")),
            },
            Request::SetRecovery { name } => match name.parse::<RecoveryKind>() {
                Ok(k) => {
                    self.session.set_recovery(k);
                    tracing::info!(recovery = %k, "recovery switched");
                    Response::ok()
                }
                Err(e) => Response::err(e),
            },
            Request::SetScheduler { name } => match name.parse::<SchedulerKind>() {
                Ok(k) => {
                    self.session.set_scheduler(k);
                    tracing::info!(scheduler = %k, "scheduler switched");
                    Response::ok()
                }
                Err(e) => Response::err(e),
            },
        }
    }

    fn status(&self) -> DaemonStatus {
        let now = self.clock.now();
        let s = session_status(&self.session, now, |id| match self.uplinks.get(usize::from(id.0)) {
            Some(u) => (u.cfg.name.clone(), Some(u.cfg.interface.clone()), u.socket.is_some()),
            None => (id.to_string(), None, false),
        });
        DaemonStatus {
            role: "client".into(),
            uptime_s: now.as_secs_f64(),
            garbage_datagrams: self.garbage,
            send_errors: self.send_errors,
            sessions: vec![s],
            ..Default::default()
        }
    }

    /// SIGHUP: re-reads the file and applies the session settings and weights; the rest (TUN,
    /// uplinks, server) needs a restart.
    fn reload(&mut self) {
        let cfg = match ClientConfig::load(&self.path) {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(error = format_args!("{e:#}"), "reload refused; keeping the running settings");
                return;
            }
        };
        self.session.set_recovery(cfg.session.recovery());
        self.session.set_scheduler(cfg.session.scheduler());
        for u in &cfg.uplink {
            if let Some(id) = self.find_link(&u.name) {
                self.session.set_link_weight(id, u.weight);
            }
        }
        tracing::info!(recovery = %cfg.session.recovery(), scheduler = %cfg.session.scheduler(), "settings reloaded");
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
