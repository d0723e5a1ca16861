//! The life of an uplink that comes and goes (drive-by WiFi, a modem losing coverage): probing,
//! active, degraded, down, and the time spent in each.
//!
//! Admission follows paper 002's advice to "avoid the fringe" (Hadaller et al., MobiSys 2007,
//! section 7): a new or returning link carries passengers only once its probes have come back
//! [`LifecycleConfig::admit_streak`] times in a row *and* the share of its recent probes answered
//! clears [`LifecycleConfig::admit_quality`]; a single lucky reply at the edge of range, which
//! kicked off the paper's card's association, is not enough. Once admitted, a link whose loss
//! estimate climbs above [`LifecycleConfig::degrade_loss`] is *degraded*: it is drained (no new
//! data) while a healthy link exists, and comes back only below [`LifecycleConfig::recover_loss`]
//! (hysteresis, so a link at the threshold does not flap). A better link is thus added before a
//! worse one is let go. A link that goes silent is declared down by the session's liveness check
//! (a few of its round trips) and its unacknowledged packets go out again on the others.

use crate::time::Instant;
use std::collections::VecDeque;
use std::time::Duration;

/// Where a link is in its life, as operators see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Phase {
    /// New or returning: probed, not yet trusted with passengers.
    Probing,
    /// Carrying passengers.
    Active,
    /// Admitted but lossy: drained while a healthy link exists.
    Degraded,
    /// Silent for a few round trips; probed until it answers again.
    Down,
}

impl Phase {
    /// Every phase, in status order.
    pub const ALL: [Phase; 4] = [Phase::Probing, Phase::Active, Phase::Degraded, Phase::Down];

    /// Lower-case name for status output.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Probing => "probing",
            Phase::Active => "active",
            Phase::Degraded => "degraded",
            Phase::Down => "down",
        }
    }

    fn index(self) -> usize {
        match self {
            Phase::Probing => 0,
            Phase::Active => 1,
            Phase::Degraded => 2,
            Phase::Down => 3,
        }
    }
}

/// Admission and degradation thresholds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LifecycleConfig {
    /// Probe replies in a row before a link is admitted.
    pub admit_streak: u32,
    /// Share of the last [`Self::window`] judged probes that must have been answered.
    pub admit_quality: f64,
    /// Probes remembered for the quality figure.
    pub window: usize,
    /// An admitted link whose loss estimate exceeds this is degraded.
    pub degrade_loss: f64,
    /// A degraded link whose loss estimate falls below this is active again.
    pub recover_loss: f64,
    /// How long an active link whose packets meet a queue must stay lossy, from when its loss
    /// estimate first passes [`Self::degrade_loss`] until it falls below [`Self::recover_loss`],
    /// before the link is degraded ([`Lifecycle::judge`]). A drop-tail
    /// buffer that overflows loses a run of packets at once, and the estimate (an average over
    /// the last few packets) spikes past the threshold and falls back within tens of packets;
    /// a link at the fringe of its range stays lossy. Degraded on such a spike, a full uplink
    /// sent everything to the others at once: on bench-bond's 20 + 5 Mbit/s with one CUBIC
    /// upload, the 5 Mbit/s uplink took 200 ms of data within 2 ms when the 20 Mbit/s one
    /// overflowed, 150 ms beyond its 50 ms buffer, and lost it in turn.
    pub degrade_after: Duration,
    /// How long after admission a link's loss estimate is left to settle before it is judged.
    pub settle: Duration,
    /// Passenger packets wait this long for an admitted link before they are sent on whatever link
    /// has an address: a TCP SYN held until the link is up connects at once, where a SYN sent into
    /// a dead link waits out TCP's exponential back-off (paper 002 section 6.2.6).
    pub wait_for_link: Duration,
}

impl Default for LifecycleConfig {
    fn default() -> Self {
        LifecycleConfig {
            admit_streak: 4,
            admit_quality: 0.8,
            window: 10,
            degrade_loss: 0.25,
            recover_loss: 0.10,
            degrade_after: Duration::from_millis(250),
            settle: Duration::from_secs(2),
            wait_for_link: Duration::from_secs(3),
        }
    }
}

/// Probes on their way remembered besides [`LifecycleConfig::window`]'s judged ones: 64 at the
/// 100 ms probing period admit a link of up to a 6.4 s round trip.
const MAX_IN_FLIGHT_PROBES: usize = 64;

/// One probe sent: its id, when, and whether its reply came back.
#[derive(Debug, Clone, Copy)]
struct ProbeRecord {
    id: u32,
    at: Instant,
    answered: bool,
}

/// The lifecycle of one link: its phase, the probes behind the admission decision, and the time
/// spent in each phase.
#[derive(Debug, Clone)]
pub struct Lifecycle {
    phase: Phase,
    since: Instant,
    /// Time spent in each phase before the current spell, by [`Phase::index`].
    spent: [Duration; 4],
    /// Times each phase was entered.
    entered: [u32; 4],
    probes: VecDeque<ProbeRecord>,
    /// Since when an active link's loss estimate has been lossy: it passed the degrade threshold
    /// then, and has not fallen below the recovery one since ([`LifecycleConfig::degrade_after`]).
    lossy_since: Option<Instant>,
}

impl Lifecycle {
    /// A link entering `phase` at `now`.
    pub fn new(phase: Phase, now: Instant) -> Self {
        let mut entered = [0; 4];
        entered[phase.index()] = 1;
        Lifecycle { phase, since: now, spent: [Duration::ZERO; 4], entered, probes: VecDeque::new(), lossy_since: None }
    }

    /// The current phase.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// When the current phase began.
    pub fn since(&self) -> Instant {
        self.since
    }

    /// Moves to `phase` at `now` (nothing if already there). Entering probing or down forgets the
    /// probes, so a returning link earns its admission afresh.
    pub fn enter(&mut self, phase: Phase, now: Instant) {
        if phase == self.phase {
            return;
        }
        self.spent[self.phase.index()] += now.saturating_duration_since(self.since);
        self.entered[phase.index()] += 1;
        self.phase = phase;
        self.since = now;
        self.lossy_since = None;
        if matches!(phase, Phase::Probing | Phase::Down) {
            self.probes.clear();
        }
    }

    /// Time spent in each phase up to `now`, and how often each was entered.
    pub fn time_in(&self, now: Instant) -> [(Phase, Duration, u32); 4] {
        Phase::ALL.map(|p| {
            let mut d = self.spent[p.index()];
            if p == self.phase {
                d += now.saturating_duration_since(self.since);
            }
            (p, d, self.entered[p.index()])
        })
    }

    /// Records a probe sent (not a reply to the peer's).
    pub fn handle_probe_sent(&mut self, id: u32, now: Instant, cfg: &LifecycleConfig) {
        self.probes.push_back(ProbeRecord { id, at: now, answered: false });
        // Remember probes still on their way as well as the judged ones: at the probing period
        // (100 ms) a path with a round trip of a second or more (bufferbloated cellular,
        // satellite) has ten or more in flight, and a reply whose record is gone would never
        // count, so such a link would never be admitted.
        let keep = cfg.window.max(cfg.admit_streak as usize).max(1) + MAX_IN_FLIGHT_PROBES;
        while self.probes.len() > keep {
            self.probes.pop_front();
        }
    }

    /// Records the reply to probe `id`.
    pub fn handle_probe_reply(&mut self, id: u32) {
        if let Some(p) = self.probes.iter_mut().rev().find(|p| p.id == id) {
            p.answered = true;
        }
    }

    /// Replies in a row, newest first, among probes judged by `now` (a probe younger than
    /// `timeout` and unanswered is still on its way and neither breaks nor extends the streak).
    pub fn streak(&self, now: Instant, timeout: Duration) -> u32 {
        let mut n = 0;
        for p in self.probes.iter().rev() {
            if p.answered {
                n += 1;
            } else if now.saturating_duration_since(p.at) >= timeout {
                break;
            }
        }
        n
    }

    /// Share of the judged probes that were answered, from the first answered one on (those
    /// before it say the link was absent, not how good it is now); 1 with none judged.
    pub fn quality(&self, now: Instant, timeout: Duration, window: usize) -> f64 {
        let judged: Vec<&ProbeRecord> = self
            .probes
            .iter()
            .skip_while(|p| !p.answered)
            .filter(|p| p.answered || now.saturating_duration_since(p.at) >= timeout)
            .collect();
        let (mut n, mut ok) = (0u32, 0u32);
        for p in &judged[judged.len().saturating_sub(window.max(1))..] {
            n += 1;
            ok += u32::from(p.answered);
        }
        if n == 0 { 1.0 } else { f64::from(ok) / f64::from(n) }
    }

    /// Whether a probing or down link has earned admission: enough replies in a row and enough of
    /// its recent probes answered.
    pub fn admissible(&self, now: Instant, timeout: Duration, cfg: &LifecycleConfig) -> bool {
        self.streak(now, timeout) >= cfg.admit_streak && self.quality(now, timeout, cfg.window) >= cfg.admit_quality
    }

    /// An admitted link's next phase given its loss estimate at `now` (hysteresis between active
    /// and degraded); `None` when it stays. A link admitted less than [`LifecycleConfig::settle`]
    /// ago is not judged: its loss estimate still counts what was lost while it was away.
    ///
    /// `queued`: the packets that revealed the loss met a queue at the link's bottleneck, where
    /// a drop-tail buffer overflowing is the likelier cause. Such a link is degraded only once
    /// its estimate, having passed the threshold, has not fallen below
    /// [`LifecycleConfig::recover_loss`] for [`LifecycleConfig::degrade_after`]: a lasting loss,
    /// not an overflow's spike. Without a queue, a loss above the threshold degrades it at once.
    pub fn judge(&mut self, loss: f64, queued: bool, now: Instant, cfg: &LifecycleConfig) -> Option<Phase> {
        match self.phase {
            Phase::Active if now < self.since + cfg.settle => None,
            Phase::Active => {
                if loss > cfg.degrade_loss {
                    let since = *self.lossy_since.get_or_insert(now);
                    if !queued || now >= since + cfg.degrade_after {
                        return Some(Phase::Degraded);
                    }
                } else if loss < cfg.recover_loss {
                    self.lossy_since = None;
                }
                None
            }
            Phase::Degraded if loss < cfg.recover_loss => Some(Phase::Active),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(x: u64) -> Instant {
        Instant::from_millis(x)
    }

    const TIMEOUT: Duration = Duration::from_millis(300);

    #[test]
    fn admitted_only_after_a_streak_of_good_probes() {
        let cfg = LifecycleConfig::default();
        let mut l = Lifecycle::new(Phase::Probing, ms(0));
        for i in 0..3 {
            l.handle_probe_sent(i, ms(100 * u64::from(i)), &cfg);
            l.handle_probe_reply(i);
        }
        assert!(!l.admissible(ms(300), TIMEOUT, &cfg), "three replies are not four");
        l.handle_probe_sent(3, ms(300), &cfg);
        l.handle_probe_reply(3);
        assert!(l.admissible(ms(320), TIMEOUT, &cfg));
    }

    #[test]
    fn the_fringe_is_not_admitted() {
        // One probe in two answered, as at the edge of a drive-by access point's range: replies
        // come, but never four in a row, and the quality stays at a half.
        let cfg = LifecycleConfig::default();
        let mut l = Lifecycle::new(Phase::Probing, ms(0));
        for i in 0..40u32 {
            l.handle_probe_sent(i, ms(100 * u64::from(i)), &cfg);
            if i % 2 == 0 {
                l.handle_probe_reply(i);
            }
            assert!(!l.admissible(ms(100 * u64::from(i) + 50), TIMEOUT, &cfg), "admitted at probe {i}");
        }
        assert!(l.quality(ms(4000), TIMEOUT, cfg.window) < 0.6);
    }

    #[test]
    fn a_link_with_a_round_trip_over_a_second_is_admitted() {
        // Probes every 100 ms over a 1.2 s round trip (a relay adding 0.6 s each way, as
        // bufferbloated cellular uplinks see): twelve are in flight when the first reply comes.
        let cfg = LifecycleConfig::default();
        let rtt = Duration::from_millis(1200);
        let mut l = Lifecycle::new(Phase::Probing, ms(0));
        let mut admitted = None;
        for t in 0..60u32 {
            let now = ms(100 * u64::from(t));
            l.handle_probe_sent(t, now, &cfg);
            if let Some(answered) = t.checked_sub(12) {
                l.handle_probe_reply(answered);
                // The session judges with its smoothed round trip by then.
                if admitted.is_none() && l.admissible(now, rtt * 3, &cfg) {
                    admitted = Some(t);
                }
            }
        }
        assert_eq!(admitted, Some(15), "admitted on the fourth reply in a row");
    }

    #[test]
    fn a_returning_link_is_not_held_back_by_its_silence() {
        let cfg = LifecycleConfig::default();
        let mut l = Lifecycle::new(Phase::Down, ms(0));
        for i in 0..8u32 {
            l.handle_probe_sent(i, ms(250 * u64::from(i)), &cfg);
        }
        for i in 8..12u32 {
            l.handle_probe_sent(i, ms(2000 + 20 * u64::from(i - 8)), &cfg);
            l.handle_probe_reply(i);
        }
        assert!(l.admissible(ms(2100), TIMEOUT, &cfg));
    }

    #[test]
    fn a_probe_in_flight_does_not_break_the_streak() {
        let cfg = LifecycleConfig::default();
        let mut l = Lifecycle::new(Phase::Probing, ms(0));
        for i in 0..4 {
            l.handle_probe_sent(i, ms(100 * u64::from(i)), &cfg);
            l.handle_probe_reply(i);
        }
        l.handle_probe_sent(4, ms(400), &cfg);
        assert_eq!(l.streak(ms(450), TIMEOUT), 4);
        // Unanswered past the timeout: the streak is broken.
        assert_eq!(l.streak(ms(800), TIMEOUT), 0);
    }

    #[test]
    fn degradation_has_hysteresis() {
        let cfg = LifecycleConfig::default();
        let mut l = Lifecycle::new(Phase::Active, ms(0));
        assert_eq!(l.judge(0.9, false, ms(1000), &cfg), None, "not judged while its estimate settles");
        assert_eq!(l.judge(0.2, false, ms(3000), &cfg), None);
        assert_eq!(l.judge(0.3, false, ms(3000), &cfg), Some(Phase::Degraded));
        l.enter(Phase::Degraded, ms(10));
        assert_eq!(l.judge(0.2, false, ms(3000), &cfg), None, "between the thresholds it stays degraded");
        assert_eq!(l.judge(0.05, false, ms(3000), &cfg), Some(Phase::Active));
    }

    #[test]
    fn an_overflow_spike_does_not_degrade_a_queued_link_a_lasting_loss_does() {
        let cfg = LifecycleConfig::default();
        let mut l = Lifecycle::new(Phase::Active, ms(0));
        // A full buffer's overflow: the estimate jumps to 0.63 and is back near zero a report
        // later; again a second later.
        for start in [3000, 4000] {
            assert_eq!(l.judge(0.63, true, ms(start), &cfg), None);
            assert_eq!(l.judge(0.4, true, ms(start + 20), &cfg), None);
            assert_eq!(l.judge(0.02, true, ms(start + 100), &cfg), None);
            assert_eq!(l.judge(0.01, true, ms(start + 400), &cfg), None, "the spike is forgotten");
        }
        // The same spike where nothing queued: a loss on the way, not an overflow.
        let mut m = Lifecycle::new(Phase::Active, ms(0));
        assert_eq!(m.judge(0.63, false, ms(3000), &cfg), Some(Phase::Degraded));
        // A link at the fringe: its estimate wanders about 0.3, dipping under the degrade
        // threshold but not to the recovery one, and is degraded once the spell is long enough.
        let wander = [0.3, 0.2, 0.35, 0.24, 0.3];
        let mut t = 6000;
        let mut got = None;
        for (i, &loss) in wander.iter().cycle().take(40).enumerate() {
            t = 6000 + 20 * i as u64;
            got = l.judge(loss, true, ms(t), &cfg);
            if got.is_some() {
                break;
            }
        }
        assert_eq!(got, Some(Phase::Degraded));
        // On the first judgement above the threshold once the spell is long enough.
        assert!(ms(t) >= ms(6000) + cfg.degrade_after && ms(t) <= ms(6060) + cfg.degrade_after, "degraded at {t} ms");
    }

    #[test]
    fn time_in_each_phase_adds_up() {
        let mut l = Lifecycle::new(Phase::Probing, ms(0));
        l.enter(Phase::Active, ms(500));
        l.enter(Phase::Down, ms(2500));
        l.enter(Phase::Probing, ms(2600));
        l.enter(Phase::Active, ms(3000));
        let t = l.time_in(ms(4000));
        assert_eq!(t[0], (Phase::Probing, Duration::from_millis(900), 2));
        assert_eq!(t[1], (Phase::Active, Duration::from_millis(3000), 2));
        assert_eq!(t[2], (Phase::Degraded, Duration::ZERO, 0));
        assert_eq!(t[3], (Phase::Down, Duration::from_millis(100), 1));
    }
}
