//! braid's clock type.
//!
//! The engine never reads a clock (docs/design.md 2): every call takes `now` as an [`Instant`], a count of
//! microseconds from an arbitrary origin (zero when the driver starts). The simulator passes virtual
//! time and the daemon passes real monotonic time, and both are the same type.

use std::fmt;
use std::ops::{Add, AddAssign, Sub};
use std::time::Duration;

/// A point in time, in microseconds since the driver's origin.
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(u64);

impl Instant {
    /// The driver's origin.
    pub const ZERO: Instant = Instant(0);
    /// A time after every time a session will see; used as "never".
    pub const MAX: Instant = Instant(u64::MAX);

    /// The instant `micros` microseconds after the origin.
    pub const fn from_micros(micros: u64) -> Self {
        Instant(micros)
    }

    /// The instant `millis` milliseconds after the origin.
    pub const fn from_millis(millis: u64) -> Self {
        Instant(millis * 1000)
    }

    /// The instant `secs` seconds after the origin.
    pub fn from_secs_f64(secs: f64) -> Self {
        Instant((secs * 1e6).round().max(0.0) as u64)
    }

    /// Microseconds since the origin.
    pub const fn as_micros(self) -> u64 {
        self.0
    }

    /// Seconds since the origin.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }

    /// Time elapsed from `earlier` to `self`, zero if `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration::from_micros(self.0.saturating_sub(earlier.0))
    }

    /// `self - d`, saturating at the origin.
    pub fn saturating_sub(self, d: Duration) -> Instant {
        Instant(self.0.saturating_sub(duration_micros(d)))
    }

    /// The low 32 bits of the microsecond count, as carried in every datagram (docs/design.md 3).
    /// It wraps every 71.6 minutes; only differences over short spans are ever taken.
    pub const fn wire_timestamp(self) -> u32 {
        self.0 as u32
    }
}

/// Whole microseconds of `d`, saturating at `u64::MAX`.
pub fn duration_micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, rhs: Duration) -> Instant {
        Instant(self.0.saturating_add(duration_micros(rhs)))
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, rhs: Duration) {
        *self = *self + rhs;
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    /// Saturating: an earlier minus a later instant is zero.
    fn sub(self, rhs: Instant) -> Duration {
        self.saturating_duration_since(rhs)
    }
}

impl fmt::Debug for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:06}s", self.0 / 1_000_000, self.0 % 1_000_000)
    }
}

impl fmt::Display for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// Takes `sample`, seen at `now`, into a windowed extreme `best` (value, when taken): a sample
/// that `replaces` the kept value (`replaces(sample, kept)`: `<=` for a minimum, `>=` for a
/// maximum) takes its place, and so does any sample once the kept one is older than `window`, so
/// the extreme follows a change that went the other way.
pub(crate) fn take_windowed(
    best: &mut Option<(Duration, Instant)>,
    now: Instant,
    sample: Duration,
    window: Duration,
    replaces: impl Fn(Duration, Duration) -> bool,
) {
    if best.is_none_or(|(b, at)| replaces(sample, b) || now.saturating_duration_since(at) > window) {
        *best = Some((sample, now));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_windowed_maximum_keeps_its_peak_for_the_window_then_follows() {
        let window = Duration::from_secs(20);
        let mut max = None;
        let ms = Duration::from_millis;
        for (t, sample, kept) in
            [(0, 150, 150), (1, 20, 150), (15, 0, 150), (20, 160, 160), (39, 30, 160), (41, 30, 30)]
        {
            take_windowed(&mut max, Instant::from_millis(t * 1000), ms(sample), window, |s, m| s >= m);
            assert_eq!(max.map(|(m, _)| m), Some(ms(kept)), "at {t} s");
        }
    }

    #[test]
    fn arithmetic_saturates() {
        let a = Instant::from_millis(5);
        let b = a + Duration::from_millis(3);
        assert_eq!(b.as_micros(), 8000);
        assert_eq!(b - a, Duration::from_millis(3));
        assert_eq!(a - b, Duration::ZERO);
        assert_eq!(a.saturating_sub(Duration::from_secs(1)), Instant::ZERO);
        assert_eq!(Instant::MAX + Duration::from_secs(1), Instant::MAX);
    }

    #[test]
    fn wire_timestamp_wraps() {
        let t = Instant::from_micros((1u64 << 32) + 7);
        assert_eq!(t.wire_timestamp(), 7);
    }
}
