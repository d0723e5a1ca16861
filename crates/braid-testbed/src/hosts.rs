//! The end hosts' TCP: a scenario's `[tcp]` applied to the real kernel TCP of the testbed's end
//! hosts (curl, nginx and iperf3 in the riders', web and, for MPTCP, van namespaces), the same
//! for every contender, so that the testbed runs the hosts the simulator models.
//!
//! | `[tcp]` key | how the kernel is told |
//! | --- | --- |
//! | `congestion` | `congctl` on every route of the end hosts' namespaces |
//! | `initial_window_bytes` | `initcwnd` (and `initrwnd` above 10 segments) on the same routes |
//! | `min_rto_ms` | `rto_min` on the same routes (iproute2 locks it, so the kernel uses it) |
//! | `mss` | `advmss` on the same routes, when it is not the default |
//! | `initial_rto_ms` | a BPF `sock_ops` program ([`braid_bpf`]) on a cgroup the end hosts run in |
//! | `buffer_kb` | not applied: the kernel autotunes its buffers ([`unapplied`] says so) |
//! | `sack`, `hystart`, `linux_rto`, `byte_counting`, `rack`, `whole_segments` | nothing to apply: the kernels run Linux's SACK recovery, CUBIC's HyStart, Linux's RTO rule, its per-segment window growth, RACK and a window counted in whole segments, all by default, and so do the simulator's hosts with these keys' defaults (true); a file that turns one off models an older host the kernels are not, and [`unapplied`] says so |
//!
//! Defaults need nothing special: with `initial_rto_ms = 1000` there is no cgroup and no BPF,
//! and default windows, RTO bound and MSS are not set on the routes.
//!
//! Congestion control goes on the routes, always, because a namespace starts with the machine's
//! default (BBR on some) and may only switch its own default to an algorithm the machine allows
//! unprivileged sockets (`net.ipv4.tcp_allowed_congestion_control`, often without CUBIC); a
//! route's `congctl` has no such limit and applies to every connection on that route.
//!
//! Also, always: `net.ipv4.tcp_syn_linear_timeouts = 0` where the kernel has it (Linux 6.7+
//! retransmits the first four SYNs at a constant interval; RFC 2988 and RFC 6298 5.5 double
//! the timer each time, as the passengers' phones and the simulator's hosts do).

use crate::netns::{self, Netns};
use anyhow::{Context, bail};
use braid_bpf::TimeoutInit;
use braid_sim::scenario::{DEFAULT_BUFFER_KB, DEFAULT_INITIAL_RTO_MS, DEFAULT_MIN_RTO_MS, DEFAULT_MSS, TcpSpec};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The segment size in which RFC 3390 (4380 bytes = 3 segments) and RFC 6928 (14600 bytes = 10
/// segments) state their initial windows; Linux counts its window in segments.
pub const RFC_SEGMENT_BYTES: usize = 1460;
/// Linux's initial congestion window and initial receive window, segments (`TCP_INIT_CWND`,
/// `TCP_DEFAULT_INIT_RCVWND`).
const LINUX_INITIAL_SEGMENTS: u32 = 10;

/// Initial congestion window in segments for a window of `bytes`: `ceil(bytes / 1460)`, so
/// that RFC 3390's 4380 bytes are 3 segments and RFC 6928's 14600 bytes are Linux's 10.
pub fn initial_window_segments(bytes: usize) -> u32 {
    bytes.div_ceil(RFC_SEGMENT_BYTES).clamp(1, u32::MAX as usize) as u32
}

/// The `[tcp]` keys the testbed cannot apply to real kernels, each with why (for a warning).
pub fn unapplied(spec: &TcpSpec) -> Vec<String> {
    let mut v = Vec::new();
    let linux = [
        ("sack", spec.sack, "SACK loss recovery"),
        ("hystart", spec.hystart, "CUBIC's HyStart"),
        ("linux_rto", spec.linux_rto, "Linux's RTO rule"),
        ("byte_counting", spec.byte_counting, "window growth by every segment acknowledged"),
        ("rack", spec.rack, "RACK"),
        ("whole_segments", spec.whole_segments, "a window counted in whole segments"),
    ];
    for (key, on, what) in linux {
        if !on {
            v.push(format!(
                "[tcp] {key} = false is not applied on the testbed: the end hosts' kernels run {what} whatever the file says; \
                 only the simulator's hosts model its absence"
            ));
        }
    }
    if spec.buffer_bytes != DEFAULT_BUFFER_KB as usize * 1000 {
        v.push(format!(
            "[tcp] buffer_kb = {} is not applied on the testbed: the end hosts' kernels size their socket buffers themselves \
             (net.ipv4.tcp_rmem / tcp_wmem autotuning)",
            spec.buffer_bytes as f64 / 1000.0
        ));
    }
    v
}

/// The end hosts' TCP settings, ready to apply to namespaces. Holds the cgroup (and its BPF
/// program) that carries a non-default initial RTO; dropping it detaches the program, ends
/// what is left in the cgroup and removes it.
#[derive(Debug)]
pub struct HostTcp {
    spec: TcpSpec,
    cgroup: Option<Cgroup>,
}

impl HostTcp {
    /// Prepares `spec`: for a non-default `initial_rto_ms`, creates the cgroup and attaches the
    /// program. Errors name the key and what the kernel lacks.
    pub fn new(spec: &TcpSpec) -> anyhow::Result<HostTcp> {
        let cgroup = if spec.initial_rto != Duration::from_millis(DEFAULT_INITIAL_RTO_MS) {
            let ms = spec.initial_rto.as_millis();
            let what = format!("[tcp] initial_rto_ms = {ms}");
            Some(Cgroup::create(spec.initial_rto).with_context(|| {
                format!(
                    "{what}: Linux sets the initial RTO only through a BPF sock_ops program on a cgroup-v2 directory \
                     (needs root, CONFIG_BPF_SYSCALL, CONFIG_CGROUP_BPF and a mounted cgroup2 file system); \
                     remove the key to run today's 1 s"
                )
            })?)
        } else {
            None
        };
        Ok(HostTcp { spec: *spec, cgroup })
    }

    /// The cgroup-v2 directory the end hosts' processes must be started in
    /// ([`Netns::command_in`]); `None` when the initial RTO is the kernel's own.
    pub fn cgroup(&self) -> Option<&Path> {
        self.cgroup.as_ref().map(|c| c.dir.as_path())
    }

    /// Whether process `pid` runs in the end hosts' cgroup (true when there is none), to check
    /// that a server really started there.
    pub fn holds(&self, pid: u32) -> bool {
        let Some(c) = &self.cgroup else { return true };
        std::fs::read_to_string(c.dir.join("cgroup.procs"))
            .is_ok_and(|procs| procs.split_whitespace().any(|p| p == pid.to_string()))
    }

    /// The initial RTO the kernel is told, in jiffies, when it is not its default.
    pub fn initial_rto_jiffies(&self) -> Option<u32> {
        self.cgroup.as_ref().map(|c| c.program.jiffies())
    }

    /// Route options for `[tcp]`: `congctl`, and those of `initcwnd`, `initrwnd`, `rto_min`,
    /// `advmss` that differ from the kernel's defaults.
    pub fn route_options(&self) -> Vec<(&'static str, String)> {
        let s = &self.spec;
        // The scenario's names are the kernel's.
        let mut v = vec![("congctl", s.congestion.to_string())];
        let iw = initial_window_segments(s.initial_window);
        if iw != LINUX_INITIAL_SEGMENTS {
            v.push(("initcwnd", iw.to_string()));
        }
        // A receiver opens with 10 segments; a larger initial window would be capped by it,
        // which the simulator's hosts (window = buffer) are not.
        if iw > LINUX_INITIAL_SEGMENTS {
            v.push(("initrwnd", iw.to_string()));
        }
        if s.min_rto != Duration::from_millis(DEFAULT_MIN_RTO_MS) {
            v.push(("rto_min", format!("{}ms", s.min_rto.as_millis())));
        }
        // The default MSS is the simulator's stand-in for a tunnel's MSS clamp; on the testbed
        // each path has its real one (braid clamps to its TUN MTU), so only an explicit
        // host MSS is set.
        if s.mss != DEFAULT_MSS {
            v.push(("advmss", s.mss.to_string()));
        }
        v
    }

    /// Applies `[tcp]` to an end host's namespace: SYN backoff (sysctl), then the route options
    /// on every unicast route of its main and policy tables. Call it after the contender has
    /// added its routes.
    pub fn apply(&self, ns: &Netns) -> anyhow::Result<()> {
        ns.sh(
            "f=/proc/sys/net/ipv4/tcp_syn_linear_timeouts; if [ -e $f ]; then sysctl -qw net.ipv4.tcp_syn_linear_timeouts=0; fi",
        )?;
        let opts = self.route_options();
        let routes: Value = serde_json::from_str(&ns.sh("ip -j -4 route show table all")?)
            .with_context(|| format!("parsing `ip -j route` in {}", ns.name()))?;
        for r in routes.as_array().into_iter().flatten() {
            if let Some(args) = route_change(r, &opts)? {
                let mut cmd = vec!["ip", "netns", "exec", ns.name(), "ip", "route", "change"];
                cmd.extend(args.iter().map(String::as_str));
                netns::run(&cmd).with_context(|| {
                    let avail = ns.sh("cat /proc/sys/net/ipv4/tcp_available_congestion_control").unwrap_or_default();
                    format!(
                        "[tcp] on the routes of {} (congestion = \"{}\"; this kernel offers: {})",
                        ns.name(),
                        self.spec.congestion,
                        avail.trim()
                    )
                })?;
            }
        }
        Ok(())
    }
}

/// The arguments of `ip route change` that re-issue route `r` (one object of `ip -j route`)
/// with `opts` added; `None` for routes the end hosts' TCP never uses (local, broadcast, ...).
pub fn route_change(r: &Value, opts: &[(&str, String)]) -> anyhow::Result<Option<Vec<String>>> {
    let field = |k: &str| r.get(k).map(|v| v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string()));
    if field("type").is_some_and(|t| t != "unicast") || field("table").is_some_and(|t| t == "local") {
        return Ok(None);
    }
    let Some(dst) = field("dst") else { bail!("route without a destination: {r}") };
    let mut a = vec![dst];
    for (key, arg) in [
        ("gateway", "via"),
        ("dev", "dev"),
        ("table", "table"),
        ("protocol", "proto"),
        ("scope", "scope"),
        ("prefsrc", "src"),
        ("metric", "metric"),
    ] {
        if let Some(v) = field(key) {
            a.extend([arg.to_string(), v]);
        }
    }
    if r["flags"].as_array().is_some_and(|f| f.iter().any(|x| x == "onlink")) {
        a.push("onlink".into());
    }
    // A route change replaces every metric: refuse to drop one this code does not know.
    for m in r["metrics"].as_array().into_iter().flatten().filter_map(Value::as_object) {
        if let Some(k) = m.keys().find(|k| !opts.iter().any(|(o, _)| o == k)) {
            bail!("route {} carries metric {k}, which re-issuing it would drop", a[0]);
        }
    }
    for (k, v) in opts {
        a.extend([k.to_string(), v.clone()]);
    }
    Ok(Some(a))
}

/// A cgroup-v2 directory of this process with the initial-RTO program attached, named as the
/// testbed's namespaces are, `braidtb<pid>-tcp<n>`, so that [`sweep_stale`] can tell a dead
/// run's.
#[derive(Debug)]
struct Cgroup {
    dir: PathBuf,
    program: TimeoutInit,
}

impl Cgroup {
    fn create(initial_rto: Duration) -> anyhow::Result<Cgroup> {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let root = cgroup2_root()?;
        let hz = kernel_hz()?;
        // The kernel's timers tick HZ times a second; round up, so the timeout is never
        // shorter than asked.
        let jiffies = (initial_rto.as_micros() * u128::from(hz)).div_ceil(1_000_000);
        let jiffies = u32::try_from(jiffies).unwrap_or(u32::MAX);
        let dir =
            root.join(format!("{}{}-tcp{}", netns::PREFIX, std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed)));
        std::fs::create_dir(&dir).with_context(|| format!("creating cgroup {}", dir.display()))?;
        match TimeoutInit::attach(&dir, jiffies) {
            Ok(program) => {
                tracing::info!(cgroup = %dir.display(), jiffies, hz, "initial RTO program attached");
                Ok(Cgroup { dir, program })
            }
            Err(e) => {
                let _ = std::fs::remove_dir(&dir);
                Err(e.into())
            }
        }
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        remove_cgroup(&self.dir);
    }
}

/// Ends every process still in the cgroup and removes it (which detaches what is attached).
fn remove_cgroup(dir: &Path) {
    // cgroup.kill (Linux 5.14+) ends every process at once; otherwise one by one.
    if std::fs::write(dir.join("cgroup.kill"), "1").is_err() {
        for pid in std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default().split_whitespace() {
            let _ = netns::run(&["kill", "-9", pid]);
        }
    }
    // Killed processes leave the cgroup a moment later.
    let deadline = Instant::now() + Duration::from_secs(2);
    while std::fs::remove_dir(dir).is_err() && dir.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Removes the cgroups left by testbed runs whose process is gone (a crash, `kill -9`): their
/// programs went with the process; the directories and any process in them go now. Returns how
/// many it removed.
pub fn sweep_stale() -> usize {
    let Ok(root) = cgroup2_root() else { return 0 };
    let Ok(entries) = std::fs::read_dir(&root) else { return 0 };
    let mut n = 0;
    for e in entries.flatten() {
        if netns::left_by_dead_run(&e.file_name().to_string_lossy()) {
            remove_cgroup(&e.path());
            n += 1;
        }
    }
    n
}

/// Where the cgroup-v2 hierarchy is mounted (`/sys/fs/cgroup` on a unified system,
/// `/sys/fs/cgroup/unified` on a hybrid one).
fn cgroup2_root() -> anyhow::Result<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").context("reading /proc/self/mounts")?;
    mounts
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.get(2) == Some(&"cgroup2"))
        .and_then(|f| f.get(1).map(PathBuf::from))
        .context("no cgroup2 file system is mounted (mount -t cgroup2 none /sys/fs/cgroup/unified)")
}

/// The kernel's timer frequency, HZ (jiffies per second; not USER_HZ, which `getconf CLK_TCK`
/// reports): from the kernel's own configuration (/proc/config.gz, or `/boot/config-<release>`),
/// else measured from the jiffies counter in /proc/timer_list.
pub fn kernel_hz() -> anyhow::Result<u32> {
    let from_config = || -> Option<u32> {
        let text = match netns::run(&["gzip", "-dc", "/proc/config.gz"]) {
            Ok(t) => t,
            Err(_) => {
                let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
                std::fs::read_to_string(format!("/boot/config-{}", release.trim())).ok()?
            }
        };
        hz_from_config(&text)
    };
    from_config().or_else(measure_hz).context(
        "cannot tell the kernel's HZ: no /proc/config.gz or /boot/config-<release>, and /proc/timer_list is not readable",
    )
}

/// `CONFIG_HZ=<n>` of a kernel configuration.
pub fn hz_from_config(config: &str) -> Option<u32> {
    config.lines().find_map(|l| l.strip_prefix("CONFIG_HZ=")).and_then(|v| v.trim().parse().ok())
}

/// HZ from the jiffies counter's advance over a quarter second, snapped to the values Linux
/// offers (100, 250, 300, 1000) when within 10 % of one.
fn measure_hz() -> Option<u32> {
    let jiffies = || -> Option<u64> {
        let t = std::fs::read_to_string("/proc/timer_list").ok()?;
        t.lines().find_map(|l| l.strip_prefix("jiffies: ")).and_then(|v| v.trim().parse().ok())
    };
    let (j0, t0) = (jiffies()?, Instant::now());
    std::thread::sleep(Duration::from_millis(250));
    let (j1, t1) = (jiffies()?, Instant::now());
    let hz = j1.saturating_sub(j0) as f64 / (t1 - t0).as_secs_f64();
    let snapped = [100.0, 250.0, 300.0, 1000.0].into_iter().find(|s| (hz / s - 1.0).abs() < 0.1);
    Some(snapped.unwrap_or(hz).round() as u32).filter(|&h| h > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_sim::scenario::Congestion;
    use serde_json::json;

    #[test]
    fn initial_windows_in_segments_follow_the_rfcs() {
        assert_eq!(initial_window_segments(4380), 3); // RFC 3390
        assert_eq!(initial_window_segments(14_600), 10); // RFC 6928, Linux's default
        assert_eq!(initial_window_segments(1460), 1);
        assert_eq!(initial_window_segments(5000), 4);
        assert_eq!(initial_window_segments(1), 1);
    }

    #[test]
    fn defaults_set_only_congestion_control_and_era_hosts_more() {
        let today = HostTcp { spec: TcpSpec::default(), cgroup: None };
        assert_eq!(today.route_options(), vec![("congctl", "cubic".to_string())]);
        let era = TcpSpec {
            initial_window: 4380,
            min_rto: Duration::from_millis(300),
            congestion: Congestion::Reno,
            ..TcpSpec::default()
        };
        let era = HostTcp { spec: era, cgroup: None };
        assert_eq!(
            era.route_options(),
            vec![("congctl", "reno".to_string()), ("initcwnd", "3".to_string()), ("rto_min", "300ms".to_string())]
        );
        let big = HostTcp { spec: TcpSpec { initial_window: 30_000, mss: 1200, ..TcpSpec::default() }, cgroup: None };
        assert_eq!(
            big.route_options(),
            vec![
                ("congctl", "cubic".to_string()),
                ("initcwnd", "21".to_string()),
                ("initrwnd", "21".to_string()),
                ("advmss", "1200".to_string())
            ]
        );
    }

    #[test]
    fn routes_are_reissued_whole_with_the_options() {
        let opts = [("initcwnd", "3".to_string()), ("rto_min", "200ms".to_string())];
        let r =
            json!({"dst":"10.0.0.0/24","dev":"r0","protocol":"kernel","scope":"link","prefsrc":"10.0.0.2","flags":[]});
        assert_eq!(
            route_change(&r, &opts).unwrap().unwrap().join(" "),
            "10.0.0.0/24 dev r0 proto kernel scope link src 10.0.0.2 initcwnd 3 rto_min 200ms"
        );
        let r = json!({"dst":"default","gateway":"10.0.0.1","dev":"r0","table":"100","metric":11,"flags":["onlink"]});
        assert_eq!(
            route_change(&r, &opts).unwrap().unwrap().join(" "),
            "default via 10.0.0.1 dev r0 table 100 metric 11 onlink initcwnd 3 rto_min 200ms"
        );
        // Applying twice keeps the same options.
        let r = json!({"dst":"default","dev":"up0","flags":[],"metrics":[{"initcwnd":3,"rto_min":200}]});
        assert!(route_change(&r, &opts).unwrap().is_some());
        // Local and broadcast routes are not the hosts' paths.
        for r in [
            json!({"type":"local","dst":"10.0.0.2","dev":"r0","table":"local","flags":[]}),
            json!({"type":"broadcast","dst":"10.0.0.255","dev":"r0","table":"local","flags":[]}),
        ] {
            assert_eq!(route_change(&r, &opts).unwrap(), None);
        }
        // A metric the change would silently drop is an error, not a loss.
        let r = json!({"dst":"default","dev":"up0","flags":[],"metrics":[{"mtu":1400}]});
        assert!(route_change(&r, &opts).is_err());
        assert!(route_change(&json!({"dev":"x"}), &opts).is_err());
    }

    #[test]
    fn hz_comes_from_the_kernel_config() {
        assert_eq!(hz_from_config("# CONFIG_HZ_100 is not set\nCONFIG_HZ_250=y\nCONFIG_HZ=250\n"), Some(250));
        assert_eq!(hz_from_config("CONFIG_HZ_1000=y\n"), None);
    }

    #[test]
    fn buffer_kb_and_older_hosts_are_unapplied() {
        assert!(unapplied(&TcpSpec::default()).is_empty(), "the default hosts are the kernels'");
        let w = unapplied(&TcpSpec { buffer_bytes: 128_000, ..TcpSpec::default() });
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("buffer_kb = 128"), "{w:?}");
        let w = unapplied(&TcpSpec { sack: false, rack: false, ..TcpSpec::default() });
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].contains("sack = false") && w[1].contains("rack = false"), "{w:?}");
    }
}
