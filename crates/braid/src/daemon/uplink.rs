//! UDP sockets: one per client uplink, bound to its interface, and the server's listener.

use super::Input;
use bytes::Bytes;
use socket2::{Domain, Protocol, Socket, Type};
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Socket buffers: a few hundred packets of headroom so a burst from the engine, or a scheduling
/// hiccup of the loop, does not drop datagrams in the kernel.
const SOCKET_BUFFER: usize = 4 << 20;

fn udp_socket() -> io::Result<Socket> {
    let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    s.set_nonblocking(true)?;
    // Best effort: the kernel caps them at net.core.{r,w}mem_max.
    let _ = s.set_recv_buffer_size(SOCKET_BUFFER);
    let _ = s.set_send_buffer_size(SOCKET_BUFFER);
    Ok(s)
}

/// A socket that sends and receives only through `interface` (SO_BINDTODEVICE), so that every
/// uplink is really used whatever the routing table prefers. Bound to the wildcard address: the
/// kernel picks the interface's current address as source, and the socket is rebuilt when that
/// address changes so the server sees a fresh flow (NAT state of the old one is gone anyway).
pub fn bind_to_interface(interface: &str) -> io::Result<UdpSocket> {
    let s = udp_socket()?;
    s.bind_device(Some(interface.as_bytes()))?;
    s.bind(&SocketAddr::from(([0, 0, 0, 0], 0)).into())?;
    UdpSocket::from_std(s.into())
}

/// The server's listening socket.
pub fn listen(addr: SocketAddr) -> io::Result<UdpSocket> {
    let s = udp_socket()?;
    s.set_reuse_address(true)?;
    s.bind(&addr.into())?;
    UdpSocket::from_std(s.into())
}

/// Reads datagrams from `sock` and hands them to the loop, tagged with the uplink index. Aborted
/// through the handle when the socket is replaced.
pub fn spawn_reader(sock: Arc<UdpSocket>, uplink: usize, tx: mpsc::Sender<Input>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut buf = vec![0u8; 65536];
        loop {
            match sock.recv_from(&mut buf).await {
                Ok((n, from)) => {
                    let input = Input::Datagram { uplink, from, data: Bytes::copy_from_slice(&buf[..n]) };
                    if tx.send(input).await.is_err() {
                        return;
                    }
                }
                Err(e) => {
                    // E.g. the interface went away; netwatch will rebuild the socket. Pause so a
                    // persistent error does not spin.
                    tracing::debug!(uplink, error = %e, "uplink receive failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            }
        }
    })
}
