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
    /// Packets a queued link's loss estimate must have judged since it turned lossy (in the
    /// lossier direction, received or found missing), besides [`Self::degrade_after`], before the
    /// link is degraded. After an overflow the split stops feeding a link whose modelled queue is
    /// deep, and an estimate that sees no packets cannot fall: when one uplink of 20 + 20 Mbit/s
    /// fell to 2 Mbit/s (bench-bond's drop case), its estimate stood at 0.37-0.80 for 250 ms with
    /// hardly a packet sent, it was degraded in 8 runs of 8 for up to a second, and the passengers'
    /// BBR, pacing at what the other uplink alone delivered, took up to 2.3 s to use it again.
    /// Twice the estimate's reach (1/8 a packet) lets one at 0.57 fall below the recovery
    /// threshold on good packets.
    pub degrade_packets: u64,
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
            degrade_packets: 16,
            settle: Duration::from_secs(2),
            wait_for_link: Duration::from_secs(3),
        }
    }
}

/// Probes on their way remembered besides [`LifecycleConfig::window`]'s judged ones: 64 at the
/// 100 ms probing period admit a link of up to a 6.4 s round trip.
const MAX_IN_FLIGHT_PROBES: usize = 64;

/// How far a link's two loss estimates have got, for [`Lifecycle::judge`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Evidence {
    /// Packets judged by each direction's loss estimate so far (what we sent and the peer has
    /// confirmed up to, what we received up to), received or found missing: a count that only
    /// grows.
    pub judged: [u64; 2],
    /// Which direction the loss that is judged is in: 0 what we send, 1 what we receive.
    pub lossier: usize,
    /// When that direction was last found carrying less than was sent into it (its capacity
    /// estimate cut to less than half, or the sender's queue model corrected upward): what the
    /// link lost until then, while the old estimate sent too much into it, was the overflow of
    /// a link that had got slower, not a sign of a link at the fringe.
    pub overfilled_at: Option<Instant>,
    /// The session's other healthy links carry less than half this one's capacity: drained, it
    /// would leave the passengers a fraction of what they had.
    pub dominant: bool,
}

/// A link found lossy: since when, how far its loss estimates had got then, and whether the
/// packets that showed the loss met a queue.
#[derive(Debug, Clone, Copy)]
struct Lossy {
    /// When the spell began, or was last started over ([`Evidence::overfilled_at`]).
    since: Instant,
    /// When it first began: it starts over only within [`EXPLAINED_FOR`] of this.
    first: Instant,
    judged: [u64; 2],
    /// Some packet that showed this spell's loss met a queue. Kept for the spell: once an
    /// overflowed buffer has drained, the next packets meet no queue while the estimate still
    /// counts the overflow's losses, and judged by them alone the link was degraded at once (in
    /// bench-bond's drop case, with the estimate at 0.63-0.87).
    queued: bool,
}

/// How long into a lossy spell an overfilled link starts it over: a link whose queue model keeps
/// being corrected upward while it loses is degraded at most this much later than otherwise.
const EXPLAINED_FOR: Duration = Duration::from_secs(1);

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
    /// then (or its capacity estimate was cut since), and has not fallen below the recovery one
    /// since ([`LifecycleConfig::degrade_after`], [`LifecycleConfig::degrade_packets`]).
    lossy: Option<Lossy>,
}

impl Lifecycle {
    /// A link entering `phase` at `now`.
    pub fn new(phase: Phase, now: Instant) -> Self {
        let mut entered = [0; 4];
        entered[phase.index()] = 1;
        Lifecycle { phase, since: now, spent: [Duration::ZERO; 4], entered, probes: VecDeque::new(), lossy: None }
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
        self.lossy = None;
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
    /// [`LifecycleConfig::recover_loss`] for [`LifecycleConfig::degrade_after`] and over
    /// [`LifecycleConfig::degrade_packets`] judged packets: a lasting loss, not an overflow's
    /// spike. The link found overfilled (`ev.overfilled_at`) starts that over, within
    /// [`EXPLAINED_FOR`] of the spell's beginning: the overflow before it is explained. A
    /// dominant link (`ev.dominant`) found overfilled within [`EXPLAINED_FOR`] before a spell
    /// begins counts as queued too. Otherwise a loss above the threshold degrades it at once.
    pub fn judge(
        &mut self,
        loss: f64,
        queued: bool,
        ev: Evidence,
        now: Instant,
        cfg: &LifecycleConfig,
    ) -> Option<Phase> {
        match self.phase {
            Phase::Active if now < self.since + cfg.settle => None,
            Phase::Active => {
                if loss > cfg.degrade_loss {
                    let lossy = match self.lossy {
                        Some(l) if ev.overfilled_at.is_some_and(|c| c > l.since) && now < l.first + EXPLAINED_FOR => {
                            // Explained by the overfill since it began: starts over.
                            self.lossy.insert(Lossy { since: now, judged: ev.judged, queued: l.queued || queued, ..l })
                        }
                        Some(l) => self.lossy.insert(Lossy { queued: l.queued || queued, ..l }),
                        None => {
                            // A dominant link found overfilled by our own sending within the last
                            // second: a spike is its buffer's overflow even when the echo that
                            // came with it predates the queue (the test below).
                            let overfilled =
                                ev.overfilled_at.is_some_and(|c| now.saturating_duration_since(c) < EXPLAINED_FOR);
                            let queued = queued || (overfilled && ev.dominant);
                            self.lossy.insert(Lossy { since: now, first: now, judged: ev.judged, queued })
                        }
                    };
                    let d = ev.lossier.min(1);
                    let judged = ev.judged[d].saturating_sub(lossy.judged[d]);
                    if !lossy.queued || (now >= lossy.since + cfg.degrade_after && judged >= cfg.degrade_packets) {
                        return Some(Phase::Degraded);
                    }
                } else if loss < cfg.recover_loss {
                    self.lossy = None;
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

    /// Loss estimates that have judged `n` packets of what we send.
    fn ev(n: u64) -> Evidence {
        Evidence { judged: [n, 0], lossier: 0, overfilled_at: None, dominant: false }
    }

    /// [`ev`], the link found overfilled at `cut` ms if at all.
    fn ev_cut(n: u64, cut: Option<u64>) -> Evidence {
        Evidence { overfilled_at: cut.map(ms), ..ev(n) }
    }

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
        assert_eq!(l.judge(0.9, false, ev(0), ms(1000), &cfg), None, "not judged while its estimate settles");
        assert_eq!(l.judge(0.2, false, ev(0), ms(3000), &cfg), None);
        assert_eq!(l.judge(0.3, false, ev(0), ms(3000), &cfg), Some(Phase::Degraded));
        l.enter(Phase::Degraded, ms(10));
        assert_eq!(l.judge(0.2, false, ev(0), ms(3000), &cfg), None, "between the thresholds it stays degraded");
        assert_eq!(l.judge(0.05, false, ev(0), ms(3000), &cfg), Some(Phase::Active));
    }

    #[test]
    fn an_overflow_spike_does_not_degrade_a_queued_link_a_lasting_loss_does() {
        let cfg = LifecycleConfig::default();
        let mut l = Lifecycle::new(Phase::Active, ms(0));
        // A full buffer's overflow: the estimate jumps to 0.63 and is back near zero a report
        // later; again a second later.
        for start in [3000, 4000] {
            assert_eq!(l.judge(0.63, true, ev(start), ms(start), &cfg), None);
            assert_eq!(l.judge(0.4, true, ev(start + 20), ms(start + 20), &cfg), None);
            assert_eq!(l.judge(0.02, true, ev(start + 100), ms(start + 100), &cfg), None);
            assert_eq!(l.judge(0.01, true, ev(start + 400), ms(start + 400), &cfg), None, "the spike is forgotten");
        }
        // The same spike where nothing queued: a loss on the way, not an overflow.
        let mut m = Lifecycle::new(Phase::Active, ms(0));
        assert_eq!(m.judge(0.63, false, ev(0), ms(3000), &cfg), Some(Phase::Degraded));
        // A link at the fringe: its estimate wanders about 0.3, dipping under the degrade
        // threshold but not to the recovery one, and is degraded once the spell is long enough.
        let wander = [0.3, 0.2, 0.35, 0.24, 0.3];
        let mut t = 6000;
        let mut got = None;
        for (i, &loss) in wander.iter().cycle().take(40).enumerate() {
            t = 6000 + 20 * i as u64;
            // A packet every millisecond: the estimate judges plenty.
            got = l.judge(loss, true, ev(t), ms(t), &cfg);
            if got.is_some() {
                break;
            }
        }
        assert_eq!(got, Some(Phase::Degraded));
        // On the first judgement above the threshold once the spell is long enough.
        assert!(ms(t) >= ms(6000) + cfg.degrade_after && ms(t) <= ms(6060) + cfg.degrade_after, "degraded at {t} ms");
    }

    #[test]
    fn a_spike_just_after_a_dominant_link_was_found_overfilled_is_its_overflow() {
        // One of two 20 Mbit/s uplinks falls to 2 (`scenarios/uplink-drop.toml`): the passenger's
        // burst in recovery goes to the other, whose queue model an echo had just
        // corrected upward, and overflows its buffer; its estimate reads 0.65, but the echo that
        // came with that report was of a packet sent before the burst and met no queue. Degraded
        // at once, the only fast uplink was drained for half a second and the passenger's TCP
        // timed out on the slow one.
        let cfg = LifecycleConfig::default();
        let at = |judged: u64, cut: Option<u64>| Evidence { dominant: true, ..ev_cut(judged, cut) };
        let mut l = Lifecycle::new(Phase::Active, ms(0));
        assert_eq!(l.judge(0.65, false, at(1000, Some(2890)), ms(3000), &cfg), None, "degraded on its overflow");
        assert_eq!(l.judge(0.05, false, at(1020, Some(2890)), ms(3050), &cfg), None);
        // More than a second after the overfill, a spike with no queue is a loss on the way.
        assert_eq!(l.judge(0.65, false, at(1200, Some(2890)), ms(4000), &cfg), Some(Phase::Degraded));
        // A loss that lasts after an overfill is still degraded once the spell is long enough.
        let mut m = Lifecycle::new(Phase::Active, ms(0));
        assert_eq!(m.judge(0.5, false, at(0, Some(2900)), ms(3000), &cfg), None);
        assert_eq!(m.judge(0.5, false, at(20, Some(2900)), ms(3260), &cfg), Some(Phase::Degraded));
        // One of links of about its capacity is drained at once, as before: the others carry the
        // passengers meanwhile (PluriBus Fig. 7b at eight times the load lost 6.8 % of its mean
        // FCT with every overfilled link shielded).
        let mut o = Lifecycle::new(Phase::Active, ms(0));
        assert_eq!(o.judge(0.65, false, ev_cut(0, Some(2900)), ms(3000), &cfg), Some(Phase::Degraded));
    }

    #[test]
    fn a_lossy_link_is_degraded_only_on_packets_judged_and_a_capacity_cut_starts_over() {
        let cfg = LifecycleConfig::default();
        // An uplink that got ten times slower: its estimate jumps on the overflow, and the split,
        // seeing a deep modelled queue, sends it nothing for a second.
        let mut l = Lifecycle::new(Phase::Active, ms(0));
        assert_eq!(l.judge(0.57, true, ev_cut(1000, None), ms(3000), &cfg), None);
        for t in (3020..4000).step_by(20) {
            assert_eq!(l.judge(0.5, true, ev_cut(1005, None), ms(t), &cfg), None, "degraded at {t} ms on no packets");
        }
        // Packets again, and still lossy over 16 of them: a lasting loss.
        assert_eq!(l.judge(0.5, true, ev_cut(1016, None), ms(4000), &cfg), Some(Phase::Degraded));

        // The receive direction's count is what counts when that direction is the lossier.
        let mut r = Lifecycle::new(Phase::Active, ms(0));
        let rx = |tx: u64, rx: u64| Evidence { judged: [tx, rx], lossier: 1, overfilled_at: None, dominant: false };
        assert_eq!(r.judge(0.5, true, rx(0, 500), ms(3000), &cfg), None);
        assert_eq!(r.judge(0.5, true, rx(900, 510), ms(3300), &cfg), None, "what we sent is not evidence");
        assert_eq!(r.judge(0.5, true, rx(900, 516), ms(3320), &cfg), Some(Phase::Degraded));

        // Its estimate cut to less than half 150 ms into the spell: what it lost before the cut
        // was the old estimate's overflow, and the spell starts over from the next judgement.
        let mut c = Lifecycle::new(Phase::Active, ms(0));
        assert_eq!(c.judge(0.6, true, ev_cut(0, None), ms(3000), &cfg), None);
        assert_eq!(c.judge(0.6, true, ev_cut(200, Some(3150)), ms(3200), &cfg), None);
        assert_eq!(
            c.judge(0.4, true, ev_cut(220, Some(3150)), ms(3300), &cfg),
            None,
            "250 ms since the cut's judgement have not passed"
        );
        assert_eq!(c.judge(0.4, true, ev_cut(240, Some(3150)), ms(3460), &cfg), Some(Phase::Degraded));
        // Found overfilled again and again (its queue model corrected upward every 100 ms) while
        // it keeps losing: started over only within the first second of the spell.
        let mut k = Lifecycle::new(Phase::Active, ms(0));
        let mut got = None;
        for (i, t) in (3000..6000).step_by(100).enumerate() {
            got = k.judge(0.5, true, ev_cut(40 * i as u64, Some(t - 1)), ms(t), &cfg);
            if got.is_some() {
                assert!((3000 + 900 + 250..=3000 + 1000 + 350).contains(&t), "degraded at {t} ms");
                break;
            }
        }
        assert_eq!(got, Some(Phase::Degraded), "an overfill that never ends shields the link for ever");
        // Once the overflowed buffer has drained, the packets meet no queue while the estimate
        // still counts the overflow: the spell is still an overflow's, until it ends.
        let mut o = Lifecycle::new(Phase::Active, ms(0));
        assert_eq!(o.judge(0.8, true, ev_cut(0, None), ms(3000), &cfg), None);
        assert_eq!(o.judge(0.75, false, ev_cut(5, None), ms(3100), &cfg), None, "degraded on a drained queue");
        assert_eq!(o.judge(0.7, false, ev_cut(10, None), ms(3300), &cfg), None);
        assert_eq!(o.judge(0.05, false, ev_cut(40, None), ms(3400), &cfg), None);
        assert_eq!(
            o.judge(0.3, false, ev_cut(45, None), ms(3500), &cfg),
            Some(Phase::Degraded),
            "a new spell, no queue"
        );
        // A cut does not shield a link whose packets did not meet a queue, unless the other
        // links carry little beside it (the test before).
        let mut q = Lifecycle::new(Phase::Active, ms(0));
        assert_eq!(q.judge(0.6, false, ev_cut(0, Some(2990)), ms(3000), &cfg), Some(Phase::Degraded));
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
