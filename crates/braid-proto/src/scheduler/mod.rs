//! Schedulers: which link each data packet takes (docs/design.md 4). Policies behind one trait, built by
//! a factory, so a new one is one new file.

mod eat;
mod min_delay;
mod round_robin;
mod single;
mod wrr;

pub use eat::{Eat, expected_delivery_us};
pub use min_delay::MinDelay;
pub use round_robin::RoundRobin;
pub use single::Single;
pub use wrr::{Wrr, natalie_weights};

use crate::link::LinkId;
use crate::scheme::{self, Param, SchemeError, Spelling};
use crate::time::Instant;
use std::fmt;
use std::str::FromStr;

/// What a scheduler sees of one usable link when placing a packet.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkView {
    /// The link.
    pub id: LinkId,
    /// Estimated arrival of this packet if sent now, µs relative to a common reference
    /// (`size/capacity + Q + (d + δ)`, PluriBus 5.3), with `size/capacity + Q` scaled up for a link
    /// of lower operator weight than the others (`Session::link_views`).
    pub arrival_us: i64,
    /// Capacity estimate, bit/s.
    pub capacity_bps: f64,
    /// Peer-reported loss probability.
    pub loss: f64,
    /// Operator weight, honoured by every scheduler: `wrr`'s share of the bytes; for `min-delay`
    /// and `eat` a preference already folded into `arrival_us` (a lower weight counts the link's
    /// queue as proportionally longer); `single` keeps to the highest weight; `round-robin` gives a
    /// link this many packets per turn. 0 keeps data off the link while another can carry it.
    pub weight: u32,
    /// Smoothed round-trip time from probes, µs, once measured (for FMTCP's RTO in `eat`).
    pub srtt_us: Option<u32>,
}

/// A scheduling policy.
pub trait Scheduler: Send + fmt::Debug {
    /// The policy.
    fn kind(&self) -> SchedulerKind;

    /// Picks a link among `links` (never empty) for a `size`-byte data packet.
    fn pick(&mut self, now: Instant, size: usize, links: &[LinkView]) -> LinkId;
}

/// The schedulers braid can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SchedulerKind {
    /// Earliest estimated arrival (PluriBus 4.3, 5.3).
    MinDelay,
    /// The best link only (today's practice).
    Single,
    /// Links in turn regardless of their properties (TEQL; a baseline).
    RoundRobin,
    /// Weighted round robin (NATALIE): operator weights, or `auto` from measured bandwidth.
    Wrr {
        /// Weights from measured available bandwidth (NATALIE's auto-weighting).
        auto: bool,
    },
    /// Earliest expected arrival, losses and timeouts included (FMTCP V-B).
    Eat,
}

impl SchedulerKind {
    /// The name as written in configs and scenarios.
    pub fn name(self) -> &'static str {
        match self {
            SchedulerKind::MinDelay => "min-delay",
            SchedulerKind::Single => "single",
            SchedulerKind::RoundRobin => "round-robin",
            SchedulerKind::Wrr { auto: false } => "wrr",
            SchedulerKind::Wrr { auto: true } => "wrr:auto",
            SchedulerKind::Eat => "eat",
        }
    }

    /// Every way of writing a scheduler ([`crate::scheme`]): what [`FromStr`] accepts and help
    /// texts list. A new scheduler is one new row.
    pub const SPELLINGS: &'static [Spelling<SchedulerKind>] = &[
        Spelling {
            name: "min-delay",
            param: Param::None,
            help: "earliest estimated arrival (PluriBus), the default",
            make: |_| SchedulerKind::MinDelay,
        },
        Spelling { name: "single", param: Param::None, help: "the best link only", make: |_| SchedulerKind::Single },
        Spelling {
            name: "round-robin",
            param: Param::None,
            help: "links in turn regardless of their properties (TEQL)",
            make: |_| SchedulerKind::RoundRobin,
        },
        Spelling {
            name: "wrr",
            param: Param::None,
            help: "weighted round robin with fixed weights (per uplink `weight`, a scenario's `weights`)",
            make: |_| SchedulerKind::Wrr { auto: false },
        },
        Spelling {
            name: "wrr",
            param: Param::Word("auto"),
            help: "weighted round robin, weights from measured available bandwidth (NATALIE)",
            make: |_| SchedulerKind::Wrr { auto: true },
        },
        Spelling {
            name: "eat",
            param: Param::None,
            help: "earliest expected arrival, losses and timeouts included (FMTCP)",
            make: |_| SchedulerKind::Eat,
        },
    ];
}

impl fmt::Display for SchedulerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for SchedulerKind {
    type Err = SchemeError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        scheme::parse(Self::SPELLINGS, "scheduler", s)
    }
}

/// Builds a scheduler.
pub fn build(kind: SchedulerKind) -> Box<dyn Scheduler> {
    match kind {
        SchedulerKind::MinDelay => Box::new(MinDelay),
        SchedulerKind::Single => Box::new(Single::default()),
        SchedulerKind::RoundRobin => Box::new(RoundRobin::default()),
        SchedulerKind::Wrr { auto } => Box::new(Wrr::new(auto)),
        SchedulerKind::Eat => Box::new(Eat),
    }
}

#[cfg(test)]
pub(crate) fn view(id: u8, arrival_us: i64, capacity_bps: f64, loss: f64) -> LinkView {
    LinkView { id: LinkId(id), arrival_us, capacity_bps, loss, weight: 1, srtt_us: None }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse() {
        assert_eq!("wrr".parse::<SchedulerKind>().unwrap(), SchedulerKind::Wrr { auto: false });
        assert_eq!("wrr:auto".parse::<SchedulerKind>().unwrap(), SchedulerKind::Wrr { auto: true });
        assert!("fastest".parse::<SchedulerKind>().unwrap_err().to_string().contains("min-delay"));
    }
}
