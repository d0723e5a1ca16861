//! Loss recovery (docs/design.md 4): the sender-side schemes behind one trait, built by a factory so a
//! new scheme is one new file, and the receiver-side decoders, which do not depend on the scheme
//! the peer chose (whatever coded packets arrive are decoded).

mod arq;
mod auto;
pub mod codec;
mod dup;
mod fec;
mod fountain;
pub mod gf256;
mod nack;
mod none;
mod oec;
mod rlnc;
mod rlnc_sender;
mod window;
mod xor;

pub use arq::Arq;
pub use auto::{AUTO_DEGRADE_LOSS, AUTO_RECOVER_LOSS, Auto};
pub use codec::{Decoder, DecoderStats, Encoder};
pub use dup::Dup;
pub use fec::Fec;
pub use fountain::{
    BLOCK_PACKETS, BLOCK_WAIT, Fountain, FountainDecoder, FountainEncoder, MAX_FAILURE, failure_probability,
    repairs_needed,
};
pub use nack::{NackTiming, NackTracker};
pub use none::NoRecovery;
pub use oec::{Oec, expected_yield, greedy_degree};
pub use rlnc::{MAX_MEMBERS, MAX_UNKNOWNS, RlncDecoder, RlncEncoder, rlnc_coefficients};
pub use rlnc_sender::RlncSender;
pub use xor::{Known, XorDecoder, XorEncoder, xor_into};

use crate::link::LinkId;
use crate::scheme::{self, Param, SchemeError, Spelling};
use crate::time::Instant;
use crate::wire::{CodeKind, Coverage};
use std::fmt;
use std::str::FromStr;

/// The loss-recovery schemes braid can run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RecoveryKind {
    /// Nothing beyond the passengers' own TCP.
    None,
    /// The receiver reports holes; the sender retransmits on the fastest link.
    Arq,
    /// Capacity-oblivious XOR coding with `percent` % redundancy (Maelstrom-style, PluriBus 6.2).
    Fec {
        /// Redundancy in percent of data packets.
        percent: f64,
    },
    /// Every packet on every usable link.
    Dup,
    /// Opportunistic erasure coding (PluriBus 4, 5.1).
    Oec,
    /// Opportunistic sliding-window random linear coding over GF(2^8) (RFC 8681 style).
    Rlnc {
        /// Coded packets sent ahead of any report, in percent of data packets (0: only into
        /// spare capacity and for reported holes). See [`RlncSender::with_ahead`].
        ahead_percent: f64,
    },
    /// Systematic RaptorQ blocks with Eq. 4 repair and NACK-driven top-up (FMTCP IV, V).
    Fountain,
    /// braid's general setting, adapting to what it measures ([`Auto`]): the default.
    Auto,
}

impl RecoveryKind {
    /// The scheme's name without its parameter (`fec` for `fec:10`), for metrics labels.
    pub fn name(&self) -> &'static str {
        match self {
            RecoveryKind::None => "none",
            RecoveryKind::Arq => "arq",
            RecoveryKind::Fec { .. } => "fec",
            RecoveryKind::Dup => "dup",
            RecoveryKind::Oec => "oec",
            RecoveryKind::Rlnc { .. } => "rlnc",
            RecoveryKind::Fountain => "fountain",
            RecoveryKind::Auto => "auto",
        }
    }

    /// Every way of writing a recovery scheme ([`crate::scheme`]): what [`FromStr`] accepts and
    /// help texts list. A new scheme is one new row.
    pub const SPELLINGS: &'static [Spelling<RecoveryKind>] = &[
        Spelling {
            name: "auto",
            param: Param::None,
            help: "braid's general setting, the default: OEC's coding into spare capacity, CoDel only for bulk load on long paths",
            make: |_| RecoveryKind::Auto,
        },
        Spelling {
            name: "none",
            param: Param::None,
            help: "nothing beyond the passengers' own TCP",
            make: |_| RecoveryKind::None,
        },
        Spelling {
            name: "arq",
            param: Param::None,
            help: "the receiver reports holes, the sender resends on the fastest link",
            make: |_| RecoveryKind::Arq,
        },
        Spelling {
            name: "fec",
            param: Param::Number { placeholder: "K", max: 1000.0 },
            help: "one XOR parity packet per 100/K data packets, whatever the links' capacity (Maelstrom-style)",
            make: |percent| RecoveryKind::Fec { percent },
        },
        Spelling {
            name: "dup",
            param: Param::None,
            help: "every packet on every usable link",
            make: |_| RecoveryKind::Dup,
        },
        Spelling {
            name: "oec",
            param: Param::None,
            help: "opportunistic erasure coding into spare capacity (PluriBus)",
            make: |_| RecoveryKind::Oec,
        },
        Spelling {
            name: "rlnc",
            param: Param::None,
            help: "sliding-window random linear coding into spare capacity and for reported holes",
            make: |_| RecoveryKind::Rlnc { ahead_percent: 0.0 },
        },
        Spelling {
            name: "rlnc",
            param: Param::Number { placeholder: "K", max: 100.0 },
            help: "rlnc, plus K coded packets per 100 data packets sent ahead of any report",
            make: |ahead_percent| RecoveryKind::Rlnc { ahead_percent },
        },
        Spelling {
            name: "fountain",
            param: Param::None,
            help: "RaptorQ blocks with FMTCP's repair allocation and NACK-driven top-up",
            make: |_| RecoveryKind::Fountain,
        },
    ];
}

impl fmt::Display for RecoveryKind {
    /// The spelling [`FromStr`] reads back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecoveryKind::Fec { percent } => scheme::write_number(f, "fec", *percent),
            RecoveryKind::Rlnc { ahead_percent } if *ahead_percent > 0.0 => {
                scheme::write_number(f, "rlnc", *ahead_percent)
            }
            other => f.write_str(other.name()),
        }
    }
}

impl FromStr for RecoveryKind {
    type Err = SchemeError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        scheme::parse(Self::SPELLINGS, "recovery scheme", s)
    }
}

/// Something the sender should transmit now, ahead of new data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repair {
    /// Send data packet `seq` again on the fastest link, or on `link` if given.
    Resend {
        /// Global sequence number.
        seq: u64,
        /// Required link, if any.
        link: Option<LinkId>,
    },
    /// Send a copy of `seq` on every usable link except `except`.
    Duplicate {
        /// Global sequence number.
        seq: u64,
        /// The link the original went on.
        except: LinkId,
    },
    /// Send a coded packet of `kind` over `coverage` on the fastest link.
    Code {
        /// The code.
        kind: CodeKind,
        /// What it combines.
        coverage: Coverage,
    },
    /// Send a coded packet of `kind` over `coverage` on `link`, if it is usable and its coding
    /// budget allows; otherwise not at all (redundancy owed to that link's data, [`Auto`]).
    CodeOn {
        /// The code.
        kind: CodeKind,
        /// What it combines.
        coverage: Coverage,
        /// The link it must go on.
        link: LinkId,
    },
}

/// The sender side of a loss-recovery scheme. Every method takes `now` (quinn-proto's congestion
/// controller style); none reads a clock.
pub trait RecoverySender: Send + fmt::Debug {
    /// The scheme.
    fn kind(&self) -> RecoveryKind;

    /// Whether the receiver should report holes for this scheme.
    fn wants_nacks(&self) -> bool {
        false
    }

    /// A new data packet `seq` went out on `link`, whose loss rate the peer reports as `loss`.
    fn on_data_sent(&mut self, now: Instant, seq: u64, link: LinkId, loss: f64) {
        let _ = (now, seq, link, loss);
    }

    /// The peer's cumulative ack: everything below `cum_ack` was delivered or given up.
    fn on_ack(&mut self, now: Instant, cum_ack: u64) {
        let _ = (now, cum_ack);
    }

    /// The peer reports `seq` missing.
    fn on_nack(&mut self, now: Instant, seq: u64) {
        let _ = (now, seq);
    }

    /// The peer reports `seq` missing, and the session repairs it itself, later, if it is not
    /// decoded first (`Session::repair_wait`): the hole counts as a loss, but nothing is owed.
    fn on_hole_waiting(&mut self, now: Instant, seq: u64) {
        let _ = (now, seq);
    }

    /// Repairs to send right away, before new data.
    fn poll_repair(&mut self, now: Instant) -> Option<Repair> {
        let _ = now;
        None
    }

    /// Whether the scheme would send a coded packet if some link's queue were empty; the session
    /// then wakes up when the first queue empties.
    fn wants_opportunity(&self) -> bool {
        false
    }

    /// `link`'s estimated queue is empty (PluriBus 4.1): a coded packet to send on it, if any.
    fn poll_opportunistic(&mut self, now: Instant, link: LinkId, loss: f64) -> Option<(CodeKind, Coverage)> {
        let _ = (now, link, loss);
        None
    }

    /// When the scheme wants [`RecoverySender::poll_repair`] called even without other input (a
    /// fountain block closing on its time limit); `None` for never.
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }

    /// Oldest sequence number the scheme may still ask the session to send or code; the session
    /// keeps sent packets from there on.
    fn oldest_needed(&self) -> Option<u64> {
        None
    }

    /// Whether coded packets (opportunistic, ahead of reports, a capacity probe's) are of use on
    /// `link` while it is the only usable link ([`Auto`] says no once it has measured the link
    /// losing nothing at random).
    fn codes_on_lone_link(&self, link: LinkId) -> bool {
        let _ = link;
        true
    }

    /// Whether the scheme codes for `link`'s losses ahead of reports ([`Auto`]). `None` while the
    /// scheme would but has not measured the link yet.
    fn codes_for_link(&self, link: LinkId) -> Option<bool> {
        let _ = link;
        Some(false)
    }

    /// Whether the scheme makes up for `link`'s steady loss, so that the session's lifecycle need
    /// not drain the link for that loss (`Session::lifecycle`'s raised thresholds): the links it
    /// codes for ([`RecoverySender::codes_for_link`]), and under [`Auto`] also a link whose
    /// typical loss says it will be coded for again. `None` while the scheme would but has not
    /// measured the link yet.
    fn keeps_lossy_link(&self, link: LinkId) -> Option<bool> {
        self.codes_for_link(link)
    }
}

/// Builds the sender side of `kind`; `seed` drives any random choice (OEC's member selection).
pub fn build(kind: RecoveryKind, seed: u64) -> Box<dyn RecoverySender> {
    match kind {
        RecoveryKind::None => Box::new(NoRecovery),
        RecoveryKind::Arq => Box::new(Arq::default()),
        RecoveryKind::Fec { percent } => Box::new(Fec::new(percent)),
        RecoveryKind::Dup => Box::new(Dup::default()),
        RecoveryKind::Oec => Box::new(Oec::new(seed)),
        RecoveryKind::Rlnc { ahead_percent } => Box::new(RlncSender::new(seed).with_ahead(ahead_percent)),
        RecoveryKind::Fountain => Box::new(Fountain::new()),
        RecoveryKind::Auto => Box::new(Auto::new(seed)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse() {
        assert_eq!("oec".parse::<RecoveryKind>().unwrap(), RecoveryKind::Oec);
        assert_eq!("auto".parse::<RecoveryKind>().unwrap(), RecoveryKind::Auto);
        assert_eq!("rlnc".parse::<RecoveryKind>().unwrap(), RecoveryKind::Rlnc { ahead_percent: 0.0 });
        assert_eq!("rlnc:2".parse::<RecoveryKind>().unwrap(), RecoveryKind::Rlnc { ahead_percent: 2.0 });
        assert_eq!("rlnc:2".parse::<RecoveryKind>().unwrap().to_string(), "rlnc:2");
        assert!("rlnc:0".parse::<RecoveryKind>().is_err());
        assert!("rlnc:101".parse::<RecoveryKind>().is_err());
        assert_eq!("fec:10".parse::<RecoveryKind>().unwrap(), RecoveryKind::Fec { percent: 10.0 });
        assert_eq!("fec:2.5".parse::<RecoveryKind>().unwrap().to_string(), "fec:2.5");
        assert_eq!("fec:100".parse::<RecoveryKind>().unwrap(), RecoveryKind::Fec { percent: 100.0 });
        assert!("fec".parse::<RecoveryKind>().is_err());
        assert!("fec:0".parse::<RecoveryKind>().is_err());
        let e = "zap".parse::<RecoveryKind>().unwrap_err().to_string();
        assert!(e.contains("zap") && e.contains("oec"), "{e}");
    }
}
