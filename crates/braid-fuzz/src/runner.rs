//! The campaign loop: seeds first, then mutants, every input under `catch_unwind`.

use crate::mutate::Mutator;
use crate::targets::{Target, Verdict};
use std::cell::{Cell, RefCell};
use std::panic::{self, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::Once;
use std::time::{Duration, Instant};

/// How to run one target.
#[derive(Debug, Clone)]
pub struct Options {
    /// Inputs to run, seeds included.
    pub inputs: u64,
    /// Seed of the mutation stream (the same seed gives the same inputs).
    pub seed: u64,
    /// Stop early after this much wall-clock time.
    pub time_limit: Option<Duration>,
    /// Where crashing inputs are written (`<target>-<n>.bin`); not written when `None`.
    pub crash_dir: Option<PathBuf>,
}

/// A panic the target raised.
#[derive(Debug, Clone)]
pub struct Crash {
    /// The target.
    pub target: &'static str,
    /// The panic message, with its source location.
    pub message: String,
    /// The input (minimised: no single chunk of it can be removed with the panic staying).
    pub input: Vec<u8>,
    /// Where it was saved, if it was.
    pub path: Option<PathBuf>,
}

/// What one campaign on one target did.
#[derive(Debug, Clone)]
pub struct Report {
    /// The target.
    pub target: &'static str,
    /// Inputs run.
    pub inputs: u64,
    /// Inputs the target accepted (parsed, or used in part).
    pub accepted: u64,
    /// Seeds the target accepted, of how many.
    pub seeds_accepted: (usize, usize),
    /// Wall-clock time taken.
    pub elapsed: Duration,
    /// Distinct panics (by message and location), first input of each.
    pub crashes: Vec<Crash>,
}

impl Report {
    /// Inputs per second of wall-clock time.
    pub fn rate(&self) -> f64 {
        self.inputs as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Most accepted mutants kept for further mutation.
const POOL: usize = 2048;
/// Distinct crashes recorded per target before the rest are only counted by message.
const MAX_CRASHES: usize = 16;

thread_local! {
    /// Set while this thread runs fuzz inputs: the panic hook then records instead of printing.
    static FUZZING: Cell<bool> = const { Cell::new(false) };
    /// The last panic's message and location on this thread.
    static LAST_PANIC: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Installs (once) a panic hook that is silent on fuzzing threads and records the message and
/// location, and defers to the previous hook everywhere else (so other tests print as usual).
fn install_hook() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if FUZZING.with(Cell::get) {
                let msg = info
                    .payload()
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_string())
                    .or_else(|| info.payload().downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "(non-string panic payload)".into());
                let loc = info.location().map(|l| format!("{}:{}", l.file(), l.line())).unwrap_or_default();
                LAST_PANIC.with(|p| *p.borrow_mut() = format!("{msg} at {loc}"));
            } else {
                previous(info);
            }
        }));
    });
}

/// Runs one input; `Err` with the panic message and location if the target panicked.
pub fn run_one(target: &Target, input: &[u8]) -> Result<Verdict, String> {
    install_hook();
    FUZZING.with(|f| f.set(true));
    let r = panic::catch_unwind(AssertUnwindSafe(|| (target.run)(input)));
    FUZZING.with(|f| f.set(false));
    r.map_err(|_| LAST_PANIC.with(|p| p.borrow().clone()))
}

/// Runs a campaign on `target`: every seed once, then mutants of seeds and of accepted mutants.
pub fn run(target: &Target, opts: &Options) -> Report {
    let start = Instant::now();
    let seeds = (target.seeds)();
    let mut m = Mutator::new(opts.seed ^ fnv(target.name), &seeds, target.text, target.max_len);
    let mut pool: Vec<Vec<u8>> = Vec::new();
    let mut report = Report {
        target: target.name,
        inputs: 0,
        accepted: 0,
        seeds_accepted: (0, seeds.len()),
        elapsed: Duration::ZERO,
        crashes: Vec::new(),
    };
    let handle = |input: Vec<u8>, report: &mut Report, pool: &mut Vec<Vec<u8>>, m: &mut Mutator, seed: bool| {
        report.inputs += 1;
        match run_one(target, &input) {
            Ok(Verdict::Accepted) => {
                report.accepted += 1;
                if seed {
                    report.seeds_accepted.0 += 1;
                } else if pool.len() < POOL {
                    pool.push(input);
                } else {
                    let i = m.rng.below(POOL);
                    pool[i] = input;
                }
            }
            Ok(Verdict::Rejected) => {}
            Err(message) => {
                if report.crashes.len() < MAX_CRASHES && report.crashes.iter().all(|c| c.message != message) {
                    let input = minimise(target, input, &message);
                    let path = opts.crash_dir.as_ref().and_then(|d| save(d, target.name, report.crashes.len(), &input));
                    eprintln!(
                        "CRASH in {}: {message}\n  input ({} bytes): {}\n  saved: {}",
                        target.name,
                        input.len(),
                        hex(&input),
                        path.as_ref().map_or("no".into(), |p| p.display().to_string())
                    );
                    report.crashes.push(Crash { target: target.name, message, input, path });
                }
            }
        }
    };
    for s in &seeds {
        if report.inputs >= opts.inputs {
            break;
        }
        handle(s.clone(), &mut report, &mut pool, &mut m, true);
    }
    while report.inputs < opts.inputs {
        if report.inputs.is_multiple_of(256) && opts.time_limit.is_some_and(|t| start.elapsed() >= t) {
            break;
        }
        // Half from the seeds, half from accepted mutants (when there are any).
        let pick = |m: &mut Mutator, pool: &[Vec<u8>]| -> Vec<u8> {
            if !pool.is_empty() && m.rng.one_in(2) {
                pool[m.rng.below(pool.len())].clone()
            } else if seeds.is_empty() {
                Vec::new()
            } else {
                seeds[m.rng.below(seeds.len())].clone()
            }
        };
        let base = pick(&mut m, &pool);
        let other = pick(&mut m, &pool);
        let input = m.mutate(&base, &other);
        handle(input, &mut report, &mut pool, &mut m, false);
    }
    report.elapsed = start.elapsed();
    report
}

/// Shrinks a crashing input: drops chunks (halving in size) while the same panic happens.
pub fn minimise(target: &Target, mut input: Vec<u8>, message: &str) -> Vec<u8> {
    let mut chunk = input.len().div_ceil(2).max(1);
    let mut tries = 0;
    while chunk >= 1 && tries < 4000 {
        let mut i = 0;
        let mut shrunk = false;
        while i < input.len() && tries < 4000 {
            tries += 1;
            let end = (i + chunk).min(input.len());
            let mut candidate = input[..i].to_vec();
            candidate.extend_from_slice(&input[end..]);
            if run_one(target, &candidate).err().as_deref() == Some(message) {
                input = candidate;
                shrunk = true;
            } else {
                i += chunk;
            }
        }
        if !shrunk {
            if chunk == 1 {
                break;
            }
            chunk /= 2;
        }
    }
    input
}

fn save(dir: &std::path::Path, target: &str, n: usize, input: &[u8]) -> Option<PathBuf> {
    std::fs::create_dir_all(dir).ok()?;
    let path = dir.join(format!("{target}-{n}.bin"));
    std::fs::write(&path, input).ok()?;
    Some(path)
}

/// Lower-case hex.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// FNV-1a, to give every target its own mutation stream from one campaign seed.
fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}
