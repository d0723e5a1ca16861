//! Active queue management of passengers' traffic at braid's ingress.
//!
//! A bulk TCP flow that is faster than the uplinks fills their drop-tail buffers until a whole
//! burst of packets is lost at once. Passengers' TCP stacks without SACK (or with too few SACK
//! blocks for a long fat pipe) then wait for a retransmission timeout, and braid's recovery
//! schemes spend the uplinks' last capacity re-sending what congestion dropped. Every good
//! gateway router answers this with AQM (RFC 7567); braid is the gateway, and it knows better
//! than the modems how long each packet will wait: its per-link queue model (PluriBus 5.2)
//! predicts the queueing delay a packet meets at the bottleneck before it is sent.
//!
//! So braid runs CoDel (RFC 8289) on that *predicted* sojourn time and drops a passenger packet
//! before it is given a sequence number. TCP sees one loss at a time, spaced by CoDel's control
//! law, recovers it with fast retransmit and backs off; the uplinks' buffers never overflow, so the
//! only losses left on them are the wireless ones, which the recovery schemes are for. A dropped
//! packet never leaves a hole the receiver waits for.
//!
//! Departure from RFC 8289: CoDel measures the sojourn of packets *leaving* a queue it owns.
//! Mostly braid owns no queue (packets leave at once, into the modem), so it judges each packet
//! by the queue it is about to join, plus whatever time it waited in braid for a full link
//! (under `min-delay` and `eat`, a link whose queue is at [`AqmConfig::link_queue_limit`] and
//! still delivers first). The control law, the interval and the re-entry rule are CoDel's. Target
//! and interval follow the passengers' round trip: the uplinks' smallest *minimum* RTT (the last
//! 10 s of probes), not the smoothed one, which grows with the very queue CoDel judges, plus under
//! `min-delay` and `eat` the larger of the extra one-way delay of the slowest link the load spreads
//! to and the largest mean hold of a delivered packet the peer reported over the last 20 s (its
//! reports' `FeedbackRepr::hold_ms`), at most doubling it (`Session::aqm_round_trip`).

use crate::time::Instant;
use std::time::Duration;

/// AQM settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AqmConfig {
    /// Off (the default): every packet is sent and the uplinks' own buffers decide (PluriBus'
    /// behaviour). On the bus of PluriBus 6 (short flows, 350 ms modem buffers) CoDel's drops cost
    /// more than the overflows they prevent (oec 0.217 s mean FCT with it, 0.210 s without); on
    /// FMTCP Table II's long fat paths it raised a bulk flow from 12.0 to 14.6 Mbit/s.
    pub enabled: bool,
    /// CoDel's target: the standing queue it tolerates. Never below this; on long paths a
    /// fraction of the round trip (see [`AqmConfig::target_fraction`]).
    pub target: Duration,
    /// The target as a fraction of the passengers' round trip, when that is larger than
    /// `target`. A single CUBIC flow backs off to 0.7 of its window, and a queue of about 0.43 of
    /// its BDP keeps the uplinks busy through that. The round trip CoDel follows
    /// (`Session::aqm_round_trip`) is a floor: the smallest path round trip plus at most as much
    /// again for the waits beyond it, where the passengers' own round trip through a sequencing
    /// buffer that holds packets for repairs runs higher (a bulk flow over the two modems of
    /// `scenarios/testbed-two-modems.toml`: a smoothed RTT of 100-270 ms against CoDel's 120 ms).
    /// 0.65 of the floor covers that. The default scheme, 0.65 against 0.5 of the round trip:
    /// FMTCP Table II cases 1-5 (ten seeds) +0.5, +1.4, 0.0, -0.1 and +0.2 %, cases 6-8 (six
    /// seeds, twelve for case 7, whose seed 1 swings by 16 % either way) -0.4, -0.7 and 0.0 %, the
    /// two modems over 120 s (six seeds) +0.7 % in the simulator, and on the testbed's Linux hosts
    /// 25.06 and 25.12 Mbit/s (two sets of six runs, 90.3 and 90.6 % of the sum) against 24.86
    /// (89.6 %). 0.8 gained the two modems 1.0 % in the simulator but cost case 1 0.4 %.
    /// RFC 8289 4.3's 5 ms suits many flows on short paths and empties a long fat pipe after
    /// every drop.
    pub target_fraction: f64,
    /// CoDel's interval: how long the queue may stay above target before the first drop. Never
    /// below this, and at least [`AqmConfig::interval_rtts`] of the passengers' round trip.
    pub interval: Duration,
    /// The interval in round trips. RFC 8289 4.2 sets it to the worst-case RTT of the flows
    /// through the queue. Passengers' round trips through braid are longer than the uplinks' (the
    /// sequencing buffer's hold, queues, the far end), and a second drop before TCP has reacted
    /// to the first costs a stack without SACK a timeout: at one uplink RTT, a bulk flow over
    /// FMTCP Table II's 200 ms paths reached 5.2 Mbit/s of 20; at three, 14.6.
    pub interval_rtts: f64,
    /// Under `min-delay` and `eat`: a link whose queue of braid's packets is estimated above this
    /// takes no new data. Another link below it takes the packet if it delivers no later;
    /// otherwise the packet waits in braid until the full link's queue is back at the limit, so
    /// a modem's buffer does not overflow and a much slower link does not deliver it late.
    /// Repairs and resends go at once, into the modem's queue, so the queue left there is also how
    /// long each repaired hole waits longer: FMTCP Table II cases 1, 3 and 5 (`oec-aqm`, 3 runs
    /// each, same seeds) carried 15.9, 12.7 and 13.7 Mbit/s with 150 ms, and 16.3, 13.5 and 14.9
    /// with 40 ms, the mean hold falling from 223, 246 and 166 ms to 168, 209 and 125 (20 ms gave
    /// no more). On the testbed's Linux hosts case 3 was unchanged (12.7 and 12.6 Mbit/s, 2 runs).
    pub link_queue_limit: Duration,
    /// Under `min-delay` and `eat`: how much slower than the fastest link (empty-queue one-way
    /// delay) a link may be and still count as capacity worth a standing wait. When the fast links
    /// are full, braid holds packets until they would arrive as late there as on the slower link,
    /// then sends on both; CoDel judges only the delay beyond that (FMTCP Table II cases 6-8: paths
    /// 100-400 ms apart; case 8 `oec-aqm` 7.4 -> 14.7 Mbit/s, 1 run). The price is that much delay
    /// for every passenger while the load needs the slower link, and about as much again: braid
    /// numbers a packet when it sends it, so one that waited then also waits at the peer behind
    /// the slower link's data sent before it (a constant 12 Mbit/s over case 8's paths: 320 ms in
    /// braid, then about 390 ms at the peer; docs/bonding.md). Zero turns it off; capped at the
    /// longest braid holds a packet for a full link (500 ms). With OEC or RLNC the slower link
    /// carries coded packets while it has no data, so the peer's sequencing buffer already waits
    /// for it; under `arq` or no recovery its first data after a quiet second can arrive after the
    /// peer gave its hole up, and is delivered late.
    pub equalize_limit: Duration,
}

impl Default for AqmConfig {
    fn default() -> Self {
        AqmConfig {
            enabled: false,
            target: Duration::from_millis(5),
            target_fraction: 0.65,
            interval: Duration::from_millis(100),
            interval_rtts: 3.0,
            link_queue_limit: Duration::from_millis(40),
            equalize_limit: Duration::from_millis(500),
        }
    }
}

impl AqmConfig {
    /// The (target, interval) in force for passengers whose round trip is `min_rtt`.
    pub fn effective(&self, min_rtt: Option<Duration>) -> (Duration, Duration) {
        let rtt = min_rtt.unwrap_or(Duration::ZERO);
        let interval = self.interval.max(rtt.mul_f64(self.interval_rtts.clamp(0.0, 100.0)));
        let target = self.target.max(rtt.mul_f64(self.target_fraction.clamp(0.0, 1.0)));
        (target, interval)
    }
}

/// CoDel's state (RFC 8289 5): whether it is dropping, when next, and how often it has.
#[derive(Debug, Clone, Default)]
pub struct Codel {
    first_above: Option<Instant>,
    dropping: bool,
    drop_next: Instant,
    count: u32,
    last_count: u32,
    drops: u64,
}

impl Codel {
    /// Decides for one packet that would wait `sojourn` at the bottleneck: true means drop it.
    /// `target` and `interval` may change between calls (they follow the round trip).
    pub fn should_drop(&mut self, now: Instant, sojourn: Duration, target: Duration, interval: Duration) -> bool {
        let ok_to_drop = self.ok_to_drop(now, sojourn, target, interval);
        if self.dropping {
            if !ok_to_drop {
                self.dropping = false;
                return false;
            }
            if now >= self.drop_next {
                self.count = self.count.saturating_add(1);
                self.drop_next = control_law(self.drop_next, interval, self.count);
                self.drops += 1;
                return true;
            }
            return false;
        }
        if ok_to_drop {
            self.dropping = true;
            // RFC 8289 5.6: if dropping stopped only recently, resume near the old drop rate
            // rather than from one, since the flows evidently did not slow down enough.
            let delta = self.count.saturating_sub(self.last_count);
            self.count = if delta > 1 && now < self.drop_next + interval * 16 { delta } else { 1 };
            self.drop_next = control_law(now, interval, self.count);
            self.last_count = self.count;
            self.drops += 1;
            return true;
        }
        false
    }

    /// RFC 8289 5.5 `dodequeue`: the sojourn has been above target for a whole interval.
    fn ok_to_drop(&mut self, now: Instant, sojourn: Duration, target: Duration, interval: Duration) -> bool {
        if sojourn < target {
            self.first_above = None;
            return false;
        }
        match self.first_above {
            None => {
                self.first_above = Some(now + interval);
                false
            }
            Some(t) => now >= t,
        }
    }

    /// Packets dropped so far.
    pub fn drops(&self) -> u64 {
        self.drops
    }
}

/// RFC 8289 5.5: the next drop comes `interval / sqrt(count)` after `t`.
fn control_law(t: Instant, interval: Duration, count: u32) -> Instant {
    t + interval.div_f64(f64::from(count.max(1)).sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Duration = Duration::from_millis(5);
    const I: Duration = Duration::from_millis(100);

    fn at(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    #[test]
    fn short_queues_are_never_dropped() {
        let mut c = Codel::default();
        assert!((0..10_000).all(|ms| !c.should_drop(at(ms), Duration::from_millis(4), T, I)));
        assert_eq!(c.drops(), 0);
    }

    #[test]
    fn a_burst_shorter_than_the_interval_is_absorbed() {
        let mut c = Codel::default();
        assert!((0..99).all(|ms| !c.should_drop(at(ms), Duration::from_millis(50), T, I)));
        assert!(!c.should_drop(at(99), Duration::from_millis(1), T, I));
        assert!((100..190).all(|ms| !c.should_drop(at(ms), Duration::from_millis(50), T, I)));
    }

    #[test]
    fn a_standing_queue_is_dropped_at_an_increasing_rate() {
        let mut c = Codel::default();
        let drops: Vec<u64> = (0..2_000).filter(|&ms| c.should_drop(at(ms), Duration::from_millis(20), T, I)).collect();
        // First drop one interval after the queue stood above target, then interval/sqrt(n).
        assert_eq!(drops[0], 100);
        assert_eq!(drops[1], 200);
        assert_eq!(drops[2], 271); // 200 + 100 / sqrt(2) = 270.7 ms, next millisecond tick
        let gaps: Vec<u64> = drops.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps.windows(2).all(|g| g[1] <= g[0] + 1), "gaps must shrink: {gaps:?}");
    }

    #[test]
    fn dropping_stops_as_soon_as_the_queue_is_below_target() {
        let mut c = Codel::default();
        for ms in 0..300 {
            c.should_drop(at(ms), Duration::from_millis(20), T, I);
        }
        let before = c.drops();
        assert!(before >= 2);
        assert!((300..1_000).all(|ms| !c.should_drop(at(ms), Duration::from_millis(2), T, I)));
        assert_eq!(c.drops(), before);
    }

    #[test]
    fn effective_settings_follow_the_round_trip() {
        let cfg = AqmConfig::default();
        assert_eq!(cfg.effective(None), (Duration::from_millis(5), Duration::from_millis(100)));
        assert_eq!(
            cfg.effective(Some(Duration::from_millis(7))),
            (Duration::from_millis(5), Duration::from_millis(100))
        );
        let (t, i) = cfg.effective(Some(Duration::from_millis(200)));
        assert_eq!(i, Duration::from_millis(600));
        assert_eq!(t, Duration::from_millis(130));
    }
}
