//! The daemons: `braid client` (the vehicle gateway) and `braid server`.
//!
//! A thin tokio driver around braid-proto's sans-IO [`Session`](braid_proto::Session), in the
//! manner of quinn's `connection.rs` over quinn-proto: reader tasks turn the TUN device, the UDP
//! sockets, the control socket, signals and interface changes into [`Input`]s on one channel; one
//! loop owns the session(s), feeds them the inputs and the clock, and writes out what they poll.

pub mod client;
pub mod config;
pub mod control;
pub mod keys;
pub mod metrics;
pub mod mss;
pub mod netwatch;
pub mod server;
pub mod status;
pub mod tun;
pub mod uplink;

use bytes::Bytes;
use std::net::SocketAddr;
use tokio::sync::{mpsc, oneshot};

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
    },
    /// A control request and where to answer it.
    Control(control::Request, oneshot::Sender<control::Response>),
    /// An interface watched by [`netwatch`] changed.
    Net(netwatch::IfChange),
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
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()
}
