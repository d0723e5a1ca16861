//! The control socket: a Unix socket speaking JSON lines, one request and one response per line.
//!
//! ```text
//! {"cmd":"status"}
//! {"cmd":"status","peer":"bus-17"}
//! {"cmd":"set_weight","link":"lte1","weight":3}
//! {"cmd":"set_recovery","name":"fec:10","peer":"bus-17"}
//! {"cmd":"set_scheduler","name":"round-robin"}
//! {"cmd":"peer_add","entry":{"name":"bus-19","public_key":"...","allowed_ips":["10.77.0.4/32"]}}
//! {"cmd":"peer_remove","name":"bus-17"}
//! ```
//!
//! `peer` (server only) names a vehicle by its `[[peer]]` name: the request then concerns that
//! vehicle alone; without it a server's `set_*` changes every vehicle. `peer_add` and
//! `peer_remove` (server only) list and unlist a vehicle while the server runs; `entry` is a
//! `[[peer]]` table as in the file.
//!
//! Who may talk to it: the socket file is mode 0600 whatever the umask, and every connection's
//! peer credentials (`SO_PEERCRED`) are checked: root or the daemon's own user, nobody else (a
//! user who could connect could switch every vehicle's recovery or weights). At start, only a
//! stale *socket* at the path is removed; any other file there is an error, never deleted.

use super::Input;
use super::config::{PeerEntry, Recovery, Scheduler};
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
    /// A snapshot of the daemon, or of one vehicle's session.
    Status {
        /// Only this vehicle (server).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        peer: Option<String>,
    },
    /// Sets an uplink's scheduler weight (by name, `link<N>` or N).
    SetWeight {
        /// The uplink.
        link: String,
        /// Its new weight.
        weight: u32,
        /// Only this vehicle (server).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        peer: Option<String>,
    },
    /// Switches the loss-recovery scheme of every session, or of one vehicle's.
    SetRecovery {
        /// The scheme, parsed as in config files ([`braid_proto::scheme`]).
        name: Recovery,
        /// Only this vehicle (server).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        peer: Option<String>,
    },
    /// Switches the scheduler of every session, or of one vehicle's.
    SetScheduler {
        /// The scheduler, parsed as in config files.
        name: Scheduler,
        /// Only this vehicle (server).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        peer: Option<String>,
    },
    /// Lists a vehicle (server): it may join at once, the other vehicles are not touched.
    PeerAdd {
        /// Its `[[peer]]` entry, checked as the file's are.
        entry: Box<PeerEntry>,
    },
    /// Unlists a vehicle (server): its session and routes end, the others are not touched.
    PeerRemove {
        /// Its `[[peer]]` name.
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

impl Request {
    /// The vehicle the request is limited to, if any.
    pub fn peer(&self) -> Option<&str> {
        match self {
            Request::Status { peer }
            | Request::SetWeight { peer, .. }
            | Request::SetRecovery { peer, .. }
            | Request::SetScheduler { peer, .. } => peer.as_deref(),
            Request::PeerAdd { .. } | Request::PeerRemove { .. } => None,
        }
    }
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

/// Where a client's control socket is unless its file says otherwise.
pub const DEFAULT_CLIENT_SOCKET: &str = "/run/braid/client.sock";
/// Where a server's control socket is unless its file says otherwise.
pub const DEFAULT_SERVER_SOCKET: &str = "/run/braid/server.sock";

/// The control socket `braid status` and `braid set` talk to: `given` (`--control`), else the
/// default socket of whichever daemon runs here, client or server. Both present, or neither, is
/// an error that names the paths, so the operator knows what to pass.
pub fn default_socket(given: Option<&Path>) -> anyhow::Result<PathBuf> {
    default_socket_among(given, &[Path::new(DEFAULT_CLIENT_SOCKET), Path::new(DEFAULT_SERVER_SOCKET)])
}

fn default_socket_among(given: Option<&Path>, defaults: &[&Path]) -> anyhow::Result<PathBuf> {
    if let Some(p) = given {
        return Ok(p.to_path_buf());
    }
    let present: Vec<&Path> = defaults.iter().copied().filter(|p| p.exists()).collect();
    let list = |ps: &[&Path], sep: &str| ps.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(sep);
    match present.as_slice() {
        [one] => Ok(one.to_path_buf()),
        [] => anyhow::bail!(
            "no braid daemon found: neither {} exists (is it running? its file's `control` key may name another path: --control PATH)",
            list(defaults, " nor ")
        ),
        many => {
            anyhow::bail!(
                "both a client and a server run here ({}): choose one with --control PATH",
                list(many, " and ")
            )
        }
    }
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

    #[test]
    fn requests_without_peer_keep_their_old_form() {
        let r: Request = serde_json::from_str(r#"{"cmd":"status"}"#).expect("status");
        assert!(matches!(r, Request::Status { peer: None }));
        assert_eq!(serde_json::to_string(&r).expect("json"), r#"{"cmd":"status"}"#);
        let r: Request = serde_json::from_str(r#"{"cmd":"set_recovery","name":"arq","peer":"bus-17"}"#).expect("set");
        assert_eq!(r.peer(), Some("bus-17"));
        assert!(serde_json::from_str::<Request>(r#"{"cmd":"status","vehicle":"x"}"#).is_err());
    }

    #[test]
    fn default_socket_follows_the_daemon_that_runs() {
        let dir = std::env::temp_dir().join(format!("braid-ctl-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let (c, s) = (dir.join("client.sock"), dir.join("server.sock"));
        let both = [c.as_path(), s.as_path()];
        let e = format!("{:#}", default_socket_among(None, &both).unwrap_err());
        assert!(e.contains("no braid daemon") && e.contains("client.sock") && e.contains("server.sock"), "{e}");
        std::fs::write(&s, "").expect("touch");
        assert_eq!(default_socket_among(None, &both).expect("server"), s);
        std::fs::write(&c, "").expect("touch");
        let e = format!("{:#}", default_socket_among(None, &both).unwrap_err());
        assert!(e.contains("both") && e.contains("--control"), "{e}");
        let given = dir.join("other.sock");
        assert_eq!(default_socket_among(Some(&given), &both).expect("given"), given);
        let _ = std::fs::remove_dir_all(&dir);
    }

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
        let r =
            tokio::task::spawn_blocking(move || request(&p, &Request::Status { peer: None })).await.unwrap().unwrap();
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
