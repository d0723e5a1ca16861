//! Scenario files, the contract of `braid sim` (docs/design.md 5): which links (rate or mahimahi trace,
//! delay, queue, loss, schedule, outages), which workload, which schemes, and optionally a sweep
//! of some keys over a list of values.
//!
//! Loading is strict: an unknown key, a value of the wrong type or out of range, a missing required
//! key, or a file that cannot be read is an error naming the key (as a dotted path such as
//! `link.wimax.down.loss.p`) and its line. Relative paths are resolved against the scenario file's
//! directory. Nothing here panics on any input.
//!
//! Defaults for keys that may be left out: `runs` [`DEFAULT_RUNS`], `seed` [`DEFAULT_SEED`];
//! per link direction `delay_ms` [`DEFAULT_DELAY_MS`], `queue_kb` [`DEFAULT_QUEUE_KB`] (1 kB =
//! 1000 bytes), `loss` none; Gilbert `loss_good` 0 and `loss_bad` 1; workload `direction` down,
//! `scale` 1, bulk `flows` 1, cbr `packet_bytes` [`DEFAULT_PACKET_BYTES`]; scheme `scheduler`
//! min-delay; `[tcp]` cubic, `mss` [`DEFAULT_MSS`], `buffer_kb`
//! [`DEFAULT_BUFFER_KB`], `initial_rto_ms` [`DEFAULT_INITIAL_RTO_MS`], `min_rto_ms`
//! [`DEFAULT_MIN_RTO_MS`], `initial_window_bytes` [`DEFAULT_INITIAL_WINDOW_BYTES`]. `name`, `duration_s`, links, their `down`/`up` with `rate_kbps` or
//! `trace`, the workload and at least one scheme are required.

/// Declares a closed set of names used in scenario files, with their spellings.
macro_rules! names {
    ($(#[$doc:meta])* $ty:ident { $($(#[$vdoc:meta])* $variant:ident = $name:literal,)* }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $ty {
            $($(#[$vdoc])* $variant,)*
        }

        impl $ty {
            /// Every value, in the order the scenario format documents them.
            pub const ALL: &'static [$ty] = &[$($ty::$variant,)*];
            /// Every spelling, in the same order as [`Self::ALL`].
            pub const NAMES: &'static [&'static str] = &[$($name,)*];

            /// The spelling used in scenario files.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($ty::$variant => $name,)*
                }
            }

            /// Looks up a spelling; `None` when unknown (list [`Self::NAMES`] in the error).
            pub fn from_name(name: &str) -> Option<Self> {
                match name {
                    $($name => Some($ty::$variant),)*
                    _ => None,
                }
            }
        }

        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

mod build;
mod doc;
mod error;
mod raw;
pub mod scheme;
mod sweep;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

pub use error::ScenarioError;
pub use scheme::{Peer, RecoveryKind, SchedulerKind, SchemeKind, SchemeSpec};
pub use sweep::Sweep;

use crate::link::{DriveBy, DrivePass, LinkDirSpec, Vehicle};
use crate::workload::Dist;

/// Runs per scheme when `runs` is not given.
pub const DEFAULT_RUNS: u32 = 1;
/// Seed of the first run when `seed` is not given.
pub const DEFAULT_SEED: u64 = 1;
/// One-way propagation delay (ms) of a link direction that gives no `delay_ms`.
pub const DEFAULT_DELAY_MS: f64 = 0.0;
/// Drop-tail queue (kB, 1000 bytes) of a link direction that gives no `queue_kb`.
pub const DEFAULT_QUEUE_KB: f64 = 64.0;
/// UDP payload size of a `cbr` workload that gives no `packet_bytes`.
pub const DEFAULT_PACKET_BYTES: u32 = 1200;
/// TCP maximum segment size when `[tcp]` gives no `mss`: fits braid's 60-byte overhead and the
/// inner IP and TCP headers in a 1500-byte path MTU.
pub const DEFAULT_MSS: u16 = 1360;
/// TCP send and receive buffer (kB) when `[tcp]` gives no `buffer_kb`.
pub const DEFAULT_BUFFER_KB: f64 = 256.0;

/// The embedded default scenario, `scenarios/bus.toml`.
const BUS_TOML: &str = include_str!("../../../../scenarios/bus.toml");

/// A loaded, checked scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// Name, for reports.
    pub name: String,
    /// Simulated time per run (`duration_s`).
    pub duration: Duration,
    /// Independent runs per scheme (seeds `seed`, `seed + 1`, ...).
    pub runs: u32,
    /// Seed of the first run.
    pub seed: u64,
    /// The uplinks, in file order (scheduler weights follow this order).
    pub links: Vec<LinkSpec>,
    /// What the passengers do.
    pub workload: WorkloadSpec,
    /// The contenders, each run on the same links, workload and seeds.
    pub schemes: Vec<SchemeSpec>,
    /// End hosts' TCP.
    pub tcp: TcpSpec,
    /// The sweep, if the file has one; [`Scenario::expand_sweep`] gives its points.
    pub sweep: Option<Sweep>,
    /// The directory relative paths were resolved against.
    pub base_dir: PathBuf,
    /// The vehicle's motion (`[vehicle]`), the position part of the clock; `None` when the
    /// scenario has no drive-by link and gives none.
    pub vehicle: Option<Vehicle>,
}

/// One `[[link]]`: an uplink, each direction modelled separately.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkSpec {
    /// Unique name.
    pub name: String,
    /// Server to vehicle.
    pub down: LinkDirSpec,
    /// Vehicle to server.
    pub up: LinkDirSpec,
    /// A drive-by WiFi link (`drive_by = {...}`): rate, loss and outages follow the vehicle's
    /// position past access points, realised per run by [`LinkSpec::for_run`].
    pub drive_by: Option<std::sync::Arc<DriveBy>>,
    /// `coding_budget` (coded bytes at most this fraction of the data bytes on the link, each
    /// direction; absent or `inf`: no bound) and `backup` (carries traffic only when no other
    /// link can), applied by both ends of the tunnel to what they send.
    pub metering: braid_proto::Metering,
    /// Whether braid is told the link's mean rate (`rate_known`, default true), as an operator's
    /// `[[uplink]]` `up_kbps`/`down_kbps` tell the daemon; false: braid finds it from traffic, as
    /// with the daemon's default configuration, which gives no rates.
    pub rate_known: bool,
}

/// One run's view of a link: its two directions, and the drive-by pass they were made from.
#[derive(Debug, Clone)]
pub struct RunLink {
    /// Vehicle to server.
    pub up: LinkDirSpec,
    /// Server to vehicle.
    pub down: LinkDirSpec,
    /// The realised pass of a drive-by link.
    pub pass: Option<DrivePass>,
}

impl LinkSpec {
    /// The rates braid is told for this link, kbit/s (up, down): the mean rates while
    /// `rate_known`, else none (an operator's `[[uplink]]` without `up_kbps`/`down_kbps`).
    pub fn told_rates_kbps(&self) -> Option<(f64, f64)> {
        self.rate_known.then(|| (self.up.rate.mean_kbps(), self.down.rate.mean_kbps()))
    }

    /// The link for one run of `duration`: as given, or, for a drive-by link, with the pass
    /// realised for `seed` (association draws) and link number `index`. The simulator and the
    /// testbed emulator derive the same seed, so both meet the same pass.
    pub fn for_run(&self, seed: u64, index: usize, duration: Duration) -> RunLink {
        let mut run = match &self.drive_by {
            None => RunLink { up: self.up.clone(), down: self.down.clone(), pass: None },
            Some(d) => {
                let pass = d.realise(seed.wrapping_mul(1_000_003).wrapping_add(2 * index as u64), duration);
                RunLink { up: pass.apply(&self.up), down: pass.apply(&self.down), pass: Some(pass) }
            }
        };
        place_outages(&mut run.up, seed, index);
        place_outages(&mut run.down, seed, index);
        run
    }
}

/// Draws the start of each outage with a `jitter` within it for this run. The draw depends on the
/// run's seed, the link and the outage alone, so a link-wide outage (in both directions) starts
/// at the same moment each way.
fn place_outages(dir: &mut LinkDirSpec, seed: u64, index: usize) {
    for o in dir.outages.iter_mut().filter(|o| !o.jitter.is_zero()) {
        let key = seed
            ^ (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
            ^ (o.at.as_nanos() as u64).rotate_left(17)
            ^ (o.duration.as_nanos() as u64).rotate_left(41);
        let mut rng = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(key);
        o.at += o.jitter.mul_f64(rand::Rng::random::<f64>(&mut rng));
        o.jitter = Duration::ZERO;
    }
    dir.outages.sort_by_key(|o| o.at);
}

names! {
    /// Which way a workload's data flows.
    Direction {
        /// Server to vehicle (downloads).
        Down = "down",
        /// Vehicle to server (uploads).
        Up = "up",
        /// Both directions.
        Both = "both",
    }
}

names! {
    /// End-host TCP congestion control (both are smoltcp's).
    Congestion {
        /// NewReno.
        Reno = "reno",
        /// CUBIC.
        Cubic = "cubic",
    }
}

/// `[workload]`.
#[derive(Debug, Clone, PartialEq)]
pub enum WorkloadSpec {
    /// Short TCP flows arriving at random (the PluriBus workload, section 6).
    Flows {
        /// Which way the flows' data goes.
        direction: Direction,
        /// Bytes per flow.
        size_bytes: Dist,
        /// Seconds between flow starts, before scaling.
        interarrival_s: Dist,
        /// Divides inter-arrival times (PluriBus 6.1's load scaling), > 0.
        scale: f64,
    },
    /// Long TCP flows for the whole run (goodput).
    Bulk {
        /// Which way the data goes.
        direction: Direction,
        /// Number of parallel flows, >= 1.
        flows: u32,
    },
    /// Constant-rate UDP (packet loss, delay, jitter).
    Cbr {
        /// Which way the packets go.
        direction: Direction,
        /// Offered rate, kbit/s.
        rate_kbps: f64,
        /// UDP payload bytes per packet.
        packet_bytes: u32,
    },
}

impl WorkloadSpec {
    /// Which way the data flows.
    pub fn direction(&self) -> Direction {
        match self {
            WorkloadSpec::Flows { direction, .. }
            | WorkloadSpec::Bulk { direction, .. }
            | WorkloadSpec::Cbr { direction, .. } => *direction,
        }
    }

    /// Mean offered load in kbit/s of payload: for flows, `mean size * 8 * scale / mean
    /// inter-arrival`; for cbr, its rate; `None` for bulk (as fast as TCP goes).
    pub fn mean_rate_kbps(&self) -> Option<f64> {
        match self {
            WorkloadSpec::Flows { size_bytes, interarrival_s, scale, .. } => {
                Some(size_bytes.mean() * 8.0 * scale / interarrival_s.mean() / 1000.0)
            }
            WorkloadSpec::Bulk { .. } => None,
            WorkloadSpec::Cbr { rate_kbps, .. } => Some(*rate_kbps),
        }
    }
}

/// `[tcp]`: the end hosts' TCP. The simulator's smoltcp hosts take it per socket; `braid
/// testbed` gives it to the end hosts' kernels (braid-testbed's `hosts` module: sysctls, route
/// options and a BPF program for the initial RTO; `buffer_kb` is simulator-only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpSpec {
    /// Congestion control.
    pub congestion: Congestion,
    /// Maximum segment size, bytes.
    pub mss: u16,
    /// Send and receive buffer, bytes (`buffer_kb` * 1000).
    pub buffer_bytes: usize,
    /// Retransmission timeout before the first RTT sample, which is what a lost SYN waits
    /// (`initial_rto_ms`; RFC 6298 and Linux: 1000, RFC 2988 and hosts before 2011: 3000).
    pub initial_rto: Duration,
    /// Lower bound of the retransmission timeout (`min_rto_ms`; Linux: 200).
    pub min_rto: Duration,
    /// Congestion window a connection starts with (`initial_window_bytes`; RFC 6928 and Linux:
    /// 14600, ten 1460-byte segments; RFC 3390: 4380).
    pub initial_window: usize,
    /// Selective acknowledgements (`sack`; RFC 2018 with RFC 6675 loss recovery, as Linux and
    /// the testbed's hosts run them). Off, the simulator's hosts recover as smoltcp does: one
    /// segment per three duplicate ACKs, each cutting the window again.
    pub sack: bool,
    /// Delay-based slow-start exit (`hystart`; Linux's CUBIC runs HyStart, RFC 9406's delay
    /// rule): CUBIC leaves slow start when the RTT grows, before the window overflows a buffer.
    pub hystart: bool,
    /// Linux's retransmission timeout (`linux_rto`): SRTT + max(4 x RTTVAR, min RTO), so a steady
    /// RTT leaves the RTO at least `min_rto` above it. Off, RFC 6298's max(min RTO, SRTT + 4 x
    /// RTTVAR), which on a steady path times out on any delay spike above a few ms.
    pub linux_rto: bool,
    /// Window growth by the data each ACK covers (`byte_counting`; RFC 3465, as Linux's
    /// `tcp_slow_start` and `tcp_cong_avoid_ai` count every segment acknowledged). Off, smoltcp's
    /// rule: at most one segment's worth per ACK, which a receiver's stretched ACKs slow down
    /// (braid's sequencing buffer hands a burst to the host, which acknowledges it once).
    pub byte_counting: bool,
    /// RACK for the resends of SACK recovery (`rack`; RFC 8985's time rule, which Linux runs by
    /// default): a resend lost again is found once something sent a quarter SRTT after it is
    /// delivered. Off, only the retransmission timeout finds it.
    pub rack: bool,
    /// Only whole segments while the congestion window holds the sender back
    /// (`whole_segments`), as Linux, which counts its window in segments (`tcp_cwnd_test`).
    /// Off, smoltcp's rule: it fills whatever room the window has, so a bulk sender whose
    /// window grows by a few bytes per ACK follows each full segment with a runt of those few
    /// bytes (42 % of the segments of paper 002's pass at 29 Mbit/s), each paying full headers.
    pub whole_segments: bool,
}

/// Defaults of `[tcp]`: today's Linux, as passengers' phones and servers run it.
pub const DEFAULT_INITIAL_RTO_MS: u64 = 1000;
/// See [`DEFAULT_INITIAL_RTO_MS`].
pub const DEFAULT_MIN_RTO_MS: u64 = 200;
/// See [`DEFAULT_INITIAL_RTO_MS`].
pub const DEFAULT_INITIAL_WINDOW_BYTES: usize = 14_600;
/// Default of `[tcp] sack`: on, as every Linux since 2.2 (`net.ipv4.tcp_sack`). The defaults
/// of the six host options are today's Linux; a file that models older hosts (PluriBus's
/// 2010 bus) turns them off in its own `[tcp]`.
pub const DEFAULT_SACK: bool = true;
/// Default of `[tcp] hystart`: on, as Linux's CUBIC (`tcp_cubic hystart=1`).
pub const DEFAULT_HYSTART: bool = true;
/// Default of `[tcp] linux_rto`: on, Linux's RTO rule.
pub const DEFAULT_LINUX_RTO: bool = true;
/// Default of `[tcp] byte_counting`: on, as Linux counts every segment an ACK covers.
pub const DEFAULT_BYTE_COUNTING: bool = true;
/// Default of `[tcp] rack`: on, as Linux (`net.ipv4.tcp_recovery = 1`).
pub const DEFAULT_RACK: bool = true;
/// Default of `[tcp] whole_segments`: on, as Linux sends no segment cut short by its window.
pub const DEFAULT_WHOLE_SEGMENTS: bool = true;

impl Default for TcpSpec {
    fn default() -> Self {
        TcpSpec {
            congestion: Congestion::Cubic,
            mss: DEFAULT_MSS,
            buffer_bytes: DEFAULT_BUFFER_KB as usize * 1000,
            initial_rto: Duration::from_millis(DEFAULT_INITIAL_RTO_MS),
            min_rto: Duration::from_millis(DEFAULT_MIN_RTO_MS),
            initial_window: DEFAULT_INITIAL_WINDOW_BYTES,
            sack: DEFAULT_SACK,
            hystart: DEFAULT_HYSTART,
            linux_rto: DEFAULT_LINUX_RTO,
            byte_counting: DEFAULT_BYTE_COUNTING,
            rack: DEFAULT_RACK,
            whole_segments: DEFAULT_WHOLE_SEGMENTS,
        }
    }
}

impl Scenario {
    /// Loads a scenario file; relative paths inside it are resolved against its directory.
    pub fn from_file(path: &Path) -> Result<Scenario, ScenarioError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| ScenarioError::Io { path: path.to_path_buf(), source })?;
        let base_dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        Scenario::from_str(&text, base_dir)
    }

    /// Parses scenario text; relative paths inside it are resolved against `base_dir`.
    pub fn from_str(text: &str, base_dir: &Path) -> Result<Scenario, ScenarioError> {
        let doc = toml::de::DeTable::parse(text).map_err(|e| ScenarioError::Syntax {
            line: doc::line_of(text, e.span().map_or(0, |s| s.start)),
            message: e.message().to_string(),
        })?;
        let mut raw = deserialize(&doc).map_err(|e| serde_error(text, &doc, &e))?;
        let raw_sweep = raw.sweep.take();
        let mut scenario = build_doc(text, &doc, base_dir, raw)?;
        if let Some(s) = raw_sweep {
            scenario.sweep = Some(sweep::expand(text, &doc, base_dir, s)?);
        }
        Ok(scenario)
    }

    /// The embedded default: the two-link bus of PluriBus section 6 (`scenarios/bus.toml`).
    pub fn default_bus() -> Scenario {
        // The embedded file names no other files and is parsed by a unit test
        // (`default_bus_is_the_paper_bus`), so this cannot fail at run time.
        Scenario::from_str(BUS_TOML, Path::new(".")).expect("embedded scenarios/bus.toml is valid")
    }

    /// The text of the embedded default scenario, for `braid sim` to print or save.
    pub fn default_bus_toml() -> &'static str {
        BUS_TOML
    }

    /// The scenarios to run: each sweep point with the value its keys were set to, or this
    /// scenario alone with `None` when there is no sweep.
    pub fn expand_sweep(&self) -> Vec<(Option<f64>, Scenario)> {
        match &self.sweep {
            Some(s) => s.values.iter().copied().map(Some).zip(s.points.iter().cloned()).collect(),
            None => vec![(None, self.clone())],
        }
    }
}

/// Deserialises the serde view of a (possibly sweep-modified) document.
fn deserialize(doc: &doc::Doc<'_>) -> Result<raw::RawScenario, toml::de::Error> {
    raw::RawScenario::deserialize(toml::Deserializer::from(doc.clone()))
}

/// Names the key and line of a serde error (unknown key: the key's span; wrong type: the value's).
fn serde_error(text: &str, doc: &doc::Doc<'_>, e: &toml::de::Error) -> ScenarioError {
    let pos = e.span().map_or(0, |s| s.start);
    ScenarioError::Invalid {
        key: doc::loc_at(doc, pos).name(),
        line: doc::line_of(text, pos),
        message: e.message().to_string(),
    }
}

/// Checks and types a deserialised document whose sweep has been taken out.
fn build_doc(
    text: &str,
    doc: &doc::Doc<'_>,
    base_dir: &Path,
    raw: raw::RawScenario,
) -> Result<Scenario, ScenarioError> {
    build::scenario(&build::Ctx { text, doc, base_dir }, raw)
}
