//! The control socket: a Unix socket speaking JSON lines, one request and one response per line.
//!
//! ```text
//! {"cmd":"status"}
//! {"cmd":"set_weight","link":"lte1","weight":3}
//! {"cmd":"set_recovery","name":"fec10"}
//! {"cmd":"set_scheduler","name":"round-robin"}
//! ```
//!
//! Who may talk to it: the socket file is mode 0600 whatever the umask, and every connection's
//! peer credentials (`SO_PEERCRED`) are checked: root or the daemon's own user, nobody else (a
//! user who could connect could switch every vehicle's recovery or weights). At start, only a
//! stale *socket* at the path is removed; any other file there is an error, never deleted.

use super::Input;
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
        /// `RecoveryKind` name.
        name: String,
    },
    /// Switches the scheduler of every session.
    SetScheduler {
        /// `SchedulerKind` name.
        name: String,
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

/// Removes a socket a daemon that died left at `path`. Anything else there (a regular file, a
/// directory, a symbolic link: a configuration typo or a planted link) is an error and stays.
fn remove_stale(path: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::FileTypeExt;
    let Ok(meta) = std::fs::symlink_metadata(path) else { return Ok(()) };
    if !meta.file_type().is_socket() {
        anyhow::bail!(
            "control: {} exists and is not a socket; refusing to remove it (choose another `control` path)",
            path.display()
        );
    }
    if std::os::unix::net::UnixStream::connect(path).is_ok() {
        anyhow::bail!("control: another daemon is listening on {}", path.display());
    }
    std::fs::remove_file(path).with_context(|| format!("control: cannot remove the stale socket {}", path.display()))
}

/// Whether a connection's peer may control the daemon: root, or the user the daemon runs as
/// (`owner`, the socket file's owner).
fn allowed(stream: &tokio::net::UnixStream, owner: u32) -> bool {
    stream.peer_cred().is_ok_and(|c| c.uid() == 0 || c.uid() == owner)
}

/// How long the accept loops wait after an error (out of file descriptors, say) before the next
/// accept: the error would otherwise repeat at once and spin a core.
pub(super) const ACCEPT_BACKOFF: std::time::Duration = std::time::Duration::from_millis(100);

/// An accept's result for the accept loops of the control socket and the metrics endpoint: the
/// connection, or after an error a pause of [`ACCEPT_BACKOFF`] and `None` (accept again).
pub(super) async fn accepted<T>(r: std::io::Result<T>, what: &str) -> Option<T> {
    match r {
        Ok(t) => Some(t),
        Err(e) => {
            tracing::warn!(error = %e, "{what}: accept failed; backing off");
            tokio::time::sleep(ACCEPT_BACKOFF).await;
            None
        }
    }
}

/// Listens on `path` and forwards requests to the loop.
pub fn spawn(path: &Path, tx: mpsc::Sender<Input>) -> anyhow::Result<SocketGuard> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("control: cannot create {}", dir.display()))?;
    }
    remove_stale(path)?;
    let listener = UnixListener::bind(path).with_context(|| format!("control: cannot listen on {}", path.display()))?;
    let guard = SocketGuard(path.to_path_buf());
    // The mode the umask gave is replaced at once; a connection in between still meets the
    // credential check below.
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("control: cannot chmod 600 {}", path.display()))?;
    let owner = std::fs::metadata(path).with_context(|| format!("control: {}", path.display()))?.uid();
    tokio::spawn(async move {
        loop {
            let Some((stream, _)) = accepted(listener.accept().await, "control").await else { continue };
            if !allowed(&stream, owner) {
                let uid = stream.peer_cred().map(|c| c.uid()).ok();
                tracing::warn!(?uid, "control: connection from another user refused");
                continue;
            }
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
    Ok(guard)
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("braid-control-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[tokio::test]
    async fn socket_is_0600_and_answers_its_owner() {
        // Whatever mode bind gave the socket (the umask's; a daemon started with umask 000 is
        // checked in tests/security_netns.rs), it ends up 0600.
        let d = dir("mode");
        let path = d.join("c.sock");
        let (tx, mut rx) = mpsc::channel(4);
        let _guard = spawn(&path, tx).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "control socket mode {mode:o}");
        tokio::spawn(async move {
            while let Some(Input::Control(_, reply)) = rx.recv().await {
                let _ = reply.send(Response::ok());
            }
        });
        let p = path.clone();
        let r = tokio::task::spawn_blocking(move || request(&p, &Request::Status)).await.unwrap().unwrap();
        assert!(r.ok, "the daemon's own user is answered");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[tokio::test(start_paused = true)]
    async fn accept_errors_back_off() {
        // An accept that always fails (out of file descriptors) is retried ten times a second,
        // not in a loop that spins a core.
        let start = tokio::time::Instant::now();
        let mut tries = 0;
        while start.elapsed() < std::time::Duration::from_secs(1) {
            tries += 1;
            assert!(tries <= 20, "accept retried {tries} times within a second");
            let failed: std::io::Result<()> = Err(std::io::Error::from_raw_os_error(24));
            assert!(accepted(failed, "test").await.is_none());
        }
        assert_eq!(tries, 10);
    }

    #[test]
    fn only_a_socket_is_removed() {
        let d = dir("rm");
        let f = d.join("not-a-socket");
        std::fs::write(&f, "precious").unwrap();
        let e = format!("{:#}", remove_stale(&f).unwrap_err());
        assert!(e.contains("not a socket"), "{e}");
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "precious");
        let link = d.join("link");
        std::os::unix::fs::symlink(&f, &link).unwrap();
        assert!(remove_stale(&link).is_err());
        assert!(f.exists() && link.exists());
        let s = d.join("stale.sock");
        drop(std::os::unix::net::UnixListener::bind(&s).unwrap());
        remove_stale(&s).unwrap();
        assert!(!s.exists(), "a stale socket is removed");
        let _ = std::fs::remove_dir_all(&d);
    }
}
