//! The smoltcp `Device` of a simulated host: two in-memory queues of IPv4 packets.
//!
//! Received packets are copied back to back into one growable byte buffer (cleared whenever the
//! queue runs empty), so ingress allocates nothing once the buffer has grown to a burst's size.
//! Transmitted packets are owned `Vec`s because [`super::TcpHost::poll_transmit`] hands them out.

use std::collections::VecDeque;

use smoltcp::phy::{self, Device, DeviceCapabilities, Medium};
use smoltcp::time::Instant as SmolInstant;

/// Largest IPv4 packet; anything longer cannot be a valid packet and is not queued.
const MAX_IPV4_PACKET: usize = 65_535;

/// An IP-medium device whose "wire" is a pair of queues the host's driver fills and drains.
#[derive(Debug)]
pub(crate) struct QueueDevice {
    /// IP MTU reported to smoltcp; it sizes the MSS smoltcp advertises and sends.
    mtu: usize,
    /// Bytes of every queued received packet, back to back.
    rx_data: Vec<u8>,
    /// `(start, len)` of each queued received packet in `rx_data`, oldest first.
    rx_index: VecDeque<(usize, usize)>,
    /// Packets smoltcp has emitted, oldest first.
    tx: VecDeque<Vec<u8>>,
}

impl QueueDevice {
    /// A device with an empty queue in each direction.
    pub(crate) fn new(mtu: usize) -> Self {
        QueueDevice { mtu, rx_data: Vec::new(), rx_index: VecDeque::new(), tx: VecDeque::new() }
    }

    /// Queue a packet from the network for the next `Interface::poll`.
    pub(crate) fn push_rx(&mut self, packet: &[u8]) {
        if packet.is_empty() || packet.len() > MAX_IPV4_PACKET {
            return;
        }
        if self.rx_index.is_empty() {
            // Everything queued before has been consumed: reuse the buffer from its start.
            self.rx_data.clear();
        }
        let start = self.rx_data.len();
        self.rx_data.extend_from_slice(packet);
        self.rx_index.push_back((start, packet.len()));
    }

    /// Whether received packets wait for smoltcp.
    pub(crate) fn has_rx(&self) -> bool {
        !self.rx_index.is_empty()
    }

    /// The oldest packet smoltcp has emitted.
    pub(crate) fn pop_tx(&mut self) -> Option<Vec<u8>> {
        self.tx.pop_front()
    }
}

impl Device for QueueDevice {
    type RxToken<'a> = RxToken<'a>;
    type TxToken<'a> = TxToken<'a>;

    fn receive(&mut self, _timestamp: SmolInstant) -> Option<(RxToken<'_>, TxToken<'_>)> {
        let (start, len) = self.rx_index.pop_front()?;
        // The slice stays valid: `rx_data` is only cleared or appended to by `push_rx`, which
        // cannot run while smoltcp holds this token.
        let frame = self.rx_data.get(start..start + len)?;
        Some((RxToken { frame }, TxToken { queue: &mut self.tx }))
    }

    fn transmit(&mut self, _timestamp: SmolInstant) -> Option<TxToken<'_>> {
        // The queue is unbounded: pacing and queueing belong to the simulated links, not here.
        Some(TxToken { queue: &mut self.tx })
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ip;
        caps.max_transmission_unit = self.mtu;
        // Checksums stay on (the default) in both directions: packets cross the simulated tunnel
        // and a corrupted one must be dropped by TCP as a real host would.
        caps
    }
}

/// One received packet, borrowed from the device's buffer.
pub(crate) struct RxToken<'a> {
    frame: &'a [u8],
}

impl phy::RxToken for RxToken<'_> {
    fn consume<R, F>(self, f: F) -> R
    where
        F: FnOnce(&[u8]) -> R,
    {
        f(self.frame)
    }
}

/// Permission to emit one packet into the transmit queue.
pub(crate) struct TxToken<'a> {
    queue: &'a mut VecDeque<Vec<u8>>,
}

impl phy::TxToken for TxToken<'_> {
    fn consume<R, F>(self, len: usize, f: F) -> R
    where
        F: FnOnce(&mut [u8]) -> R,
    {
        let mut packet = vec![0; len];
        let result = f(&mut packet);
        self.queue.push_back(packet);
        result
    }
}
