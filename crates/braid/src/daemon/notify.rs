//! systemd's readiness protocol (`sd_notify(3)`, `Type=notify`): one datagram such as `READY=1`
//! to the Unix socket named by `$NOTIFY_SOCKET`, written here with the standard library rather
//! than a dependency. Nothing happens when the variable is unset (not started by systemd).

use std::os::unix::net::UnixDatagram;

/// Tells the service manager `state` (`READY=1`, `STOPPING=1`, `RELOADING=1`); an error only
/// when `$NOTIFY_SOCKET` is set and the message cannot be sent.
pub fn notify(state: &str) -> std::io::Result<()> {
    match std::env::var_os("NOTIFY_SOCKET") {
        Some(path) => send(&path, state),
        None => Ok(()),
    }
}

fn send(path: &std::ffi::OsStr, state: &str) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt as _;
    let sock = UnixDatagram::unbound()?;
    let bytes = path.as_bytes();
    // A leading '@' names a socket in Linux's abstract namespace.
    if let Some(name) = bytes.strip_prefix(b"@") {
        use std::os::linux::net::SocketAddrExt as _;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
        sock.send_to_addr(state.as_bytes(), &addr)?;
    } else {
        sock.send_to(state.as_bytes(), std::path::Path::new(path))?;
    }
    Ok(())
}

/// [`notify`], logging rather than failing: readiness is a courtesy to the service manager,
/// never a reason for the tunnel to stop.
pub fn notify_or_log(state: &str) {
    if let Err(e) = notify(state) {
        tracing::warn!(error = %e, state, "cannot notify the service manager ($NOTIFY_SOCKET)");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_reaches_a_path_socket_and_an_abstract_one() {
        let dir = std::env::temp_dir().join(format!("braid-notify-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("notify.sock");
        let rx = UnixDatagram::bind(&path).unwrap();
        send(path.as_os_str(), "READY=1").unwrap();
        let mut buf = [0u8; 64];
        let n = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1");

        use std::os::linux::net::SocketAddrExt as _;
        let name = format!("braid-notify-test-{}", std::process::id());
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let rx = UnixDatagram::bind_addr(&addr).unwrap();
        send(std::ffi::OsStr::new(&format!("@{name}")), "STOPPING=1").unwrap();
        let n = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"STOPPING=1");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
