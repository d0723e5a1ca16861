//! `auto`: braid's general setting, the one a user gets without choosing (the daemon's default
//! `[session]`, a scenario `[[scheme]]` with only a name).
//!
//! What it decides, and from what it measures:
//! - **How much to code, and when**: OEC's rule (PluriBus 4.1-4.2, 5.1): coded packets only into
//!   capacity the queue model finds spare, known holes repaired at once. So coding grows with
//!   spare capacity and loss and vanishes when the passengers' load fills the uplinks. Beyond the
//!   few packets for rare losses on full links (below), nothing is sent ahead of reports, which
//!   on lightly loaded uplinks would only add bytes that the spare-capacity packets already carry.
//! - **Which code**: OEC's XOR of a few packets of W while the data's links lose little, RLNC over
//!   all of W ([`super::RlncSender`]) once they lose [`RLNC_FROM_LOSS`] or more. An XOR recovers a
//!   packet only when exactly one of its members is missing, so under bursty loss most are
//!   useless, while any k RLNC packets recover any k holes (PluriBus Fig. 10's Gilbert sweep, 3
//!   runs: at 15-35 % mean loss `rlnc` 0.56-1.88 s mean FCT against `oec`'s 0.61-3.31; the bus
//!   with a coding budget, 5 % bursty loss on WiMax: `rlnc` up to 10 % faster). At low loss the
//!   two are alike and XOR costs far less CPU (an RLNC packet multiplies all of W).
//! - **Known holes are resent**, not XOR-coded at degree 1 as OEC does: the same bytes, but they
//!   are the passengers' own data, which TCP would resend anyway, not redundancy sent ahead of
//!   loss; so a coding budget ([`crate::link::CodingMeter`]) does not withhold them. With OEC's
//!   coded repairs, a budget of 0 left every hole to the passengers' TCP after the receiver had
//!   held the packets behind it for a repair that never came (PluriBus' bus with today's hosts,
//!   `scenarios/bus-metered.toml` at budget 0: mean FCT 0.467 s with `oec`, 0.388 s with `none`).
//! - **Which losses to hide**: a loss at an uplink's full buffer while every uplink in use is
//!   queued is congestion, and the passengers' TCP must see it to back off; the receiver gives
//!   such a hole up as soon as it is known lost instead of having it resent
//!   ([`crate::link::RxSample::congested`], `Session::release_congestion_holes`). Wireless losses
//!   are repaired. Only where the session runs no AQM of its own (short paths): there braid's
//!   CoDel is the congestion signal.
//! - **Whether to run AQM**: the session runs CoDel ([`crate::aqm`]) only while the load is bulk
//!   (new data has met a queue for a while) and the uplinks' round trip is long
//!   ([`crate::session`]'s `auto_aqm`): there, modem buffers are smaller than a bulk flow's window
//!   and overflow in bursts; on short paths drop-tail buffers keep a flow's window, and short flows
//!   (the bus) lose more to CoDel's drops than to overflows.
//! - **Rare losses on full links are repaired ahead of reports**: while the holes the peer
//!   reports come to under [`RLNC_FROM_LOSS`] of the data sent (over about the last 4096 data
//!   packets), [`AHEAD_PER_LOSS`] RLNC packets per expected loss (at most [`AHEAD_MAX_PERCENT`]
//!   per 100 data packets) go over all of W as data is sent, whether or not a link has spare
//!   capacity ([`RlncSender::with_ahead`]). On a full link a hole otherwise waits for a report
//!   and a resend that queues behind everything sent since; the passengers' window, held by the
//!   packets waiting behind the hole in the peer's sequencing buffer, stops the sender and the
//!   link runs dry before the repair lands. The expected loss is counted from reported holes,
//!   not taken from the links' reported loss ([`Auto::ahead_percent`] says why). Paper 002's
//!   pass (`scenarios/drive-by-pass.toml`, 10 runs), where the production phase loses 0.2 % at
//!   up to 29 Mbit/s: 87.0 % of the pass's potential with the rate from reported holes, 85.2 %
//!   with it from the links' reported loss, which sent nothing ahead most of the time; two or
//!   four per 100 moved 85.1-86.1 %, the coded packets taking the data's capacity. At heavier
//!   loss a few packets ahead repair little and take capacity from the data (FMTCP Table II
//!   with Linux-like hosts, `rlnc:2` at 2-5 % loss: 0.6-1.7 Mbit/s less); spare capacity and
//!   reports repair it.
//! - **How to split**: earliest estimated arrival (`min-delay`) over capacity estimates that the
//!   session keeps honest by probing ([`crate::link::TxLink::handle_probe_timer`]).

use super::{Oec, RecoveryKind, RecoverySender, Repair, RlncSender};
use crate::link::LinkId;
use crate::time::Instant;
use crate::wire::{CodeKind, Coverage};

/// The mean loss of the links data went on (per data packet) from which coded packets are RLNC.
pub const RLNC_FROM_LOSS: f64 = 0.02;
/// Coded packets sent ahead of reports per data packet the links are expected to lose, while
/// they lose less than [`RLNC_FROM_LOSS`] (module docs).
pub const AHEAD_PER_LOSS: f64 = 5.0;
/// At most this many coded packets per 100 data packets go ahead of reports.
pub const AHEAD_MAX_PERCENT: f64 = 1.0;
/// Weight of each data packet's link loss in [`Auto`]'s running mean: about the last 64 packets.
const LOSS_GAIN: f64 = 1.0 / 64.0;
/// Weight of each data packet in the running mean of reported holes per data packet that sets
/// how many coded packets go ahead of reports: about the last 4096 packets, which at paper 002's
/// 0.2 % hold about eight losses.
const HOLE_RATE_GAIN: f64 = 1.0 / 4096.0;

/// The `auto` sender: OEC's or RLNC's coding by the loss the data meets (module docs).
#[derive(Debug, Clone)]
pub struct Auto {
    oec: Oec,
    rlnc: RlncSender,
    /// Running mean of the loss rate of the link each data packet went on.
    data_loss: f64,
    /// Running mean of holes the peer reported per data packet sent: the loss that coding ahead
    /// of reports answers ([`Auto::ahead_percent`]).
    hole_rate: f64,
    /// The newest hole counted in `hole_rate`: a hole reported again is not a new loss.
    newest_hole: Option<u64>,
}

impl Auto {
    /// A sender whose random choices are seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Auto { oec: Oec::new(seed), rlnc: RlncSender::new(seed), data_loss: 0.0, hole_rate: 0.0, newest_hole: None }
    }

    /// Whether coded packets are RLNC now.
    pub fn codes_rlnc(&self) -> bool {
        self.data_loss >= RLNC_FROM_LOSS
    }

    /// Coded packets per 100 data packets sent ahead of reports now (module docs), from the holes
    /// the peer reported over the last few thousand data packets. Not from the links' reported
    /// loss: a report carries the receiver's estimate, which jumps by an eighth at each loss and
    /// decays within tens of packets, and a report follows each loss at once (it carries the
    /// hole), so at 0.2 % loss the reported figure averaged 1-3 % over the data sent, the sender
    /// took it for heavy loss and sent nothing ahead most of the time.
    pub fn ahead_percent(&self) -> f64 {
        if self.hole_rate >= RLNC_FROM_LOSS {
            0.0
        } else {
            (AHEAD_PER_LOSS * self.hole_rate * 100.0).min(AHEAD_MAX_PERCENT)
        }
    }
}

impl RecoverySender for Auto {
    fn kind(&self) -> RecoveryKind {
        RecoveryKind::Auto
    }

    fn wants_nacks(&self) -> bool {
        self.oec.wants_nacks()
    }

    fn on_data_sent(&mut self, now: Instant, seq: u64, link: LinkId, loss: f64) {
        if loss.is_finite() {
            self.data_loss += (loss.clamp(0.0, 1.0) - self.data_loss) * LOSS_GAIN;
        }
        self.hole_rate -= self.hole_rate * HOLE_RATE_GAIN;
        self.rlnc.set_ahead(self.ahead_percent());
        self.oec.on_data_sent(now, seq, link, loss);
        self.rlnc.on_data_sent(now, seq, link, loss);
    }

    fn on_ack(&mut self, now: Instant, cum_ack: u64) {
        self.oec.on_ack(now, cum_ack);
        self.rlnc.on_ack(now, cum_ack);
    }

    /// Holes are tracked by OEC alone: they are resent ([`Auto::poll_repair`]), whichever code
    /// fills the spare capacity.
    fn on_nack(&mut self, now: Instant, seq: u64) {
        // Reports of older holes are retries (holes are reported in order); count each once.
        if self.newest_hole.is_none_or(|h| seq > h) {
            self.newest_hole = Some(seq);
            self.hole_rate += HOLE_RATE_GAIN;
        }
        self.oec.on_nack(now, seq);
    }

    /// Reported holes first (resent), then the coded packets owed ahead of reports. Holes are
    /// never reported to the RLNC sender, so all it gives here is those.
    fn poll_repair(&mut self, now: Instant) -> Option<Repair> {
        match self.oec.poll_repair(now) {
            Some(Repair::Code { coverage, .. }) if coverage.degree == 1 => {
                Some(Repair::Resend { seq: coverage.base, link: None })
            }
            Some(other) => Some(other),
            None => self.rlnc.poll_repair(now),
        }
    }

    fn wants_opportunity(&self) -> bool {
        self.oec.wants_opportunity()
    }

    fn poll_opportunistic(&mut self, now: Instant, link: LinkId, loss: f64) -> Option<(CodeKind, Coverage)> {
        if self.codes_rlnc() {
            self.rlnc.poll_opportunistic(now, link, loss)
        } else {
            self.oec.poll_opportunistic(now, link, loss)
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.oec.poll_timeout()
    }

    fn oldest_needed(&self) -> Option<u64> {
        match (self.oec.oldest_needed(), self.rlnc.oldest_needed()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_xor_at_low_loss_rlnc_at_high_and_resends_known_holes() {
        let t = Instant::ZERO;
        let mut a = Auto::new(1);
        for seq in 0..200 {
            a.on_data_sent(t, seq, LinkId(0), 0.005);
        }
        assert!(!a.codes_rlnc());
        assert_eq!(a.poll_opportunistic(t, LinkId(0), 0.005).map(|(k, _)| k), Some(CodeKind::Xor));
        for seq in 200..400 {
            a.on_data_sent(t, seq, LinkId(1), 0.1);
        }
        assert!(a.codes_rlnc(), "{}", a.data_loss);
        assert_eq!(a.poll_opportunistic(t, LinkId(1), 0.1).map(|(k, _)| k), Some(CodeKind::Rlnc));
        // A reported hole comes back as itself, which a coding budget does not withhold.
        a.on_nack(t, 250);
        assert_eq!(a.poll_repair(t), Some(Repair::Resend { seq: 250, link: None }));
        assert_eq!(a.poll_repair(t), None);
    }

    #[test]
    fn rare_losses_earn_coded_packets_ahead_of_reports() {
        let t = Instant::ZERO;
        // No loss: none ahead.
        let mut a = Auto::new(1);
        for seq in 0..1000 {
            a.on_data_sent(t, seq, LinkId(0), 0.0);
        }
        assert_eq!(a.ahead_percent(), 0.0);
        assert_eq!(a.poll_repair(t), None);
        // One hole in 500 (paper 002's production phase), each reported twice, on a link whose
        // reported estimate reads 3 % (as it does right after a loss): five per expected loss, one
        // per 100, coded ahead over the last thousand packets.
        let mut a = Auto::new(1);
        let mut ahead = 0;
        for seq in 0..20_000 {
            a.on_data_sent(t, seq, LinkId(0), 0.03);
            if seq % 500 == 250 {
                a.on_nack(t, seq - 10);
                a.on_nack(t, seq - 10);
            }
            // The reported holes come back as resends; the rest is coded ahead.
            while let Some(r) = a.poll_repair(t) {
                match r {
                    Repair::Resend { .. } => {}
                    Repair::Code { kind: CodeKind::Rlnc, .. } => ahead += u32::from(seq >= 19_000),
                    other => panic!("{other:?}"),
                }
            }
        }
        let p = a.ahead_percent();
        assert!((0.6..=AHEAD_MAX_PERCENT).contains(&p), "{p}");
        assert!((5..=11).contains(&ahead), "{ahead}");
        // Heavy loss (a hole in 10): RLNC into spare capacity and reports instead.
        for seq in 20_000..40_000 {
            a.on_data_sent(t, seq, LinkId(0), 0.1);
            if seq % 10 == 0 {
                a.on_nack(t, seq - 5);
            }
        }
        assert_eq!(a.ahead_percent(), 0.0);
    }
}
