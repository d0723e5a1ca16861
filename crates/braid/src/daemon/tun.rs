//! The TUN device: passengers' packets in and out.

use super::Input;
use super::config::TunConfig;
use super::mss::clamp_mss;
use anyhow::Context;
use bytes::Bytes;
use std::sync::Arc;
use tokio::sync::mpsc;
use tun_rs::{AsyncDevice, DeviceBuilder};

/// Creates the TUN device with its addresses (IPv4, IPv6 or both) and MTU, up.
pub fn open(cfg: &TunConfig, mtu: u16) -> anyhow::Result<Arc<AsyncDevice>> {
    let mut queues = open_queues(cfg, mtu, 1)?;
    queues.pop().context("tun: no queue")
}

/// Creates the TUN device as [`open`] does, with `n` queues (`IFF_MULTI_QUEUE` when `n` > 1):
/// each can be read and written on its own, and the kernel hands a flow's packets to the same
/// queue, so `n` readers take the device's packets in parallel.
pub fn open_queues(cfg: &TunConfig, mtu: u16, n: usize) -> anyhow::Result<Vec<Arc<AsyncDevice>>> {
    let mut builder = DeviceBuilder::new().name(&cfg.name).mtu(mtu);
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
        // rather than silently truncated.
        let mut buf = vec![0u8; usize::from(mtu) + 256];
        loop {
            match dev.recv(&mut buf).await {
                Ok(0) => continue,
                Ok(n) => {
                    clamp_mss(&mut buf[..n], mtu);
                    let Some((q, item)) = route(Bytes::copy_from_slice(&buf[..n])) else { continue };
                    let Some(queue) = queues.get(q) else { continue };
                    if queue.send(item).await.is_err() {
                        return;
                    }
                }
                Err(e) => {
                    tracing::error!(error = %e, "tun read failed");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
            }
        }
    });
}
