//! A Prometheus `/metrics` endpoint: a tiny HTTP/1.1 responder, one request per connection.

use super::Input;
use super::control::{Request, ask};
use super::status::DaemonStatus;
use anyhow::Context;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

/// Serves `/metrics` on `addr`.
pub async fn spawn(addr: SocketAddr, tx: mpsc::Sender<Input>) -> anyhow::Result<()> {
    let listener = TcpListener::bind(addr).await.with_context(|| format!("metrics: cannot listen on {addr}"))?;
    tokio::spawn(async move {
        loop {
            let Some((mut stream, _)) = super::control::accepted(listener.accept().await, "metrics").await else {
                continue;
            };
            let tx = tx.clone();
            tokio::spawn(async move {
                // The request head, bounded in size and time: nothing else of it is needed.
                let mut head = Vec::with_capacity(512);
                let mut buf = [0u8; 1024];
                let read = tokio::time::timeout(Duration::from_secs(5), async {
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 8192 {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                })
                .await;
                if read.is_err() {
                    return;
                }
                let line = head.split(|b| *b == b'\r').next().unwrap_or_default();
                let (code, body) = if line.starts_with(b"GET /metrics ") || line.starts_with(b"GET /metrics?") {
                    match ask(&tx, Request::Status { peer: None }).await.status {
                        Some(s) => ("200 OK", render(&s)),
                        None => ("503 Service Unavailable", String::from("stopping\n")),
                    }
                } else {
                    ("404 Not Found", String::from("try /metrics\n"))
                };
                let resp = format!(
                    "HTTP/1.1 {code}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(resp.as_bytes()).await;
            });
        }
    });
    Ok(())
}

/// A label value as the text format wants it: backslash, double quote and newline escaped.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// One metric family being written: its samples follow its HELP and TYPE lines.
struct Exposition(String);

impl Exposition {
    /// A family with its samples (label set, value). Samples whose value is unknown (`None`) or
    /// not finite are left out, as Prometheus asks, rather than exported as NaN; a family left
    /// with no sample is left out whole.
    fn family(&mut self, name: &str, kind: &str, help: &str, samples: impl IntoIterator<Item = (String, Option<f64>)>) {
        let samples: Vec<(String, f64)> =
            samples.into_iter().filter_map(|(l, v)| v.filter(|v| v.is_finite()).map(|v| (l, v))).collect();
        if samples.is_empty() {
            return;
        }
        let o = &mut self.0;
        let _ = writeln!(o, "# HELP braid_{name} {help}\n# TYPE braid_{name} {kind}");
        for (labels, v) in samples {
            let _ = writeln!(o, "braid_{name}{labels} {v}");
        }
    }

    fn counter(&mut self, name: &str, help: &str, samples: impl IntoIterator<Item = (String, Option<f64>)>) {
        self.family(name, "counter", help, samples);
    }

    fn gauge(&mut self, name: &str, help: &str, samples: impl IntoIterator<Item = (String, Option<f64>)>) {
        self.family(name, "gauge", help, samples);
    }
}

/// `{k="v",...}` from label pairs; empty without any.
fn labels(pairs: &[(&str, &str)]) -> String {
    if pairs.is_empty() {
        return String::new();
    }
    let inner: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}=\"{}\"", escape(v))).collect();
    format!("{{{}}}", inner.join(","))
}

fn one(v: f64) -> Vec<(String, Option<f64>)> {
    vec![(String::new(), Some(v))]
}

/// The Prometheus text exposition of a status snapshot, named by Prometheus conventions: base
/// units (seconds, bytes, bits per second), `_total` on counters, `_ratio` on fractions, no NaN
/// (an unknown value is left out). On a server, each vehicle's series carry `vehicle`, its
/// `[[peer]]` name, which stays the same across its sessions; uplinks are labelled `uplink`, the
/// name configured on the client, which the vehicle's probes carry to the server (`link<N>`, by
/// the id the vehicle sends, until one has arrived).
pub fn render(s: &DaemonStatus) -> String {
    use super::status::{SessionStatus, UplinkStatus};
    let mut e = Exposition(String::new());
    let server = s.role == "server";
    e.gauge(
        "build_info",
        "Always 1; the labels say which braid runs.",
        vec![(labels(&[("version", env!("CARGO_PKG_VERSION")), ("role", &s.role)]), Some(1.0))],
    );
    e.gauge("uptime_seconds", "Seconds since the daemon started.", one(s.uptime_s));
    e.counter("garbage_datagrams_total", "Datagrams dropped before any session.", one(s.garbage_datagrams as f64));
    e.counter("send_errors_total", "Datagram sends that failed.", one(s.send_errors as f64));
    let r = &s.rejected;
    e.counter(
        "rejected_datagrams_total",
        "Datagrams dropped by the crypto layer, by reason.",
        [
            ("bad_mac", r.bad_mac),
            ("replay", r.replay),
            ("unknown_session", r.unknown_session),
            ("malformed", r.malformed),
            ("rate_limited", r.rate_limited),
            ("unknown_key", r.unknown_key),
            ("expired", r.expired),
        ]
        .iter()
        .map(|(k, v)| (labels(&[("reason", k)]), Some(*v as f64))),
    );
    e.counter("handshakes_total", "Handshakes completed (new sessions and rekeys).", one(s.handshakes as f64));
    e.counter(
        "unknown_session_hints_total",
        "Unknown-session hints sent (server) or received (client).",
        one(s.unknown_session_hints as f64),
    );
    if server {
        e.counter(
            "cookie_replies_total",
            "Cookie replies sent instead of handshake responses (under load).",
            one(s.cookie_replies as f64),
        );
        e.counter(
            "sessions_refused_total",
            "New sessions refused because max_sessions were open.",
            one(s.sessions_refused as f64),
        );
        e.counter("sessions_expired_total", "Sessions dropped after being idle.", one(s.sessions_expired as f64));
        e.counter(
            "unroutable_packets_total",
            "Passenger packets from the TUN device that no session could take.",
            one(s.unroutable_packets as f64),
        );
        e.counter(
            "passenger_dropped_total",
            "Passenger packets out of a vehicle's session dropped by the server, by reason.",
            [("source_not_allowed", s.passenger_dropped.source_not_allowed), ("not_ip", s.passenger_dropped.not_ip)]
                .iter()
                .map(|(k, v)| (labels(&[("reason", k)]), Some(*v as f64))),
        );
    }
    e.gauge("sessions", "Open sessions.", one(s.sessions.len() as f64));

    // The session's labels: the vehicle's name on a server; a client has one session, its own.
    let who = |x: &SessionStatus| -> Vec<(&str, String)> {
        if server { vec![("vehicle", x.peer.clone())] } else { Vec::new() }
    };
    let with = |base: Vec<(&str, String)>, more: &[(&str, &str)]| {
        let mut pairs: Vec<(&str, &str)> = base.iter().map(|(k, v)| (*k, v.as_str())).collect();
        pairs.extend_from_slice(more);
        labels(&pairs)
    };
    let per_session = |f: &dyn Fn(&SessionStatus) -> Option<f64>| {
        s.sessions.iter().map(|x| (with(who(x), &[]), f(x))).collect::<Vec<_>>()
    };
    e.gauge(
        "session_info",
        "Always 1; the labels say the session's id (it changes when the vehicle joins again), cipher, recovery and scheduler.",
        s.sessions
            .iter()
            .map(|x| {
                let id = format!("{:04x}", x.id);
                let l = with(
                    who(x),
                    &[("session", &id), ("cipher", &x.cipher), ("recovery", &x.recovery), ("scheduler", &x.scheduler)],
                );
                (l, Some(1.0))
            })
            .collect::<Vec<_>>(),
    );
    e.gauge(
        "session_key_age_seconds",
        "Seconds since the session's keys were made.",
        per_session(&|x| Some(x.key_age_s)),
    );
    e.counter(
        "tun_packets_in_total",
        "Passenger packets taken from the TUN device.",
        per_session(&|x| Some(x.tun_in as f64)),
    );
    e.counter(
        "tun_packets_delivered_total",
        "Passenger packets delivered to the TUN device.",
        per_session(&|x| Some(x.delivered as f64)),
    );
    e.counter(
        "aqm_dropped_packets_total",
        "Passenger packets dropped by active queue management (the uplinks were congested).",
        per_session(&|x| Some(x.aqm_dropped as f64)),
    );
    e.counter(
        "data_packets_sent_total",
        "Data packets sent, first transmissions.",
        per_session(&|x| Some(x.data_sent as f64)),
    );
    e.counter("data_packets_resent_total", "Data packets sent again.", per_session(&|x| Some(x.data_resent as f64)));
    e.counter(
        "recovered_packets_total",
        "Packets recovered from coded packets.",
        per_session(&|x| Some(x.recovered as f64)),
    );
    e.counter(
        "malformed_datagrams_total",
        "Malformed datagrams dropped by a session.",
        per_session(&|x| Some(x.malformed as f64)),
    );

    let per_link = |f: &dyn Fn(&UplinkStatus) -> Option<f64>| {
        s.sessions
            .iter()
            .flat_map(|x| x.uplinks.iter().map(move |u| (with(who(x), &[("uplink", &u.name)]), f(u))))
            .collect::<Vec<_>>()
    };
    e.gauge(
        "uplink_active",
        "1 when the uplink is active.",
        per_link(&|u| Some(f64::from(u8::from(u.state == "active")))),
    );
    e.gauge(
        "uplink_present",
        "1 when the uplink has a socket (client: interface up and addressed).",
        per_link(&|u| Some(f64::from(u8::from(u.present)))),
    );
    e.gauge("uplink_rtt_seconds", "Smoothed round-trip time from probes.", per_link(&|u| u.rtt_ms.map(|v| v / 1e3)));
    e.gauge(
        "uplink_relative_one_way_delay_seconds",
        "Outgoing one-way delay relative to the fastest uplink (the clock offset cancels).",
        per_link(&|u| u.owd_ms.map(|v| v / 1e3)),
    );
    e.gauge("uplink_tx_loss_ratio", "Outgoing loss as the peer measures it (0 to 1).", per_link(&|u| Some(u.tx_loss)));
    e.gauge("uplink_rx_loss_ratio", "Incoming loss as measured here (0 to 1).", per_link(&|u| Some(u.rx_loss)));
    // A capacity of 0 means no estimate yet: left out, not exported as a zero rate.
    let known = |kbps: f64| (kbps > 0.0).then_some(kbps * 1e3);
    e.gauge(
        "uplink_tx_capacity_bits_per_second",
        "Outgoing capacity estimate.",
        per_link(&|u| known(u.tx_capacity_kbps)),
    );
    e.gauge(
        "uplink_rx_capacity_bits_per_second",
        "Incoming capacity estimate.",
        per_link(&|u| known(u.rx_capacity_kbps)),
    );
    e.gauge(
        "uplink_data_share_ratio",
        "This uplink's share of the data packets sent (0 to 1).",
        per_link(&|u| Some(u.data_share)),
    );
    e.gauge("uplink_weight", "Scheduler weight.", per_link(&|u| Some(f64::from(u.weight))));
    e.counter("uplink_data_packets_sent_total", "Data packets sent.", per_link(&|u| Some(u.data_sent as f64)));
    e.counter("uplink_coded_packets_sent_total", "Coded packets sent.", per_link(&|u| Some(u.coded_sent as f64)));
    e.counter(
        "uplink_datagrams_received_total",
        "Datagrams received.",
        per_link(&|u| Some(u.datagrams_received as f64)),
    );
    e.counter(
        "uplink_sent_bytes_total",
        "Bytes sent, braid's headers included.",
        per_link(&|u| Some(u.bytes_sent as f64)),
    );
    e.counter(
        "uplink_received_bytes_total",
        "Bytes received, braid's headers included.",
        per_link(&|u| Some(u.bytes_received as f64)),
    );
    e.counter("uplink_downs_total", "Times the uplink went down.", per_link(&|u| Some(u.downs as f64)));
    e.counter(
        "uplink_data_sent_bytes_total",
        "Bytes of data datagrams sent (braid header and payload): what the coding budget is a fraction of.",
        per_link(&|u| Some(u.data_bytes as f64)),
    );
    e.counter(
        "uplink_coded_sent_bytes_total",
        "Bytes of coded datagrams sent (braid header and payload).",
        per_link(&|u| Some(u.coded_bytes as f64)),
    );
    // No bound: left out rather than exported as NaN or infinity.
    e.gauge(
        "uplink_coding_budget_ratio",
        "Coded bytes allowed per data byte sent on the uplink.",
        per_link(&|u| u.coding_budget),
    );
    e.counter(
        "uplink_coded_withheld_total",
        "Coded packets the uplink's coding budget held back.",
        per_link(&|u| Some(u.coded_withheld as f64)),
    );
    // Uplinks without a monthly allowance are left out.
    e.gauge(
        "uplink_billing_period_bytes",
        "Bytes both ways on the uplink this billing period (uplinks with a monthly_budget).",
        per_link(&|u| u.monthly.as_ref().map(|m| m.used_bytes as f64)),
    );
    e.gauge(
        "uplink_monthly_budget_bytes",
        "The uplink's monthly data allowance.",
        per_link(&|u| u.monthly.as_ref().map(|m| m.budget_bytes as f64)),
    );
    e.counter(
        "uplink_queue_corrections_total",
        "Times the peer's echoes showed a deeper queue than the model and corrected it.",
        per_link(&|u| Some(u.queue_corrections as f64)),
    );
    e.0
}

#[cfg(test)]
mod tests;
