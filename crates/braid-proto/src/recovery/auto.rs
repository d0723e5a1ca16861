//! `auto`: braid's general setting, the one a user gets without choosing (the daemon's default
//! `[session]`, a scenario `[[scheme]]` with only a name).
//!
//! What it decides, and from what it measures:
//! - **How much to code, and when**: OEC's rule (PluriBus 4.1-4.2, 5.1): coded packets only into
//!   capacity the queue model finds spare, their degree from the measured loss, known holes
//!   repaired at once. So coding grows with spare capacity and loss and vanishes when the
//!   passengers' load fills the uplinks; nothing is sent ahead of reports, which on lightly loaded
//!   uplinks would only add bytes that OEC's spare-capacity packets already carry.
//! - **Whether to run AQM**: the session runs CoDel ([`crate::aqm`]) only while the load is bulk
//!   (new data has met a queue for a while) and the uplinks' round trip is long
//!   ([`crate::session`]'s `auto_aqm`): there, modem buffers are smaller than a bulk flow's window
//!   and overflow in bursts; on short paths drop-tail buffers keep a flow's window, and short flows
//!   (the bus) lose more to CoDel's drops than to overflows.
//! - **How to split**: earliest estimated arrival (`min-delay`) over capacity estimates that the
//!   session keeps honest by probing ([`crate::link::TxLink::handle_probe_timer`]).

use super::{Oec, RecoveryKind, RecoverySender, Repair};
use crate::link::LinkId;
use crate::time::Instant;
use crate::wire::{CodeKind, Coverage};

/// The `auto` sender: OEC's coding, reported as `auto`.
#[derive(Debug, Clone)]
pub struct Auto {
    oec: Oec,
}

impl Auto {
    /// A sender whose random choices are seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Auto { oec: Oec::new(seed) }
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
        self.oec.on_data_sent(now, seq, link, loss);
    }

    fn on_ack(&mut self, now: Instant, cum_ack: u64) {
        self.oec.on_ack(now, cum_ack);
    }

    fn on_nack(&mut self, now: Instant, seq: u64) {
        self.oec.on_nack(now, seq);
    }

    fn poll_repair(&mut self, now: Instant) -> Option<Repair> {
        self.oec.poll_repair(now)
    }

    fn wants_opportunity(&self) -> bool {
        self.oec.wants_opportunity()
    }

    fn poll_opportunistic(&mut self, now: Instant, link: LinkId, loss: f64) -> Option<(CodeKind, Coverage)> {
        self.oec.poll_opportunistic(now, link, loss)
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.oec.poll_timeout()
    }

    fn oldest_needed(&self) -> Option<u64> {
        self.oec.oldest_needed()
    }
}
