//! `oec`: opportunistic erasure coding (PluriBus 4.1, 4.2, 5.1).
//!
//! A coded packet goes out on a link only when that link's estimated queue is empty (the session
//! asks via [`RecoverySender::poll_opportunistic`]), so coded packets use spare capacity and delay
//! data by at most one packet. Each XORs `max(1, floor(-1/ln r))` packets drawn at random from W,
//! the data packets sent since the last cumulative ack, where r is the estimated probability that a
//! packet of W is already at the receiver: the degree that maximises the expected yield
//! `Y(c) = c (1 - r) r^(c-1)` (Eq. 1).
//!
//! PluriBus assumes the sender knows nothing of individual packets, only r. braid's receiver
//! reports holes in its feedback (docs/design.md 3, "receiver state needed by the coders"), and for a
//! packet known to be missing the same greedy rule gives degree 1: a coded packet carrying just
//! that packet has yield 1, the most any coded packet can have. So known holes are repaired first,
//! and the random greedy code covers the rest. This is what makes OEC hold up under bursty
//! (Gilbert-Elliott) loss, where several packets of W go missing at once and random XORs of a
//! small window cannot untangle them.
//!
//! A known hole's repair goes at once, on the link that delivers first
//! ([`RecoverySender::poll_repair`]), not into the next spare capacity: like a resend, it costs
//! no more than what was lost, and the sequencing buffer at the far end holds everything behind
//! the hole until it comes. Waiting for spare capacity sent it wherever a queue was empty, which
//! with a fast link kept full (FMTCP Table II case 8: a 100 ms path beside a 500 ms one) was the
//! slow link, 400 ms later: one simulated run of `oec-aqm` there, 6.6 Mbit/s before, 7.4 after.

use super::window::UnackedWindow;
use super::{RecoveryKind, RecoverySender, Repair};
use crate::link::LinkId;
use crate::time::Instant;
use crate::wire::{CodeKind, Coverage};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::time::Duration;

/// Most packets W may hold; beyond it the oldest leave (they are older than any useful repair).
const MAX_WINDOW: usize = 4096;
/// Packets older than this leave W even without an ack, so a dead reverse path cannot make OEC
/// code forever (PluriBus 5.1 relies on acks arriving within about an RTT).
const MAX_AGE: Duration = Duration::from_secs(1);

/// Expected number of packets a coded packet of degree `c` recovers when each packet is at the
/// receiver with probability `r` (PluriBus Eq. 1).
pub fn expected_yield(c: u32, r: f64) -> f64 {
    f64::from(c) * (1.0 - r) * r.powi(c as i32 - 1)
}

/// The greedy degree `max(1, floor(-1 / ln r))` (PluriBus 4.2), at most `window`.
pub fn greedy_degree(r: f64, window: usize) -> usize {
    let window = window.max(1);
    if r <= 0.0 {
        return 1;
    }
    if r >= 1.0 {
        return window;
    }
    let c = (-1.0 / r.ln()).floor();
    if c.is_finite() { (c as usize).clamp(1, window) } else { window }
}

/// The OEC sender.
#[derive(Debug, Clone)]
pub struct Oec {
    /// W, with the loss rate of the link each packet went on.
    window: UnackedWindow<f64>,
    /// Estimated probability that a packet of W is at the receiver.
    r: f64,
    /// Packets of W the receiver reported missing, oldest first.
    missing: std::collections::BTreeSet<u64>,
    rng: ChaCha8Rng,
}

impl Oec {
    /// A sender whose random member selection is seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Oec {
            window: UnackedWindow::new(MAX_WINDOW, MAX_AGE),
            r: 0.0,
            missing: Default::default(),
            rng: ChaCha8Rng::seed_from_u64(seed),
        }
    }

    /// |W|.
    pub fn window_len(&self) -> usize {
        self.window.len()
    }

    /// The current r.
    pub fn r(&self) -> f64 {
        self.r
    }

    /// Resets r to the mean delivery probability of what is left in W. PluriBus 5.1 (iii) prints
    /// "reset r to p"; r is a delivery probability, so the meaning is 1 - p, here per packet.
    fn reset_r(&mut self) {
        let n = self.window.len();
        self.r = if n == 0 { 0.0 } else { self.window.values().map(|p| 1.0 - p).sum::<f64>() / n as f64 };
    }

    fn expire(&mut self, now: Instant) {
        if self.window.expire(now) {
            self.missing = self.missing.split_off(&self.window.base());
            self.reset_r();
        }
    }
}

impl RecoverySender for Oec {
    fn kind(&self) -> RecoveryKind {
        RecoveryKind::Oec
    }

    /// PluriBus 5.1 (i): insert into W, `r <- ((|W| - 1) r + (1 - p)) / |W|`.
    fn on_data_sent(&mut self, now: Instant, seq: u64, _link: LinkId, loss: f64) {
        if !self.window.push(now, seq, loss) {
            return;
        }
        let w = self.window.len() as f64;
        self.r = ((w - 1.0) * self.r + (1.0 - loss)) / w;
        self.expire(now);
    }

    /// PluriBus 5.1 (iii): purge acknowledged packets from W and reset r.
    fn on_ack(&mut self, _now: Instant, cum_ack: u64) {
        if cum_ack > self.window.base() {
            self.window.purge_below(cum_ack);
            self.missing = self.missing.split_off(&cum_ack);
            self.reset_r();
        }
    }

    fn wants_nacks(&self) -> bool {
        true
    }

    fn on_nack(&mut self, _now: Instant, seq: u64) {
        if self.window.contains(seq) {
            self.missing.insert(seq);
        }
    }

    /// A known hole: degree 1, yield 1 (see the module comment), sent at once on the link that
    /// delivers first.
    fn poll_repair(&mut self, now: Instant) -> Option<Repair> {
        self.expire(now);
        let seq = self.missing.pop_first()?;
        Some(Repair::Code { kind: CodeKind::Xor, coverage: Coverage { base: seq, span: 1, degree: 1, seed: 0 } })
    }

    fn wants_opportunity(&self) -> bool {
        !self.window.is_empty()
    }

    /// PluriBus 4.2 and 5.1 (ii): choose the greedy degree, draw members at random from W, and
    /// `r <- (|W| r + (1 - p) Y(c)) / |W|`.
    fn poll_opportunistic(&mut self, now: Instant, _link: LinkId, loss: f64) -> Option<(CodeKind, Coverage)> {
        self.expire(now);
        if self.window.is_empty() {
            return None;
        }
        let span = self.window.len().min(usize::from(u16::MAX));
        let c = greedy_degree(self.r, span);
        let coverage =
            Coverage { base: self.window.base(), span: span as u16, degree: c as u16, seed: self.rng.random() };
        let w = self.window.len() as f64;
        let y = expected_yield(c as u32, self.r);
        self.r = ((w * self.r + (1.0 - loss) * y) / w).clamp(0.0, 1.0);
        Some((CodeKind::Xor, coverage))
    }

    fn oldest_needed(&self) -> Option<u64> {
        (!self.window.is_empty()).then_some(self.window.base())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_degree_maximises_expected_yield() {
        for r in [0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 0.95, 0.99] {
            let c = greedy_degree(r, 1000);
            let best = (1..200u32).max_by(|a, b| expected_yield(*a, r).total_cmp(&expected_yield(*b, r))).unwrap();
            // floor(-1/ln r) is the optimum or one below it (PluriBus rounds down on purpose).
            assert!(c as u32 == best || c as u32 + 1 == best || (r < 0.4 && c == 1), "r={r} c={c} best={best}");
        }
        assert_eq!(greedy_degree(0.9, 5), 5, "capped by the window");
        assert_eq!(greedy_degree(1.0, 7), 7);
        assert_eq!(greedy_degree(0.2, 7), 1);
    }

    #[test]
    fn r_follows_the_paper_updates() {
        let mut o = Oec::new(1);
        let t = Instant::ZERO;
        o.on_data_sent(t, 0, LinkId(0), 0.1);
        assert!((o.r() - 0.9).abs() < 1e-12);
        o.on_data_sent(t, 1, LinkId(0), 0.3);
        assert!((o.r() - 0.8).abs() < 1e-12);
        let r0 = o.r();
        let (_, cov) = o.poll_opportunistic(t, LinkId(0), 0.0).unwrap();
        let c = greedy_degree(r0, 2) as u32;
        assert_eq!(cov.degree as u32, c);
        let want = (2.0 * r0 + expected_yield(c, r0)) / 2.0;
        assert!((o.r() - want).abs() < 1e-12);
        o.on_ack(t, 1);
        assert_eq!(o.window_len(), 1);
        assert!((o.r() - 0.7).abs() < 1e-12, "reset to 1 - p of what is left");
    }

    #[test]
    fn codes_only_over_unacked_window_and_stops_when_empty() {
        let mut o = Oec::new(7);
        let t = Instant::ZERO;
        for s in 10..20 {
            o.on_data_sent(t, s, LinkId(0), 0.05);
        }
        o.on_ack(t, 15);
        let (_, cov) = o.poll_opportunistic(t, LinkId(1), 0.05).unwrap();
        assert_eq!((cov.base, cov.span), (15, 5));
        assert!(cov.members().iter().all(|s| (15..20).contains(s)));
        o.on_ack(t, 20);
        assert!(!o.wants_opportunity());
        assert_eq!(o.poll_opportunistic(t, LinkId(1), 0.05), None);
    }

    #[test]
    fn known_holes_are_repaired_at_once_with_degree_one() {
        let mut o = Oec::new(3);
        let t = Instant::ZERO;
        for s in 0..10 {
            o.on_data_sent(t, s, LinkId(0), 0.05);
        }
        assert!(o.wants_nacks());
        assert_eq!(o.poll_repair(t), None, "nothing reported, nothing owed");
        o.on_nack(t, 7);
        o.on_nack(t, 4);
        o.on_nack(t, 99); // not in W: ignored
        let members = |r: Option<Repair>| match r {
            Some(Repair::Code { kind: CodeKind::Xor, coverage }) => coverage.members(),
            other => panic!("expected a degree-1 XOR repair, got {other:?}"),
        };
        assert_eq!(members(o.poll_repair(t)), vec![4]);
        o.on_ack(t, 5);
        assert_eq!(members(o.poll_repair(t)), vec![7]);
        assert_eq!(o.poll_repair(t), None, "each report is repaired once");
        // Spare capacity gets the greedy random code, never a hole that was already repaired.
        assert!(o.poll_opportunistic(t, LinkId(0), 0.0).unwrap().1.members().len() > 1 || o.window_len() == 1);
    }

    #[test]
    fn window_ages_out_without_acks() {
        let mut o = Oec::new(7);
        o.on_data_sent(Instant::ZERO, 0, LinkId(0), 0.05);
        assert_eq!(o.poll_opportunistic(Instant::from_millis(1500), LinkId(0), 0.05), None);
    }

    #[test]
    fn resends_do_not_enter_the_window() {
        let mut o = Oec::new(7);
        o.on_data_sent(Instant::ZERO, 0, LinkId(0), 0.0);
        o.on_data_sent(Instant::ZERO, 1, LinkId(0), 0.0);
        o.on_data_sent(Instant::ZERO, 0, LinkId(1), 0.0);
        assert_eq!(o.window_len(), 2);
    }
}
