//! CI's short fuzz run: every target, a bounded number of inputs each, on stable Rust.
//!
//! The long campaign is `scripts/fuzz-long.sh`; this only proves every target runs, that its
//! seeds are valid input (so the mutants start from real traffic), and catches regressions of
//! panics found before.

use braid_fuzz::{Options, TARGETS, runner};

/// Inputs per target: a few seconds for all of them together with the test profile.
const INPUTS: u64 = 2_000;

#[test]
fn every_target_runs_without_panicking() {
    let mut failures = Vec::new();
    let mut total = 0;
    let start = std::time::Instant::now();
    for t in TARGETS {
        let crash_dir = Some(std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fuzz-crashes"));
        let r = runner::run(t, &Options { inputs: INPUTS, seed: 0xb4a1d, time_limit: None, crash_dir });
        total += r.inputs;
        println!(
            "{:<16} {:>6} inputs {:>5.1}% accepted {:>6.2} s",
            t.name,
            r.inputs,
            100.0 * r.accepted as f64 / r.inputs as f64,
            r.elapsed.as_secs_f64()
        );
        assert_eq!(r.inputs, INPUTS, "{}", t.name);
        assert_eq!(r.seeds_accepted.0, r.seeds_accepted.1, "{}: every seed is valid input", t.name);
        assert!(r.accepted > r.seeds_accepted.0 as u64, "{}: some mutants are accepted too", t.name);
        for c in r.crashes {
            let saved = c.path.map_or("not saved".into(), |p| p.display().to_string());
            failures.push(format!("{}: {} ({} bytes, {saved})", c.target, c.message, c.input.len()));
        }
    }
    println!("{total} inputs in {:.1} s", start.elapsed().as_secs_f64());
    assert!(failures.is_empty(), "panics:\n{}", failures.join("\n"));
}

/// Inputs that once made a target panic (`regressions/<target>-<what>.bin`), replayed every run.
#[test]
fn past_crashes_stay_fixed() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("regressions");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).expect("regressions/ exists") {
        let path = entry.expect("readable").path();
        let name = path.file_name().and_then(|f| f.to_str()).unwrap_or_default().to_string();
        let t = TARGETS
            .iter()
            .filter(|t| name.starts_with(&format!("{}-", t.name)))
            .max_by_key(|t| t.name.len())
            .unwrap_or_else(|| panic!("{name}: no target is a prefix of it"));
        let input = std::fs::read(&path).expect("readable");
        if let Err(e) = runner::run_one(t, &input) {
            panic!("{name}: {e}");
        }
        n += 1;
    }
    assert!(n > 0);
}

#[test]
fn target_names_are_unique_and_seeded() {
    for (i, t) in TARGETS.iter().enumerate() {
        assert!(TARGETS[..i].iter().all(|o| o.name != t.name), "{} twice", t.name);
        assert!(!(t.seeds)().is_empty(), "{} has seeds", t.name);
        assert!(braid_fuzz::target(t.name).is_some());
    }
}

#[test]
fn a_panicking_target_is_caught_minimised_and_reported() {
    let t = braid_fuzz::Target {
        name: "test-panics",
        about: "panics on inputs containing 0xEE",
        text: false,
        max_len: 64,
        run: |d| {
            assert!(!d.contains(&0xee), "found 0xEE");
            braid_fuzz::Verdict::Accepted
        },
        seeds: || vec![vec![1, 2, 3, 0xee, 5, 6, 7, 8]],
    };
    let r = runner::run(&t, &Options { inputs: 100, seed: 1, time_limit: None, crash_dir: None });
    assert_eq!(r.inputs, 100);
    assert_eq!(r.crashes.len(), 1);
    assert_eq!(r.crashes[0].input, vec![0xee], "minimised to the byte that matters");
    assert!(r.crashes[0].message.contains("found 0xEE"), "{}", r.crashes[0].message);
}
