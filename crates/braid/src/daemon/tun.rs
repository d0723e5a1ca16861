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
    let mut builder = DeviceBuilder::new().name(&cfg.name).mtu(mtu);
    if let Some(a) = cfg.address.v4 {
        builder = builder.ipv4(a.addr, a.prefix, None);
    }
    for &(addr, prefix) in &cfg.address.v6 {
        builder = builder.ipv6(addr, prefix);
    }
    let dev = builder
        .build_async()
        .with_context(|| format!("tun: cannot create {:?} (needs CAP_NET_ADMIN and /dev/net/tun)", cfg.name))?;
    Ok(Arc::new(dev))
}

/// Reads passengers' packets, clamps their MSS and hands them to the loop.
pub fn spawn_reader(dev: Arc<AsyncDevice>, mtu: u16, tx: mpsc::Sender<Input>) {
    tokio::spawn(async move {
        // Room for a packet larger than the MTU, so it is seen (and refused by the engine, counted)
        // rather than silently truncated.
        let mut buf = vec![0u8; usize::from(mtu) + 256];
        loop {
            match dev.recv(&mut buf).await {
                Ok(0) => continue,
                Ok(n) => {
                    clamp_mss(&mut buf[..n], mtu);
                    if tx.send(Input::Tun(Bytes::copy_from_slice(&buf[..n]))).await.is_err() {
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
