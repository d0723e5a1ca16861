//! Monthly data allowances of metered uplinks (`[[uplink]] monthly_budget`, `billing_day`).
//!
//! Cellular plans bill bytes per month, and braid's coding spends an uplink's spare capacity,
//! which on a metered plan is the fleet's money. The client counts each uplink's bytes both ways
//! (braid's datagrams with their AEAD tag and outer IP and UDP headers: what the carrier counts),
//! keeps the count of the current billing period in `state_dir/usage.json` across restarts, and
//! as an uplink nears its allowance changes its metering: from [`STOP_CODING_AT`] of it no coded
//! bytes go on it, from the whole of it it is a backup uplink, carrying traffic only while no
//! other uplink is usable. The client asks the server for the same on its sends over that uplink
//! (`braid_proto::wire::LinkRequest`, in the uplink's probes), so the allowance bounds both
//! directions. Passengers' data is never dropped for a budget: past it, the fleet
//! pays overage only when it has no other way to carry the data. The next billing period
//! restores the configured metering.

use super::config::UplinkConfig;
use braid_proto::Metering;
use braid_proto::session::LinkCounters;
use braid_proto::wire::LinkRequest;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The share of an allowance after which coding stops on the uplink: the last tenth is kept for
/// passengers' data.
pub(super) const STOP_CODING_AT: f64 = 0.9;

/// How often the count is written to disk: a crash loses at most this much of it.
pub(super) const SAVE_EVERY: Duration = Duration::from_secs(60);

/// Bytes per datagram the session's counters do not see: the AEAD tag and IPv4 + UDP headers
/// (IPv6's are 20 bytes longer; the difference is under 2 % of a full datagram).
const PER_DATAGRAM: u64 = braid_proto::crypto::TAG_LEN as u64 + 28;

/// What the allowance does to an uplink now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stage {
    /// Under [`STOP_CODING_AT`] of it (or no allowance): the configured metering.
    Normal,
    /// No coded bytes on the uplink.
    NoCoding,
    /// The allowance is used up: a backup uplink until the next period.
    Backup,
}

impl Stage {
    fn of(used: u64, budget: Option<u64>) -> Stage {
        match budget {
            Some(b) if used >= b => Stage::Backup,
            Some(b) if used as f64 >= STOP_CODING_AT * b as f64 => Stage::NoCoding,
            _ => Stage::Normal,
        }
    }

    /// The metering in force: the configured one, tightened as the server is asked to tighten its
    /// own ([`Self::request`]).
    pub(super) fn metering(self, configured: Metering) -> Metering {
        configured.tightened_by(self.request())
    }

    /// What the vehicle asks of the server's sends on the uplink, so that the allowance bounds
    /// both directions.
    pub(super) fn request(self) -> LinkRequest {
        match self {
            Stage::Normal => LinkRequest::default(),
            Stage::NoCoding => LinkRequest { no_coding: true, backup: false },
            Stage::Backup => LinkRequest { no_coding: true, backup: true },
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Stage::Normal => "normal",
            Stage::NoCoding => "no coding",
            Stage::Backup => "backup",
        }
    }
}

/// A civil date (UTC), enough for billing periods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub(super) struct Date {
    pub year: i32,
    pub month: u8,
    pub day: u8,
}

impl Date {
    /// The UTC date at `t`.
    pub(super) fn of(t: SystemTime) -> Date {
        let days = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() / 86_400) as i64;
        // Howard Hinnant's civil_from_days (days since 1970-01-01 to a proleptic Gregorian date).
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z - era * 146_097;
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = (doy - (153 * mp + 2) / 5 + 1) as u8;
        let month = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
        let year = (yoe + era * 400 + i64::from(month <= 2)) as i32;
        Date { year, month, day }
    }

    /// The first day of the billing period that contains `self`, for periods starting on day
    /// `billing_day` (1-28) of each month.
    pub(super) fn period_start(self, billing_day: u8) -> Date {
        if self.day >= billing_day {
            Date { day: billing_day, ..self }
        } else if self.month == 1 {
            Date { year: self.year - 1, month: 12, day: billing_day }
        } else {
            Date { month: self.month - 1, day: billing_day, ..self }
        }
    }
}

impl std::fmt::Display for Date {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:04}-{:02}-{:02}", self.year, self.month, self.day)
    }
}

/// One uplink's count in the file.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct Saved {
    period_start: Date,
    bytes: u64,
}

/// `usage.json`.
#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    uplinks: BTreeMap<String, Saved>,
}

/// One uplink's allowance and count.
#[derive(Debug)]
struct Meter {
    name: String,
    budget: Option<u64>,
    billing_day: u8,
    period: Date,
    used: u64,
    /// The session counters last seen (bytes and datagrams both ways), to count what is new;
    /// a new session starts them again from zero.
    seen: [u64; 4],
    stage: Stage,
}

/// The allowances of the client's uplinks.
#[derive(Debug)]
pub(super) struct Usage {
    /// Where the count is kept; `None` when no uplink has an allowance (nothing is written).
    path: Option<PathBuf>,
    meters: Vec<Meter>,
    dirty: bool,
}

/// A change of an uplink's stage, for the client to apply and log.
#[derive(Debug, PartialEq)]
pub(super) struct Change {
    pub uplink: usize,
    pub stage: Stage,
}

impl Usage {
    /// The allowances of `uplinks`, with this period's counts from `state_dir/usage.json` (a
    /// missing file is a first start; an unreadable one is reported and counted from zero).
    pub(super) fn load(state_dir: &Path, uplinks: &[UplinkConfig], now: SystemTime) -> Usage {
        let any = uplinks.iter().any(|u| u.monthly_budget.is_some());
        let path = any.then(|| state_dir.join("usage.json"));
        let saved = path.as_deref().map(read_file).unwrap_or_default();
        let today = Date::of(now);
        let meters = uplinks
            .iter()
            .map(|u| {
                let period = today.period_start(u.billing_day);
                // A count from an earlier period (the daemon was down at the turn) starts again.
                let used = saved.uplinks.get(&u.name).filter(|s| s.period_start == period).map_or(0, |s| s.bytes);
                let budget = u.monthly_budget.map(|b| b.0);
                Meter {
                    name: u.name.clone(),
                    budget,
                    billing_day: u.billing_day,
                    period,
                    used,
                    seen: [0; 4],
                    stage: Stage::of(used, budget),
                }
            })
            .collect();
        Usage { path, meters, dirty: false }
    }

    /// A reloaded configuration: each uplink's allowance and billing day as the file now says
    /// (uplinks are matched by name; the count so far stays). The stage follows at the next
    /// [`Self::account`].
    pub(super) fn reconfigure(&mut self, state_dir: &Path, uplinks: &[UplinkConfig]) {
        for m in &mut self.meters {
            if let Some(u) = uplinks.iter().find(|u| u.name == m.name) {
                m.budget = u.monthly_budget.map(|b| b.0);
                m.billing_day = u.billing_day;
            }
        }
        let any = self.meters.iter().any(|m| m.budget.is_some());
        self.path = any.then(|| state_dir.join("usage.json"));
        self.dirty |= any;
    }

    /// The metering uplink `i` gets now, from its configured one.
    pub(super) fn metering(&self, i: usize, configured: Metering) -> Metering {
        self.meters.get(i).map_or(configured, |m| m.stage.metering(configured))
    }

    /// Uplink `i`'s stage now.
    pub(super) fn stage(&self, i: usize) -> Stage {
        self.meters.get(i).map_or(Stage::Normal, |m| m.stage)
    }

    /// Whether any uplink has an allowance.
    pub(super) fn active(&self) -> bool {
        self.path.is_some()
    }

    /// A new session: its counters start from zero.
    pub(super) fn new_session(&mut self) {
        for m in &mut self.meters {
            m.seen = [0; 4];
        }
    }

    /// Counts what the session's counters gained since the last call (`counters[i]` is uplink
    /// `i`'s) and starts a new period where one began; returns the uplinks whose stage changed.
    pub(super) fn account(&mut self, counters: &[LinkCounters], now: SystemTime) -> Vec<Change> {
        let today = Date::of(now);
        let mut changes = Vec::new();
        for (i, m) in self.meters.iter_mut().enumerate() {
            let period = today.period_start(m.billing_day);
            if period != m.period {
                tracing::info!(uplink = %m.name, used = m.used, period = %period, "billing period starts; usage counted from zero");
                m.period = period;
                m.used = 0;
                self.dirty = true;
            }
            if let Some(c) = counters.get(i) {
                let now = [c.bytes_sent, c.bytes_received, c.datagrams_sent, c.datagrams_received];
                // Counters below the last seen: a session started since; all of them are new.
                let base = if now.iter().zip(m.seen).any(|(n, s)| *n < s) { [0; 4] } else { m.seen };
                let bytes =
                    (now[0] - base[0]) + (now[1] - base[1]) + (now[2] - base[2] + now[3] - base[3]) * PER_DATAGRAM;
                m.seen = now;
                if bytes > 0 {
                    m.used = m.used.saturating_add(bytes);
                    self.dirty = true;
                }
            }
            let stage = Stage::of(m.used, m.budget);
            if stage != m.stage {
                m.stage = stage;
                changes.push(Change { uplink: i, stage });
                let budget = m.budget.unwrap_or(0);
                match stage {
                    Stage::Normal => tracing::info!(uplink = %m.name, "monthly budget: configured metering restored"),
                    Stage::NoCoding => {
                        tracing::warn!(uplink = %m.name, used = m.used, budget, "monthly budget 90 % used: no more coding on this uplink this period")
                    }
                    Stage::Backup => {
                        tracing::warn!(uplink = %m.name, used = m.used, budget, "monthly budget used up: backup only until the period ends")
                    }
                }
            }
        }
        changes
    }

    /// Writes the counts if they changed (atomically: a temporary file renamed over the old
    /// one). A failure is reported and retried at the next save.
    pub(super) fn save(&mut self) {
        let Some(path) = self.path.as_ref() else { return };
        if !self.dirty {
            return;
        }
        let file = File {
            uplinks: self
                .meters
                .iter()
                .filter(|m| m.budget.is_some())
                .map(|m| (m.name.clone(), Saved { period_start: m.period, bytes: m.used }))
                .collect(),
        };
        match super::write_json_atomically(path, &file) {
            Ok(()) => self.dirty = false,
            Err(e) => tracing::warn!(file = %path.display(), error = %e, "cannot save the uplinks' monthly usage"),
        }
    }

    /// Uplink `i`'s count this period, its allowance and its stage, for `braid status`.
    pub(super) fn report(&self, i: usize) -> Option<(u64, u64, &'static str)> {
        let m = self.meters.get(i)?;
        Some((m.used, m.budget?, m.stage.as_str()))
    }
}

fn read_file(path: &Path) -> File {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return File::default(),
        Err(e) => {
            tracing::warn!(file = %path.display(), error = %e, "cannot read the uplinks' monthly usage; counting from zero");
            return File::default();
        }
    };
    serde_json::from_str(&text).unwrap_or_else(|e| {
        tracing::warn!(file = %path.display(), error = %e, "the uplinks' monthly usage file is not valid; counting from zero");
        File::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_config::config::ByteSize;

    /// A directory of its own under the system's temporary directory, removed when dropped.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(name: &str) -> TempDir {
            let dir = std::env::temp_dir().join(format!("braid-usage-{}-{name}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            TempDir(dir)
        }

        fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn uplink(name: &str, budget: Option<u64>, billing_day: u8) -> UplinkConfig {
        let mut u: UplinkConfig = toml::from_str(&format!("name = \"{name}\"\ninterface = \"wwan0\"")).unwrap();
        u.monthly_budget = budget.map(ByteSize);
        u.billing_day = billing_day;
        u
    }

    fn at(date: &str) -> SystemTime {
        // Days since the epoch by counting forward: slow but independent of `Date::of`.
        let mut t = UNIX_EPOCH;
        while Date::of(t).to_string() != date {
            t += Duration::from_secs(86_400);
        }
        t + Duration::from_secs(12 * 3600)
    }

    fn counters(sent: u64, received: u64) -> LinkCounters {
        LinkCounters { bytes_sent: sent, bytes_received: received, ..LinkCounters::default() }
    }

    #[test]
    fn dates_and_billing_periods() {
        assert_eq!(Date::of(UNIX_EPOCH).to_string(), "1970-01-01");
        assert_eq!(Date::of(UNIX_EPOCH + Duration::from_secs(951_782_400)).to_string(), "2000-02-29");
        assert_eq!(Date::of(UNIX_EPOCH + Duration::from_secs(1_795_564_800)).to_string(), "2026-11-25");
        let d = Date { year: 2026, month: 11, day: 25 };
        assert_eq!(d.period_start(1).to_string(), "2026-11-01");
        assert_eq!(d.period_start(25).to_string(), "2026-11-25");
        assert_eq!(d.period_start(28).to_string(), "2026-10-28");
        assert_eq!(Date { year: 2027, month: 1, day: 3 }.period_start(15).to_string(), "2026-12-15");
    }

    #[test]
    fn coding_stops_at_90_percent_and_the_uplink_is_backup_when_used_up() {
        let dir = TempDir::new("coding");
        let cfg = [uplink("lte", Some(100_000), 1), uplink("wifi", None, 1)];
        let t = at("2026-11-25");
        let mut u = Usage::load(dir.path(), &cfg, t);
        let configured = Metering { coding_budget: Some(0.5), backup: false };
        assert_eq!(u.metering(0, configured), configured);
        assert!(u.account(&[counters(40_000, 40_000), counters(1 << 30, 0)], t).is_empty());
        let c = u.account(&[counters(50_000, 41_000), counters(1 << 31, 0)], t);
        assert_eq!(c, vec![Change { uplink: 0, stage: Stage::NoCoding }]);
        assert_eq!(u.metering(0, configured), Metering { coding_budget: Some(0.0), backup: false });
        // A new session (the server restarted): its counters start from zero and still count.
        u.new_session();
        let c = u.account(&[counters(9_000, 0), counters(0, 0)], t);
        assert_eq!(c, vec![Change { uplink: 0, stage: Stage::Backup }]);
        assert_eq!(u.metering(0, configured), Metering { coding_budget: Some(0.0), backup: true });
        // The uplink without an allowance is never touched.
        assert_eq!(u.metering(1, configured), configured);
        assert_eq!(u.report(0).map(|r| r.2), Some("backup"));
        assert_eq!(u.report(1), None);
    }

    #[test]
    fn the_count_survives_a_restart_and_a_new_period_starts_from_zero() {
        let dir = TempDir::new("restart");
        let cfg = [uplink("lte", Some(1_000_000), 20)];
        let t = at("2026-11-25");
        let mut u = Usage::load(dir.path(), &cfg, t);
        u.account(&[counters(300_000, 200_000)], t);
        u.save();
        let again = Usage::load(dir.path(), &cfg, t);
        let (used, budget, stage) = again.report(0).unwrap();
        assert_eq!((budget, stage), (1_000_000, "normal"));
        assert_eq!(used, 500_000);
        // Restarted after the 20th of the next month: a new period.
        let later = Usage::load(dir.path(), &cfg, at("2026-12-21"));
        assert_eq!(later.report(0).unwrap().0, 0);
        // Running across the turn of the period: the count starts again and the metering is restored.
        let mut u = Usage::load(dir.path(), &[uplink("lte", Some(400_000), 20)], t);
        assert_eq!(u.report(0).unwrap().2, "backup");
        let c = u.account(&[counters(0, 0)], at("2026-12-20"));
        assert_eq!(c, vec![Change { uplink: 0, stage: Stage::Normal }]);
    }

    #[test]
    fn a_reload_changes_the_allowance_and_keeps_the_count() {
        let dir = TempDir::new("reload");
        let t = at("2026-11-25");
        let mut u = Usage::load(dir.path(), &[uplink("lte", None, 1)], t);
        u.account(&[counters(500, 500)], t);
        u.reconfigure(dir.path(), &[uplink("lte", Some(1_000), 1)]);
        assert!(u.active());
        let c = u.account(&[counters(500, 500)], t);
        assert_eq!(c, vec![Change { uplink: 0, stage: Stage::Backup }]);
        assert_eq!(u.report(0), Some((1_000, 1_000, "backup")));
    }

    #[test]
    fn a_damaged_file_is_reported_and_counting_starts_from_zero() {
        let dir = TempDir::new("damaged");
        std::fs::write(dir.path().join("usage.json"), "{ not json").unwrap();
        let u = Usage::load(dir.path(), &[uplink("lte", Some(10), 1)], at("2026-11-25"));
        assert_eq!(u.report(0).unwrap().0, 0);
    }

    #[test]
    fn nothing_is_written_without_an_allowance() {
        let dir = TempDir::new("nothing");
        let mut u = Usage::load(dir.path(), &[uplink("lte", None, 1)], at("2026-11-25"));
        assert!(!u.active());
        u.account(&[counters(1, 1)], at("2026-11-25"));
        u.save();
        assert!(!dir.path().join("usage.json").exists());
    }
}
