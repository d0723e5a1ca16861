//! The real workload: every planned flow is one `curl` fetching that many bytes (an HTTP range of
//! one file) from nginx, started at its planned time; `bulk` is iperf3 for the whole run; `cbr` is
//! iperf3 in UDP mode. Flow completion time is curl's `time_total`: from the start of the TCP
//! connection (the SYN) to the last byte, as the simulator measures it.

use crate::contender::Running;
use crate::netns::Netns;
use braid_sim::results::FlowRecord;
use braid_sim::scenario::Direction;
use braid_sim::workload::PlannedFlow;
use serde_json::Value;
use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;

/// `program` in the clients' namespace and cgroup (the end hosts' `[tcp]`), under `mptcpize`
/// for MPTCP.
fn client_command(ns: &Netns, run: &Running, program: &str) -> Command {
    let cgroup = run.cgroup.as_deref();
    let mut c = if run.mptcp {
        let mut c = ns.command_in(cgroup, "mptcpize");
        c.args(["run", program]);
        c
    } else {
        ns.command_in(cgroup, program)
    };
    c.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::null());
    c
}

/// Runs every planned flow at its start time (from `epoch`) and waits for all of them, each at
/// most until `deadline` after `epoch`. `stop` is polled between starts (Ctrl-C).
pub fn run_flows(
    ns: &Netns,
    run: &Running,
    plan: &[PlannedFlow],
    epoch: std::time::Instant,
    deadline: Duration,
    stop: &dyn Fn() -> bool,
) -> Vec<FlowRecord> {
    let url = format!("http://{}/blob", run.target);
    let (tx, rx) = mpsc::channel::<(usize, Option<f64>)>();
    let mut started = 0;
    for (i, f) in plan.iter().enumerate() {
        if stop() {
            break;
        }
        if let Some(wait) = (epoch + f.start).checked_duration_since(std::time::Instant::now()) {
            std::thread::sleep(wait);
        }
        let left = deadline.saturating_sub(epoch.elapsed()).as_secs_f64().max(1.0);
        let mut c = client_command(ns, run, "curl");
        c.args(["-s", "-o", "/dev/null", "-w", "%{http_code} %{size_download} %{time_total}", "--max-time"])
            .arg(format!("{left:.1}"))
            .arg("-r")
            .arg(format!("0-{}", f.size - 1))
            .arg(&url);
        let (tx, size) = (tx.clone(), f.size);
        std::thread::spawn(move || {
            let fct = c.output().ok().and_then(|o| parse_curl(&String::from_utf8_lossy(&o.stdout), size));
            let _ = tx.send((i, fct));
        });
        started += 1;
    }
    drop(tx);
    let mut fct = vec![None; started];
    for (i, t) in rx.iter() {
        fct[i] = t;
    }
    plan.iter()
        .zip(fct)
        .map(|(f, fct_s)| FlowRecord {
            size_bytes: f.size,
            start_s: f.start.as_secs_f64(),
            fct_s,
            incomplete: fct_s.is_none(),
        })
        .collect()
}

/// curl's `-w "%{http_code} %{size_download} %{time_total}"`: the time if the whole range came.
fn parse_curl(out: &str, size: u64) -> Option<f64> {
    let mut it = out.split_whitespace();
    let code: u32 = it.next()?.parse().ok()?;
    let got: u64 = it.next()?.parse().ok()?;
    let t: f64 = it.next()?.parse().ok()?;
    (matches!(code, 200 | 206) && got == size).then_some(t)
}

/// What iperf3 measured.
#[derive(Debug, Clone, Copy, Default)]
pub struct IperfResult {
    /// Received goodput, kbit/s (summed over directions for `both`).
    pub goodput_kbps: f64,
    /// UDP: fraction of datagrams lost.
    pub udp_loss: Option<f64>,
    /// UDP: jitter, ms.
    pub jitter_ms: Option<f64>,
}

/// How long iperf3 may run past its test time (connecting, and the closing exchange of results
/// over its control connection) before the run is given up.
const IPERF_GRACE: Duration = Duration::from_secs(30);

/// Runs `c` and returns what it printed, or an error once it ran longer than `limit` (it is
/// killed): a contender whose path is gone (a drive-by link out of range when iperf3 exchanges
/// its results) must not hang the testbed.
fn output_within(mut c: Command, limit: Duration) -> anyhow::Result<Vec<u8>> {
    use std::io::Read;
    let mut child = c.spawn()?;
    let mut out = child.stdout.take();
    // Read while it runs: iperf3's JSON can outgrow a pipe's buffer.
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(o) = out.as_mut() {
            let _ = o.read_to_end(&mut buf);
        }
        buf
    });
    let start = std::time::Instant::now();
    loop {
        if child.try_wait()?.is_some() {
            break;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            anyhow::bail!(
                "iperf3 still running {} s after its test time, killed (did the path go away before it could exchange results?)",
                IPERF_GRACE.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    reader.join().map_err(|_| anyhow::anyhow!("reading iperf3's output failed"))
}

/// Runs iperf3 against the contender's target for `secs`: TCP with `flows` parallel streams, or
/// UDP at `udp_kbps` with `udp_bytes` datagrams.
pub fn run_iperf(
    ns: &Netns,
    run: &Running,
    direction: Direction,
    secs: u64,
    flows: u32,
    udp: Option<(f64, u32)>,
) -> anyhow::Result<IperfResult> {
    let mut c = client_command(ns, run, "iperf3");
    c.args(["-J", "-c", &run.target.ip().to_string(), "-p", &run.target.port().to_string(), "-t", &secs.to_string()]);
    c.args(["-P", &flows.max(1).to_string()]);
    match direction {
        Direction::Down => {
            c.arg("-R");
        }
        Direction::Both => {
            c.arg("--bidir");
        }
        Direction::Up => {}
    }
    if let Some((kbps, bytes)) = udp {
        c.args(["-u", "-b", &format!("{}K", kbps.round() as u64), "-l", &bytes.to_string()]);
    }
    let stdout = output_within(c, Duration::from_secs(secs) + IPERF_GRACE)?;
    let v: Value = serde_json::from_slice(&stdout).map_err(|e| anyhow::anyhow!("iperf3 printed no JSON ({e})"))?;
    if let Some(err) = v["error"].as_str() {
        anyhow::bail!("iperf3: {err}");
    }
    let end = &v["end"];
    if udp.is_some() {
        let sum = &end["sum"];
        return Ok(IperfResult {
            goodput_kbps: sum["bits_per_second"].as_f64().unwrap_or(0.0) / 1e3,
            udp_loss: sum["lost_percent"].as_f64().map(|p| p / 100.0),
            jitter_ms: sum["jitter_ms"].as_f64(),
        });
    }
    let mut bps = end["sum_received"]["bits_per_second"].as_f64().unwrap_or(0.0);
    if direction == Direction::Both {
        bps += end["sum_received_bidir_reverse"]["bits_per_second"].as_f64().unwrap_or(0.0);
    }
    Ok(IperfResult { goodput_kbps: bps / 1e3, udp_loss: None, jitter_ms: None })
}

#[cfg(test)]
mod tests {
    use super::parse_curl;

    #[test]
    fn curl_output_counts_only_complete_ranges() {
        assert_eq!(parse_curl("206 1500 0.251", 1500), Some(0.251));
        assert_eq!(parse_curl("200 1 0.1", 1), Some(0.1));
        assert_eq!(parse_curl("206 1000 0.251", 1500), None);
        assert_eq!(parse_curl("000 0 5.0", 10), None);
        assert_eq!(parse_curl("", 10), None);
    }
}
