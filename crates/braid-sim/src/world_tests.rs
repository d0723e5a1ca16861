//! The simulator's datagram path is the daemon's: sealed, with the tag on the air.

use super::*;
use crate::scenario::Scenario;
use braid_proto::crypto::DATA_PACKET_OVERHEAD;
use std::path::Path;

fn scenario(duration_s: u32) -> Scenario {
    let text = format!(
        r#"
name = "sealed"
duration_s = {duration_s}
runs = 1
seed = 7

[[link]]
name = "only"
down = {{ rate_kbps = 5000, delay_ms = 20 }}
up = {{ rate_kbps = 5000, delay_ms = 20 }}

# One packet at 1 s and the next after 100 s: the tests send their own.
[workload]
kind = "cbr"
rate_kbps = 0.01
packet_bytes = 97
direction = "up"

[[scheme]]
name = "single"
recovery = "none"
scheduler = "single"
"#
    );
    Scenario::from_str(&text, Path::new(".")).expect("parses")
}

fn world(sc: &Scenario) -> World<'_> {
    let scheme = &sc.schemes[0];
    let (recovery, scheduler) = engine_scheme(scheme).expect("a braid scheme");
    World::new(sc, scheme, recovery, scheduler, sc.seed)
}

/// A passenger packet of `len` bytes from the rider to the web host.
fn passenger(len: usize) -> Vec<u8> {
    let src = SocketAddrV4::new(RIDER, 5004);
    let dst = SocketAddrV4::new(WEB, 5004);
    cbr_packet(src, dst, 0, Instant::ZERO, len)
}

#[test]
fn a_data_packet_on_the_air_carries_the_tag_and_the_daemons_overhead() {
    let sc = scenario(3);
    let mut w = world(&sc);
    // Until the link is up (the client's probes), then at one instant: one passenger packet in,
    // one datagram out.
    while w.now < Instant::from_secs_f64(2.0) {
        w.now = w.next_event();
        w.arrivals();
        w.deliveries();
        w.client.handle_timeout(w.now);
        let snow = w.server_now();
        w.server.handle_timeout(snow);
        w.pump();
    }
    for len in [60, 600, 1400] {
        let (datagrams, bytes) = (w.datagrams, w.bytes_on_air);
        let p = passenger(len);
        assert_eq!(p.len(), len);
        w.client.handle_tun_packet(w.now, &p).expect("fits the MTU");
        w.pump();
        assert_eq!(w.datagrams, datagrams + 1, "one datagram for one passenger packet");
        // What the daemon puts on the air for a data packet: outer IPv4 + UDP, braid's data
        // header, the payload and the 16-byte AEAD tag (braid_proto::crypto). Without sealing
        // the simulator counted 16 bytes less per datagram.
        assert_eq!(w.bytes_on_air - bytes, (len + DATA_PACKET_OVERHEAD) as u64, "payload {len}");
    }
    assert_eq!(w.unsealed, 0);
}

#[test]
fn keys_are_renewed_before_they_expire_and_traffic_goes_on() {
    // Longer than REJECT_AFTER (180 s): without the rekeys nothing would seal after it.
    let sc = scenario(200);
    let mut w = world(&sc);
    let mut delivered_late = 0u64;
    let mut t = Instant::from_secs_f64(1.0);
    while w.now < w.end {
        w.now = w.next_event().min(t);
        w.arrivals();
        w.deliveries();
        if w.now >= w.next_rekey {
            w.rekey();
        }
        if w.now >= t {
            // One passenger packet a second, up.
            let _ = w.client.handle_tun_packet(w.now, &passenger(200));
            t += Duration::from_secs(1);
        }
        w.client.handle_timeout(w.now);
        let snow = w.server_now();
        w.server.handle_timeout(snow);
        let before = w.passenger_bytes_delivered;
        w.pump();
        if w.now > Instant::from_secs_f64(185.0) {
            delivered_late += w.passenger_bytes_delivered - before;
        }
    }
    assert_eq!(w.key_epoch, 1, "one rekey in 200 s (every REKEY_AFTER)");
    assert_eq!(w.unsealed, 0, "every datagram sealed");
    assert!(delivered_late >= 10 * 200, "passenger packets still delivered after 185 s: {delivered_late} bytes");
}
