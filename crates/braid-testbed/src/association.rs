//! Kernel MPTCP's WiFi endpoints follow the card's association, as a vehicle's network manager
//! does: an endpoint is added once the card has associated with an access point (and got its
//! address), and removed when it has lost it (NetworkManager manages MPTCP endpoints this way).
//!
//! Linux's in-kernel path manager opens a subflow for an endpoint only when a connection starts or
//! when the endpoint is added. With the WiFi endpoint configured once at the start, a connection
//! opened out of range sends its WiFi subflow's SYN into nothing, the subflow times out
//! (`ETIMEDOUT`) and is never tried again, and kernel MPTCP carries nothing over any later pass.
//! That is not what an operator who runs MPTCP on a vehicle gets, so the baseline would be unfairly
//! weak. braid's client gets no such help: it finds a returning uplink by probing it.

use crate::background::Background;
use crate::emulator::Clock;
use braid_sim::link::driveby::{DrivePass, STEP};
use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// One drive-by uplink whose MPTCP endpoint follows the association.
#[derive(Clone, Debug)]
pub struct Endpoint {
    /// Its address in the vehicle.
    pub addr: Ipv4Addr,
    /// Its interface in the vehicle.
    pub dev: String,
    /// The endpoint id (unique among the vehicle's endpoints).
    pub id: u8,
    /// The realised pass: when the card is associated.
    pub pass: Arc<DrivePass>,
}

/// Adds and removes the endpoints in a namespace as the passes' associations come and go; stops
/// (leaving the endpoints as they are) when dropped.
pub struct EndpointManager {
    _thread: Background,
}

impl EndpointManager {
    /// Follows `endpoints` in namespace `ns` on `clock`.
    pub fn start(ns: &str, endpoints: Vec<Endpoint>, clock: Clock) -> anyhow::Result<EndpointManager> {
        let ns = ns.to_string();
        let thread = Background::spawn("testbed-mptcp-endpoints", move |stop| follow(&ns, &endpoints, clock, stop))?;
        Ok(EndpointManager { _thread: thread })
    }
}

/// Whether the card is associated `t` after the emulator's start (false past the realised pass).
pub fn associated(pass: &DrivePass, t: Duration) -> bool {
    let step = (t.as_micros() / STEP.as_micros()) as usize;
    pass.usable.get(step).copied().unwrap_or(false)
}

fn follow(ns: &str, endpoints: &[Endpoint], clock: Clock, stop: &AtomicBool) {
    let mut configured = vec![false; endpoints.len()];
    while !stop.load(Ordering::Relaxed) {
        let now = Duration::from_micros(clock.now().as_micros());
        for (e, on) in endpoints.iter().zip(configured.iter_mut()) {
            let want = associated(&e.pass, now);
            if want == *on {
                continue;
            }
            let id = e.id.to_string();
            let addr = e.addr.to_string();
            let args: Vec<&str> = if want {
                vec!["-n", ns, "mptcp", "endpoint", "add", &addr, "dev", &e.dev, "id", &id, "subflow"]
            } else {
                vec!["-n", ns, "mptcp", "endpoint", "delete", "id", &id]
            };
            // A failure is logged, not retried every tick: the next change of association tries
            // again.
            match Command::new("ip").args(&args).output() {
                Ok(o) if !o.status.success() => {
                    tracing::warn!(ns, ?args, stderr = %String::from_utf8_lossy(&o.stderr).trim(), "ip mptcp endpoint failed");
                }
                Err(e) => tracing::warn!(ns, error = %e, "running ip mptcp endpoint"),
                Ok(_) => {}
            }
            *on = want;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_is_wanted_exactly_while_the_card_is_associated() {
        let pass = DrivePass { radio: Vec::new(), usable: vec![false, true, true, false], associations: Vec::new() };
        let at = |ms| associated(&pass, Duration::from_millis(ms));
        assert!(!at(0) && !at(99));
        assert!(at(100) && at(299));
        assert!(!at(300) && !at(10_000), "gone after the pass and past its end");
    }
}
