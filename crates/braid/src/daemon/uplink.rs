//! UDP sockets: one per client uplink, bound to its interface, and the server's listener.

use super::{Clock, Input, rx_instant};
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

fn udp_socket(v6: bool) -> io::Result<Socket> {
    let s = Socket::new(if v6 { Domain::IPV6 } else { Domain::IPV4 }, Type::DGRAM, Some(Protocol::UDP))?;
    s.set_nonblocking(true)?;
    // Best effort: the kernel caps them at net.core.{r,w}mem_max.
    let _ = s.set_recv_buffer_size(SOCKET_BUFFER);
    let _ = s.set_send_buffer_size(SOCKET_BUFFER);
    Ok(s)
}

/// A socket that sends and receives only through `interface` (SO_BINDTODEVICE), so that every
/// uplink is really used whatever the routing table prefers, of the server's family (`v6`).
/// Bound to the wildcard address: the kernel picks the interface's current address as source,
/// and the socket is rebuilt when that address changes so the server sees a fresh flow (NAT
/// state of the old one is gone anyway).
pub fn bind_to_interface(interface: &str, v6: bool) -> io::Result<UdpSocket> {
    let s = udp_socket(v6)?;
    s.bind_device(Some(interface.as_bytes()))?;
    let any: SocketAddr = if v6 { (std::net::Ipv6Addr::UNSPECIFIED, 0).into() } else { ([0, 0, 0, 0], 0).into() };
    if v6 {
        s.set_only_v6(true)?;
    }
    s.bind(&any.into())?;
    UdpSocket::from_std(s.into())
}

/// The server's listening socket. On the IPv6 wildcard (`[::]:7700`) it takes IPv4 vehicles too
/// (dual stack; their addresses then read as IPv4-mapped IPv6 ones, and replies go back the same
/// way); on a specific address only that address's family.
pub fn listen(addr: SocketAddr) -> io::Result<UdpSocket> {
    let s = udp_socket(addr.is_ipv6())?;
    s.set_reuse_address(true)?;
    if addr.is_ipv6() {
        s.set_only_v6(!addr.ip().is_unspecified())?;
    }
    s.bind(&addr.into())?;
    UdpSocket::from_std(s.into())
}

/// The server's `n` listening sockets, one per worker, all on `addr` (`SO_REUSEPORT`), with
/// socket `i` getting the datagrams of the sessions whose id is `i` modulo `n`
/// ([`steer_by_session`]; without it the kernel spreads them by source address and port). One socket, as
/// [`listen`] binds it, when `n` is 1. Before it joins the port with `SO_REUSEPORT`, the address
/// is bound once without it, so a server already running there is an error ("address in use"),
/// not a silent sharing of its vehicles' datagrams.
pub fn listen_group(addr: SocketAddr, n: usize) -> io::Result<Vec<UdpSocket>> {
    if n <= 1 {
        return Ok(vec![listen(addr)?]);
    }
    let socket = |at: SocketAddr| -> io::Result<Socket> {
        let s = udp_socket(at.is_ipv6())?;
        s.set_reuse_port(true)?;
        if at.is_ipv6() {
            s.set_only_v6(!at.ip().is_unspecified())?;
        }
        s.bind(&at.into())?;
        Ok(s)
    };
    if addr.port() != 0 {
        let probe = udp_socket(addr.is_ipv6())?;
        if addr.is_ipv6() {
            probe.set_only_v6(!addr.ip().is_unspecified())?;
        }
        probe.bind(&addr.into())?;
    }
    let first = socket(addr)?;
    // With port 0 the kernel picked one: the others join that one.
    let at = first.local_addr()?.as_socket().unwrap_or(addr);
    let mut group = vec![UdpSocket::from_std(first.into())?];
    for _ in 1..n {
        group.push(UdpSocket::from_std(socket(at)?.into())?);
    }
    if let Err(e) = steer_by_session(&group[0], n) {
        // Still correct without it: a reader hands a datagram to its session's worker.
        tracing::warn!(error = %e, "cannot steer datagrams to their session's socket; they are handed over instead");
    }
    Ok(group)
}

/// Has the kernel deliver each datagram to socket `session id % n` of the group (its index in
/// the order the sockets were bound), the socket of the session's worker, so no datagram needs
/// handing over: a classic BPF program on the `SO_REUSEPORT` group
/// (`SO_ATTACH_REUSEPORT_CBPF`), which sees the UDP payload, whose bytes 1-2 are the clear
/// header's session id (big-endian). A datagram too short for it goes to socket 0.
fn steer_by_session(sock: &UdpSocket, n: usize) -> io::Result<()> {
    use nix::sys::socket::{setsockopt, sockopt::AttachReusePortCbpf};
    let op = |code: u32, k: u32| libc::sock_filter { code: code as u16, jt: 0, jf: 0, k };
    let mut program = [
        op(libc::BPF_LD | libc::BPF_H | libc::BPF_ABS, 1),
        op(libc::BPF_ALU | libc::BPF_MOD | libc::BPF_K, n as u32),
        op(libc::BPF_RET | libc::BPF_A, 0),
    ];
    let fprog = libc::sock_fprog { len: program.len() as u16, filter: program.as_mut_ptr() };
    setsockopt(sock, AttachReusePortCbpf, &fprog).map_err(io::Error::from)
}

/// A datagram as the loop gets it: its sender, its bytes and when the kernel received it.
#[derive(Debug, Clone)]
pub struct Received {
    /// Its source.
    pub from: SocketAddr,
    /// Its bytes.
    pub data: Bytes,
    /// Its kernel receive time on the engine's clock ([`rx_instant`]).
    pub at: braid_proto::Instant,
}

/// The datagrams in one receive buffer of `len` bytes: with UDP GRO the kernel coalesces
/// equal-sized datagrams of one sender into one buffer, `stride` bytes each, the last one possibly
/// shorter ([`quinn_udp::RecvMeta::stride`]). A stride of 0 (never sent by the kernel) or of at
/// least `len` means one datagram; an empty buffer is one empty datagram, so it is counted as
/// malformed like any other.
pub fn gro_segments(buf: &[u8], stride: usize) -> impl Iterator<Item = &[u8]> {
    let stride = if stride == 0 { buf.len() } else { stride };
    buf.is_empty().then_some(buf).into_iter().chain(buf.chunks(stride.max(1)))
}

/// Batched reception (quinn-udp): `recvmmsg` fills up to [`quinn_udp::BATCH_SIZE`] buffers per
/// system call, and UDP GRO, where the kernel has it, coalesces a burst of equal-sized datagrams
/// from one sender into one buffer that is split here by its stride. At high rates this is what
/// keeps the per-datagram system-call cost off the loop. quinn-udp also turns on `SO_TIMESTAMPNS`,
/// so every buffer comes with the time the kernel received it.
pub struct BatchReceiver {
    state: quinn_udp::UdpSocketState,
    bufs: Vec<Vec<u8>>,
    metas: Vec<quinn_udp::RecvMeta>,
    /// Whether a buffer without a kernel timestamp, and one coalesced by GRO, were logged.
    seen_untimed: bool,
    seen_gro: bool,
}

impl BatchReceiver {
    /// Sets `sock` up for batched reception (GRO where available, kernel receive timestamps).
    pub fn new(sock: &UdpSocket) -> io::Result<Self> {
        let state = quinn_udp::UdpSocketState::new(sock.into())?;
        // A GRO buffer holds up to 64 datagrams, at most 64 KiB together; one 64 KiB buffer per
        // batch slot covers that and the largest single datagram.
        let bufs = vec![vec![0u8; 65536]; quinn_udp::BATCH_SIZE];
        let metas = vec![quinn_udp::RecvMeta::default(); quinn_udp::BATCH_SIZE];
        Ok(BatchReceiver { state, bufs, metas, seen_untimed: false, seen_gro: false })
    }

    /// Waits until datagrams are there, reads a batch and appends each datagram to `out` with its
    /// receive time on `clock`.
    ///
    /// The kernel stamps a GRO buffer once, so the datagrams split out of it share that time. GRO
    /// only merges datagrams handled in the same NAPI poll, which the kernel would have stamped
    /// within microseconds of each other anyway (software timestamps are taken as the softirq
    /// processes packets, not as they come off the wire). The capacity estimator (braid-proto
    /// `link/rx.rs`) divides the bits of a train of queued packets by the sum of their arrival
    /// gaps; it takes a clump as one arrival whose bits drained in the gap before it, so a train
    /// that arrives in clumps gives the same rate, and a single clump is never a sample on its
    /// own (it needs 2 ms of gaps).
    pub async fn recv(&mut self, sock: &UdpSocket, clock: &Clock, out: &mut Vec<Received>) -> io::Result<()> {
        let BatchReceiver { state, bufs, metas, seen_untimed, seen_gro } = self;
        let n = loop {
            sock.readable().await?;
            let mut iovs: Vec<io::IoSliceMut<'_>> = bufs.iter_mut().map(|b| io::IoSliceMut::new(b)).collect();
            match sock.try_io(tokio::io::Interest::READABLE, || state.recv(sock.into(), &mut iovs, metas)) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            }
        };
        // Both clocks read once per batch, after the read: every timestamp of the batch is
        // earlier, so none lands in the future.
        let (now, wall) = clock.now_and_wall();
        for (meta, buf) in metas.iter().zip(bufs.iter()).take(n) {
            if meta.timestamp.is_none() && !*seen_untimed {
                *seen_untimed = true;
                tracing::warn!("the kernel gave no receive timestamp: arrivals are timed when read");
            }
            if meta.stride < meta.len && !*seen_gro {
                *seen_gro = true;
                tracing::debug!(len = meta.len, stride = meta.stride, "GRO coalesces datagrams on this socket");
            }
            let at = rx_instant(meta.timestamp, now, wall);
            let data = &buf[..meta.len.min(buf.len())];
            out.extend(gro_segments(data, meta.stride).map(|d| Received {
                from: meta.addr,
                data: Bytes::copy_from_slice(d),
                at,
            }));
        }
        Ok(())
    }
}

/// Batched sending (quinn-udp): consecutive datagrams of one size to one destination are
/// collected and leave in one `sendmsg` with UDP GSO where the kernel has it (one datagram per
/// call otherwise). A shorter datagram may end a batch, as GSO allows. Call [`GsoBatch::finish`]
/// before waiting for more input, so nothing is held back.
///
/// A datagram waits in a batch only while the rest of it is built (at most 64 datagrams, a few
/// microseconds each in a release build), so its stamp, taken when it was built, is that much
/// older than its departure. The segments leave back to back, as single sends in a loop did;
/// on a real uplink the bottleneck spaces them and the peer measures its rate from that. Over a
/// veth pair nothing spaces them: the batch reaches the peer's socket as one buffer with one
/// kernel timestamp, so there the peer sees no dispersion and its capacity estimate is only the
/// rate it was offered (measured: 7-15 Mbit/s under a 20 Mbit/s load, against hundreds without
/// GSO). Turning GRO off would not change that: the kernel segments such a buffer on delivery,
/// every segment with the buffer's timestamp.
pub struct GsoBatch {
    state: quinn_udp::UdpSocketState,
    buf: Vec<u8>,
    segment: usize,
    count: usize,
    dest: Option<SocketAddr>,
    closed: bool,
}

/// Most bytes in one GSO send: the UDP length field's limit, less the headers.
const GSO_BYTES_MAX: usize = 65_000;

impl GsoBatch {
    /// A batch for datagrams sent through `sock`.
    pub fn new(sock: &UdpSocket) -> io::Result<Self> {
        let state = quinn_udp::UdpSocketState::new(sock.into())?;
        Ok(GsoBatch { state, buf: Vec::with_capacity(GSO_BYTES_MAX), segment: 0, count: 0, dest: None, closed: false })
    }

    /// Adds a datagram for `dest`, first sending what is batched if it cannot join it. Errors
    /// are those of a send that failed (the datagrams of that batch are lost, as one would be).
    pub async fn push(&mut self, sock: &UdpSocket, dest: SocketAddr, datagram: &[u8]) -> io::Result<()> {
        let fits = self.dest == Some(dest)
            && !self.closed
            && self.segment > 0
            && datagram.len() <= self.segment
            && self.count < self.state.max_gso_segments()
            && self.buf.len() + datagram.len() <= GSO_BYTES_MAX;
        let mut result = Ok(());
        if !fits {
            result = self.finish(sock).await;
            self.dest = Some(dest);
            self.segment = datagram.len();
        }
        // A datagram shorter than the segment size must be the last of its batch.
        self.closed = datagram.len() < self.segment;
        self.buf.extend_from_slice(datagram);
        self.count += 1;
        result
    }

    /// Sends what is batched.
    pub async fn finish(&mut self, sock: &UdpSocket) -> io::Result<()> {
        let Some(dest) = self.dest.take() else { return Ok(()) };
        let transmit = quinn_udp::Transmit {
            destination: dest,
            ecn: None,
            contents: &self.buf,
            segment_size: (self.count > 1).then_some(self.segment),
            src_ip: None,
        };
        let state = &self.state;
        let result = loop {
            if let Err(e) = sock.writable().await {
                break Err(e);
            }
            match sock.try_io(tokio::io::Interest::WRITABLE, || state.try_send(sock.into(), &transmit)) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                r => break r,
            }
        };
        self.buf.clear();
        self.count = 0;
        self.closed = false;
        result
    }
}

/// Reads datagrams from `sock` in batches and hands them to the loop, tagged with the uplink
/// index. Aborted through the handle when the socket is replaced.
pub fn spawn_reader(
    sock: Arc<UdpSocket>,
    mut rx: BatchReceiver,
    clock: Clock,
    uplink: usize,
    tx: mpsc::Sender<Input>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut batch = Vec::with_capacity(quinn_udp::BATCH_SIZE);
        loop {
            match rx.recv(&sock, &clock, &mut batch).await {
                Ok(()) => {
                    for Received { from, data, at } in batch.drain(..) {
                        if tx.send(Input::Datagram { uplink, from, data, at }).await.is_err() {
                            return;
                        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn split(buf: &[u8], stride: usize) -> Vec<&[u8]> {
        gro_segments(buf, stride).collect()
    }

    #[test]
    fn gro_buffer_splits_by_stride_with_a_short_last_segment() {
        let buf: Vec<u8> = (0..10).collect();
        assert_eq!(split(&buf, 4), [&buf[0..4], &buf[4..8], &buf[8..10]]);
        assert_eq!(split(&buf, 5), [&buf[0..5], &buf[5..10]]);
        assert_eq!(split(&buf, 1).len(), 10);
    }

    /// Datagrams pushed through a [`GsoBatch`] arrive through a [`BatchReceiver`] intact and in
    /// order: runs of one size leave together (GSO, where the kernel has it; on loopback the
    /// batch reaches the socket as one GRO buffer), a shorter one ends a run, a change of size
    /// or destination starts a new one.
    #[tokio::test]
    async fn batched_sends_arrive_intact_and_in_order() {
        let bind = || {
            let s = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
            s.set_nonblocking(true).expect("nonblocking");
            UdpSocket::from_std(s).expect("tokio socket")
        };
        let (tx, rx, other) = (bind(), bind(), bind());
        let (to, elsewhere) = (rx.local_addr().expect("addr"), other.local_addr().expect("addr"));
        let mut batch = GsoBatch::new(&tx).expect("batch");
        let mut receiver = BatchReceiver::new(&rx).expect("receiver");
        let sizes = [1200, 1200, 1200, 1200, 700, 1200, 1200, 90, 90, 1200];
        let datagram = |i: usize| vec![i as u8; sizes[i]];
        for i in 0..sizes.len() {
            let dest = if i == 8 { elsewhere } else { to };
            batch.push(&tx, dest, &datagram(i)).await.expect("push");
        }
        batch.finish(&tx).await.expect("finish");
        let clock = Clock::new();
        let mut got = Vec::new();
        while got.len() < sizes.len() - 1 {
            tokio::time::timeout(std::time::Duration::from_secs(5), receiver.recv(&rx, &clock, &mut got))
                .await
                .expect("datagrams within 5 s")
                .expect("recv");
        }
        let want: Vec<Vec<u8>> = (0..sizes.len()).filter(|&i| i != 8).map(datagram).collect();
        let got: Vec<Vec<u8>> = got.iter().map(|r| r.data.to_vec()).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn buffer_without_gro_is_one_datagram() {
        let buf = [7u8; 1400];
        // quinn-udp reports stride = len when there was no GRO control message.
        assert_eq!(split(&buf, 1400), [&buf[..]]);
        assert_eq!(split(&buf, 65536), [&buf[..]]);
        assert_eq!(split(&buf, 0), [&buf[..]], "a zero stride must not panic nor split");
        assert_eq!(split(&[], 0), [&[] as &[u8]], "an empty datagram is still one datagram");
        assert_eq!(split(&[], 1200), [&[] as &[u8]]);
    }
}
