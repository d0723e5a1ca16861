//! The daemons: `braid client` (the vehicle gateway) and `braid server`.
//!
//! A thin tokio driver around braid-proto's sans-IO [`Session`](braid_proto::Session), in the
//! manner of quinn's `connection.rs` over quinn-proto: reader tasks turn the TUN device, the UDP
//! sockets, the control socket, signals and interface changes into [`Input`]s on one channel; a
//! loop owns the session(s), feeds them the inputs and the clock, and writes out what they poll
//! (the client's one loop; the server's workers, [`worker`], each with its share of the sessions).

pub mod client;
pub use braid_config::config;
pub mod control;
pub mod gps;
pub use braid_config::keys;
pub mod metrics;
pub mod mss;
pub mod netwatch;
pub mod notify;
pub mod peers;
pub mod server;
pub mod servers;
pub mod status;
pub mod tun;
pub mod uplink;
mod usage;
pub mod worker;

use bytes::Bytes;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// Writes `value` as JSON to `path`, creating its folder: through a temporary file and a rename,
/// so a crash leaves the old file or the new one, never half of one (the daemons' state files:
/// the location map, the uplinks' monthly usage).
fn write_json_atomically<T: serde::Serialize>(path: &std::path::Path, value: &T) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let json = serde_json::to_vec(value).map_err(std::io::Error::other)?;
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, json)?;
    std::fs::rename(&tmp, path)
}

/// A new session's engine configuration, the same for both roles: its id, a random seed for
/// its coding choices, the `[session]` settings and the TUN MTU as the largest passenger packet.
fn session_config(
    role: braid_proto::Role,
    id: u32,
    settings: &config::SessionSettings,
    mtu: u16,
) -> braid_proto::SessionConfig {
    let mut seed = [0u8; 8];
    // A failed OS RNG only makes coding choices predictable, which is harmless here.
    let _ = getrandom::fill(&mut seed);
    let mut scfg = braid_proto::SessionConfig::new(role);
    scfg.session_id = id;
    scfg.seed = u64::from_le_bytes(seed);
    settings.configure(&mut scfg);
    scfg.max_packet = usize::from(mtu);
    scfg
}

/// Converts between the monotonic clock and braid-proto's microsecond [`braid_proto::Instant`].
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    origin: std::time::Instant,
}

impl Clock {
    /// A clock starting now.
    pub fn new() -> Self {
        Clock { origin: std::time::Instant::now() }
    }

    /// The engine's now.
    pub fn now(&self) -> braid_proto::Instant {
        braid_proto::Instant::from_micros(self.origin.elapsed().as_micros() as u64)
    }

    /// The engine's now and the wall clock (`CLOCK_REALTIME`, since the Unix epoch) read together:
    /// the reference for turning one batch's kernel receive timestamps into engine instants
    /// ([`rx_instant`]). Read per batch, so a step of the wall clock affects at most the batch
    /// that straddles it.
    pub fn now_and_wall(&self) -> (braid_proto::Instant, Duration) {
        let now = self.now();
        let wall = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        (now, wall)
    }

    /// The tokio instant of an engine instant.
    pub fn tokio_instant(&self, t: braid_proto::Instant) -> tokio::time::Instant {
        tokio::time::Instant::from_std(self.origin + std::time::Duration::from_micros(t.as_micros()))
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

/// The oldest a kernel receive timestamp may make a datagram. Datagrams wait in the socket
/// buffer only while the loop is behind, tens of milliseconds at the rates braid runs at; an age
/// beyond this says the wall clock was stepped between the kernel's stamp and the read.
pub const MAX_RX_AGE: Duration = Duration::from_secs(1);

/// When a datagram arrived, on the engine's clock: the kernel's receive timestamp `kernel`
/// (`SO_TIMESTAMPNS`, wall-clock time since the Unix epoch) moved onto the monotonic clock by the
/// offset between the two clocks read together after the read (`now`, `wall`). The engine's
/// receiver estimators (PluriBus 5.2, 5.3) time arrivals, and the read time of a busy loop adds
/// its own queueing to every datagram; the kernel's time does not. Clamped to `now` at the
/// latest (a wall clock stepped back) and to [`MAX_RX_AGE`] before it at the earliest (stepped
/// forward); `now` when the kernel gave no timestamp.
pub fn rx_instant(kernel: Option<Duration>, now: braid_proto::Instant, wall: Duration) -> braid_proto::Instant {
    let Some(kernel) = kernel else { return now };
    now.saturating_sub(wall.saturating_sub(kernel).min(MAX_RX_AGE))
}

/// Something for the daemon's loop to handle.
#[derive(Debug)]
pub enum Input {
    /// A passenger packet read from the TUN device (MSS already clamped).
    Tun(Bytes),
    /// A datagram from an uplink socket (client: `uplink` is its index) or the listening socket.
    Datagram {
        /// The uplink index on the client; 0 on the server.
        uplink: usize,
        /// Its source.
        from: SocketAddr,
        /// Its bytes.
        data: Bytes,
        /// When the kernel received it ([`rx_instant`]).
        at: braid_proto::Instant,
    },
    /// A control request and where to answer it.
    Control(control::Request, oneshot::Sender<control::Response>),
    /// An interface watched by [`netwatch`] changed.
    Net(netwatch::IfChange),
    /// A position fix from gpsd (client, location awareness on).
    Position(braid_proto::location::Position),
    /// SIGHUP: reload the session settings.
    Reload,
    /// SIGTERM or SIGINT: stop.
    Shutdown,
}

/// Sends SIGTERM/SIGINT as [`Input::Shutdown`] and SIGHUP as [`Input::Reload`].
pub fn spawn_signals(tx: mpsc::Sender<Input>) -> std::io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let mut hup = signal(SignalKind::hangup())?;
    tokio::spawn(async move {
        loop {
            let input = tokio::select! {
                _ = term.recv() => Input::Shutdown,
                _ = int.recv() => Input::Shutdown,
                _ = hup.recv() => Input::Reload,
            };
            if tx.send(input).await.is_err() {
                return;
            }
        }
    });
    Ok(())
}

/// Most inputs an event loop takes in one go before it writes out.
pub(crate) const INPUT_BATCH: usize = 64;

/// The input that woke an event loop plus whatever else is already queued (up to [`INPUT_BATCH`]),
/// so the engine handles a batch before the loop writes out.
pub(crate) fn queued_batch(first: Option<Input>, rx: &mut mpsc::Receiver<Input>) -> Vec<Input> {
    let mut inputs: Vec<Input> = first.into_iter().collect();
    while inputs.len() < INPUT_BATCH
        && let Ok(i) = rx.try_recv()
    {
        inputs.push(i);
    }
    inputs
}

/// A tokio runtime for a daemon: two worker threads, as the machines it targets have few cores
/// and the work is one loop plus reader tasks.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    runtime_with(2)
}

/// A tokio runtime with `threads` worker threads (the server: one per session worker, at least 2).
pub fn runtime_with(threads: usize) -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread().worker_threads(threads.max(2)).enable_all().build()
}

/// Logs a session event naming the uplink (`uplink_name` gives the client's `[[uplink]]` name, on
/// the server the name the vehicle reported, `link<N>` until it has) rather than its id.
pub fn log_event(e: braid_proto::Event, session: Option<&str>, uplink_name: impl Fn(braid_proto::LinkId) -> String) {
    use braid_proto::Event;
    match e {
        Event::LinkUp(id) => tracing::info!(session, uplink = %uplink_name(id), "uplink up"),
        Event::LinkDown(id) => {
            tracing::warn!(session, uplink = %uplink_name(id), "uplink down; its unacknowledged packets go on the others")
        }
        Event::LinkAddress(id, addr) => tracing::info!(session, uplink = %uplink_name(id), %addr, "uplink address"),
        Event::Closed => tracing::info!(session, "session closed by the peer"),
    }
}

/// Warns, once per protocol version, that a datagram came from a braid speaking another version of
/// the protocol (its header's top two bits, [`braid_proto::wire::VERSION`]). Such datagrams are
/// refused and counted as malformed, so a vehicle and a server of different releases never form a
/// session; this says why, where a counter alone would not. `warned` holds one bit per version,
/// shared by the server's workers, so the process says it once whichever socket the datagram
/// came in on.
pub(crate) fn note_other_version(warned: &AtomicU8, error: &braid_proto::wire::WireError, from: SocketAddr) {
    if let braid_proto::wire::WireError::BadVersion(version) = *error {
        let bit = 1u8 << (version & 3);
        if warned.fetch_or(bit, Ordering::Relaxed) & bit == 0 {
            tracing::warn!(
                %from,
                peer_version = version,
                our_version = braid_proto::wire::VERSION,
                "datagrams from a braid of another protocol version are refused: run the same braid release at both ends"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_proto::Instant;

    #[test]
    fn a_braid_of_another_protocol_version_is_named_once_per_version() {
        use braid_proto::wire::{Header, VERSION, WireError};
        let from: SocketAddr = "192.0.2.7:4000".parse().unwrap();
        // A data datagram (type 1) of another version as the header parser sees it.
        let other = VERSION ^ 1;
        let Err(e) = Header::parse(&[(other << 6) | (1 << 2); 16]) else { panic!("a version {other} header parsed") };
        assert_eq!(e, WireError::BadVersion(other));
        let warned = AtomicU8::new(0);
        let bits = || warned.load(Ordering::Relaxed);
        note_other_version(&warned, &e, from);
        assert_eq!(bits(), 1 << other);
        note_other_version(&warned, &e, from);
        assert_eq!(bits(), 1 << other, "warned again");
        let third = VERSION ^ 2;
        note_other_version(&warned, &WireError::BadVersion(third), from);
        assert_eq!(bits(), (1 << other) | (1 << third));
        // Other malformed datagrams are not about versions.
        note_other_version(&warned, &WireError::Truncated { field: "header", need: 11, have: 3 }, from);
        assert_eq!(bits(), (1 << other) | (1 << third));
    }

    #[test]
    fn kernel_timestamp_moves_onto_the_engine_clock() {
        let now = Instant::from_secs_f64(100.0);
        let wall = Duration::from_secs(1_700_000_000) + Duration::from_nanos(500_000_000);
        let ago = |d: Duration| rx_instant(Some(wall - d), now, wall);
        assert_eq!(ago(Duration::ZERO), now);
        assert_eq!(ago(Duration::from_micros(350)), Instant::from_micros(100_000_000 - 350));
        // The age is cut to whole microseconds, the engine's resolution.
        assert_eq!(ago(Duration::from_nanos(1_999)), Instant::from_micros(100_000_000 - 1));
        assert_eq!(ago(Duration::from_millis(999)), Instant::from_micros(99_001_000));
    }

    #[test]
    fn kernel_timestamp_is_clamped_and_optional() {
        let now = Instant::from_secs_f64(100.0);
        let wall = Duration::from_secs(1_700_000_000);
        assert_eq!(rx_instant(None, now, wall), now, "no timestamp: the read time");
        // The wall clock stepped back after the kernel stamped it: not in the future.
        assert_eq!(rx_instant(Some(wall + Duration::from_secs(5)), now, wall), now);
        // Stepped forward, or a bogus stamp (the epoch): no more than MAX_RX_AGE old.
        assert_eq!(rx_instant(Some(wall - Duration::from_secs(30)), now, wall), Instant::from_secs_f64(99.0));
        assert_eq!(rx_instant(Some(Duration::ZERO), now, wall), Instant::from_secs_f64(99.0));
        // Never before the engine's origin, right after start.
        let early = Instant::from_micros(200);
        assert_eq!(rx_instant(Some(wall - Duration::from_millis(3)), early, wall), Instant::ZERO);
        // A wall clock before the epoch reads as zero: every stamp is then "in the future".
        assert_eq!(rx_instant(Some(wall), now, Duration::ZERO), now);
    }

    #[test]
    fn events_name_the_uplink_not_its_id() {
        use std::sync::{Arc, Mutex};
        #[derive(Clone, Default)]
        struct Buf(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Buf {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().expect("not poisoned").extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let buf = Buf::default();
        let out = buf.clone();
        let sub = tracing_subscriber::fmt().with_ansi(false).with_writer(move || out.clone()).finish();
        tracing::subscriber::with_default(sub, || {
            let names = ["lte1", "wifi"];
            let name = |id: braid_proto::LinkId| names[usize::from(id.0)].to_string();
            log_event(braid_proto::Event::LinkDown(braid_proto::LinkId(1)), None, name);
            log_event(braid_proto::Event::LinkUp(braid_proto::LinkId(0)), Some("00a1"), name);
        });
        let text = String::from_utf8(buf.0.lock().expect("not poisoned").clone()).expect("UTF-8");
        assert!(text.contains("uplink=wifi") && text.contains("uplink down"), "{text}");
        assert!(text.contains("session=\"00a1\"") && text.contains("uplink=lte1"), "{text}");
        assert!(!text.contains("LinkId") && !text.contains('\x1b'), "{text}");
    }
}
