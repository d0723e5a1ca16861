//! The emulator meets its accuracy targets (issue 4): delay within 1 ms at low load, rate within
//! 3 %, Bernoulli loss inside the binomial 95 % interval. A shortened run of
//! `braid testbed accuracy`; needs root and namespaces, skips with a message otherwise.

use braid_testbed::{accuracy, netns};

#[test]
fn emulator_meets_delay_rate_and_loss_targets() {
    if let Err(why) = netns::available() {
        eprintln!("SKIP emulator accuracy: {why}");
        return;
    }
    netns::sweep_stale();
    let dir = std::env::temp_dir().join(format!("braid-acc-{}", std::process::id()));
    let checks = accuracy::measure(&dir, 0.5).expect("accuracy run");
    let _ = std::fs::remove_dir_all(&dir);
    for c in &checks {
        eprintln!(
            "{:<26} configured {:>10.4} measured {:>10.4} ±{:.4} {} ({})",
            c.what, c.configured, c.measured, c.tolerance, c.unit, c.detail
        );
    }
    assert_eq!(checks.len(), 3);
    for c in &checks {
        assert!(
            c.pass(),
            "{}: measured {} vs configured {} (tolerance {})",
            c.what,
            c.measured,
            c.configured,
            c.tolerance
        );
    }
}
