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
#[derive(Debug, Clone, Default)]
pub struct IperfResult {
    /// Received goodput, kbit/s (summed over directions for `both`).
    pub goodput_kbps: f64,
    /// Received goodput in each second, kbit/s, where the receiver's own figures are at hand (a
    /// download: the client receives); empty otherwise.
    pub goodput_kbps_series: Vec<f64>,
    /// The TCP senders' congestion window in each second, kB, summed over streams, as the
    /// sender's kernel reported it to iperf3 (`snd_cwnd`): the server's for a download (fetched
    /// with `--get-server-output`), the client's for an upload; empty for `both` and UDP.
    pub sender_cwnd_kb_series: Vec<f64>,
    /// Their smoothed round trip in each second, ms (`rtt`), the largest over streams.
    pub sender_rtt_ms_series: Vec<f64>,
    /// UDP: fraction of datagrams lost.
    pub udp_loss: Option<f64>,
    /// UDP: jitter, ms.
    pub jitter_ms: Option<f64>,
}

/// How long iperf3 may run past its test time (connecting, and the closing exchange of results
/// over its control connection) before it is interrupted.
const IPERF_GRACE: Duration = Duration::from_secs(10);

/// How long an interrupted iperf3 has to print what it measured before it is killed.
const IPERF_INTERRUPTED_GRACE: Duration = Duration::from_secs(5);

/// Runs `c` and returns what it printed and whether it had to be interrupted: past `limit` it
/// gets SIGINT, on which iperf3 prints its JSON with what it measured so far (a contender whose
/// path is gone, a drive-by link out of range when iperf3 exchanges its results, must neither hang
/// the testbed nor lose the run's figures); if it still runs after that, it is killed.
fn output_within(mut c: Command, limit: Duration) -> anyhow::Result<(Vec<u8>, bool)> {
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
    let mut interrupted = false;
    loop {
        if child.try_wait()?.is_some() {
            break;
        }
        if !interrupted && start.elapsed() > limit {
            let pid = nix::unistd::Pid::from_raw(child.id() as i32);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT);
            interrupted = true;
        }
        if interrupted && start.elapsed() > limit + IPERF_INTERRUPTED_GRACE {
            let _ = child.kill();
            let _ = child.wait();
            anyhow::bail!(
                "iperf3 still running {} s after its test time and did not stop on SIGINT, killed",
                (IPERF_GRACE + IPERF_INTERRUPTED_GRACE).as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = reader.join().map_err(|_| anyhow::anyhow!("reading iperf3's output failed"))?;
    Ok((out, interrupted))
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
            if udp.is_none() {
                c.arg("--get-server-output");
            }
        }
        Direction::Both => {
            c.arg("--bidir");
        }
        Direction::Up => {}
    }
    if let Some((kbps, bytes)) = udp {
        c.args(["-u", "-b", &format!("{}K", kbps.round() as u64), "-l", &bytes.to_string()]);
    }
    let (stdout, interrupted) = output_within(c, Duration::from_secs(secs) + IPERF_GRACE)?;
    let v: Value = serde_json::from_slice(&stdout).map_err(|e| anyhow::anyhow!("iperf3 printed no JSON ({e})"))?;
    parse_iperf(&v, direction, secs, udp.is_some(), interrupted)
}

/// iperf3 ended before its test began (its control connection was refused or reset, or never
/// came up): nothing was measured, and a retry may still measure the rest of the run.
#[derive(Debug)]
pub struct NotStarted(pub String);

impl std::fmt::Display for NotStarted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "iperf3 did not start its test: {}", self.0)
    }
}

impl std::error::Error for NotStarted {}

/// What iperf3's JSON says; `interrupted` if it was stopped with SIGINT after its test time.
fn parse_iperf(
    v: &Value,
    direction: Direction,
    secs: u64,
    udp: bool,
    interrupted: bool,
) -> anyhow::Result<IperfResult> {
    let intervals = v["intervals"].as_array().map_or(&[][..], |a| a.as_slice());
    // A download's client is the receiver: its own figures are the receiver's whether or not the
    // test ran to its end and the closing exchange with the server took place (on a drive-by
    // link the path may be gone by then). Its bytes count over the whole test time.
    let receiver_is_client = direction == Direction::Down && !udp;
    if let Some(err) = v["error"].as_str() {
        if intervals.is_empty() {
            return Err(NotStarted(err.to_string()).into());
        }
        if !receiver_is_client {
            if interrupted {
                anyhow::bail!(
                    "iperf3 could not exchange its results within {} s of its test time ({err}), and the client did not receive, so nothing was measured at the receiver",
                    IPERF_GRACE.as_secs()
                );
            }
            anyhow::bail!("iperf3: {err}");
        }
        tracing::warn!("iperf3 ended with \"{err}\"; counting what its client received");
    }
    let end = &v["end"];
    if udp {
        let sum = &end["sum"];
        return Ok(IperfResult {
            goodput_kbps: sum["bits_per_second"].as_f64().unwrap_or(0.0) / 1e3,
            udp_loss: sum["lost_percent"].as_f64().map(|p| p / 100.0),
            jitter_ms: sum["jitter_ms"].as_f64(),
            ..IperfResult::default()
        });
    }
    let series = if receiver_is_client {
        intervals.iter().filter_map(|i| i["sum"]["bits_per_second"].as_f64()).map(|b| b / 1e3).collect()
    } else {
        Vec::new()
    };
    let received = &end["sum_received"];
    let mut bps = if receiver_is_client {
        received["bytes"].as_f64().unwrap_or(0.0) * 8.0 / secs.max(1) as f64
    } else {
        received["bits_per_second"].as_f64().unwrap_or(0.0)
    };
    if direction == Direction::Both {
        bps += end["sum_received_bidir_reverse"]["bits_per_second"].as_f64().unwrap_or(0.0);
    }
    let (sender_cwnd_kb_series, sender_rtt_ms_series) = match direction {
        Direction::Down => sender_series(&v["server_output_json"]["intervals"]),
        Direction::Up => sender_series(&v["intervals"]),
        Direction::Both => (Vec::new(), Vec::new()),
    };
    Ok(IperfResult {
        goodput_kbps: bps / 1e3,
        goodput_kbps_series: series,
        sender_cwnd_kb_series,
        sender_rtt_ms_series,
        udp_loss: None,
        jitter_ms: None,
    })
}

/// The sending side's `intervals` of iperf3's JSON: per interval, the streams' `snd_cwnd`
/// summed (kB) and the largest `rtt` (ms). Empty where the sender's figures are missing (an
/// iperf3 server without `-J`, or one that could not send them).
fn sender_series(intervals: &Value) -> (Vec<f64>, Vec<f64>) {
    let intervals = intervals.as_array().map_or(&[][..], |a| a.as_slice());
    let mut cwnd = Vec::with_capacity(intervals.len());
    let mut rtt = Vec::with_capacity(intervals.len());
    for i in intervals {
        let streams = i["streams"].as_array().map_or(&[][..], |a| a.as_slice());
        let senders: Vec<&Value> = streams.iter().filter(|s| s["snd_cwnd"].is_number()).collect();
        if senders.is_empty() {
            return (Vec::new(), Vec::new());
        }
        cwnd.push(senders.iter().filter_map(|s| s["snd_cwnd"].as_f64()).sum::<f64>() / 1e3);
        rtt.push(senders.iter().filter_map(|s| s["rtt"].as_f64()).fold(0.0, f64::max) / 1e3);
    }
    (cwnd, rtt)
}

#[cfg(test)]
mod tests {
    use super::{parse_curl, parse_iperf};
    use braid_sim::scenario::Direction;
    use serde_json::json;

    #[test]
    fn an_interrupted_download_keeps_what_its_client_received_and_an_upload_says_why_it_has_nothing() {
        let v = json!({
            "error": "interrupt - the client has terminated",
            "intervals": [{"sum": {"bits_per_second": 8e6}}, {"sum": {"bits_per_second": 4e6}}],
            "end": {"sum_received": {"bytes": 1_500_000, "bits_per_second": 1e6}},
        });
        let r = parse_iperf(&v, Direction::Down, 2, false, true).unwrap();
        assert_eq!(r.goodput_kbps, 6000.0, "the bytes over the test time, not over the time until the interrupt");
        assert_eq!(r.goodput_kbps_series, vec![8000.0, 4000.0]);
        let e = parse_iperf(&v, Direction::Up, 2, false, true).unwrap_err().to_string();
        assert!(e.contains("could not exchange its results"), "{e}");
        // Not interrupted, an upload's error is iperf3's own; a download that ended early
        // still counts what it received, over the whole test time.
        let e = parse_iperf(&v, Direction::Up, 2, false, false).unwrap_err().to_string();
        assert!(e.starts_with("iperf3: interrupt"), "{e}");
        assert_eq!(parse_iperf(&v, Direction::Down, 4, false, false).unwrap().goodput_kbps, 3000.0);
        // A test that never began is told apart, so that the run can try again.
        let refused = json!({"error": "unable to receive control message: Connection reset by peer", "intervals": []});
        let e = parse_iperf(&refused, Direction::Down, 2, false, false).unwrap_err();
        assert!(e.is::<super::NotStarted>(), "{e}");
        let ok = json!({"end": {"sum_received": {"bytes": 1, "bits_per_second": 2e6}}});
        assert_eq!(parse_iperf(&ok, Direction::Up, 2, false, false).unwrap().goodput_kbps, 2000.0);
    }

    #[test]
    fn curl_output_counts_only_complete_ranges() {
        assert_eq!(parse_curl("206 1500 0.251", 1500), Some(0.251));
        assert_eq!(parse_curl("200 1 0.1", 1), Some(0.1));
        assert_eq!(parse_curl("206 1000 0.251", 1500), None);
        assert_eq!(parse_curl("000 0 5.0", 10), None);
        assert_eq!(parse_curl("", 10), None);
    }

    #[test]
    fn the_senders_window_and_round_trip_come_from_whichever_side_sends() {
        // A download: the client receives, and the server's own JSON (`--get-server-output`)
        // carries the sender's kernel figures; two streams' windows add, the larger RTT counts.
        let sender = |cwnd: u64, rtt: u64| json!({"snd_cwnd": cwnd, "rtt": rtt, "sender": true});
        let down = json!({
            "intervals": [{"sum": {"bits_per_second": 8e6}, "streams": [{"bytes": 1, "sender": false}]}],
            "end": {"sum_received": {"bytes": 1_000_000}},
            "server_output_json": {"intervals": [
                {"streams": [sender(590_000, 420_000), sender(10_000, 205_000)]},
                {"streams": [sender(700_000, 650_000)]},
            ]},
        });
        let r = parse_iperf(&down, Direction::Down, 1, false, false).unwrap();
        assert_eq!(r.sender_cwnd_kb_series, vec![600.0, 700.0]);
        assert_eq!(r.sender_rtt_ms_series, vec![420.0, 650.0]);
        // An upload: the client sends, its own intervals say so. An iperf3 server that printed
        // text instead leaves a download's series empty rather than wrong.
        let up = json!({
            "intervals": [{"streams": [sender(14_480, 60_000)]}],
            "end": {"sum_received": {"bits_per_second": 2e6}},
        });
        let r = parse_iperf(&up, Direction::Up, 1, false, false).unwrap();
        assert_eq!((r.sender_cwnd_kb_series, r.sender_rtt_ms_series), (vec![14.48], vec![60.0]));
        let text = json!({"end": {"sum_received": {"bytes": 1}}, "server_output_text": "[  5] ..."});
        assert!(parse_iperf(&text, Direction::Down, 1, false, false).unwrap().sender_cwnd_kb_series.is_empty());
    }
}
