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
            let Ok((mut stream, _)) = listener.accept().await else { continue };
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
                    match ask(&tx, Request::Status).await.status {
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

/// The Prometheus text exposition of a status snapshot.
pub fn render(s: &DaemonStatus) -> String {
    let mut o = String::new();
    let mut metric = |name: &str, help: &str, kind: &str, samples: Vec<(String, f64)>| {
        let _ = writeln!(o, "# HELP braid_{name} {help}\n# TYPE braid_{name} {kind}");
        for (labels, v) in samples {
            let _ = writeln!(o, "braid_{name}{labels} {v}");
        }
    };
    metric("up_seconds", "Seconds since the daemon started.", "gauge", vec![(String::new(), s.uptime_s)]);
    metric(
        "garbage_datagrams_total",
        "Datagrams dropped before any session.",
        "counter",
        vec![(String::new(), s.garbage_datagrams as f64)],
    );
    metric("send_errors_total", "Datagram sends that failed.", "counter", vec![(String::new(), s.send_errors as f64)]);
    let r = &s.rejected;
    metric(
        "rejected_datagrams_total",
        "Datagrams dropped by the crypto layer, by reason.",
        "counter",
        [
            ("bad_mac", r.bad_mac),
            ("replay", r.replay),
            ("unknown_session", r.unknown_session),
            ("malformed", r.malformed),
            ("rate_limited", r.rate_limited),
            ("unknown_key", r.unknown_key),
        ]
        .iter()
        .map(|(k, v)| (format!("{{reason=\"{k}\"}}"), *v as f64))
        .collect(),
    );
    metric("handshakes_total", "Handshakes completed.", "counter", vec![(String::new(), s.handshakes as f64)]);
    metric("sessions", "Open sessions.", "gauge", vec![(String::new(), s.sessions.len() as f64)]);
    let per_session = |f: &dyn Fn(&super::status::SessionStatus) -> f64| {
        s.sessions.iter().map(|x| (format!("{{session=\"{:04x}\"}}", x.id), f(x))).collect::<Vec<_>>()
    };
    metric(
        "tun_in_total",
        "Passenger packets taken from the TUN device.",
        "counter",
        per_session(&|x| x.tun_in as f64),
    );
    metric(
        "aqm_dropped_total",
        "Passenger packets dropped by active queue management (the uplinks were congested).",
        "counter",
        per_session(&|x| x.aqm_dropped as f64),
    );
    metric(
        "delivered_total",
        "Passenger packets delivered to the TUN device.",
        "counter",
        per_session(&|x| x.delivered as f64),
    );
    metric("recovered_total", "Packets recovered from coded packets.", "counter", per_session(&|x| x.recovered as f64));
    metric(
        "malformed_total",
        "Malformed datagrams dropped by a session.",
        "counter",
        per_session(&|x| x.malformed as f64),
    );
    let per_link = |f: &dyn Fn(&super::status::UplinkStatus) -> f64| {
        s.sessions
            .iter()
            .flat_map(|x| {
                x.uplinks.iter().map(move |u| (format!("{{session=\"{:04x}\",uplink=\"{}\"}}", x.id, u.name), f(u)))
            })
            .collect::<Vec<_>>()
    };
    metric(
        "uplink_active",
        "1 when the uplink is active.",
        "gauge",
        per_link(&|u| f64::from(u8::from(u.state == "active"))),
    );
    metric("uplink_rtt_seconds", "Smoothed RTT.", "gauge", per_link(&|u| u.rtt_ms.unwrap_or(f64::NAN) / 1e3));
    metric(
        "uplink_owd_seconds",
        "One-way delay relative to the fastest uplink.",
        "gauge",
        per_link(&|u| u.owd_ms.unwrap_or(f64::NAN) / 1e3),
    );
    metric("uplink_tx_loss", "Outgoing loss estimate.", "gauge", per_link(&|u| u.tx_loss));
    metric("uplink_rx_loss", "Incoming loss estimate.", "gauge", per_link(&|u| u.rx_loss));
    metric("uplink_tx_capacity_bps", "Outgoing capacity estimate.", "gauge", per_link(&|u| u.tx_capacity_kbps * 1e3));
    metric("uplink_rx_capacity_bps", "Incoming capacity estimate.", "gauge", per_link(&|u| u.rx_capacity_kbps * 1e3));
    metric("uplink_data_sent_total", "Data packets sent.", "counter", per_link(&|u| u.data_sent as f64));
    metric("uplink_coded_sent_total", "Coded packets sent.", "counter", per_link(&|u| u.coded_sent as f64));
    metric("uplink_bytes_sent_total", "Bytes sent.", "counter", per_link(&|u| u.bytes_sent as f64));
    metric("uplink_data_bytes_total", "Bytes of data datagrams sent.", "counter", per_link(&|u| u.data_bytes as f64));
    metric(
        "uplink_coded_bytes_total",
        "Bytes of coded datagrams sent.",
        "counter",
        per_link(&|u| u.coded_bytes as f64),
    );
    metric(
        "uplink_coding_budget",
        "Coded bytes allowed per data byte sent (NaN: no bound).",
        "gauge",
        per_link(&|u| u.coding_budget.unwrap_or(f64::NAN)),
    );
    metric(
        "uplink_coded_withheld_total",
        "Coded packets the coding budget held back.",
        "counter",
        per_link(&|u| u.coded_withheld as f64),
    );
    metric("uplink_bytes_received_total", "Bytes received.", "counter", per_link(&|u| u.bytes_received as f64));
    metric("uplink_downs_total", "Times the uplink went down.", "counter", per_link(&|u| u.downs as f64));
    metric(
        "uplink_queue_corrections_total",
        "Times the peer's echoes showed a deeper queue than the model and corrected it.",
        "counter",
        per_link(&|u| u.queue_corrections as f64),
    );
    o
}
