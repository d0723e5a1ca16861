//! The longest stall of a bulk flow, measured as the simulator measures it: the largest gap
//! between two consecutive TCP segments carrying data of one flow where they reach the receiving
//! host (the simulator notes them as they leave the tunnel, `braid_sim::world`). A packet socket
//! in the receiving namespace sees every segment with the kernel's receive time; nothing is
//! captured but the headers.

use crate::netns::Netns;
use nix::sys::socket::{self, AddressFamily, ControlMessageOwned, MsgFlags, SockFlag, SockProtocol, SockType, sockopt};
use nix::sys::time::TimeVal;
use std::collections::HashMap;
use std::io::IoSliceMut;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

/// A flow that carried less than this is not a bulk flow (iperf3's control connection sends a
/// few hundred bytes at the start and at the end, a "stall" as long as the test).
const MIN_FLOW_BYTES: u64 = 1_000_000;

/// What is kept of each flow, keyed by its addresses and ports.
#[derive(Debug, Default, Clone, Copy)]
struct Flow {
    /// Receive time of its latest data segment, ns (the kernel's real-time clock).
    last_ns: Option<u64>,
    /// TCP payload bytes seen.
    bytes: u64,
    /// Largest gap between consecutive data segments, ns.
    longest_gap_ns: u64,
}

type FlowKey = ([u8; 4], u16, [u8; 4], u16);

/// Per-flow gaps of the IPv4 TCP segments a namespace receives (module docs).
#[derive(Debug, Default)]
pub struct Gaps {
    flows: HashMap<FlowKey, Flow>,
}

impl Gaps {
    /// Notes one IPv4 packet (from its IP header on; it may be cut after the TCP header) that
    /// arrived at `at_ns`. Anything but a TCP segment carrying data is ignored.
    pub fn note(&mut self, p: &[u8], at_ns: u64) {
        if p.len() < 20 || p[0] >> 4 != 4 || p[9] != 6 {
            return;
        }
        let ihl = usize::from(p[0] & 0x0f) * 4;
        let total = usize::from(u16::from_be_bytes([p[2], p[3]]));
        let Some(tcp) = p.get(ihl..) else { return };
        if tcp.len() < 20 || total < ihl + 20 {
            return;
        }
        let data_off = usize::from(tcp[12] >> 4) * 4;
        let Some(payload) = (total - ihl).checked_sub(data_off).filter(|n| *n > 0) else {
            return; // a bare acknowledgement
        };
        let key = (
            [p[12], p[13], p[14], p[15]],
            u16::from_be_bytes([tcp[0], tcp[1]]),
            [p[16], p[17], p[18], p[19]],
            u16::from_be_bytes([tcp[2], tcp[3]]),
        );
        let f = self.flows.entry(key).or_default();
        if let Some(last) = f.last_ns {
            f.longest_gap_ns = f.longest_gap_ns.max(at_ns.saturating_sub(last));
        }
        f.last_ns = Some(f.last_ns.map_or(at_ns, |l| l.max(at_ns)));
        f.bytes += payload as u64;
    }

    /// The longest gap of any bulk flow ([`MIN_FLOW_BYTES`] or more), ms; `None` without one.
    pub fn longest_stall_ms(&self) -> Option<f64> {
        self.flows
            .values()
            .filter(|f| f.bytes >= MIN_FLOW_BYTES)
            .map(|f| f.longest_gap_ns as f64 / 1e6)
            .reduce(f64::max)
    }
}

/// A packet socket in a namespace, read on a thread of its own until [`StallWatch::finish`].
pub struct StallWatch {
    stop: Arc<AtomicBool>,
    reader: JoinHandle<anyhow::Result<Gaps>>,
}

impl StallWatch {
    /// Starts watching what `ns` receives.
    pub fn start(ns: &Netns) -> anyhow::Result<StallWatch> {
        let fd: OwnedFd = ns.enter(|| {
            let fd =
                socket::socket(AddressFamily::Packet, SockType::Datagram, SockFlag::SOCK_CLOEXEC, SockProtocol::EthIp)
                    .map_err(|e| anyhow::anyhow!("opening a packet socket to time the flow's segments: {e}"))?;
            socket::setsockopt(&fd, sockopt::ReceiveTimestampns, &true)?;
            // Wake up now and then to see the stop flag.
            socket::setsockopt(&fd, sockopt::ReceiveTimeout, &TimeVal::new(0, 100_000))?;
            Ok(fd)
        })?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let reader = std::thread::Builder::new().name("stall-watch".into()).spawn(move || read(&fd, &flag))?;
        Ok(StallWatch { stop, reader })
    }

    /// Stops watching; the longest stall of a bulk flow, ms.
    pub fn finish(self) -> anyhow::Result<Option<f64>> {
        self.stop.store(true, Ordering::Relaxed);
        let gaps = self.reader.join().map_err(|_| anyhow::anyhow!("the stall watch's thread panicked"))??;
        Ok(gaps.longest_stall_ms())
    }
}

fn read(fd: &OwnedFd, stop: &AtomicBool) -> anyhow::Result<Gaps> {
    let mut gaps = Gaps::default();
    // IPv4 and TCP headers with options fit in 120 bytes; the rest of each segment is cut.
    let mut buf = [0u8; 120];
    let mut cmsg = nix::cmsg_space!(nix::sys::time::TimeSpec);
    while !stop.load(Ordering::Relaxed) {
        let mut iov = [IoSliceMut::new(&mut buf)];
        let (len, at_ns) = match socket::recvmsg::<()>(fd.as_raw_fd(), &mut iov, Some(&mut cmsg), MsgFlags::empty()) {
            Ok(m) => {
                let at = m.cmsgs()?.find_map(|c| match c {
                    ControlMessageOwned::ScmTimestampns(ts) => {
                        Some(ts.tv_sec() as u64 * 1_000_000_000 + ts.tv_nsec() as u64)
                    }
                    _ => None,
                });
                (m.bytes.min(120), at)
            }
            Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::EINTR) => continue,
            Err(e) => anyhow::bail!("reading the packet socket that times the flow's segments: {e}"),
        };
        if let Some(at) = at_ns {
            gaps.note(&buf[..len], at);
        }
    }
    Ok(gaps)
}

#[cfg(test)]
mod tests {
    use super::Gaps;

    /// An IPv4 TCP segment from port `sport` with `payload` bytes of data (headers only).
    fn segment(sport: u16, payload: u16) -> Vec<u8> {
        let mut p = vec![0u8; 40];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&(40 + payload).to_be_bytes());
        p[9] = 6;
        p[12..16].copy_from_slice(&[10, 0, 0, 1]);
        p[16..20].copy_from_slice(&[10, 0, 0, 2]);
        p[20..22].copy_from_slice(&sport.to_be_bytes());
        p[22..24].copy_from_slice(&40000u16.to_be_bytes());
        p[32] = 5 << 4;
        p
    }

    #[test]
    fn the_longest_gap_of_a_bulk_flow_is_its_stall_and_small_flows_and_acks_do_not_count() {
        let mut g = Gaps::default();
        let ms = 1_000_000;
        // A bulk flow: 1,000 segments of 1,400 bytes 1 ms apart, with one 250 ms hole.
        let mut t = 0;
        for i in 0..1000 {
            t += if i == 500 { 250 * ms } else { ms };
            g.note(&segment(5201, 1400), t);
            g.note(&segment(5201, 0), t + 1); // acknowledgements carry nothing
        }
        // iperf3's control connection: two small messages a test apart.
        g.note(&segment(5202, 300), 0);
        g.note(&segment(5202, 300), 60_000 * ms);
        assert_eq!(g.longest_stall_ms(), Some(250.0));
        // Malformed and foreign packets are ignored.
        g.note(&[0x45, 0, 0], t);
        g.note(&[0x60; 60], t);
        assert_eq!(g.longest_stall_ms(), Some(250.0));
        assert_eq!(Gaps::default().longest_stall_ms(), None);
    }
}
