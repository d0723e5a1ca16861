//! `arq`: the receiver reports holes (NACKs) and the sender retransmits each on the fastest link
//! (PluriBus 6.2's retransmission baseline: least-delay path, no rate reduction on loss).

use super::{RecoveryKind, RecoverySender, Repair};
use crate::time::Instant;
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// Several feedback packets may report the same hole before the retransmission lands; resends of
/// one sequence number closer together than this are suppressed.
const RESEND_GUARD: Duration = Duration::from_millis(20);

/// Retransmits what the receiver reports missing.
#[derive(Debug, Default, Clone)]
pub struct Arq {
    pending: VecDeque<u64>,
    last_resend: BTreeMap<u64, Instant>,
    cum_ack: u64,
}

impl RecoverySender for Arq {
    fn kind(&self) -> RecoveryKind {
        RecoveryKind::Arq
    }

    fn wants_nacks(&self) -> bool {
        true
    }

    fn on_ack(&mut self, _now: Instant, cum_ack: u64) {
        self.cum_ack = self.cum_ack.max(cum_ack);
        self.last_resend = self.last_resend.split_off(&self.cum_ack);
        self.pending.retain(|&s| s >= cum_ack);
    }

    fn on_nack(&mut self, now: Instant, seq: u64) {
        if seq < self.cum_ack {
            return;
        }
        if let Some(&t) = self.last_resend.get(&seq)
            && now - t < RESEND_GUARD
        {
            return;
        }
        self.last_resend.insert(seq, now);
        self.pending.push_back(seq);
    }

    fn poll_repair(&mut self, _now: Instant) -> Option<Repair> {
        self.pending.pop_front().map(|seq| Repair::Resend { seq, link: None })
    }

    fn oldest_needed(&self) -> Option<u64> {
        Some(self.cum_ack)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nack_triggers_one_resend_per_guard_interval() {
        let mut a = Arq::default();
        let t = Instant::from_millis(100);
        a.on_nack(t, 7);
        a.on_nack(t + Duration::from_millis(5), 7);
        assert_eq!(a.poll_repair(t), Some(Repair::Resend { seq: 7, link: None }));
        assert_eq!(a.poll_repair(t), None);
        a.on_nack(t + Duration::from_millis(30), 7);
        assert_eq!(a.poll_repair(t), Some(Repair::Resend { seq: 7, link: None }));
    }

    #[test]
    fn acked_packets_are_not_resent() {
        let mut a = Arq::default();
        a.on_nack(Instant::ZERO, 3);
        a.on_ack(Instant::ZERO, 4);
        assert_eq!(a.poll_repair(Instant::ZERO), None);
        a.on_nack(Instant::ZERO, 2);
        assert_eq!(a.poll_repair(Instant::ZERO), None);
    }
}
