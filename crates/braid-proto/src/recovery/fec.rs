//! `fec`: capacity-oblivious XOR coding with K % redundancy, PluriBus 6.2's (K, 1) Maelstrom code:
//! after every 100/K data packets, one coded packet XORs the unacknowledged packets sent since the
//! previous coded packet, and goes out at once on the least-delay link whatever the spare capacity.

use super::{RecoveryKind, RecoverySender, Repair};
use crate::time::Instant;
use crate::wire::{CodeKind, Coverage};
use std::collections::VecDeque;

/// Fixed-rate XOR coding.
#[derive(Debug, Clone)]
pub struct Fec {
    percent: f64,
    credit: f64,
    since: Option<u64>,
    cum_ack: u64,
    pending: VecDeque<Coverage>,
}

impl Fec {
    /// `percent` coded packets per 100 data packets (100 = one per data packet).
    pub fn new(percent: f64) -> Self {
        Fec { percent: percent.max(0.0), credit: 0.0, since: None, cum_ack: 0, pending: VecDeque::new() }
    }
}

impl RecoverySender for Fec {
    fn kind(&self) -> RecoveryKind {
        RecoveryKind::Fec { percent: self.percent }
    }

    fn on_data_sent(&mut self, _now: Instant, seq: u64, _link: crate::link::LinkId, _loss: f64) {
        let start = self.since.unwrap_or(seq).max(self.cum_ack).min(seq);
        self.credit += self.percent / 100.0;
        let span = u16::try_from(seq + 1 - start).unwrap_or(u16::MAX);
        let mut emitted = false;
        // Redundancy above 100 % sends several coded packets per data packet.
        while self.credit >= 1.0 - 1e-9 {
            self.credit -= 1.0;
            self.pending.push_back(Coverage::all(seq + 1 - u64::from(span), span));
            emitted = true;
        }
        self.since = Some(if emitted { seq + 1 } else { start });
    }

    fn on_ack(&mut self, _now: Instant, cum_ack: u64) {
        self.cum_ack = self.cum_ack.max(cum_ack);
    }

    fn poll_repair(&mut self, _now: Instant) -> Option<Repair> {
        self.pending.pop_front().map(|coverage| Repair::Code { kind: CodeKind::Xor, coverage })
    }

    fn oldest_needed(&self) -> Option<u64> {
        self.pending.front().map(|c| c.base).or(self.since)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::LinkId;

    fn coded(f: &mut Fec) -> Vec<Vec<u64>> {
        std::iter::from_fn(|| f.poll_repair(Instant::ZERO))
            .map(|r| match r {
                Repair::Code { coverage, .. } => coverage.members(),
                other => panic!("fec only codes, got {other:?}"),
            })
            .collect()
    }

    #[test]
    fn ten_percent_codes_every_ten_packets_over_the_last_ten() {
        let mut f = Fec::new(10.0);
        for s in 0..25 {
            f.on_data_sent(Instant::ZERO, s, LinkId(0), 0.0);
        }
        assert_eq!(coded(&mut f), vec![(0..10).collect::<Vec<_>>(), (10..20).collect()]);
    }

    #[test]
    fn hundred_percent_repeats_each_packet() {
        let mut f = Fec::new(100.0);
        for s in 0..3 {
            f.on_data_sent(Instant::ZERO, s, LinkId(0), 0.0);
        }
        assert_eq!(coded(&mut f), vec![vec![0], vec![1], vec![2]]);
    }

    #[test]
    fn acked_packets_leave_the_window() {
        let mut f = Fec::new(25.0);
        f.on_data_sent(Instant::ZERO, 0, LinkId(0), 0.0);
        f.on_data_sent(Instant::ZERO, 1, LinkId(0), 0.0);
        f.on_ack(Instant::ZERO, 2);
        f.on_data_sent(Instant::ZERO, 2, LinkId(0), 0.0);
        f.on_data_sent(Instant::ZERO, 3, LinkId(0), 0.0);
        assert_eq!(coded(&mut f), vec![vec![2, 3]]);
    }

    #[test]
    fn two_hundred_percent_sends_two_per_packet() {
        let mut f = Fec::new(200.0);
        f.on_data_sent(Instant::ZERO, 0, LinkId(0), 0.0);
        assert_eq!(coded(&mut f), vec![vec![0], vec![0]]);
    }
}
