//! Simulator speed, measured side by side with a baseline in the same process (these machines are
//! shared and noisy, so only the ratio is meaningful from one run to another).
//!
//! - the full simulation: braid sessions + emulated links + smoltcp hosts, one run per scheme of the
//!   embedded bus scenario, single-threaded: simulated datagrams per wall-clock second;
//! - the baseline: the same number of datagrams pushed through the link model alone;
//! - the default scenario as `braid sim` runs it (10 runs x 5 schemes on all cores): wall time.
//!
//! `cargo bench -p braid-sim --bench sim_speed`

use braid_proto::Instant;
use braid_sim::link::{Delivery, Enqueue, LinkModel};
use braid_sim::runner::{RunOptions, run_scenario};
use braid_sim::scenario::Scenario;
use braid_sim::world;
use std::time::{Duration, Instant as WallClock};

fn main() {
    let sc = Scenario::default_bus();

    // Full simulation, one thread.
    let t0 = WallClock::now();
    let mut datagrams = 0u64;
    let mut simulated = 0.0;
    for scheme in &sc.schemes {
        let r = world::run(&sc, scheme, 0, sc.seed, None).expect("bus schemes run in the simulator");
        datagrams += r.datagrams;
        simulated += r.simulated_s;
    }
    let full = t0.elapsed().as_secs_f64();
    let full_rate = datagrams as f64 / full;

    // Baseline: the same number of datagrams through the bus's first link model alone.
    let t1 = WallClock::now();
    let mut link: LinkModel<u64> = LinkModel::new(&sc.links[0].down, 1);
    let mut now = Instant::ZERO;
    let mut out = 0u64;
    for i in 0..datagrams {
        now += Duration::from_micros(7_000);
        if let Enqueue::Dropped(_) = link.enqueue(now, 1000, i) {
            continue;
        }
        while let Some(d) = link.poll_deliver(now) {
            if let Delivery::Delivered { packet, .. } = d {
                out = out.wrapping_add(packet);
            }
        }
    }
    let base = t1.elapsed().as_secs_f64();
    let base_rate = datagrams as f64 / base;

    println!("simulated {simulated:.0} s of traffic, {datagrams} datagrams, in {full:.2} s wall (1 thread)");
    println!("  full simulation : {:>12.0} datagrams/s, {:>8.0} simulated s per wall s", full_rate, simulated / full);
    println!("  link model only : {:>12.0} datagrams/s (checksum {out})", base_rate);
    println!(
        "  ratio           : the full simulation costs {:.1}x the bare link model per datagram",
        base_rate / full_rate
    );

    // The default scenario as `braid sim` runs it.
    let t2 = WallClock::now();
    let report = run_scenario(&sc, &RunOptions::default(), &|_, _| {}).expect("default scenario runs");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "default scenario ({} runs x {} schemes, {cores} threads): {:.2} s wall",
        sc.runs,
        sc.schemes.len(),
        t2.elapsed().as_secs_f64()
    );
    assert_eq!(report.results.len(), sc.schemes.len());
}
