//! `dup`: every data packet on every usable link. The most robust and most wasteful scheme; a
//! baseline for how much capacity redundancy can buy.

use super::{RecoveryKind, RecoverySender, Repair};
use crate::link::LinkId;
use crate::time::Instant;
use std::collections::VecDeque;

/// Copies each data packet to the other links.
#[derive(Debug, Default, Clone)]
pub struct Dup {
    pending: VecDeque<Repair>,
}

impl RecoverySender for Dup {
    fn kind(&self) -> RecoveryKind {
        RecoveryKind::Dup
    }

    fn on_data_sent(&mut self, _now: Instant, seq: u64, link: LinkId, _loss: f64) {
        self.pending.push_back(Repair::Duplicate { seq, except: link });
    }

    fn poll_repair(&mut self, _now: Instant) -> Option<Repair> {
        self.pending.pop_front()
    }

    fn oldest_needed(&self) -> Option<u64> {
        self.pending.front().map(|r| match *r {
            Repair::Duplicate { seq, .. } | Repair::Resend { seq, .. } => seq,
            Repair::Code { coverage, .. } | Repair::CodeOn { coverage, .. } => coverage.base,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_data_packet_is_duplicated_once() {
        let mut d = Dup::default();
        d.on_data_sent(Instant::ZERO, 4, LinkId(1), 0.0);
        d.on_data_sent(Instant::ZERO, 5, LinkId(0), 0.0);
        assert_eq!(d.oldest_needed(), Some(4));
        assert_eq!(d.poll_repair(Instant::ZERO), Some(Repair::Duplicate { seq: 4, except: LinkId(1) }));
        assert_eq!(d.poll_repair(Instant::ZERO), Some(Repair::Duplicate { seq: 5, except: LinkId(0) }));
        assert_eq!(d.poll_repair(Instant::ZERO), None);
    }
}
