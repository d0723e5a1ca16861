//! The vehicle's position for the client daemon, as a GPS receiver gives it: a small gpsd in the
//! vehicle's namespace that sends every watcher a TPV report (gpsd's JSON protocol,
//! <https://gpsd.io/gpsd_json.html>) of the scenario's `[vehicle]` every
//! [`braid_sim::link::driveby::STEP`] of the emulator's clock, as the simulator tells its client
//! the position at the same times. The daemon reads it with its own gpsd client (`[location]`), so
//! a scheme with `location = true` runs location awareness end to end, gpsd protocol included.
//!
//! The route is laid along the equator, eastwards: there the daemon's projection
//! ([`braid_proto::location::Position::from_lat_lon`]) gives back the simulator's metres along
//! the road, so both learn the same map cells.

use crate::background::Background;
use crate::emulator::Clock;
use crate::netns::Netns;
use anyhow::Context as _;
use braid_proto::location::Position;
use braid_sim::link::driveby::{STEP, Vehicle};
use std::io::Write as _;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// A gpsd reporting the scenario's vehicle; stops when dropped.
pub struct GpsFeed {
    addr: SocketAddr,
    _thread: Background,
}

impl GpsFeed {
    /// Listens on a free port of `ns`'s loopback and reports `vehicle` at `clock`'s time.
    pub fn start(ns: &Netns, vehicle: Vehicle, clock: Clock) -> anyhow::Result<GpsFeed> {
        let listener = ns
            .enter(|| TcpListener::bind("127.0.0.1:0").context("binding the testbed's gpsd"))
            .with_context(|| format!("starting gpsd in namespace {}", ns.name()))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let thread = Background::spawn("testbed-gpsd", move |stop| serve(&listener, vehicle, clock, stop))?;
        Ok(GpsFeed { addr, _thread: thread })
    }

    /// Where the client daemon finds it (inside the vehicle's namespace).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

/// gpsd's TPV report of `vehicle` `t` after the emulator's start: a 2D fix (mode 2).
pub fn tpv_report(vehicle: &Vehicle, t: Duration) -> String {
    let pos = Position { x_m: vehicle.position_m(t), y_m: 0.0, vx_mps: vehicle.speed_mps, vy_mps: 0.0 };
    let (lat, lon, speed, track) = pos.to_lat_lon();
    serde_json::json!({
        "class": "TPV",
        "device": "testbed",
        "mode": 2,
        "lat": lat,
        "lon": lon,
        "speed": speed,
        "track": track,
    })
    .to_string()
}

fn serve(listener: &TcpListener, vehicle: Vehicle, clock: Clock, stop: &AtomicBool) {
    let mut watchers: Vec<TcpStream> = Vec::new();
    // The fix times, on the emulator's clock: every STEP from its start, as in the simulator.
    let mut next = Duration::ZERO;
    while !stop.load(Ordering::Relaxed) {
        while let Ok((mut s, _)) = listener.accept() {
            // gpsd greets every client with its version; a watcher's `?WATCH` is not waited for.
            let hello = r#"{"class":"VERSION","release":"braid-testbed","proto_major":3,"proto_minor":14}"#;
            if s.set_nonblocking(false).is_ok() && writeln!(s, "{hello}").is_ok() {
                watchers.push(s);
            }
        }
        let now = Duration::from_micros(clock.now().as_micros());
        if now >= next {
            let line = tpv_report(&vehicle, now);
            watchers.retain_mut(|s| writeln!(s, "{line}").is_ok());
            while next <= now {
                next += STEP;
            }
        }
        std::thread::sleep(next.saturating_sub(now).min(Duration::from_millis(20)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_is_what_the_daemon_reads_back_as_the_simulators_position() {
        let v = Vehicle { speed_mps: 22.2, start_m: -640.0, route_m: None };
        let t = Duration::from_secs(10);
        let line = tpv_report(&v, t);
        let v_json: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v_json["class"], "TPV");
        let (lat, lon) = (v_json["lat"].as_f64().unwrap(), v_json["lon"].as_f64().unwrap());
        let (speed, track) = (v_json["speed"].as_f64().unwrap(), v_json["track"].as_f64().unwrap());
        let pos = Position::from_lat_lon(lat, lon, speed, track).unwrap();
        assert!((pos.x_m - v.position_m(t)).abs() < 1e-6, "{pos:?} against {}", v.position_m(t));
        assert!((pos.vx_mps - 22.2).abs() < 1e-9 && pos.y_m.abs() < 1e-9, "{pos:?}");
    }
}
