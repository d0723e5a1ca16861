//! The control socket: a Unix socket speaking JSON lines, one request and one response per line.
//!
//! ```text
//! {"cmd":"status"}
//! {"cmd":"set_weight","link":"lte1","weight":3}
//! {"cmd":"set_recovery","name":"fec:10"}
//! {"cmd":"set_scheduler","name":"round-robin"}
//! ```

use super::Input;
use super::config::{Recovery, Scheduler};
use super::status::DaemonStatus;
use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::net::UnixListener;
use tokio::sync::{mpsc, oneshot};

/// A request to the running daemon.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// A snapshot of the daemon.
    Status,
    /// Sets an uplink's scheduler weight (by name, `link<N>` or N).
    SetWeight {
        /// The uplink.
        link: String,
        /// Its new weight.
        weight: u32,
    },
    /// Switches the loss-recovery scheme of every session.
    SetRecovery {
        /// The scheme, parsed as in config files ([`braid_proto::scheme`]).
        name: Recovery,
    },
    /// Switches the scheduler of every session.
    SetScheduler {
        /// The scheduler, parsed as in config files.
        name: Scheduler,
    },
}

/// The daemon's answer.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Response {
    /// Whether the request was carried out.
    pub ok: bool,
    /// Why not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The status, for `status`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<DaemonStatus>,
}

impl Response {
    /// Success without a payload.
    pub fn ok() -> Self {
        Response { ok: true, ..Default::default() }
    }

    /// Failure.
    pub fn err(e: impl std::fmt::Display) -> Self {
        Response { ok: false, error: Some(e.to_string()), status: None }
    }
}

/// Longest request line accepted: a request is a few dozen bytes; this bounds a bad client.
const MAX_LINE: usize = 4096;

/// Removes the socket file when the daemon stops.
pub struct SocketGuard(PathBuf);

impl Drop for SocketGuard {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Listens on `path` and forwards requests to the loop.
pub fn spawn(path: &Path, tx: mpsc::Sender<Input>) -> anyhow::Result<SocketGuard> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("control: cannot create {}", dir.display()))?;
    }
    // A socket file left by a daemon that died: nothing listens on it any more.
    if std::os::unix::net::UnixStream::connect(path).is_err() {
        let _ = std::fs::remove_file(path);
    }
    let listener = UnixListener::bind(path).with_context(|| format!("control: cannot listen on {}", path.display()))?;
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { continue };
            let tx = tx.clone();
            tokio::spawn(async move {
                let (rd, mut wr) = stream.into_split();
                let mut lines = tokio::io::BufReader::new(rd.take_limit()).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    let resp = match serde_json::from_str::<Request>(&line) {
                        Ok(req) => ask(&tx, req).await,
                        Err(e) => Response::err(format!("bad request: {e}")),
                    };
                    let mut out = serde_json::to_vec(&resp).unwrap_or_default();
                    out.push(b'\n');
                    if wr.write_all(&out).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    Ok(SocketGuard(path.to_path_buf()))
}

/// Bounds what one connection may send, so a client that never sends a newline cannot grow a
/// buffer without limit.
trait TakeLimit: Sized {
    fn take_limit(self) -> tokio::io::Take<Self>;
}

impl<R: tokio::io::AsyncRead> TakeLimit for R {
    fn take_limit(self) -> tokio::io::Take<Self> {
        tokio::io::AsyncReadExt::take(self, (MAX_LINE * 64) as u64)
    }
}

/// Asks the loop and waits for its answer.
pub async fn ask(tx: &mpsc::Sender<Input>, req: Request) -> Response {
    let (rtx, rrx) = oneshot::channel();
    if tx.send(Input::Control(req, rtx)).await.is_err() {
        return Response::err("daemon is stopping");
    }
    rrx.await.unwrap_or_else(|_| Response::err("daemon is stopping"))
}

/// Sends one request to a running daemon (for `braid status` and `braid set`).
pub fn request(path: &Path, req: &Request) -> anyhow::Result<Response> {
    let mut s = std::os::unix::net::UnixStream::connect(path)
        .with_context(|| format!("cannot reach the daemon at {} (is it running? --control PATH)", path.display()))?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
    let mut line = serde_json::to_vec(req)?;
    line.push(b'\n');
    s.write_all(&line)?;
    let mut answer = String::new();
    BufReader::new(s).read_line(&mut answer)?;
    serde_json::from_str(&answer).with_context(|| format!("bad answer from the daemon: {answer:?}"))
}
