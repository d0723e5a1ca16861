//! Metered uplinks: a bound on what coding may spend on a link, and backup-only links.
//!
//! OEC (PluriBus 4.1) codes into whatever capacity the data leaves free, which is free only when
//! nobody pays by the byte. On a lightly loaded bus it sends 4.5-7.6x the passengers' bytes; on a
//! metered cellular plan that is the bill. [`CodingMeter`] bounds it per link: coded bytes sent on
//! the link never exceed `budget` times the data bytes sent on it, from the session's start, and
//! over any stretch of time they exceed `budget` times that stretch's data by at most
//! [`CODING_CREDIT_CAP`] bytes.
//!
//! It is a token bucket filled by data: every data byte sent on the link adds `budget` bytes of
//! credit, a coded datagram may go only if the credit covers all of it, and it spends that much.
//! Cumulative accounting alone would let a long download bank credit that a later idle spell spent
//! at once, coding ten times the data of the moment; a sliding window would need a log of sends.
//! The cap keeps the spending in proportion to the traffic of the moment, and the bucket is the
//! whole state: two numbers.

/// Most coding credit a link may hold, bytes: about 45 full-size coded packets, the repair of
/// a few hundred milliseconds of a few-Mbit/s uplink's data. Credit beyond it is forfeited.
pub const CODING_CREDIT_CAP: f64 = 64.0 * 1024.0;

/// How an uplink is metered; the default is unmetered.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Metering {
    /// Coded bytes on this link at most this fraction of the data bytes on it (0 = no coding at
    /// all); `None` for no bound.
    pub coding_budget: Option<f64>,
    /// A backup link carries data, repair and feedback only when no other usable link is a
    /// non-backup one; otherwise it carries nothing but light keepalive probes
    /// ([`BACKUP_KEEPALIVE`]).
    pub backup: bool,
}

/// Keepalive probe period of an idle backup link (the other links': `SessionConfig::keepalive`,
/// 1 s). Each end sends its own probe and answers the other's, 23-byte braid datagrams, about 75
/// bytes on the wire with the daemon's AEAD tag and the outer headers: per 30 s two each way,
/// about 13 MB a month each way, against 390 MB at 1 s. Enough to know the link is there when
/// the others fail; a link that died meanwhile is found on first use, within the down timeout.
pub const BACKUP_KEEPALIVE: std::time::Duration = std::time::Duration::from_secs(30);

impl Metering {
    /// This metering tightened by what the peer asks of the link ([`crate::wire::LinkRequest`]):
    /// no coding, or backup, if either says so; never looser.
    pub fn tightened_by(self, asked: crate::wire::LinkRequest) -> Metering {
        let no_coding = asked.no_coding || asked.backup;
        Metering {
            coding_budget: if no_coding { Some(0.0) } else { self.coding_budget },
            backup: self.backup || asked.backup,
        }
    }

    /// Checks the values: a budget must be a finite number >= 0 (infinity means no bound and is
    /// stored as `None`).
    pub fn new(coding_budget: Option<f64>, backup: bool) -> Result<Self, MeteringError> {
        let coding_budget = match coding_budget {
            Some(b) if b == f64::INFINITY => None,
            Some(b) if b.is_finite() && b >= 0.0 => Some(b),
            Some(b) => return Err(MeteringError::Budget(b)),
            None => None,
        };
        Ok(Metering { coding_budget, backup })
    }
}

/// Why a [`Metering`] was refused.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum MeteringError {
    /// The coding budget is negative or not a number.
    #[error("coding budget must be a number >= 0 (or inf for no bound), found {0}")]
    Budget(f64),
}

/// One link's coding account (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct CodingMeter {
    budget: Option<f64>,
    credit: f64,
    data_bytes: u64,
    coded_bytes: u64,
    withheld: u64,
}

impl CodingMeter {
    /// An account with `budget` (`None`: unbounded) and no credit yet.
    pub fn new(budget: Option<f64>) -> Self {
        CodingMeter { budget, ..CodingMeter::default() }
    }

    /// Changes the budget; the bytes counted so far stay, the credit is kept within the new cap.
    pub fn set_budget(&mut self, budget: Option<f64>) {
        self.budget = budget;
        self.credit = self.credit.min(CODING_CREDIT_CAP);
    }

    /// The budget in force.
    pub fn budget(&self) -> Option<f64> {
        self.budget
    }

    /// A data datagram of `bytes` went out on the link.
    pub fn on_data(&mut self, bytes: usize) {
        self.data_bytes += bytes as u64;
        if let Some(b) = self.budget {
            self.credit = (self.credit + b * bytes as f64).min(CODING_CREDIT_CAP);
        }
    }

    /// Whether a coded datagram of `bytes` may go out on the link now.
    pub fn allows(&self, bytes: usize) -> bool {
        self.budget.is_none() || self.credit >= bytes as f64
    }

    /// A coded datagram of `bytes` went out on the link: the caller checked [`Self::allows`].
    pub fn on_coded(&mut self, bytes: usize) {
        self.coded_bytes += bytes as u64;
        if self.budget.is_some() {
            self.credit = (self.credit - bytes as f64).max(0.0);
        }
    }

    /// A coded datagram the budget did not allow.
    pub fn on_withheld(&mut self) {
        self.withheld += 1;
    }

    /// Data bytes sent on the link (braid header and payload, first sends and resends).
    pub fn data_bytes(&self) -> u64 {
        self.data_bytes
    }

    /// Coded bytes sent on the link (braid header and payload).
    pub fn coded_bytes(&self) -> u64 {
        self.coded_bytes
    }

    /// Coded datagrams the budget held back.
    pub fn withheld(&self) -> u64 {
        self.withheld
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn no_budget_allows_everything_and_still_counts() {
        let mut m = CodingMeter::new(None);
        assert!(m.allows(1500));
        m.on_coded(1500);
        m.on_data(100);
        assert_eq!((m.coded_bytes(), m.data_bytes()), (1500, 100));
    }

    #[test]
    fn zero_budget_allows_no_coding() {
        let mut m = CodingMeter::new(Some(0.0));
        m.on_data(10_000_000);
        assert!(!m.allows(1));
    }

    #[test]
    fn credit_is_capped() {
        let mut m = CodingMeter::new(Some(1.0));
        m.on_data(10_000_000);
        let mut sent = 0;
        while m.allows(1000) {
            m.on_coded(1000);
            sent += 1000;
        }
        assert_eq!(sent as f64, (CODING_CREDIT_CAP / 1000.0).floor() * 1000.0);
    }

    #[test]
    fn metering_checks_its_budget() {
        assert_eq!(Metering::new(Some(f64::INFINITY), false).unwrap().coding_budget, None);
        assert!(Metering::new(Some(-0.1), false).is_err());
        assert!(Metering::new(Some(f64::NAN), false).is_err());
        assert_eq!(Metering::new(Some(0.25), true).unwrap(), Metering { coding_budget: Some(0.25), backup: true });
    }

    proptest! {
        /// Whatever the order of sends, a sender that asks before each coded datagram never has
        /// coded more than budget x data, and over any suffix of the sends no more than the cap
        /// above budget x that suffix's data.
        #[test]
        fn coded_bytes_stay_within_the_budget(
            budget in 0.0f64..2.0,
            sends in proptest::collection::vec((any::<bool>(), 40usize..1500), 0..400),
        ) {
            let mut m = CodingMeter::new(Some(budget));
            let mut log = Vec::new();
            for (coded, bytes) in sends {
                if coded {
                    if m.allows(bytes) {
                        m.on_coded(bytes);
                        log.push((true, bytes));
                    }
                } else {
                    m.on_data(bytes);
                    log.push((false, bytes));
                }
                prop_assert!(m.coded_bytes() as f64 <= budget * m.data_bytes() as f64 + 1e-6);
            }
            for start in 0..log.len() {
                let (c, d) = log[start..].iter().fold((0.0, 0.0), |(c, d), &(coded, b)| {
                    if coded { (c + b as f64, d) } else { (c, d + b as f64) }
                });
                prop_assert!(c <= CODING_CREDIT_CAP + budget * d + 1e-6);
            }
        }
    }
}
