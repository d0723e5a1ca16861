//! The user-space link emulator (docs/design.md 7). This kernel has no netem, so each uplink is an L3
//! hop between two namespaces made of two TUN devices, one on each side, and two threads per
//! direction that carry every IP packet through the simulator's own [`LinkModel`] in real time:
//! the same rate or trace, drop-tail queue, propagation delay, loss process, schedule and outages
//! as `braid sim`, so braid and the peers it is compared with meet exactly the links the
//! simulator models.
//!
//! * A reader thread takes each packet off the source TUN and offers it to the model at the
//!   current time ([`LinkModel::enqueue`] fixes its whole fate at once).
//! * A writer thread sleeps until the model's next event ([`LinkModel::poll_timeout`]), or until
//!   the reader wakes it, and writes every packet due by then into the destination TUN.
//!
//! Both run at a low real-time priority where the host allows it ([`crate::realtime`]), so
//! that a busy machine delays them less.
//!
//! Time 0 of every model is the emulator's epoch, so traces and schedules start with the run.

use braid_proto::Instant;
use braid_sim::link::driveby::{DrivePass, STEP};
use braid_sim::link::{Delivery, Enqueue, LinkModel, LinkModelStats};
use braid_sim::scenario::LinkSpec;
use std::io::ErrorKind;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;
use tun_rs::{InterruptEvent, SyncDevice};

/// Largest packet a TUN hands over (the devices' MTU is 1500; room for a larger one so that it
/// is carried whole rather than truncated).
const MAX_PACKET: usize = 65_536;

/// How long a reader blocks before it looks at the stop flag again.
const READ_TIMEOUT: Duration = Duration::from_millis(200);

/// Real time as the link model's [`Instant`]: microseconds since the emulator's epoch.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    epoch: std::time::Instant,
}

impl Clock {
    /// A clock whose zero is now.
    pub fn start() -> Clock {
        Clock { epoch: std::time::Instant::now() }
    }

    /// Now.
    pub fn now(&self) -> Instant {
        Instant::from_micros(self.epoch.elapsed().as_micros() as u64)
    }

    /// The wall-clock instant of `t`.
    pub fn to_std(&self, t: Instant) -> std::time::Instant {
        self.epoch + Duration::from_micros(t.as_micros())
    }
}

/// How far ahead a drive-by link's pass is realised: longer than any testbed run. Within a run the
/// pass is the simulator's for the same seed (realising further ahead changes nothing before).
pub const DRIVE_BY_HORIZON: Duration = Duration::from_secs(4 * 3600);

/// One uplink to emulate: its spec, the seed of its randomness, and its two TUN devices.
pub struct EmulatedLink {
    /// The scenario's link (both directions).
    pub spec: LinkSpec,
    /// Seed of this link's loss processes (each direction derives its own).
    pub seed: u64,
    /// The vehicle side: what the van sends into it goes up.
    pub van: SyncDevice,
    /// The server side: what the lan sends into it goes down.
    pub lan: SyncDevice,
}

/// Counters of one emulated link, per direction.
#[derive(Debug, Clone)]
pub struct LinkReport {
    /// Link name.
    pub name: String,
    /// Vehicle to server.
    pub up: LinkModelStats,
    /// Server to vehicle.
    pub down: LinkModelStats,
    /// Packets the writer could not hand to the far side's kernel (should stay 0).
    pub write_errors: u64,
    /// A drive-by link's realised pass (the simulator's for the same seed and index).
    pub pass: Option<Arc<DrivePass>>,
    /// Bytes delivered to the vehicle in each [`STEP`] of the emulator's clock, for a drive-by
    /// link (what each pass carried, [`DrivePass::bytes_per_coverage`]); empty otherwise.
    pub down_bytes_per_step: Vec<u64>,
}

struct Direction {
    model: Mutex<DirState>,
    wake: Condvar,
}

struct DirState {
    model: LinkModel<Vec<u8>>,
    stopped: bool,
    write_errors: u64,
    /// Bytes delivered per [`STEP`], kept only where someone reads them (a drive-by link's
    /// down direction).
    bytes_per_step: Option<Vec<u64>>,
}

/// Running emulated links; stopped (threads joined, devices closed) by [`Emulator::stop`] or on
/// drop.
pub struct Emulator {
    names: Vec<String>,
    passes: Vec<Option<Arc<DrivePass>>>,
    dirs: Vec<(Arc<Direction>, Arc<Direction>)>,
    interrupt: Arc<InterruptEvent>,
    threads: Vec<JoinHandle<()>>,
    clock: Clock,
}

impl Emulator {
    /// Starts carrying packets over `links`, with time 0 at `clock`'s epoch.
    pub fn start(links: Vec<EmulatedLink>, clock: Clock) -> anyhow::Result<Emulator> {
        let interrupt = Arc::new(InterruptEvent::new()?);
        let mut emu =
            Emulator { names: Vec::new(), passes: Vec::new(), dirs: Vec::new(), interrupt, threads: Vec::new(), clock };
        for (i, l) in links.into_iter().enumerate() {
            // The same seed derivation as the simulator's world, so a testbed run meets the loss
            // pattern the simulator's run of the same seed met.
            let up_seed = l.seed.wrapping_mul(1_000_003).wrapping_add(2 * i as u64 + 1);
            let down_seed = l.seed.wrapping_mul(1_000_003).wrapping_add(2 * i as u64 + 2);
            // A drive-by link is realised for the same seed and index as in the simulator, once
            // per run: the run's potential and what each pass carried are read from it.
            let run = l.spec.for_run(l.seed, i, DRIVE_BY_HORIZON);
            let per_step = run.pass.is_some();
            let new_dir = |spec, seed, count: bool| {
                Arc::new(Direction {
                    model: Mutex::new(DirState {
                        model: LinkModel::new(spec, seed),
                        stopped: false,
                        write_errors: 0,
                        bytes_per_step: count.then(Vec::new),
                    }),
                    wake: Condvar::new(),
                })
            };
            let up = new_dir(&run.up, up_seed, false);
            let down = new_dir(&run.down, down_seed, per_step);
            let van = Arc::new(l.van);
            let lan = Arc::new(l.lan);
            van.set_nonblocking(true)?;
            lan.set_nonblocking(true)?;
            let name = l.spec.name.clone();
            emu.spawn_direction(format!("{name}-up"), van.clone(), lan.clone(), up.clone())?;
            emu.spawn_direction(format!("{name}-down"), lan, van, down.clone())?;
            emu.names.push(name);
            emu.passes.push(run.pass.map(Arc::new));
            emu.dirs.push((up, down));
        }
        Ok(emu)
    }

    fn spawn_direction(
        &mut self,
        name: String,
        from: Arc<SyncDevice>,
        to: Arc<SyncDevice>,
        dir: Arc<Direction>,
    ) -> anyhow::Result<()> {
        let (clock, interrupt) = (self.clock, self.interrupt.clone());
        let d = dir.clone();
        self.threads.push(std::thread::Builder::new().name(format!("rd-{name}")).spawn(move || {
            crate::realtime::promote_current_thread();
            read_loop(&from, &d, &interrupt, clock)
        })?);
        self.threads.push(std::thread::Builder::new().name(format!("wr-{name}")).spawn(move || {
            crate::realtime::promote_current_thread();
            write_loop(&to, &dir, clock)
        })?);
        Ok(())
    }

    /// The counters so far.
    pub fn report(&self) -> Vec<LinkReport> {
        self.names
            .iter()
            .zip(&self.dirs)
            .zip(&self.passes)
            .map(|((name, (up, down)), pass)| {
                let (u, d) = (lock(&up.model), lock(&down.model));
                LinkReport {
                    name: name.clone(),
                    up: u.model.stats().clone(),
                    down: d.model.stats().clone(),
                    write_errors: u.write_errors + d.write_errors,
                    pass: pass.clone(),
                    down_bytes_per_step: d.bytes_per_step.clone().unwrap_or_default(),
                }
            })
            .collect()
    }

    /// Each link's realised drive-by pass, in link order (`None` for an ordinary link).
    pub fn passes(&self) -> &[Option<Arc<DrivePass>>] {
        &self.passes
    }

    /// Stops every thread and closes the devices; the final counters.
    pub fn stop(mut self) -> Vec<LinkReport> {
        let report = self.report();
        self.halt();
        report
    }

    fn halt(&mut self) {
        for (up, down) in &self.dirs {
            for d in [up, down] {
                lock(&d.model).stopped = true;
                d.wake.notify_all();
            }
        }
        let _ = self.interrupt.trigger();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        self.halt();
    }
}

fn lock(m: &Mutex<DirState>) -> MutexGuard<'_, DirState> {
    // A panicking emulator thread must not take the rest of the testbed down with it.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn read_loop(from: &SyncDevice, dir: &Direction, interrupt: &InterruptEvent, clock: Clock) {
    let mut buf = vec![0u8; MAX_PACKET];
    loop {
        match from.recv_intr_timeout(&mut buf, interrupt, Some(READ_TIMEOUT)) {
            Ok(0) => continue,
            Ok(n) => {
                let mut st = lock(&dir.model);
                if st.stopped {
                    return;
                }
                let now = clock.now();
                // A drop-tail drop is the link's congestion loss; the model counts it.
                let _dropped: Enqueue<_> = st.model.enqueue(now, n, buf[..n].to_vec());
                drop(st);
                dir.wake.notify_one();
            }
            Err(e) if matches!(e.kind(), ErrorKind::TimedOut | ErrorKind::WouldBlock) => {
                if lock(&dir.model).stopped {
                    return;
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {
                if lock(&dir.model).stopped {
                    return;
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "emulator: TUN read failed; link direction stops");
                return;
            }
        }
    }
}

fn write_loop(to: &SyncDevice, dir: &Direction, clock: Clock) {
    let mut due: Vec<Vec<u8>> = Vec::new();
    let mut st = lock(&dir.model);
    loop {
        if st.stopped {
            return;
        }
        let now = clock.now();
        while let Some(d) = st.model.poll_deliver(now) {
            if let Delivery::Delivered { packet, at } = d {
                if let Some(steps) = &mut st.bytes_per_step {
                    let step = (at.as_micros() / STEP.as_micros() as u64) as usize;
                    if steps.len() <= step {
                        steps.resize(step + 1, 0);
                    }
                    steps[step] += packet.len() as u64;
                }
                due.push(packet);
            }
        }
        if !due.is_empty() {
            drop(st);
            let mut errors = 0;
            for p in due.drain(..) {
                if to.send(&p).is_err() {
                    errors += 1;
                }
            }
            st = lock(&dir.model);
            st.write_errors += errors;
            continue;
        }
        let wait = match st.model.poll_timeout() {
            Some(t) => clock.to_std(t).saturating_duration_since(std::time::Instant::now()),
            None => Duration::from_secs(1),
        };
        if wait.is_zero() {
            continue;
        }
        st = dir.wake.wait_timeout(st, wait).map(|(g, _)| g).unwrap_or_else(|e| e.into_inner().0);
    }
}
