//! braid: one test per change braid made to smoltcp (vendor/README.md lists them); each fails on
//! upstream smoltcp 0.14.0, by its assertion or because the setting it uses does not exist there.

use super::RttEstimator;
use super::congestion::Controller;
use crate::storage::Assembler;
use crate::time::Instant;

#[cfg(feature = "socket-tcp-cubic")]
use super::congestion::cubic::Cubic;
#[cfg(feature = "socket-tcp-reno")]
use super::congestion::reno::Reno;

/// Upstream rounds every RTO up to RFC 6298's 1 s; braid's default is Linux's 200 ms.
#[test]
fn the_minimum_rto_is_linuxs_200_ms() {
    let mut rtte = RttEstimator::default();
    for _ in 0..20 {
        rtte.sample(20);
    }
    assert_eq!(rtte.retransmission_timeout().total_millis(), 200);
}

/// `Socket::set_rto_bounds`: another era's hosts (3 s initial RTO, 1 s floor).
#[test]
fn rto_bounds_are_per_estimator() {
    let mut rtte = RttEstimator::with_bounds(3000, 1000);
    assert_eq!(rtte.retransmission_timeout().total_millis(), 3000);
    for _ in 0..20 {
        rtte.sample(20);
    }
    assert_eq!(rtte.retransmission_timeout().total_millis(), 1000);
}

/// `Socket::set_linux_rto`: SRTT + max(4 RTTVAR, min RTO), so a steady RTT does not leave the
/// RTO a few ms above it (RFC 6298's rule gives max(min RTO, SRTT + 4 RTTVAR)).
#[test]
fn linux_rto_keeps_the_minimum_above_srtt() {
    let mut rfc = RttEstimator::default();
    let mut linux = RttEstimator::default();
    linux.linux_rto = true;
    for _ in 0..40 {
        rfc.sample(300);
        linux.sample(300);
    }
    assert!(rfc.retransmission_timeout().total_millis() < 320);
    assert_eq!(linux.retransmission_timeout().total_millis(), 500);
}

/// RFC 6928's ten-segment initial window (14600 bytes) where upstream starts with two segments.
#[test]
fn the_initial_window_is_ten_segments() {
    #[cfg(feature = "socket-tcp-reno")]
    assert_eq!(Reno::new().window(), 14600);
    #[cfg(feature = "socket-tcp-cubic")]
    assert_eq!(Cubic::new().window(), 14600);
}

/// `Socket::set_initial_window`: the 4380 bytes of 2010's hosts (RFC 3390).
#[test]
#[cfg(feature = "socket-tcp-reno")]
fn the_initial_window_is_settable() {
    let mut reno = Reno::new();
    reno.set_initial_window(4380);
    assert_eq!(reno.window(), 4380);
}

/// `Socket::set_byte_counting`: an ACK covering eight segments grows the slow-start window by
/// eight segments, not one.
#[test]
#[cfg(feature = "socket-tcp-reno")]
fn byte_counting_grows_the_window_by_what_an_ack_covers() {
    let rtte = RttEstimator::default();
    let now = Instant::from_millis(0);
    let grow = |byte_counting: bool| {
        let mut reno = Reno::new();
        reno.set_mss(1460);
        reno.set_remote_window(1 << 20);
        reno.set_byte_counting(byte_counting);
        let before = reno.window();
        reno.on_ack(now, 8 * 1460, 0, &rtte);
        reno.window() - before
    };
    assert_eq!(grow(false), 1460);
    assert_eq!(grow(true), 8 * 1460);
}

/// `build.rs`: a receiver keeps 128 out-of-order runs (upstream: 4, and every segment beyond a
/// window's fourth hole is dropped). Unit tests build against the fixed configuration in `lib.rs`
/// (4 runs, which upstream's assembler tests are written for), so this reads what `build.rs`
/// generated for every other build, and checks that many runs fit an assembler of that size.
#[test]
fn a_receiver_keeps_128_out_of_order_runs() {
    mod built {
        #![allow(unused)]
        include!(concat!(env!("OUT_DIR"), "/config.rs"));
    }
    assert_eq!(built::ASSEMBLER_MAX_SEGMENT_COUNT, 128);
    let mut assembler = Assembler::new();
    for run in 0..crate::config::ASSEMBLER_MAX_SEGMENT_COUNT {
        assert_eq!(assembler.add(10 + run * 20, 10), Ok(()), "run {run}");
    }
}
