//! `none`: no recovery in the tunnel; passengers' TCP retransmits end to end (today's practice).

use super::{RecoveryKind, RecoverySender};

/// Sends nothing but data.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoRecovery;

impl RecoverySender for NoRecovery {
    fn kind(&self) -> RecoveryKind {
        RecoveryKind::None
    }
}
