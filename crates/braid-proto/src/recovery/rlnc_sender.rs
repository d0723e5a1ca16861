//! `rlnc`: opportunistic sliding-window random linear coding (docs/design.md 4; RFC 8681 style).
//!
//! The sender side follows OEC (PluriBus 4.1, 5.1, [`super::Oec`]): coded packets go out only when
//! a link's estimated queue is empty, so they use spare capacity and never delay data; W holds the
//! data packets sent since the last cumulative ack (purged by it, aged out after a second, capped
//! at [`MAX_WINDOW`] so decoding stays cheap); nothing is coded once W is empty.
//!
//! What differs is the code. OEC's XOR of `c` random packets of W recovers a packet only when
//! exactly one of them is missing, so under bursty loss, with several packets of W missing at
//! once, most of its coded packets are useless. An RLNC packet combines *all* of W with random
//! nonzero GF(2^8) coefficients (a dense sliding-window code, RFC 8681's encoding window = W): any
//! k of them that arrive recover any k missing packets of W with probability about 1 - 1/255 each,
//! whatever the loss pattern. So no degree needs choosing and no estimate r is needed.
//!
//! Holes the receiver reports (NACKs) are repaired at once on the link that delivers first, as in
//! braid's OEC, but as RLNC over the span of the reported holes rather than one degree-1 copy
//! each: one such repair per report, any of them serving any hole, so a lost repair costs nothing
//! specific. The span stops at the last reported
//! hole, so packets the receiver has not yet missed (newer ones) do not join the system of
//! equations it must solve before the oldest hole, the one blocking in-order delivery, comes back.
//!
//! A reported hole that has already left W (its cap evicts the oldest, which is the very packet
//! blocking in-order delivery) is re-sent as it is, from the session's store. A passenger's ACKs
//! come in bursts when braid's sequencing buffer releases one downstream, so upstream W filled its
//! 256 packets within a burst while one hole held the peer's cumulative ack: the hole's report
//! then found it gone and went unanswered, and the peer's buffer held every later ACK until it
//! gave the hole up (FMTCP Table II case 3, `rlnc-aqm`: ACKs waited 508 ms on average).
//!
//! No stopping rule: like OEC, the sender codes for as long as W is not empty, instead of stopping
//! once the repairs sent exceed the expected losses plus a margin. Coded packets only ever take
//! spare capacity, so stopping early saves nothing data needs, and the tail of a burst (whose
//! losses the sender learns of only an RTT later) is exactly where extra repairs pay. Measured on
//! the Fig. 10 sweep (10 runs each): RLNC's overhead is 16.9-20.5x bytes on the air per byte
//! delivered against OEC's 16.8-21.6x, and its receivers find more than 99.9 % of coded packets
//! useless, which the decoder rejects from their coefficients alone without touching the payload.
//!
//! **Ahead of reports** (`rlnc:<K>`, off by default): K coded packets per 100 data packets go out
//! at once over all of W, whether or not a link has spare capacity, as a sliding-window code at a
//! fixed rate does (RFC 8681's code rate; FMTCP V appends its `l_b` repair symbols to every block
//! the same way, before any loss is known). A hole is then repaired by the next of them, about
//! 100 / K data packets later, instead of a report's round trip (a path's one-way delay twice
//! over, plus its queue), and every packet behind the hole waits in the peer's sequencing buffer
//! that much less. The price is K % of the links whenever they are full. FMTCP Table II
//! (`rlnc-aqm-ahead`, K = 2, against `rlnc-aqm`, 5 runs): the mean hold fell from 153-194
//! ms to 7-117 ms at 1-5 % loss (at 20 and 50 % 2 % is too few to repair much ahead), and the
//! bulk flow carried 0.1-0.6 Mbit/s more at 1, 20 and 50 % loss; at 2 and 5 % the same with the
//! files' hosts, and 0.6-1.7 less with Linux-like ones (a timeout per run at 2 %). So it is a
//! scheme to choose, not the default.

use super::window::UnackedWindow;
use super::{RecoveryKind, RecoverySender, Repair};
use crate::link::LinkId;
use crate::time::Instant;
use crate::wire::{CodeKind, Coverage};
use std::collections::BTreeSet;
use std::time::Duration;

/// Most packets W may hold: a coded packet combines all of them, so this bounds the encoding work
/// per coded packet (256 × 1400 bytes of multiply-adds) and the receiver's system of equations
/// ([`super::MAX_UNKNOWNS`]). Beyond it the oldest leave W.
pub const MAX_WINDOW: usize = 256;
/// Packets older than this leave W even without an ack (as in OEC), so a dead reverse path cannot
/// make the sender code forever.
const MAX_AGE: Duration = Duration::from_secs(1);

/// The RLNC sender.
#[derive(Debug, Clone)]
pub struct RlncSender {
    /// W.
    window: UnackedWindow<()>,
    /// Holes the receiver reported, not yet repaired as often as reported.
    holes: BTreeSet<u64>,
    /// Repairs owed to reported holes: one per report (a repeated report means the earlier repair
    /// was lost or not enough).
    owed: usize,
    /// Seed of the next coded packet: a counter, so two coded packets over the same window never
    /// share coefficients.
    next_seed: u16,
    /// Reported holes that had already left W, to re-send as they are; at most [`MAX_WINDOW`].
    evicted: BTreeSet<u64>,
    /// Coded packets owed ahead of reports per 100 data packets sent (`rlnc:<K>`: K).
    ahead_percent: f64,
    /// Those owed and not yet sent (fractional: one goes out each time it reaches 1).
    ahead_owed: f64,
}

impl RlncSender {
    /// A sender whose coefficient seeds start from `seed`.
    pub fn new(seed: u64) -> Self {
        RlncSender {
            window: UnackedWindow::new(MAX_WINDOW, MAX_AGE),
            holes: BTreeSet::new(),
            owed: 0,
            next_seed: seed as u16,
            evicted: BTreeSet::new(),
            ahead_percent: 0.0,
            ahead_owed: 0.0,
        }
    }

    /// Also sends `percent` coded packets per 100 data packets ahead of any report (module
    /// docs); 0 (the default) sends none. Clamped to 0..=100.
    pub fn with_ahead(mut self, percent: f64) -> Self {
        self.ahead_percent = if percent.is_finite() { percent.clamp(0.0, 100.0) } else { 0.0 };
        self
    }

    /// Changes how many coded packets per 100 data packets go ahead of any report (as
    /// [`RlncSender::with_ahead`]), for a sender that adapts it to the loss it meets; at 0 what
    /// was owed ahead is forgotten.
    pub fn set_ahead(&mut self, percent: f64) {
        self.ahead_percent = if percent.is_finite() { percent.clamp(0.0, 100.0) } else { 0.0 };
        if self.ahead_percent == 0.0 {
            self.ahead_owed = 0.0;
        }
    }

    /// A coded packet over all of W.
    fn over_window(&mut self) -> Coverage {
        let seed = self.seed();
        let span = self.window.len().min(MAX_WINDOW) as u16;
        Coverage { base: self.window.base(), span, degree: span, seed }
    }

    /// A coded packet over all of W, for a caller that decides itself when and where it goes;
    /// `None` while W is empty.
    pub fn code_over_window(&mut self, now: Instant) -> Option<Coverage> {
        self.expire(now);
        (!self.window.is_empty()).then(|| self.over_window())
    }

    /// |W|.
    pub fn window_len(&self) -> usize {
        self.window.len()
    }

    fn seed(&mut self) -> u16 {
        let s = self.next_seed;
        self.next_seed = self.next_seed.wrapping_add(1);
        s
    }

    fn trim_holes(&mut self) {
        self.holes = self.holes.split_off(&self.window.base());
        self.owed = self.owed.min(self.holes.len());
    }

    fn expire(&mut self, now: Instant) {
        if self.window.expire(now) {
            self.trim_holes();
        }
    }
}

impl RecoverySender for RlncSender {
    fn kind(&self) -> RecoveryKind {
        RecoveryKind::Rlnc { ahead_percent: self.ahead_percent }
    }

    fn on_data_sent(&mut self, now: Instant, seq: u64, _link: LinkId, _loss: f64) {
        // At most one packet's worth saved up: a quiet spell earns no burst of repairs later.
        let ahead = self.ahead_percent / 100.0;
        self.ahead_owed = (self.ahead_owed + ahead).min(1.0 + ahead);
        if self.window.push(now, seq, ()) {
            self.expire(now);
        }
    }

    fn on_ack(&mut self, _now: Instant, cum_ack: u64) {
        self.evicted = self.evicted.split_off(&cum_ack);
        if cum_ack > self.window.base() {
            self.window.purge_below(cum_ack);
            self.trim_holes();
        }
    }

    fn wants_nacks(&self) -> bool {
        true
    }

    fn on_nack(&mut self, _now: Instant, seq: u64) {
        if self.window.contains(seq) {
            self.holes.insert(seq);
            self.owed = (self.owed + 1).min(self.holes.len());
        } else if seq < self.window.base() {
            self.evicted.insert(seq);
            if self.evicted.len() > MAX_WINDOW {
                self.evicted.pop_first();
            }
        }
    }

    /// Repairs owed to reported holes go at once, on the link that delivers first; then those
    /// owed ahead of reports (`rlnc:<K>`), over all of W, the same way.
    fn poll_repair(&mut self, now: Instant) -> Option<Repair> {
        self.expire(now);
        if let Some(seq) = self.evicted.pop_first() {
            return Some(Repair::Resend { seq, link: None });
        }
        if self.window.is_empty() {
            return None;
        }
        if self.owed == 0 {
            if self.ahead_owed < 1.0 {
                return None;
            }
            self.ahead_owed -= 1.0;
            return Some(Repair::Code { kind: CodeKind::Rlnc, coverage: self.over_window() });
        }
        let (&first, &last) = (self.holes.first()?, self.holes.last()?);
        self.owed -= 1;
        if self.owed == 0 {
            self.holes.clear();
        }
        let span = (last - first + 1) as u16;
        let seed = self.seed();
        Some(Repair::Code { kind: CodeKind::Rlnc, coverage: Coverage { base: first, span, degree: span, seed } })
    }

    fn wants_opportunity(&self) -> bool {
        !self.window.is_empty()
    }

    fn poll_opportunistic(&mut self, now: Instant, _link: LinkId, _loss: f64) -> Option<(CodeKind, Coverage)> {
        self.expire(now);
        if self.window.is_empty() {
            return None;
        }
        Some((CodeKind::Rlnc, self.over_window()))
    }

    fn oldest_needed(&self) -> Option<u64> {
        (!self.window.is_empty()).then_some(self.window.base())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sender_with(n: u64) -> RlncSender {
        let mut s = RlncSender::new(5);
        for q in 0..n {
            s.on_data_sent(Instant::ZERO, q, LinkId(0), 0.1);
        }
        s
    }

    #[test]
    fn codes_densely_over_the_unacked_window_with_fresh_seeds() {
        let mut s = sender_with(10);
        s.on_ack(Instant::ZERO, 4);
        let (k, a) = s.poll_opportunistic(Instant::ZERO, LinkId(0), 0.0).unwrap();
        let (_, b) = s.poll_opportunistic(Instant::ZERO, LinkId(0), 0.0).unwrap();
        assert_eq!(k, CodeKind::Rlnc);
        assert_eq!((a.base, a.span, a.degree), (4, 6, 6));
        assert_ne!(a.seed, b.seed);
        s.on_ack(Instant::ZERO, 10);
        assert!(!s.wants_opportunity());
        assert_eq!(s.poll_opportunistic(Instant::ZERO, LinkId(0), 0.0), None);
    }

    #[test]
    fn reported_holes_get_one_repair_per_report_over_their_span_at_once() {
        let repair = |s: &mut RlncSender| match s.poll_repair(Instant::ZERO) {
            Some(Repair::Code { kind: CodeKind::Rlnc, coverage }) => Some((coverage.base, coverage.span)),
            None => None,
            other => panic!("expected an RLNC repair, got {other:?}"),
        };
        let mut s = sender_with(20);
        assert_eq!(repair(&mut s), None, "nothing reported, nothing owed");
        s.on_nack(Instant::ZERO, 12);
        s.on_nack(Instant::ZERO, 5);
        s.on_nack(Instant::ZERO, 40); // not in W
        assert_eq!(repair(&mut s), Some((5, 8)));
        s.on_ack(Instant::ZERO, 6); // 5 arrived: only 12 is left
        assert_eq!(repair(&mut s), Some((12, 1)), "the second report's repair covers what is left");
        assert_eq!(repair(&mut s), None, "repairs paid");
        let c = s.poll_opportunistic(Instant::ZERO, LinkId(0), 0.0).unwrap().1;
        assert_eq!((c.base, c.span), (6, 14), "spare capacity: all of W");
        s.on_nack(Instant::ZERO, 12);
        assert_eq!(repair(&mut s), Some((12, 1)));
    }

    #[test]
    fn window_is_capped_and_ages_out() {
        let mut s = sender_with(300);
        assert_eq!(s.window_len(), MAX_WINDOW);
        assert_eq!(s.oldest_needed(), Some(300 - MAX_WINDOW as u64));
        assert_eq!(s.poll_opportunistic(Instant::from_millis(1500), LinkId(0), 0.0), None);
    }

    #[test]
    fn a_reported_hole_that_left_w_is_resent_as_it_is() {
        let mut s = sender_with(300); // W holds 44..300: 0..44 left it, unacknowledged
        s.on_nack(Instant::ZERO, 10);
        s.on_nack(Instant::ZERO, 400); // never sent: nothing to do
        assert_eq!(s.poll_repair(Instant::ZERO), Some(Repair::Resend { seq: 10, link: None }));
        assert_eq!(s.poll_repair(Instant::ZERO), None);
        s.on_nack(Instant::ZERO, 11);
        s.on_ack(Instant::ZERO, 12); // 11 arrived after all
        assert_eq!(s.poll_repair(Instant::ZERO), None);
    }

    #[test]
    fn ahead_of_reports_one_coded_packet_per_hundred_over_k_data_packets() {
        let mut s = RlncSender::new(5).with_ahead(2.0);
        let mut sent = Vec::new();
        for q in 0..200 {
            s.on_data_sent(Instant::ZERO, q, LinkId(0), 0.0);
            while let Some(r) = s.poll_repair(Instant::ZERO) {
                let Repair::Code { kind: CodeKind::Rlnc, coverage } = r else { panic!("{r:?}") };
                sent.push((q, coverage.base, coverage.span));
            }
        }
        // Every 50th data packet, over all of W (nothing acknowledged: W is the newest 200).
        assert_eq!(sent.iter().map(|c| c.0).collect::<Vec<_>>(), [49, 99, 149, 199]);
        assert_eq!(sent[3], (199, 0, 200));
        // A reported hole comes first; and the default sends none ahead.
        s.on_nack(Instant::ZERO, 7);
        for q in 200..250 {
            s.on_data_sent(Instant::ZERO, q, LinkId(0), 0.0);
        }
        let first = s.poll_repair(Instant::ZERO);
        assert!(matches!(first, Some(Repair::Code { coverage: Coverage { base: 7, span: 1, .. }, .. })), "{first:?}");
        assert!(matches!(s.poll_repair(Instant::ZERO), Some(Repair::Code { coverage: Coverage { base: 0, .. }, .. })));
        assert_eq!(s.poll_repair(Instant::ZERO), None);
        assert_eq!(sender_with(500).poll_repair(Instant::ZERO), None);
        assert_eq!(s.kind().to_string(), "rlnc:2");
    }

    #[test]
    fn resends_do_not_enter_the_window() {
        let mut s = sender_with(2);
        s.on_data_sent(Instant::ZERO, 0, LinkId(1), 0.0);
        assert_eq!(s.window_len(), 2);
    }
}
