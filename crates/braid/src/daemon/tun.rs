//! The TUN device: passengers' packets in and out.

use super::Input;
use super::config::TunConfig;
use super::mss::clamp_mss;
use anyhow::Context;
use bytes::Bytes;
use std::sync::Arc;
use tokio::sync::mpsc;
use tun_rs::{AsyncDevice, DeviceBuilder, GROTable, IDEAL_BATCH_SIZE, VIRTIO_NET_HDR_LEN};

/// Creates the TUN device with its addresses (IPv4, IPv6 or both) and MTU, up.
pub fn open(cfg: &TunConfig, mtu: u16) -> anyhow::Result<Arc<AsyncDevice>> {
    let mut queues = open_queues(cfg, mtu, 1, false)?;
    queues.pop().context("tun: no queue")
}

/// Creates the TUN device as [`open`] does, with `n` queues (`IFF_MULTI_QUEUE` when `n` > 1):
/// each can be read and written on its own, and the kernel hands a flow's packets to the same
/// queue, so `n` readers take the device's packets in parallel.
///
/// With `offload` the device carries a virtio-net header on every packet (`IFF_VNET_HDR`, TCP
/// and, from Linux 6.2, UDP segmentation offload), so that packets written with
/// [`TunBatch`] can leave as one buffer per flow, as wireguard-go's TUN does: the kernel takes
/// a run of one flow's packets through its stack once rather than once per packet. Reads then
/// may return such buffers from the kernel; [`spawn_routed`] splits them.
pub fn open_queues(cfg: &TunConfig, mtu: u16, n: usize, offload: bool) -> anyhow::Result<Vec<Arc<AsyncDevice>>> {
    let mut builder = DeviceBuilder::new().name(&cfg.name).mtu(mtu).offload(offload);
    if let Some(a) = cfg.address.v4 {
        builder = builder.ipv4(a.addr, a.prefix, None);
    }
    for &(addr, prefix) in &cfg.address.v6 {
        builder = builder.ipv6(addr, prefix);
    }
    if n > 1 {
        builder = builder.multi_queue(true);
    }
    let first = builder
        .build_sync()
        .with_context(|| format!("tun: cannot create {:?} (needs CAP_NET_ADMIN and /dev/net/tun)", cfg.name))?;
    let mut sync = Vec::with_capacity(n);
    for i in 1..n {
        sync.push(first.try_clone().with_context(|| format!("tun: cannot open queue {i} of {:?}", cfg.name))?);
    }
    sync.insert(0, first);
    sync.into_iter().map(|d| AsyncDevice::new(d).map(Arc::new).context("tun: registering with the runtime")).collect()
}

/// Reads passengers' packets, clamps their MSS and hands them to the loop.
pub fn spawn_reader(dev: Arc<AsyncDevice>, mtu: u16, tx: mpsc::Sender<Input>) {
    spawn_routed(dev, mtu, vec![tx], |p| Some((0, Input::Tun(p))));
}

/// Reads passengers' packets, clamps their MSS and hands each to the queue `route` names (its
/// index in `queues`, with what to send), or drops it where `route` gives `None`.
pub fn spawn_routed<T: Send + 'static>(
    dev: Arc<AsyncDevice>,
    mtu: u16,
    queues: Vec<mpsc::Sender<T>>,
    route: impl Fn(Bytes) -> Option<(usize, T)> + Send + 'static,
) {
    tokio::spawn(async move {
        // Room for a packet larger than the MTU, so it is seen (and refused by the engine, counted)
        // rather than silently truncated; with offload, one buffer as the kernel hands it over
        // (up to 64 KiB) and room for the packets it splits into.
        let mut whole = vec![0u8; VIRTIO_NET_HDR_LEN + usize::from(u16::MAX)];
        let mut bufs = vec![vec![0u8; usize::from(mtu) + 256]; IDEAL_BATCH_SIZE];
        let mut sizes = vec![0usize; IDEAL_BATCH_SIZE];
        loop {
            match dev.recv_multiple(&mut whole, &mut bufs, &mut sizes, 0).await {
                Ok(k) => {
                    for (buf, &n) in bufs.iter_mut().zip(&sizes).take(k) {
                        if n == 0 {
                            continue;
                        }
                        clamp_mss(&mut buf[..n], mtu);
                        let Some((q, item)) = route(Bytes::copy_from_slice(&buf[..n])) else { continue };
                        let Some(queue) = queues.get(q) else { continue };
                        if queue.send(item).await.is_err() {
                            return;
                        }
                    }
                }
                // A buffer the kernel handed over that cannot be split (it does not fit): that
                // packet is lost, the next read is not affected.
                Err(e) if e.raw_os_error().is_none() => tracing::debug!(error = %e, "tun packet dropped"),
                Err(e) => {
                    tracing::error!(error = %e, "tun read failed");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
            }
        }
    });
}

/// Most passenger packets [`TunBatch`] holds before it writes them.
const TUN_BATCH: usize = 64;

/// Passenger packets waiting to be written to the TUN device together: on a device opened with
/// offload, consecutive packets of one TCP or UDP flow are coalesced into one buffer that the
/// kernel segments again on its way out ([`tun_rs::GROTable`], a port of wireguard-go's), so a
/// run of a flow's packets costs one write and one pass through the kernel's receive and
/// forwarding path; without offload, one write per packet as before. Call [`TunBatch::send`]
/// before waiting for more input, so nothing is held back.
pub struct TunBatch {
    bufs: Vec<Vec<u8>>,
    len: usize,
    gro: GROTable,
}

impl Default for TunBatch {
    fn default() -> Self {
        TunBatch { bufs: Vec::new(), len: 0, gro: GROTable::new() }
    }
}

impl TunBatch {
    /// Adds a packet, writing the batch first when it is full.
    pub async fn push(&mut self, dev: &AsyncDevice, packet: &[u8]) {
        if self.len == TUN_BATCH {
            self.send(dev).await;
        }
        if self.len == self.bufs.len() {
            // Room for a whole flow's run: the coalescing appends to a flow's first buffer and
            // only where it has the room (it never reallocates).
            self.bufs.push(Vec::with_capacity(2 * VIRTIO_NET_HDR_LEN + usize::from(u16::MAX)));
        }
        let b = &mut self.bufs[self.len];
        b.clear();
        // Room for the virtio-net header, which the write fills in.
        b.resize(VIRTIO_NET_HDR_LEN, 0);
        b.extend_from_slice(packet);
        self.len += 1;
    }

    /// Writes what is batched. A packet the kernel refuses is lost, as a single write's would be.
    pub async fn send(&mut self, dev: &AsyncDevice) {
        if self.len == 0 {
            return;
        }
        if let Err(e) = dev.send_multiple(&mut self.gro, &mut self.bufs[..self.len], VIRTIO_NET_HDR_LEN).await {
            tracing::debug!(error = %e, "tun write failed");
        }
        self.len = 0;
    }
}
