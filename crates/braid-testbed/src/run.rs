//! `braid testbed`: every contender of a scenario, every run, on real kernels over emulated links;
//! results in the simulator's types so that the same table, JSON, CSV and plots come out.

use crate::capture::StallWatch;
use crate::contender::{self, Service};
use crate::emulator::LinkReport;
use crate::hosts::HostTcp;
use crate::topology::Topology;
use crate::workload;
use anyhow::{Context, bail};
use braid_sim::link::driveby::DrivePass;
use braid_sim::results::{LinkResult, RunResult, SimReport};
use braid_sim::runner::aggregate;
use braid_sim::scenario::{Direction, Peer, Scenario, SchemeKind, SchemeSpec, WorkloadSpec};
use braid_sim::workload::FlowPlan;
use braid_sim::world::{DRAIN, FIRST_FLOW};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How to run a scenario on the testbed.
#[derive(Debug, Clone)]
pub struct TestbedOptions {
    /// Overrides the scenario's `runs`.
    pub runs: Option<u32>,
    /// Overrides the scenario's `seed`.
    pub seed: Option<u64>,
    /// Overrides the scenario's `duration_s` (the testbed runs in real time).
    pub duration: Option<Duration>,
    /// Contenders run side by side, each on its own namespaces and links (default: all of a run).
    pub jobs: Option<usize>,
    /// The braid binary, for braid contenders.
    pub braid_bin: PathBuf,
    /// Where configs and logs go (kept on failure).
    pub work_dir: PathBuf,
    /// Set to stop early (Ctrl-C): runs end, everything is cleaned up.
    pub stop: Arc<AtomicBool>,
}

/// Debian packages each contender and workload needs, by command.
const TOOLS: &[(&str, &str)] = &[
    ("ip", "iproute2"),
    ("curl", "curl"),
    ("nginx", "nginx-light"),
    ("iperf3", "iperf3"),
    ("mptcpize", "mptcpd"),
    ("kcptun-client", "kcptun"),
    ("kcptun-server", "kcptun"),
];

fn have(cmd: &str) -> bool {
    std::env::var_os("PATH").map(|p| std::env::split_paths(&p).any(|d| d.join(cmd).is_file())).unwrap_or(false)
        || Path::new("/usr/sbin").join(cmd).is_file()
}

/// The commands `scenario` needs that are missing, with the Debian package of each.
pub fn missing_tools(scenario: &Scenario) -> Vec<(&'static str, &'static str)> {
    let mut need = vec!["ip"];
    match scenario.workload {
        WorkloadSpec::Flows { .. } => need.extend(["curl", "nginx"]),
        _ => need.push("iperf3"),
    }
    for s in &scenario.schemes {
        match s.kind {
            SchemeKind::Peer(Peer::Mptcp) => need.push("mptcpize"),
            SchemeKind::Peer(Peer::Kcptun) => need.extend(["kcptun-client", "kcptun-server"]),
            _ => {}
        }
    }
    TOOLS.iter().filter(|(c, _)| need.contains(c) && !have(c)).copied().collect()
}

/// Checks that the testbed can run `scenario` here: namespaces, tools, a supported workload.
pub fn check(scenario: &Scenario) -> anyhow::Result<()> {
    crate::netns::available().map_err(|e| anyhow::anyhow!(e))?;
    let missing = missing_tools(scenario);
    if !missing.is_empty() {
        let pkgs: Vec<&str> = missing.iter().map(|m| m.1).collect();
        bail!(
            "missing {} (Debian: {}); `scripts/testbed-deps.sh` installs everything the testbed uses",
            missing.iter().map(|m| m.0).collect::<Vec<_>>().join(", "),
            pkgs.join(" ")
        );
    }
    if let WorkloadSpec::Flows { direction, .. } = scenario.workload
        && direction != Direction::Down
    {
        bail!(
            "workload.direction: the testbed runs `flows` as downloads (curl from nginx); \"{direction}\" is not supported yet"
        );
    }
    if scenario.sweep.is_some() {
        bail!("sweep: the testbed runs one point at a time; remove [sweep] or run it with `braid sim`");
    }
    for s in &scenario.schemes {
        if let SchemeKind::Braid { .. } = s.kind {
            braid_sim::world::engine_scheme(s)?;
        }
    }
    Ok(())
}

/// Runs every contender `runs` times; `progress(done, total)` after each.
pub fn run_testbed(
    scenario: &Scenario,
    opts: &TestbedOptions,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> anyhow::Result<SimReport> {
    check(scenario)?;
    let swept = crate::netns::sweep_stale();
    let swept_cgroups = crate::hosts::sweep_stale();
    if swept + swept_cgroups > 0 {
        tracing::warn!(namespaces = swept, cgroups = swept_cgroups, "removed what an earlier testbed run left");
    }
    // One set of end hosts for every contender and run; dropped (cgroup and program removed)
    // when this function returns, also on an error or Ctrl-C.
    let hosts = HostTcp::new(&scenario.tcp)?;
    let hosts = &hosts;
    let started = std::time::Instant::now();
    let runs = opts.runs.unwrap_or(scenario.runs).max(1);
    let seed0 = opts.seed.unwrap_or(scenario.seed);
    let duration = opts.duration.unwrap_or(scenario.duration);
    let jobs = opts.jobs.unwrap_or(scenario.schemes.len()).clamp(1, scenario.schemes.len().max(1));
    let total = runs as usize * scenario.schemes.len();
    let mut results: Vec<RunResult> = Vec::new();
    let mut done = 0;
    for run in 0..runs {
        let seed = seed0 + u64::from(run);
        for chunk in scenario.schemes.chunks(jobs) {
            if opts.stop.load(Ordering::Relaxed) {
                bail!("interrupted before run {run}");
            }
            let out: Vec<anyhow::Result<RunResult>> = std::thread::scope(|s| {
                let handles: Vec<_> = chunk
                    .iter()
                    .enumerate()
                    .map(|(k, scheme)| {
                        let dir = opts.work_dir.join(format!("run{run}-{}", scheme.name));
                        s.spawn(move || {
                            run_one(scenario, scheme, &format!("{run}{k}"), seed, run, duration, &dir, hosts, opts)
                                .with_context(|| format!("contender {} (run {run}, seed {seed})", scheme.name))
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(anyhow::anyhow!("panicked")))).collect()
            });
            if opts.stop.load(Ordering::Relaxed) {
                bail!("interrupted: the runs stopped early and their partial results are discarded");
            }
            for r in out {
                results.push(r?);
                done += 1;
                progress(done, total);
            }
        }
    }
    let aggregates = scenario
        .schemes
        .iter()
        .map(|s| {
            let mine: Vec<&RunResult> = results.iter().filter(|r| r.scheme == s.name).collect();
            aggregate(&s.name, None, &mine)
        })
        .collect();
    Ok(SimReport {
        scenario: format!("{} (testbed)", scenario.name),
        sweep_label: None,
        results: aggregates,
        runs: results,
        wall_s: started.elapsed().as_secs_f64(),
    })
}

#[allow(clippy::too_many_arguments)]
fn run_one(
    scenario: &Scenario,
    scheme: &SchemeSpec,
    tag: &str,
    seed: u64,
    run: u32,
    duration: Duration,
    dir: &Path,
    hosts: &HostTcp,
    opts: &TestbedOptions,
) -> anyhow::Result<RunResult> {
    let plan: Vec<_> = FlowPlan::new(&scenario.workload, seed, FIRST_FLOW, duration).collect();
    let service = match scenario.workload {
        WorkloadSpec::Flows { .. } => Service::Http { blob_bytes: plan.iter().map(|f| f.size).max().unwrap_or(1) },
        _ => Service::Iperf,
    };
    let mut topo = Topology::build(tag, &scenario.links, seed, dir)?;
    // Location awareness reads the vehicle's position from gpsd, as on a vehicle: a gpsd in the
    // vehicle's namespace plays the scenario's [vehicle] on the emulator's clock.
    let gps = match (scheme.location, scenario.vehicle) {
        (true, Some(v)) => Some(crate::gps::GpsFeed::start(&topo.van, v, topo.clock())?),
        (true, None) => anyhow::bail!("scheme {}: location = true needs a [vehicle] in the scenario", scheme.name),
        (false, _) => None,
    };
    let gpsd = gps.as_ref().map(crate::gps::GpsFeed::addr);
    let running = contender::start(&topo, scheme, service, &opts.braid_bin, hosts, gpsd, Duration::from_secs(30))?;
    // The workload's clock starts now, as the simulator's does after its links came up: flows
    // keep their planned offsets from here.
    let epoch = std::time::Instant::now() - FIRST_FLOW;
    let ns = running.client_ns(&topo);
    let stop = || opts.stop.load(Ordering::Relaxed);
    let before = Counters::read(&topo, ns);
    let mut r = RunResult {
        scheme: scheme.name.clone(),
        run,
        seed,
        sweep_value: None,
        flows: Vec::new(),
        goodput_kbps: None,
        goodput_kbps_series: Vec::new(),
        sender_cwnd_kb_series: Vec::new(),
        sender_rtt_ms_series: Vec::new(),
        residual_loss: 0.0,
        aqm_drops: 0.0,
        overhead: 0.0,
        coded_fraction: 0.0,
        recovered: 0,
        resent: 0,
        tcp_timeouts: 0,
        tcp_recoveries: 0,
        tcp_spurious_timeouts: 0,
        late_fraction: 0.0,
        reordered_fraction: 0.0,
        mean_hold_ms: 0.0,
        arrival_error_ms: 0.0,
        arrival_within_10ms: 0.0,
        cbr_loss: None,
        cbr_delay_ms: None,
        cbr_jitter_ms: None,
        links: Vec::new(),
        pass_share: None,
        longest_stall_ms: None,
        wifi_pass_mb: Vec::new(),
        datagrams: 0,
        simulated_s: duration.as_secs_f64(),
    };
    match scenario.workload {
        WorkloadSpec::Flows { .. } => {
            r.flows = workload::run_flows(ns, &running, &plan, epoch, duration + DRAIN, &stop);
        }
        WorkloadSpec::Bulk { direction, flows } => {
            // Stalls are timed where the data arrives, per TCP flow; MPTCP's subflows are flows
            // of their own there (one pausing while another carries is no stall), so not for it.
            let receiver = match direction {
                Direction::Down => Some(ns),
                Direction::Up => Some(&topo.web),
                Direction::Both => None,
            };
            let watch = receiver.filter(|_| !running.mptcp).map(StallWatch::start).transpose()?;
            let started = topo.clock().now();
            let res = bulk(ns, &running, direction, duration, flows)?;
            r.goodput_kbps = Some(res.goodput_kbps);
            r.goodput_kbps_series = res.goodput_kbps_series;
            r.sender_cwnd_kb_series = res.sender_cwnd_kb_series;
            r.sender_rtt_ms_series = res.sender_rtt_ms_series;
            r.longest_stall_ms = watch.map(StallWatch::finish).transpose()?.flatten();
            // The drive-by links' potential up to the test's end, from the emulator's start (the
            // simulator counts its run's whole potential too, time before the first flow included).
            let end = Duration::from_micros(started.as_micros()) + duration;
            let potential: f64 =
                topo.drive_passes().iter().flatten().map(|p| p.potential_bytes_between(Duration::ZERO, end)).sum();
            r.pass_share = (potential > 0.0).then(|| res.goodput_kbps * 1e3 / 8.0 * duration.as_secs_f64() / potential);
        }
        WorkloadSpec::Cbr { direction, rate_kbps, packet_bytes } => {
            let res = workload::run_iperf(
                ns,
                &running,
                direction,
                duration.as_secs().max(1),
                1,
                Some((rate_kbps, packet_bytes)),
            )?;
            r.goodput_kbps = Some(res.goodput_kbps);
            r.cbr_loss = res.udp_loss;
            r.cbr_jitter_ms = res.jitter_ms;
        }
    }
    // Let what is in flight land before reading counters.
    std::thread::sleep(Duration::from_millis(500));
    let after = Counters::read(&topo, ns);
    let emulated = Duration::from_micros(topo.clock().now().as_micros());
    let links = topo.stop();
    let mut estimates = Vec::new();
    let mut data_sent = Vec::new();
    if let Some(ctl) = &running.braid_control {
        let c = contender::braid_counters(&opts.braid_bin, ctl)?;
        estimates = c.uplink_estimates.clone();
        data_sent = c.uplink_data_sent.clone();
        r.residual_loss = 1.0 - c.delivered as f64 / c.tun_in.max(1) as f64;
        r.aqm_drops = c.aqm_dropped as f64 / c.tun_in.max(1) as f64;
        r.coded_fraction = c.coded_sent as f64 / (c.data_sent + c.resent + c.coded_sent).max(1) as f64;
        r.recovered = c.recovered;
        r.resent = c.resent;
    } else {
        // Without a tunnel, every packet an uplink drops or loses is a loss the end hosts see
        // (kcptun's ARQ hides them again, but its tunnel ends are not instrumented here).
        let (lost, offered) = links
            .iter()
            .flat_map(|l| [&l.up, &l.down])
            .fold((0, 0), |(l, o), s| (l + s.random_losses + s.outage_losses + s.queue_drops, o + s.offered_packets));
        r.residual_loss = if matches!(scheme.kind, SchemeKind::Peer(Peer::Kcptun)) {
            f64::NAN
        } else {
            lost as f64 / offered.max(1) as f64
        };
    }
    let on_air: u64 = links.iter().map(|l| l.up.offered_bytes + l.down.offered_bytes).sum();
    r.overhead = on_air as f64 / after.web_bytes.saturating_sub(before.web_bytes).max(1) as f64;
    r.tcp_timeouts = after.tcp.timeouts.saturating_sub(before.tcp.timeouts);
    r.tcp_recoveries = after.tcp.recoveries.saturating_sub(before.tcp.recoveries);
    r.tcp_spurious_timeouts = after.tcp.spurious_timeouts.saturating_sub(before.tcp.spurious_timeouts);
    r.datagrams = links.iter().map(|l| l.up.offered_packets + l.down.offered_packets).sum();
    r.links = link_results(&links, &scenario.links, emulated, &data_sent);
    r.wifi_pass_mb = wifi_pass_mb(&links, emulated);
    for l in &mut r.links {
        if let Some((_, cap, loss)) = estimates.iter().find(|e| e.0 == l.name) {
            l.est_capacity_down_kbps = *cap;
            l.est_loss_down = *loss;
        }
    }
    drop(running);
    Ok(r)
}

/// The bulk workload: iperf3 for `duration`. If its test does not begin (its control connection
/// did not come up, as at the lossy entry of a drive-by pass), it is started again for the time
/// left, as an application would reconnect; the time lost counts against the contender, since
/// goodput is over the whole `duration` (the simulator's flow starts once and its SYN is resent).
fn bulk(
    ns: &crate::netns::Netns,
    running: &contender::Running,
    direction: Direction,
    duration: Duration,
    flows: u32,
) -> anyhow::Result<workload::IperfResult> {
    let start = std::time::Instant::now();
    let total = duration.as_secs().max(1);
    loop {
        let left = total.saturating_sub(start.elapsed().as_secs());
        let e = match workload::run_iperf(ns, running, direction, left.max(1), flows, None) {
            Ok(mut res) => {
                let lost = total - left;
                res.goodput_kbps *= left as f64 / total as f64;
                res.goodput_kbps_series.splice(0..0, std::iter::repeat_n(0.0, lost as usize));
                for series in [&mut res.sender_cwnd_kb_series, &mut res.sender_rtt_ms_series] {
                    if !series.is_empty() {
                        series.splice(0..0, std::iter::repeat_n(0.0, lost as usize));
                    }
                }
                return Ok(res);
            }
            Err(e) => e,
        };
        if !e.is::<workload::NotStarted>() || start.elapsed() + Duration::from_secs(2) >= duration {
            return Err(e);
        }
        tracing::warn!(error = %e, "starting iperf3 again");
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// Counters read at the start and end of the workload.
struct Counters {
    /// Bytes in and out of the web server's interface: the passengers' traffic end to end.
    web_bytes: u64,
    /// The end hosts' TCP retransmission timeouts and loss recoveries (client namespace and
    /// web server together), from the kernels' `TcpExt` counters.
    tcp: braid_sim::host::TcpCounters,
}

impl Counters {
    fn read(topo: &Topology, client: &crate::netns::Netns) -> Counters {
        let web_bytes =
            contender::if_counter(&topo.web, "w0", "tx_bytes") + contender::if_counter(&topo.web, "w0", "rx_bytes");
        Counters { web_bytes, tcp: contender::tcp_events(client) + contender::tcp_events(&topo.web) }
    }
}

/// What each pass of each drive-by link carried down to the vehicle, MB of IP packets, in time
/// order (the simulator's `wifi_pass_mb`): the passes that began before the emulator stopped at
/// `emulated`.
fn wifi_pass_mb(links: &[LinkReport], emulated: Duration) -> Vec<f64> {
    DrivePass::mb_per_pass(
        links.iter().filter_map(|l| Some((&**l.pass.as_ref()?, &l.down_bytes_per_step[..]))),
        emulated,
    )
}

/// Per-link results; utilisation is over the whole time the links were up (`elapsed`).
/// `braid_data_sent`: braid's data packets per uplink id (empty for peers).
fn link_results(
    links: &[LinkReport],
    specs: &[braid_sim::scenario::LinkSpec],
    elapsed: Duration,
    braid_data_sent: &[u64],
) -> Vec<LinkResult> {
    // braid's share of data is its data packets per uplink, as in the simulator: a byte share
    // would count OEC's coded packets, which fill every link's spare capacity. Peers send no
    // coded packets, so theirs is bytes delivered.
    let braid_total: u64 = braid_data_sent.iter().sum();
    let data_total: u64 = links.iter().map(|l| l.up.delivered_bytes + l.down.delivered_bytes).sum();
    links
        .iter()
        .zip(specs)
        .enumerate()
        .map(|(i, (l, s))| {
            let left = |x: &braid_sim::link::LinkModelStats| x.delivered_packets + x.random_losses + x.outage_losses;
            let lost = l.up.random_losses + l.up.outage_losses + l.down.random_losses + l.down.outage_losses;
            LinkResult {
                name: l.name.clone(),
                utilisation_down: l.down.busy.as_secs_f64() / elapsed.as_secs_f64(),
                utilisation_up: l.up.busy.as_secs_f64() / elapsed.as_secs_f64(),
                data_share: if braid_total > 0 {
                    braid_data_sent.get(i).copied().unwrap_or(0) as f64 / braid_total as f64
                } else {
                    (l.up.delivered_bytes + l.down.delivered_bytes) as f64 / data_total.max(1) as f64
                },
                loss: lost as f64 / (left(&l.up) + left(&l.down)).max(1) as f64,
                queue_drops: (l.up.queue_drops + l.down.queue_drops) as f64
                    / (l.up.offered_packets + l.down.offered_packets).max(1) as f64,
                // braid's own estimates are filled in by the caller; peers have none.
                est_capacity_down_kbps: 0.0,
                true_capacity_down_kbps: s.down.rate.mean_kbps(),
                est_loss_down: 0.0,
                true_loss_down: s.down.loss.mean_loss(),
                down_kbps_series: Vec::new(),
                degraded_s: None,
            }
        })
        .collect()
}
