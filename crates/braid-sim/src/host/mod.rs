//! End hosts for the simulator: real TCP (smoltcp) on virtual time.
//!
//! The simulator carries the passengers' IP packets through a braid tunnel between two hosts,
//! `riders` (the passengers' devices) and `web` (remote servers). Each is a [`TcpHost`]: a
//! smoltcp interface on an in-memory device, driven sans-IO like braid-proto (docs/design.md 2): time
//! comes in as `now`, packets go in through [`TcpHost::handle_packet`] and come out of
//! [`TcpHost::poll_transmit`], and [`TcpHost::poll_at`] says when to call [`TcpHost::poll`] next.
//! Flow completion times (docs/design.md 6) are thus measured on real TCP behaviour: handshake, slow
//! start, Reno or CUBIC, delayed ACKs, fast retransmit and retransmission timeouts.
//!
//! smoltcp is patched (`vendor/smoltcp`, see `vendor/README.md`) to Linux's initial congestion
//! window (10 segments, RFC 6928) and minimum RTO (200 ms), so that flow completion times match
//! the real testbed's kernels, and given Linux's SACK recovery, RACK, HyStart, RTO rule and byte
//! counting ([`HostConfig`]'s options, all on by default: the hosts are today's Linux). Where
//! smoltcp 0.14 still differs from Linux the hosts behave as smoltcp does, for every scheme alike:
//! no TCP timestamps (smoltcp's timestamp source is a plain `fn` that cannot see virtual time).
//! One Linux behaviour is kept on purpose: the ACK that completes the handshake is not delayed.
//!
//! A flow is one TCP connection from the rider to a port the web host listens on. The sender
//! writes a pattern derived from the flow id (module `pattern`), then closes; the receiver checks every
//! byte and reports [`FlowEvent::Completed`] when it has read them all. [`udp`] builds the
//! constant-bit-rate probes of the `cbr` workload.

mod device;
mod flow;
mod pattern;
pub mod udp;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

use braid_proto::Instant;
use serde::{Deserialize, Serialize};
use smoltcp::iface::{Config, Interface, SocketSet};
use smoltcp::socket::tcp::{self, CongestionControl};
use smoltcp::time::Instant as SmolInstant;
use smoltcp::wire::{HardwareAddress, IpAddress, IpCidr};

use device::QueueDevice;
use flow::{Flow, Limits};

/// Identifies a flow across both hosts; chosen by the workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct FlowId(pub u64);

impl fmt::Display for FlowId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "flow#{}", self.0)
    }
}

/// What this host's side of a flow does with data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transfer {
    /// Write this many pattern bytes, then close (the web side of a "down" flow).
    Send(u64),
    /// Read and check this many bytes; report `Completed` when all are in.
    Receive(u64),
    /// Write pattern bytes as fast as TCP takes them, never close (bulk goodput).
    SendForever,
    /// Read and check bytes forever; see [`TcpHost::bytes_received`] (bulk goodput).
    ReceiveForever,
}

/// The congestion controller of every socket of a host.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Congestion {
    /// NewReno (RFC 5681).
    Reno,
    /// CUBIC (RFC 8312), the default of Linux, Windows and macOS.
    #[default]
    Cubic,
}

impl From<Congestion> for CongestionControl {
    fn from(c: Congestion) -> Self {
        match c {
            Congestion::Reno => CongestionControl::Reno,
            Congestion::Cubic => CongestionControl::Cubic,
        }
    }
}

/// Loss events of a host's TCP senders ([`TcpHost::tcp_counters`]; on the testbed, a kernel's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpCounters {
    /// Retransmission timeouts (each backoff counts again).
    pub timeouts: u64,
    /// Loss recoveries entered (fast retransmit or SACK recovery), each a congestion response.
    pub recoveries: u64,
    /// Of `timeouts`, those found spurious and undone (F-RTO; Linux's `TCPSpuriousRTOs`): the
    /// data had only been delayed.
    pub spurious_timeouts: u64,
}

impl TcpCounters {
    /// Adds what `socket` counted.
    fn add_socket(&mut self, socket: &tcp::Socket<'_>) {
        self.timeouts += u64::from(socket.timeouts());
        self.recoveries += u64::from(socket.recoveries());
        self.spurious_timeouts += u64::from(socket.spurious_timeouts());
    }
}

impl std::ops::Add for TcpCounters {
    type Output = TcpCounters;
    fn add(self, o: TcpCounters) -> TcpCounters {
        TcpCounters {
            timeouts: self.timeouts + o.timeouts,
            recoveries: self.recoveries + o.recoveries,
            spurious_timeouts: self.spurious_timeouts + o.spurious_timeouts,
        }
    }
}

/// How a [`TcpHost`] is set up. Build with [`HostConfig::new`] and adjust the fields.
#[derive(Clone, Debug, PartialEq)]
pub struct HostConfig {
    /// The host's IPv4 address; it must be unicast.
    pub address: Ipv4Addr,
    /// Prefix length of the host's subnet (at most 32). Other subnets are reached through a
    /// default route, so the two hosts may sit in different subnets.
    pub prefix_len: u8,
    /// IP MTU in bytes. The MSS smoltcp advertises and uses is `mtu - 40`.
    pub mtu: usize,
    /// Congestion controller.
    pub congestion: Congestion,
    /// Retransmission timeout before the first RTT sample (RFC 6298 2.1).
    pub initial_rto: Duration,
    /// Lower bound of the retransmission timeout (Linux's `TCP_RTO_MIN`).
    pub min_rto: Duration,
    /// Congestion window of a new connection, bytes.
    pub initial_window: usize,
    /// SACK loss recovery (RFC 2018, RFC 6675; smoltcp's `set_sack_recovery`), for the host
    /// as sender and as receiver (three SACK blocks per ACK).
    pub sack: bool,
    /// HyStart's delay-based slow-start exit (CUBIC only; smoltcp's `set_hystart`).
    pub hystart: bool,
    /// Linux's RTO rule, SRTT + max(4 x RTTVAR, min RTO) (smoltcp's `set_linux_rto`).
    pub linux_rto: bool,
    /// Window growth by the bytes each ACK covers, as Linux counts acknowledged segments (RFC
    /// 3465; smoltcp's `set_byte_counting`).
    pub byte_counting: bool,
    /// RACK for SACK recovery's resends: one lost again is found by what was sent after it,
    /// without waiting for a timeout (RFC 8985; smoltcp's `set_rack`).
    pub rack: bool,
    /// Only whole segments while the congestion window holds the sender back, as Linux, which
    /// counts its window in segments (smoltcp's `set_whole_segments`); off, smoltcp fills
    /// whatever room the window has, a runt of a few bytes after each full segment.
    pub whole_segments: bool,
    /// Upper bound on the MSS, like a router's MSS clamping in front of a tunnel; applied by
    /// lowering the MTU the stack sees to `mss + 40`.
    pub mss_clamp: Option<u16>,
    /// Size of a socket's receive buffer and of its send buffer, in bytes (a flow smaller than
    /// this gets buffers of its size). Windows above 64 KiB use window scaling (RFC 7323),
    /// which smoltcp negotiates from the receive buffer's size.
    pub socket_buffer: usize,
    /// Seed of smoltcp's generator (initial sequence numbers, IP ids) and of ephemeral ports.
    pub seed: u64,
    /// A running flow that makes no progress (no state change, no byte read or acknowledged)
    /// for this long is `Failed` with [`FailReason::Timeout`].
    pub idle_timeout: Duration,
    /// How long a finished or failed flow's socket may take to close before it is dropped.
    pub linger: Duration,
}

impl HostConfig {
    /// A host at `address/prefix_len` as today's Linux: MTU 1500, CUBIC with HyStart, SACK
    /// recovery with RACK, byte counting, whole segments, Linux's RTO rule and bounds (1 s initial, 200 ms
    /// minimum) and initial window (14600 bytes); no MSS clamp, 256 KiB socket buffers, seed 0,
    /// 60 s idle timeout, 60 s linger. Turn the six options off for smoltcp's own (older) TCP.
    pub fn new(address: Ipv4Addr, prefix_len: u8) -> Self {
        HostConfig {
            address,
            prefix_len,
            mtu: 1500,
            congestion: Congestion::default(),
            initial_rto: Duration::from_secs(1),
            min_rto: Duration::from_millis(200),
            initial_window: 14_600,
            sack: true,
            hystart: true,
            linux_rto: true,
            byte_counting: true,
            rack: true,
            whole_segments: true,
            mss_clamp: None,
            socket_buffer: 256 * 1024,
            seed: 0,
            idle_timeout: Duration::from_secs(60),
            linger: Duration::from_secs(60),
        }
    }

    /// The MTU the stack sees: `mtu` lowered by the MSS clamp, kept where smoltcp works.
    fn effective_mtu(&self) -> usize {
        let clamped = match self.mss_clamp {
            Some(mss) => self.mtu.min(usize::from(mss) + 40),
            None => self.mtu,
        };
        // Below 128 the MSS would approach smoltcp's minimum of 48; IPv4 ends at 65535.
        clamped.clamp(128, 65_535)
    }
}

/// Something that happened to a flow on this host.
///
/// `Completed` comes from the host that receives the data. `Failed` may come from either host;
/// in the rare case that the receiver completed but its acknowledgements never reached the
/// sender, the sender reports `Failed` after `Completed` was reported: `Completed` is final.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowEvent {
    /// The three-way handshake completed on this host.
    Established {
        /// The flow.
        flow: FlowId,
        /// When this host saw it.
        at: Instant,
    },
    /// This host read every byte of the flow and each was the right one.
    Completed {
        /// The flow.
        flow: FlowId,
        /// When the last byte was read (FCT = `at` - connect time).
        at: Instant,
        /// Bytes read.
        bytes: u64,
    },
    /// The flow was given up on this host.
    Failed {
        /// The flow.
        flow: FlowId,
        /// When this host gave up.
        at: Instant,
        /// Why.
        reason: FailReason,
    },
}

impl FlowEvent {
    /// The flow the event is about.
    pub fn flow(&self) -> FlowId {
        match *self {
            FlowEvent::Established { flow, .. }
            | FlowEvent::Completed { flow, .. }
            | FlowEvent::Failed { flow, .. } => flow,
        }
    }

    /// When it happened.
    pub fn at(&self) -> Instant {
        match *self {
            FlowEvent::Established { at, .. } | FlowEvent::Completed { at, .. } | FlowEvent::Failed { at, .. } => at,
        }
    }
}

/// Why a flow failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailReason {
    /// The connection attempt was answered with an RST (nobody listens on the port).
    Refused,
    /// The established connection was reset by the peer.
    Reset,
    /// No progress for [`HostConfig::idle_timeout`].
    Timeout,
    /// The byte at this stream offset is not the flow's pattern, or lies past the flow's size.
    Corrupt {
        /// Stream offset of the first wrong byte.
        offset: u64,
    },
    /// The peer closed after sending fewer bytes than the flow's size.
    Truncated {
        /// Bytes received before the peer's FIN.
        received: u64,
    },
}

/// Why [`TcpHost::connect`] or [`TcpHost::listen`] refused a flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    /// The host already holds a flow with this id.
    #[error("{0} is already open on this host")]
    DuplicateFlow(FlowId),
    /// Another flow on this host holds the local port (the web side needs one port per flow:
    /// the port is how the accepted connection is matched to its flow).
    #[error("local port {0} is in use")]
    PortInUse(u16),
    /// Port 0 cannot be listened on or connected to.
    #[error("port 0 is not a valid TCP port")]
    ZeroPort,
    /// The remote address is unspecified.
    #[error("cannot connect to {0}")]
    Unaddressable(SocketAddrV4),
    /// Every ephemeral port (49152-65535) is held by a flow.
    #[error("no free ephemeral port")]
    NoFreePort,
}

/// Buffer size for a direction that carries no data (only the handshake and FIN).
const MIN_BUFFER: usize = 4096;

/// First and last ephemeral port (RFC 6335).
const EPHEMERAL: (u16, u16) = (49_152, 65_535);

/// A host with a real TCP stack on virtual time; see the module documentation.
pub struct TcpHost {
    address: Ipv4Addr,
    socket_buffer: usize,
    congestion: CongestionControl,
    initial_rto: Duration,
    min_rto: Duration,
    initial_window: usize,
    sack: bool,
    hystart: bool,
    linux_rto: bool,
    byte_counting: bool,
    rack: bool,
    whole_segments: bool,
    limits: Limits,
    iface: Interface,
    device: QueueDevice,
    /// Holds only sockets of flows in `flows`: finished ones are removed.
    sockets: SocketSet<'static>,
    /// Timeouts and recoveries of the sockets already dropped (`tcp_counters`).
    retired: TcpCounters,
    /// Ordered, so flows are driven and events emitted in the same order on every run.
    flows: BTreeMap<FlowId, Flow>,
    /// Local ports held by flows.
    ports: BTreeSet<u16>,
    next_ephemeral: u16,
    events: VecDeque<FlowEvent>,
    /// When smoltcp or a flow timer next needs a poll, as of the last poll.
    next_poll: Option<Instant>,
    /// Work arrived since the last poll that the cached `next_poll` does not cover.
    poll_now: bool,
}

impl fmt::Debug for TcpHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpHost")
            .field("address", &self.address)
            .field("flows", &self.flows.len())
            .field("next_poll", &self.next_poll)
            .finish_non_exhaustive()
    }
}

impl TcpHost {
    /// A host with no flows.
    ///
    /// # Panics
    /// If `config.address` is not a unicast address (smoltcp refuses it).
    pub fn new(config: HostConfig) -> Self {
        let mut device = QueueDevice::new(config.effective_mtu());
        let mut iface_config = Config::new(HardwareAddress::Ip);
        iface_config.random_seed = config.seed;
        let mut iface = Interface::new(iface_config, &mut device, SmolInstant::ZERO);
        let prefix_len = config.prefix_len.min(32);
        iface.update_ip_addrs(|addrs| {
            // Invariant: the list starts empty and holds at least one address.
            addrs
                .push(IpCidr::new(IpAddress::Ipv4(config.address), prefix_len))
                .expect("a fresh interface has room for one address");
        });
        // On an IP-medium device the gateway is never looked up: any address will do, and our
        // own is always valid. Without a default route smoltcp would not send off-subnet.
        iface
            .routes_mut()
            .add_default_ipv4_route(config.address)
            .expect("a fresh route table has room for the default route");
        let span = u64::from(EPHEMERAL.1 - EPHEMERAL.0) + 1;
        TcpHost {
            address: config.address,
            socket_buffer: config.socket_buffer.clamp(MIN_BUFFER, 1 << 30),
            congestion: config.congestion.into(),
            initial_rto: config.initial_rto,
            min_rto: config.min_rto,
            initial_window: config.initial_window,
            sack: config.sack,
            hystart: config.hystart,
            linux_rto: config.linux_rto,
            byte_counting: config.byte_counting,
            rack: config.rack,
            whole_segments: config.whole_segments,
            limits: Limits { idle_timeout: config.idle_timeout, linger: config.linger },
            iface,
            device,
            sockets: SocketSet::new(Vec::new()),
            retired: TcpCounters::default(),
            flows: BTreeMap::new(),
            ports: BTreeSet::new(),
            // Seeded like a real stack's randomised ephemeral ports; always in range.
            next_ephemeral: EPHEMERAL.0 + (config.seed % span) as u16,
            events: VecDeque::new(),
            next_poll: None,
            poll_now: false,
        }
    }

    /// The host's address.
    pub fn address(&self) -> Ipv4Addr {
        self.address
    }

    /// Start a flow: actively open a connection from an ephemeral port to `remote`. The SYN
    /// leaves at the next [`poll`](Self::poll), due at `now`; the flow's FCT counts from `now`.
    pub fn connect(
        &mut self,
        now: Instant,
        flow: FlowId,
        remote: SocketAddrV4,
        transfer: Transfer,
    ) -> Result<(), HostError> {
        if self.flows.contains_key(&flow) {
            return Err(HostError::DuplicateFlow(flow));
        }
        if remote.port() == 0 {
            return Err(HostError::ZeroPort);
        }
        if remote.ip().is_unspecified() {
            return Err(HostError::Unaddressable(remote));
        }
        let port = self.ephemeral_port()?;
        let mut socket = self.new_socket(transfer);
        socket
            .connect(self.iface.context(), (IpAddress::Ipv4(*remote.ip()), remote.port()), port)
            .map_err(|_| HostError::Unaddressable(remote))?;
        let handle = self.sockets.add(socket);
        self.ports.insert(port);
        self.flows.insert(flow, Flow::new(flow, handle, port, transfer, Some(now)));
        self.poll_now = true;
        Ok(())
    }

    /// Be ready to accept `flow` on `port` (passive open). Call it before the peer connects; the
    /// port identifies the flow, so concurrent flows need distinct ports. A listener that sees
    /// no SYN within the idle timeout fails with [`FailReason::Timeout`].
    pub fn listen(&mut self, flow: FlowId, port: u16, transfer: Transfer) -> Result<(), HostError> {
        if self.flows.contains_key(&flow) {
            return Err(HostError::DuplicateFlow(flow));
        }
        if port == 0 {
            return Err(HostError::ZeroPort);
        }
        if self.ports.contains(&port) {
            return Err(HostError::PortInUse(port));
        }
        let mut socket = self.new_socket(transfer);
        socket.listen(port).map_err(|_| HostError::ZeroPort)?;
        let handle = self.sockets.add(socket);
        self.ports.insert(port);
        self.flows.insert(flow, Flow::new(flow, handle, port, transfer, None));
        // Start the listener's idle clock at the next poll.
        self.poll_now = true;
        Ok(())
    }

    /// An IPv4 packet arrives from the network at `now`. It is queued; [`poll_at`](Self::poll_at)
    /// then returns `now`, and the next [`poll`](Self::poll) processes it. Malformed packets,
    /// packets for other addresses or with bad checksums are dropped there, as a real stack does.
    pub fn handle_packet(&mut self, now: Instant, ip_packet: &[u8]) {
        tracing::trace!(host = %self.address, %now, len = ip_packet.len(), "packet in");
        self.device.push_rx(ip_packet);
    }

    /// Run smoltcp and every flow's application at `now`: process queued packets, fire due
    /// timers, write and read data, report events, and drop the sockets of finished flows.
    pub fn poll(&mut self, now: Instant) {
        let ts = to_smol(now);
        // Usually two rounds: smoltcp processes input, the applications react, smoltcp emits
        // what they wrote or the window they opened. A third is needed only when an abort's RST
        // must go out before its socket can be dropped.
        let mut touched = true;
        for _ in 0..4 {
            self.iface.poll(ts, &mut self.device, &mut self.sockets);
            touched = self.drive_flows(now);
            if !touched {
                break;
            }
        }
        self.poll_now = touched;
        let stack = self.iface.poll_at(ts, &self.sockets).map(from_smol);
        let timers = self.flows.values().filter_map(|f| f.deadline(&self.limits)).min();
        self.next_poll = match (stack, timers) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }

    /// Run each flow's application once; returns whether any touched its socket.
    fn drive_flows(&mut self, now: Instant) -> bool {
        let mut touched = false;
        let (sockets, ports, events, limits, retired) =
            (&mut self.sockets, &mut self.ports, &mut self.events, &self.limits, &mut self.retired);
        self.flows.retain(|&id, flow| {
            let socket = sockets.get_mut::<tcp::Socket<'static>>(flow.handle);
            // What limits a sender (its window, the receiver's, recovery), every time its flow
            // runs: `--log braid_sim::tcp=debug`.
            if tracing::enabled!(target: "braid_sim::tcp", tracing::Level::DEBUG) {
                let st = socket.sender_state();
                if st.in_flight > 0 {
                    tracing::debug!(target: "braid_sim::tcp", flow = id.0, %now, cwnd = st.cwnd, flight = st.in_flight, rwnd = st.remote_window, srtt_ms = st.srtt_ms, recovery = st.in_recovery, rec = socket.recoveries(), rto = socket.timeouts(), "sender");
                }
            }
            let drive = flow.drive(id, socket, now, limits, events);
            touched |= drive.touched;
            if drive.remove {
                retired.add_socket(socket);
                sockets.remove(flow.handle);
                ports.remove(&flow.local_port);
            }
            !drive.remove
        });
        touched
    }

    /// The next IPv4 packet this host sends, oldest first.
    pub fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        self.device.pop_tx()
    }

    /// When [`poll`](Self::poll) must next be called: `now` if input or new flows wait,
    /// otherwise the earliest smoltcp timer (retransmission, delayed ACK, ...) or flow timer,
    /// never earlier than `now`; `None` if nothing will happen without input.
    pub fn poll_at(&self, now: Instant) -> Option<Instant> {
        if self.poll_now || self.device.has_rx() {
            return Some(now);
        }
        self.next_poll.map(|t| t.max(now))
    }

    /// The next flow event, oldest first.
    pub fn poll_event(&mut self) -> Option<FlowEvent> {
        self.events.pop_front()
    }

    /// Bytes of `flow` read and verified on this host so far; 0 once the flow is forgotten
    /// (its `Completed` event carries the total).
    pub fn bytes_received(&self, flow: FlowId) -> u64 {
        self.flows.get(&flow).map_or(0, Flow::bytes_read)
    }

    /// Retransmission timeouts and loss recoveries of every TCP socket this host has had, as
    /// senders: where a bulk flow's goodput went (a timeout idles it for an RTO or more).
    pub fn tcp_counters(&self) -> TcpCounters {
        let mut total = self.retired;
        // Only TCP sockets are built here (the smoltcp build has no other socket kind).
        for (_, smoltcp::socket::Socket::Tcp(s)) in self.sockets.iter() {
            total.add_socket(s);
        }
        total
    }

    /// This host's TCP senders with data in flight: their congestion windows summed (bytes) and
    /// the largest of their smoothed round trips (ms); (0, 0) while none sends. A bulk run notes
    /// it each second ([`crate::results::RunResult::sender_cwnd_kb_series`]).
    pub fn sender_window(&self) -> (usize, u32) {
        let mut out = (0, 0);
        for (_, smoltcp::socket::Socket::Tcp(s)) in self.sockets.iter() {
            let st = s.sender_state();
            if st.in_flight > 0 {
                out = (out.0 + st.cwnd, out.1.max(st.srtt_ms));
            }
        }
        out
    }

    /// Flows on this host that still have data to move (neither finished nor failed).
    pub fn active_flows(&self) -> usize {
        self.flows.values().filter(|f| f.is_running()).count()
    }

    /// Sockets this host holds: its active flows plus finished ones still closing (bounded by
    /// [`HostConfig::linger`]). For checking that memory stays bounded.
    pub fn socket_count(&self) -> usize {
        self.sockets.iter().count()
    }

    /// A fresh socket configured for this host, with buffers sized for `transfer`.
    ///
    /// A buffer larger than the whole transfer changes nothing TCP does (the window it offers
    /// is never the limit), and the direction that carries no data needs next to none; sizing
    /// them so spares zeroing a megabyte per short flow, which would cost more than the flow's
    /// TCP processing.
    fn new_socket(&self, transfer: Transfer) -> tcp::Socket<'static> {
        let fit = |n: u64| usize::try_from(n).map_or(self.socket_buffer, |n| n.clamp(MIN_BUFFER, self.socket_buffer));
        let (rx, tx) = match transfer {
            Transfer::Send(n) => (MIN_BUFFER, fit(n)),
            Transfer::Receive(n) => (fit(n), MIN_BUFFER),
            Transfer::SendForever => (MIN_BUFFER, self.socket_buffer),
            Transfer::ReceiveForever => (self.socket_buffer, MIN_BUFFER),
        };
        let mut socket = tcp::Socket::new(tcp::SocketBuffer::new(vec![0; rx]), tcp::SocketBuffer::new(vec![0; tx]));
        socket.set_congestion_control(self.congestion);
        socket.set_initial_window(self.initial_window);
        socket.set_rto_bounds(self.initial_rto.into(), self.min_rto.into());
        socket.set_sack_recovery(self.sack);
        socket.set_hystart(self.hystart);
        socket.set_linux_rto(self.linux_rto);
        socket.set_byte_counting(self.byte_counting);
        socket.set_rack(self.rack);
        socket.set_whole_segments(self.whole_segments);

        // The sender writes whole buffers at once; Nagle would only hold back the last segment
        // of a flow behind an ACK the peer delays.
        socket.set_nagle_enabled(false);
        // The ACK that completes the handshake goes out at once, as Linux sends it; smoltcp would
        // delay it like a data ACK, adding its delay to every flow. `Flow::drive` restores
        // smoltcp's default delayed ACK (`DATA_ACK_DELAY`) once the connection is established.
        socket.set_ack_delay(None);
        socket
    }

    /// The next ephemeral port no flow holds, cycling like a real stack's allocator.
    fn ephemeral_port(&mut self) -> Result<u16, HostError> {
        for _ in EPHEMERAL.0..=EPHEMERAL.1 {
            let port = self.next_ephemeral;
            self.next_ephemeral = if port == EPHEMERAL.1 { EPHEMERAL.0 } else { port + 1 };
            if !self.ports.contains(&port) {
                return Ok(port);
            }
        }
        Err(HostError::NoFreePort)
    }
}

/// braid's instant as smoltcp's (both count microseconds).
fn to_smol(t: Instant) -> SmolInstant {
    SmolInstant::from_micros(i64::try_from(t.as_micros()).unwrap_or(i64::MAX))
}

/// smoltcp's instant as braid's; smoltcp's "now" (time zero) maps to the origin.
fn from_smol(t: SmolInstant) -> Instant {
    Instant::from_micros(u64::try_from(t.total_micros()).unwrap_or(0))
}
