//! Drive-by WiFi: a link whose rate, loss and very existence follow the vehicle's position along a
//! road past roadside access points (Hadaller et al., MobiSys 2007, "paper 002" below).
//!
//! The model is a chain of three published or standard relations, evaluated along the route:
//!
//! 1. **Signal from distance**: log-distance path loss, `rssi(d) = S_edge - 10 n log10(d / range)`,
//!    where `d` is the straight-line distance to the access point (along the road and across the
//!    `offset_m` from it), `range` is where the signal reaches the lowest MAC rate's sensitivity
//!    `S_edge`, and `n` the path-loss exponent.
//! 2. **MAC rate from signal**: the fastest 802.11b/g rate whose receiver sensitivity the signal
//!    clears ([`MAC_RATES`]).
//! 3. **TCP-level rate from MAC rate**: paper 002's Table 3 (static TCP goodput measured in the lab
//!    for each MAC rate). The link carries that goodput plus TCP/IP headers.
//!
//! The **phases** are paper 002's (section 6.1): production where the TCP-level rate exceeds
//! 3 Mbit/s, entry before it and exit after it. With the defaults (`range_m` 640, `n` 3) the
//! production phase spans +-320 m around the access point, as in the paper's Figure 11. Loss is
//! `production_loss` in the production phase and rises linearly in signal toward `edge_loss` at
//! the edge of range (paper 002 Figure 7: MAC losses concentrate in the fringe).
//!
//! **Association** (paper 002 section 6.2): the card starts associating once the signal clears
//! `assoc_dbm`. It needs [`ASSOC_MESSAGES`] management frames; each is lost with the loss rate at the
//! vehicle's position when it is sent, a lost frame costs `mgmt_timeout_s` (the Madwifi driver's
//! hard-coded 5 s, section 6.2.2) before its one retry, and two losses in a row restart the
//! procedure. So association takes longer the lossier the place where it starts. Until it
//! completes, and outside range, the link is gone: everything sent on it is lost.
//!
//! A pass is realised for one run's seed into the ordinary [`LinkDirSpec`] machinery (a
//! [`Schedule`] of rate and loss every [`STEP`] plus [`Outage`]s), so the simulator and the testbed
//! emulator run it through the same [`LinkModel`](super::LinkModel).

use std::sync::Arc;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::spec::{LinkDirSpec, LossSpec, Outage, RateSpec, Schedule, ScheduleRow};

/// How often the realised schedule samples the position: 100 ms is 2.2 m at 80 km/h, finer than
/// paper 002's 20 m road intervals.
pub const STEP: Duration = Duration::from_millis(100);

/// Management frames an open-system association exchanges (paper 002 Figure 10: authentication
/// request and response, association request and response).
pub const ASSOC_MESSAGES: u32 = 4;

/// Air time of one successful management frame exchange.
const MGMT_FRAME_TIME: Duration = Duration::from_millis(2);

/// TCP goodput of a 1448-byte segment in a 1500-byte IP packet: the link rate is the Table 3
/// goodput scaled up by this, so a TCP with the usual 1448-byte MSS gets exactly Table 3's figure.
pub const GOODPUT_PER_IP_BYTE: f64 = 1448.0 / 1500.0;

/// The production phase starts where the TCP-level rate exceeds this (paper 002 section 6.1).
pub const PRODUCTION_KBPS: f64 = 3000.0;

/// One 802.11b/g MAC rate: its receiver sensitivity and paper 002's Table 3 TCP goodput.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MacRate {
    /// MAC bit rate, Mbit/s.
    pub mac_mbps: f64,
    /// Least signal (dBm) at which a card decodes it.
    pub sensitivity_dbm: f64,
    /// Paper 002 Table 3: static TCP goodput at this MAC rate, Mbit/s.
    pub tcp_mbps: f64,
}

/// 802.11b/g rates, slowest first. Goodputs are paper 002's Table 3. Sensitivities are typical of
/// an 802.11b/g card's data sheet (the standard's own minimums put every 802.11b rate above 6 Mbit/s
/// OFDM, which would leave no fringe at all); 5.5 Mbit/s, the first rate above the production
/// threshold, is 9 dB above 1 Mbit/s, so with `n` = 3 production starts at half the range.
pub const MAC_RATES: [MacRate; 12] = [
    MacRate { mac_mbps: 1.0, sensitivity_dbm: -95.0, tcp_mbps: 0.75 },
    MacRate { mac_mbps: 2.0, sensitivity_dbm: -92.0, tcp_mbps: 1.53 },
    MacRate { mac_mbps: 5.5, sensitivity_dbm: -86.0, tcp_mbps: 3.88 },
    MacRate { mac_mbps: 6.0, sensitivity_dbm: -85.0, tcp_mbps: 4.51 },
    MacRate { mac_mbps: 9.0, sensitivity_dbm: -84.0, tcp_mbps: 6.76 },
    MacRate { mac_mbps: 11.0, sensitivity_dbm: -83.0, tcp_mbps: 6.87 },
    MacRate { mac_mbps: 12.0, sensitivity_dbm: -82.0, tcp_mbps: 8.8 },
    MacRate { mac_mbps: 18.0, sensitivity_dbm: -80.0, tcp_mbps: 12.7 },
    MacRate { mac_mbps: 24.0, sensitivity_dbm: -77.0, tcp_mbps: 16.4 },
    MacRate { mac_mbps: 36.0, sensitivity_dbm: -73.0, tcp_mbps: 22.4 },
    MacRate { mac_mbps: 48.0, sensitivity_dbm: -69.0, tcp_mbps: 27.7 },
    MacRate { mac_mbps: 54.0, sensitivity_dbm: -68.0, tcp_mbps: 29.3 },
];

/// The vehicle's motion: the position part of a scenario's clock, seen by every drive-by link and
/// by the client. Position is along the road, in metres, at constant speed; on a closed route (a
/// bus line driven lap after lap) it starts again from 0 after `route_m`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Vehicle {
    /// Speed, m/s.
    pub speed_mps: f64,
    /// Position at time 0, m.
    pub start_m: f64,
    /// Length of a closed route, m: position `route_m` is position 0 again. `None`: an open road.
    pub route_m: Option<f64>,
}

impl Vehicle {
    /// Position along the road `t` after the start of the run, m (within `[0, route_m)` on a
    /// closed route).
    pub fn position_m(&self, t: Duration) -> f64 {
        let x = self.start_m + self.speed_mps * t.as_secs_f64();
        match self.route_m {
            Some(r) => x.rem_euclid(r),
            None => x,
        }
    }

    /// Signed distance along the road from `from` to `to`, m: on a closed route the shorter way
    /// round, so an access point near the end of the route is also near its start.
    pub fn along_m(&self, from: f64, to: f64) -> f64 {
        let d = to - from;
        match self.route_m {
            Some(r) => (d + r / 2.0).rem_euclid(r) - r / 2.0,
            None => d,
        }
    }
}

/// A drive-by link's description (`[[link]] drive_by = {...}` in a scenario).
#[derive(Debug, Clone, PartialEq)]
pub struct DriveBy {
    /// How the vehicle moves.
    pub vehicle: Vehicle,
    /// Access point positions along the road, m, increasing.
    pub aps_m: Vec<f64>,
    /// Distance of the access points from the road, m.
    pub offset_m: f64,
    /// Distance at which the signal falls to the slowest rate's sensitivity: the edge of range.
    pub range_m: f64,
    /// Path-loss exponent `n`.
    pub path_loss_exp: f64,
    /// Loss rate at the edge of range.
    pub edge_loss: f64,
    /// Loss rate in the production phase.
    pub production_loss: f64,
    /// Signal at which the card starts to associate, dBm (the Madwifi default threshold, -71 dBm,
    /// "avoids the fringe"; the edge sensitivity associates as soon as anything is heard).
    pub assoc_dbm: f64,
    /// What a lost management frame costs before its retry (paper 002 section 6.2.2: 5 s).
    pub mgmt_timeout: Duration,
}

/// Defaults of a `drive_by` table: paper 002's setting.
impl Default for DriveBy {
    fn default() -> Self {
        DriveBy {
            vehicle: Vehicle { speed_mps: 80.0 / 3.6, start_m: -640.0, route_m: None },
            aps_m: vec![0.0],
            offset_m: 10.0,
            range_m: 640.0,
            path_loss_exp: 3.0,
            edge_loss: 0.3,
            production_loss: 0.002,
            assoc_dbm: MAC_RATES[0].sensitivity_dbm,
            mgmt_timeout: Duration::from_secs(5),
        }
    }
}

/// Radio conditions at one point of the road.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Radio {
    /// Index of the nearest access point in range, if any.
    pub ap: Option<usize>,
    /// Signal, dBm (`-inf` out of range).
    pub rssi_dbm: f64,
    /// TCP-level rate (Table 3), kbit/s; 0 out of range.
    pub tcp_kbps: f64,
    /// Loss rate.
    pub loss: f64,
}

impl DriveBy {
    /// Signal from access point `ap` at road position `x`, dBm.
    pub fn rssi_dbm(&self, ap: usize, x: f64) -> f64 {
        let along = self.vehicle.along_m(self.aps_m[ap], x);
        let d = (along * along + self.offset_m * self.offset_m).sqrt().max(1.0);
        MAC_RATES[0].sensitivity_dbm - 10.0 * self.path_loss_exp * (d / self.range_m).log10()
    }

    /// Conditions at road position `x`, from the strongest access point.
    pub fn radio_at(&self, x: f64) -> Radio {
        let best = (0..self.aps_m.len())
            .map(|i| (i, self.rssi_dbm(i, x)))
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .filter(|&(_, s)| s >= MAC_RATES[0].sensitivity_dbm);
        let Some((ap, rssi)) = best else {
            return Radio { ap: None, rssi_dbm: f64::NEG_INFINITY, tcp_kbps: 0.0, loss: 1.0 };
        };
        let rate = MAC_RATES.iter().rev().find(|r| rssi >= r.sensitivity_dbm).unwrap_or(&MAC_RATES[0]);
        let tcp_kbps = rate.tcp_mbps * 1000.0;
        // Production starts at the first rate above 3 Mbit/s; below it loss climbs toward the edge.
        let prod_dbm =
            MAC_RATES.iter().find(|r| r.tcp_mbps * 1000.0 > PRODUCTION_KBPS).map_or(0.0, |r| r.sensitivity_dbm);
        let loss = if rssi >= prod_dbm {
            self.production_loss
        } else {
            let span = prod_dbm - MAC_RATES[0].sensitivity_dbm;
            let frac = ((prod_dbm - rssi) / span).clamp(0.0, 1.0);
            self.production_loss + (self.edge_loss - self.production_loss) * frac
        };
        Radio { ap: Some(ap), rssi_dbm: rssi, tcp_kbps, loss }
    }

    /// The conditions at time `t` of the run.
    pub fn radio_at_time(&self, t: Duration) -> Radio {
        self.radio_at(self.vehicle.position_m(t))
    }

    /// Realises the pass for one run: when each association completes (drawn with `seed`) and the
    /// resulting per-[`STEP`] rate and loss, over `duration`.
    pub fn realise(&self, seed: u64, duration: Duration) -> DrivePass {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xd71e_b7a5);
        let steps = (duration.as_micros() / STEP.as_micros()) as usize + 1;
        let mut usable = vec![false; steps];
        let mut radio = Vec::with_capacity(steps);
        for i in 0..steps {
            radio.push(self.radio_at_time(STEP * i as u32));
        }
        let mut associations = Vec::new();
        let mut i = 0;
        while i < steps {
            // Wait until some access point is heard above the association threshold.
            let Some(ap) = radio[i].ap.filter(|_| radio[i].rssi_dbm >= self.assoc_dbm) else {
                i += 1;
                continue;
            };
            let start = STEP * i as u32;
            let done = self.associate(&mut rng, ap, start, duration);
            // Usable from association to the end of this access point's coverage.
            let from = done.map_or(steps, |d| (d.as_micros().div_ceil(STEP.as_micros())) as usize);
            let mut j = i;
            while j < steps && radio[j].ap == Some(ap) {
                if j >= from {
                    usable[j] = true;
                }
                j += 1;
            }
            associations.push(Association { ap, started: start, completed: done.filter(|d| *d < STEP * j as u32) });
            i = j.max(i + 1);
        }
        DrivePass { radio, usable, associations }
    }

    /// Runs the association procedure for `ap` from `start`: the time it completes, or `None` if
    /// the vehicle leaves range (or the run ends) first.
    fn associate(&self, rng: &mut ChaCha8Rng, ap: usize, start: Duration, end: Duration) -> Option<Duration> {
        let mut t = start;
        let mut msg = 0;
        let mut losses_in_row = 0;
        while msg < ASSOC_MESSAGES {
            if t >= end {
                return None;
            }
            let r = self.radio_at_time(t);
            if r.ap != Some(ap) {
                return None;
            }
            if rng.random::<f64>() < r.loss {
                losses_in_row += 1;
                t += self.mgmt_timeout;
                if losses_in_row >= 2 {
                    // Two successive losses: the driver restarts the procedure (section 6.2.2).
                    msg = 0;
                    losses_in_row = 0;
                }
            } else {
                losses_in_row = 0;
                msg += 1;
                t += MGMT_FRAME_TIME;
            }
        }
        Some(t)
    }
}

/// One association attempt of a realised pass.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Association {
    /// Which access point.
    pub ap: usize,
    /// When the card started to associate.
    pub started: Duration,
    /// When it completed, `None` if the vehicle left range first.
    pub completed: Option<Duration>,
}

/// A pass realised for one run.
#[derive(Debug, Clone, PartialEq)]
pub struct DrivePass {
    /// Conditions at each [`STEP`].
    pub radio: Vec<Radio>,
    /// Whether the link can carry anything during each step (in range and associated).
    pub usable: Vec<bool>,
    /// Every association attempt.
    pub associations: Vec<Association>,
}

impl DrivePass {
    /// The pass's potential: the integral over the run of the TCP-level rate the model allows
    /// (Table 3 goodput while usable), in bytes. This is what a perfect transport would deliver.
    pub fn potential_bytes(&self) -> f64 {
        self.radio.iter().zip(&self.usable).filter(|(_, u)| **u).map(|(r, _)| r.tcp_kbps * 1000.0 / 8.0).sum::<f64>()
            * STEP.as_secs_f64()
    }

    /// Each access point's coverage in turn: the access point and the steps during which it is the
    /// strongest one in range (one entry per pass, so a route driven twice has two per point).
    pub fn coverages(&self) -> Vec<(usize, std::ops::Range<usize>)> {
        let mut out: Vec<(usize, std::ops::Range<usize>)> = Vec::new();
        for (i, r) in self.radio.iter().enumerate() {
            let Some(ap) = r.ap else { continue };
            match out.last_mut() {
                Some((last, range)) if *last == ap && range.end == i => range.end = i + 1,
                _ => out.push((ap, i..i + 1)),
            }
        }
        out
    }

    /// What each of this pass's coverages ([`Self::coverages`]) carried, from `bytes_per_step`
    /// (bytes delivered over the link in each [`STEP`]): the step each coverage starts at and its
    /// bytes.
    pub fn bytes_per_coverage(&self, bytes_per_step: &[u64]) -> Vec<(usize, u64)> {
        self.coverages()
            .into_iter()
            .map(|(_, steps)| {
                let end = steps.end.min(bytes_per_step.len());
                (steps.start, bytes_per_step.get(steps.start.min(end)..end).map_or(0, |b| b.iter().sum()))
            })
            .collect()
    }

    /// What each pass of several drive-by links carried, MB, in time order: each link's pass and
    /// its bytes delivered per [`STEP`] ([`Self::bytes_per_coverage`]), for the passes that began
    /// before `until` (the run's end: the testbed realises a pass for hours ahead, and the passes
    /// the vehicle never reached are not passes that carried nothing). The simulator and the
    /// testbed both report `wifi_pass_mb` this way.
    pub fn mb_per_pass<'a>(links: impl IntoIterator<Item = (&'a DrivePass, &'a [u64])>, until: Duration) -> Vec<f64> {
        let end = (until.as_micros() / STEP.as_micros()) as usize;
        let mut passes: Vec<(usize, f64)> = links
            .into_iter()
            .flat_map(|(pass, steps)| pass.bytes_per_coverage(steps))
            .filter(|(at, _)| *at < end)
            .map(|(at, b)| (at, b as f64 / 1e6))
            .collect();
        passes.sort_by_key(|p| p.0);
        passes.into_iter().map(|p| p.1).collect()
    }

    /// The same integral ignoring association: what the radio alone would allow.
    pub fn radio_potential_bytes(&self) -> f64 {
        self.radio.iter().map(|r| r.tcp_kbps * 1000.0 / 8.0).sum::<f64>() * STEP.as_secs_f64()
    }

    /// The potential between `from` and `to` (a run that measures over part of the pass, as the
    /// testbed's workload does, which starts once its tunnel is up).
    pub fn potential_bytes_between(&self, from: Duration, to: Duration) -> f64 {
        let step = |t: Duration| (t.as_micros() / STEP.as_micros()) as usize;
        let (skip, end) = (step(from), step(to));
        self.radio
            .iter()
            .zip(&self.usable)
            .take(end)
            .skip(skip)
            .filter(|(_, u)| **u)
            .map(|(r, _)| r.tcp_kbps * 1000.0 / 8.0)
            .sum::<f64>()
            * STEP.as_secs_f64()
    }

    /// One direction of the link over this pass: `base`'s delay and queue, the pass's rate and
    /// loss as a schedule, and outages wherever it is unusable (added to `base`'s own).
    pub fn apply(&self, base: &LinkDirSpec) -> LinkDirSpec {
        let mut rows = Vec::new();
        let mut last: Option<(f64, f64)> = None;
        let mut outages = base.outages.clone();
        let mut gone_since: Option<usize> = None;
        for (i, (r, &u)) in self.radio.iter().zip(&self.usable).enumerate() {
            // While gone, packets still drain at the slowest rate so that they are lost, not held.
            let kbps = if u { r.tcp_kbps / GOODPUT_PER_IP_BYTE } else { MAC_RATES[0].tcp_mbps * 1000.0 };
            let loss = if u { r.loss } else { 1.0 };
            if last != Some((kbps, loss)) {
                rows.push(ScheduleRow {
                    t_s: (STEP * i as u32).as_secs_f64(),
                    delay_ms: None,
                    loss: Some(loss),
                    rate_kbps: Some(kbps),
                });
                last = Some((kbps, loss));
            }
            match (u, gone_since) {
                (false, None) => gone_since = Some(i),
                (true, Some(s)) => {
                    outages.push(Outage {
                        at: STEP * s as u32,
                        duration: STEP * (i - s) as u32,
                        jitter: Duration::ZERO,
                    });
                    gone_since = None;
                }
                _ => {}
            }
        }
        if let Some(s) = gone_since {
            outages.push(Outage {
                at: STEP * s as u32,
                duration: STEP * (self.radio.len() - s) as u32 + STEP * 1000,
                jitter: Duration::ZERO,
            });
        }
        outages.sort_by_key(|o| o.at);
        LinkDirSpec {
            rate: RateSpec::Constant { kbps: MAC_RATES[0].tcp_mbps * 1000.0 },
            delay: base.delay,
            queue_bytes: base.queue_bytes,
            loss: LossSpec::None,
            schedule: Some(Arc::new(Schedule { rows })),
            outages,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paper() -> DriveBy {
        DriveBy::default()
    }

    #[test]
    fn phases_match_paper_002() {
        let d = paper();
        // Production (TCP-level rate above 3 Mbit/s) within about +-320 m, range to about +-640 m.
        assert!(d.radio_at(-300.0).tcp_kbps > PRODUCTION_KBPS);
        assert!(d.radio_at(-340.0).tcp_kbps < PRODUCTION_KBPS);
        assert!(d.radio_at(330.0).tcp_kbps < PRODUCTION_KBPS);
        assert!(d.radio_at(630.0).ap.is_some());
        assert_eq!(d.radio_at(650.0).ap, None);
        // Loss: low in production, high at the edge.
        assert_eq!(d.radio_at(0.0).loss, d.production_loss);
        assert!(d.radio_at(630.0).loss > 0.25);
        // Near the access point the fastest rate.
        assert_eq!(d.radio_at(0.0).tcp_kbps, 29_300.0);
    }

    #[test]
    fn rate_never_falls_toward_the_access_point() {
        let d = paper();
        let mut prev = 0.0;
        for x in (-640..=0).step_by(5) {
            let r = d.radio_at(x as f64).tcp_kbps;
            assert!(r >= prev, "rate fell at {x} m");
            prev = r;
        }
    }

    #[test]
    fn association_in_the_fringe_takes_longer_than_in_production() {
        let mut fringe = Duration::ZERO;
        let mut clean = Duration::ZERO;
        let avoid = DriveBy { assoc_dbm: -80.0, ..paper() };
        for seed in 0..40 {
            let p = paper().realise(seed, Duration::from_secs(58));
            let a = p.associations[0];
            fringe += a.completed.unwrap_or(Duration::from_secs(58)) - a.started;
            let p = avoid.realise(seed, Duration::from_secs(58));
            let a = p.associations[0];
            clean += a.completed.unwrap_or(Duration::from_secs(58)) - a.started;
        }
        assert!(fringe > clean * 5, "fringe {fringe:?} vs production {clean:?}");
    }

    #[test]
    fn pass_potential_and_schedule() {
        let d = DriveBy { edge_loss: 0.0, production_loss: 0.0, ..paper() };
        let p = d.realise(1, Duration::from_secs(58));
        // No loss: associated 8 ms after entering range, usable for the whole 58 s pass.
        let a = p.associations[0];
        assert_eq!(a.completed, Some(a.started + Duration::from_millis(8)));
        let ideal = p.radio_potential_bytes();
        assert!((p.potential_bytes() - ideal).abs() / ideal < 0.01);
        // Order of magnitude of paper 002's Figure 9 potential (tens of MB per pass).
        assert!((40e6..120e6).contains(&ideal), "{ideal}");
        // Its two halves make the whole, and nothing lies beyond the pass.
        let (half, end) = (Duration::from_secs(29), Duration::from_secs(58));
        let (first, second) = (p.potential_bytes_between(Duration::ZERO, half), p.potential_bytes_between(half, end));
        assert!(first > 0.0 && second > 0.0);
        assert!((first + second - p.potential_bytes()).abs() < 1.0);
        assert_eq!(p.potential_bytes_between(end, Duration::from_secs(3600)), 0.0);
        let spec = p.apply(&LinkDirSpec {
            rate: RateSpec::Constant { kbps: 1.0 },
            delay: Duration::from_millis(2),
            queue_bytes: 1000,
            loss: LossSpec::None,
            schedule: None,
            outages: vec![],
        });
        let s = spec.schedule.unwrap();
        assert_eq!(s.at(29.0).rate_kbps, Some(29_300.0 / GOODPUT_PER_IP_BYTE));
        assert_eq!(s.at(1.0).rate_kbps, Some(0.75 * 1000.0 / GOODPUT_PER_IP_BYTE));
        // Before the vehicle is in range (the first step) the link is gone.
        assert_eq!(spec.outages[0].at, Duration::ZERO);
    }

    #[test]
    fn bytes_per_coverage_sums_each_pass_alone() {
        // Two access points 2 km apart on a 4 km loop driven once: two passes, out of range
        // between them.
        let d = DriveBy {
            vehicle: Vehicle { speed_mps: 20.0, start_m: 3000.0, route_m: Some(4000.0) },
            aps_m: vec![0.0, 2000.0],
            ..paper()
        };
        let p = d.realise(1, Duration::from_secs(200));
        let cov = p.coverages();
        assert_eq!(cov.len(), 2, "{cov:?}");
        // One byte per step everywhere: each pass carries its own length in steps, nothing of
        // the gap between them; a series that ends early counts what it has.
        let ones = vec![1u64; p.radio.len()];
        let got = p.bytes_per_coverage(&ones);
        assert_eq!(got, cov.iter().map(|(_, r)| (r.start, r.len() as u64)).collect::<Vec<_>>());
        let short = p.bytes_per_coverage(&ones[..cov[0].1.end]);
        assert_eq!(short, vec![(cov[0].1.start, cov[0].1.len() as u64), (cov[1].1.start, 0)]);
    }

    #[test]
    fn passes_the_vehicle_never_reached_are_not_counted() {
        // The testbed realises a pass hours ahead; a run of 200 s on a 200 s loop made only the
        // first lap's two passes, not the later laps' passes with nothing delivered.
        let d = DriveBy {
            vehicle: Vehicle { speed_mps: 20.0, start_m: 3000.0, route_m: Some(4000.0) },
            aps_m: vec![0.0, 2000.0],
            ..paper()
        };
        let p = d.realise(1, Duration::from_secs(1000));
        assert!(p.coverages().len() >= 8, "five laps, two passes each: {:?}", p.coverages());
        let mut ones = vec![1u64; p.radio.len()];
        ones.truncate(2000);
        let got = DrivePass::mb_per_pass([(&p, &ones[..])], Duration::from_secs(200));
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(got.iter().all(|mb| *mb > 0.0), "{got:?}");
    }

    #[test]
    fn out_of_range_is_an_outage() {
        let d = DriveBy { vehicle: Vehicle { speed_mps: 22.2, start_m: -1000.0, route_m: None }, ..paper() };
        let p = d.realise(3, Duration::from_secs(100));
        let spec = p.apply(&LinkDirSpec {
            rate: RateSpec::Constant { kbps: 1.0 },
            delay: Duration::ZERO,
            queue_bytes: 1000,
            loss: LossSpec::None,
            schedule: None,
            outages: vec![],
        });
        let first = spec.outages[0];
        assert_eq!(first.at, Duration::ZERO);
        // In range after (1000 - 640) / 22.2 = 16.2 s; association takes at least that.
        assert!(first.duration >= Duration::from_millis(16_200));
        let last = spec.outages.last().unwrap();
        // Out of range again at (1000 + 640) / 22.2 = 73.9 s, for the rest of the run.
        assert!(last.at <= Duration::from_millis(74_000) && last.at >= Duration::from_millis(73_800), "{last:?}");
    }
}
