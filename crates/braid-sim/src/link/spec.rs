//! What one direction of an emulated link is: the parsed form of a scenario's `down = {...}` /
//! `up = {...}` tables (docs/design.md 5). The same spec drives the simulator (virtual time) and the
//! testbed emulator (real time).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Bytes one mahimahi delivery opportunity may carry (the trace format's MTU).
pub const TRACE_OPPORTUNITY_BYTES: usize = 1500;

/// One direction of one link.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkDirSpec {
    /// How fast the bottleneck drains.
    pub rate: RateSpec,
    /// One-way propagation delay, added after a packet leaves the bottleneck.
    pub delay: Duration,
    /// Drop-tail queue limit in bytes (packets waiting, not counting the one being sent).
    pub queue_bytes: usize,
    /// Loss process, applied to each packet as it leaves the bottleneck (wireless loss, not congestion).
    pub loss: LossSpec,
    /// Optional per-second overrides of delay, loss and rate (PluriBus 6.2's emulation method).
    pub schedule: Option<Arc<Schedule>>,
    /// Blackouts: every packet leaving the bottleneck inside one is lost.
    pub outages: Vec<Outage>,
}

/// Bottleneck capacity.
#[derive(Debug, Clone, PartialEq)]
pub enum RateSpec {
    /// A constant rate in kbit/s (1 kbit = 1000 bit).
    Constant {
        /// kbit/s.
        kbps: f64,
    },
    /// Delivery opportunities from a mahimahi trace.
    Trace(Arc<Trace>),
}

impl RateSpec {
    /// The mean rate in kbit/s: the constant, or the trace's average.
    pub fn mean_kbps(&self) -> f64 {
        match self {
            RateSpec::Constant { kbps } => *kbps,
            RateSpec::Trace(t) => t.mean_kbps(),
        }
    }
}

/// Per-packet loss process.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LossSpec {
    /// No random loss.
    None,
    /// Each packet is lost independently with probability `p`.
    Bernoulli {
        /// Loss probability.
        p: f64,
    },
    /// Gilbert-Elliott: a two-state Markov chain stepped once per packet.
    Gilbert {
        /// P(good -> bad) per packet.
        p_gb: f64,
        /// P(bad -> good) per packet.
        p_bg: f64,
        /// Loss probability in the good state.
        loss_good: f64,
        /// Loss probability in the bad state.
        loss_bad: f64,
    },
}

impl LossSpec {
    /// Long-run average loss rate.
    pub fn mean_loss(&self) -> f64 {
        match *self {
            LossSpec::None => 0.0,
            LossSpec::Bernoulli { p } => p,
            LossSpec::Gilbert { p_gb, p_bg, loss_good, loss_bad } => {
                if p_gb + p_bg <= 0.0 {
                    return loss_good;
                }
                let pi_bad = p_gb / (p_gb + p_bg);
                (1.0 - pi_bad) * loss_good + pi_bad * loss_bad
            }
        }
    }
}

/// A blackout interval, from the start of the run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Outage {
    /// Start, from the beginning of the run.
    pub at: Duration,
    /// Length.
    pub duration: Duration,
    /// The start is drawn per run, uniformly within this much after `at` (`jitter_s`), so that
    /// runs see the blackout at different moments of the flows' life.
    pub jitter: Duration,
}

/// Errors reading a trace or schedule file.
#[derive(Debug, thiserror::Error)]
pub enum SpecFileError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The path as given.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// A line is not what the format requires.
    #[error("{path}:{line}: {what}")]
    Format {
        /// The path as given.
        path: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        what: String,
    },
}

/// A mahimahi trace: each entry is a millisecond at which one 1500-byte opportunity occurs; the
/// trace repeats with period equal to its last timestamp (mahimahi's convention).
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    /// Where it came from, for reports.
    pub name: String,
    /// Opportunity times in ms, non-decreasing.
    pub opportunities_ms: Vec<u64>,
    /// Repeat period in ms (the last timestamp, at least 1).
    pub period_ms: u64,
}

impl Trace {
    /// Reads a trace file.
    pub fn from_file(path: &Path) -> Result<Self, SpecFileError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| SpecFileError::Io { path: path.display().to_string(), source })?;
        Self::parse(&path.display().to_string(), &text)
    }

    /// Parses trace text: one non-negative integer (ms) per line, non-decreasing; blank lines ignored.
    pub fn parse(name: &str, text: &str) -> Result<Self, SpecFileError> {
        let mut opportunities_ms = Vec::new();
        let mut last = 0u64;
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() {
                continue;
            }
            let bad = |what: String| SpecFileError::Format { path: name.to_string(), line: i + 1, what };
            let t: u64 = line.parse().map_err(|_| bad(format!("expected a time in milliseconds, found {line:?}")))?;
            if t < last {
                return Err(bad(format!("time {t} ms goes backwards (previous {last} ms)")));
            }
            last = t;
            opportunities_ms.push(t);
        }
        if opportunities_ms.is_empty() {
            return Err(SpecFileError::Format {
                path: name.to_string(),
                line: 0,
                what: "trace has no delivery opportunities".into(),
            });
        }
        Ok(Trace { name: name.to_string(), period_ms: last.max(1), opportunities_ms })
    }

    /// Average capacity over one period, kbit/s.
    pub fn mean_kbps(&self) -> f64 {
        (self.opportunities_ms.len() * TRACE_OPPORTUNITY_BYTES * 8) as f64 / self.period_ms as f64
    }
}

/// One row of a schedule: from `t_s` on, these values replace the spec's (an empty cell keeps the
/// previous value).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScheduleRow {
    /// Seconds from the start of the run.
    pub t_s: f64,
    /// One-way delay, ms.
    pub delay_ms: Option<f64>,
    /// Bernoulli loss probability replacing the loss model.
    pub loss: Option<f64>,
    /// Capacity, kbit/s (replaces a constant rate or trace).
    pub rate_kbps: Option<f64>,
}

/// A per-second schedule: CSV with header `t_s,delay_ms,loss,rate_kbps`, rows sorted by time.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    /// Rows by increasing `t_s`.
    pub rows: Vec<ScheduleRow>,
}

impl Schedule {
    /// Reads a schedule CSV file.
    pub fn from_file(path: &Path) -> Result<Self, SpecFileError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| SpecFileError::Io { path: path.display().to_string(), source })?;
        Self::parse(&path.display().to_string(), &text)
    }

    /// Parses schedule CSV text. The header must be exactly `t_s,delay_ms,loss,rate_kbps`.
    pub fn parse(name: &str, text: &str) -> Result<Self, SpecFileError> {
        let bad = |line: usize, what: String| SpecFileError::Format { path: name.to_string(), line, what };
        let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
        let Some((hi, header)) = lines.next() else {
            return Err(bad(1, "empty schedule: expected header t_s,delay_ms,loss,rate_kbps".into()));
        };
        let cols: Vec<&str> = header.split(',').map(str::trim).collect();
        if cols != ["t_s", "delay_ms", "loss", "rate_kbps"] {
            return Err(bad(hi + 1, format!("header must be t_s,delay_ms,loss,rate_kbps, found {header:?}")));
        }
        let mut rows: Vec<ScheduleRow> = Vec::new();
        for (i, line) in lines {
            let cells: Vec<&str> = line.split(',').map(str::trim).collect();
            if cells.len() != 4 {
                return Err(bad(i + 1, format!("expected 4 cells, found {}", cells.len())));
            }
            let num = |idx: usize, key: &str| -> Result<Option<f64>, SpecFileError> {
                let c = cells[idx];
                if c.is_empty() {
                    return Ok(None);
                }
                let v: f64 = c.parse().map_err(|_| bad(i + 1, format!("{key}: not a number: {c:?}")))?;
                if !v.is_finite() || v < 0.0 {
                    return Err(bad(i + 1, format!("{key}: must be a finite non-negative number, found {c}")));
                }
                Ok(Some(v))
            };
            let t_s = num(0, "t_s")?.ok_or_else(|| bad(i + 1, "t_s: missing".into()))?;
            let loss = num(2, "loss")?;
            if let Some(l) = loss
                && l > 1.0
            {
                return Err(bad(i + 1, format!("loss: must be within 0..=1, found {l}")));
            }
            if let Some(prev) = rows.last()
                && t_s < prev.t_s
            {
                return Err(bad(i + 1, format!("t_s {t_s} goes backwards (previous {})", prev.t_s)));
            }
            rows.push(ScheduleRow { t_s, delay_ms: num(1, "delay_ms")?, loss, rate_kbps: num(3, "rate_kbps")? });
        }
        Ok(Schedule { rows })
    }

    /// The values in force at `t_s` seconds: each field from the latest row at or before `t_s` that
    /// sets it.
    pub fn at(&self, t_s: f64) -> ScheduleRow {
        let mut out = ScheduleRow { t_s, delay_ms: None, loss: None, rate_kbps: None };
        for row in self.rows.iter().take_while(|r| r.t_s <= t_s) {
            out.delay_ms = row.delay_ms.or(out.delay_ms);
            out.loss = row.loss.or(out.loss);
            out.rate_kbps = row.rate_kbps.or(out.rate_kbps);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_parses_and_averages() {
        let t = Trace::parse("t", "1\n1\n2\n\n4\n").unwrap();
        assert_eq!(t.opportunities_ms, vec![1, 1, 2, 4]);
        assert_eq!(t.period_ms, 4);
        assert!((t.mean_kbps() - 4.0 * 12000.0 / 4.0).abs() < 1e-9);
    }

    #[test]
    fn trace_rejects_garbage_with_line() {
        let e = Trace::parse("x", "1\n2\nabc\n").unwrap_err().to_string();
        assert!(e.contains("x:3"), "{e}");
        assert!(Trace::parse("x", "5\n3\n").is_err());
        assert!(Trace::parse("x", "\n").is_err());
    }

    #[test]
    fn schedule_holds_values_until_changed() {
        let s = Schedule::parse("s", "t_s,delay_ms,loss,rate_kbps\n0,20,0.01,1000\n5,,0.2,\n10,40,,500\n").unwrap();
        let r = s.at(7.0);
        assert_eq!((r.delay_ms, r.loss, r.rate_kbps), (Some(20.0), Some(0.2), Some(1000.0)));
        let r = s.at(12.0);
        assert_eq!((r.delay_ms, r.loss, r.rate_kbps), (Some(40.0), Some(0.2), Some(500.0)));
        assert_eq!(s.at(-1.0).delay_ms, None);
    }

    #[test]
    fn schedule_errors_name_the_problem() {
        assert!(Schedule::parse("s", "t,d\n").unwrap_err().to_string().contains("header"));
        let e = Schedule::parse("s", "t_s,delay_ms,loss,rate_kbps\n0,1,2,3\n").unwrap_err().to_string();
        assert!(e.contains("loss") && e.contains("s:2"), "{e}");
    }

    #[test]
    fn gilbert_mean_loss() {
        let l = LossSpec::Gilbert { p_gb: 0.5, p_bg: 0.5, loss_good: 0.0, loss_bad: 0.3 };
        assert!((l.mean_loss() - 0.15).abs() < 1e-12);
    }
}
