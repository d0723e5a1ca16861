//! What the namespace tests share: running a command for its output, and showing the daemons'
//! logs when a test fails.

use std::path::Path;
use std::process::Command;

/// Runs `args[0]` with the rest as arguments; its stdout, or an error naming the command with
/// what it printed.
pub fn run(args: &[&str]) -> Result<String, String> {
    let out = Command::new(args[0]).args(&args[1..]).output().map_err(|e| format!("{args:?}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!("{args:?}: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
    }
}

/// Prints the last `lines` lines of each log in `dir`, for a test that is failing.
pub fn print_log_tails<'a>(dir: &Path, logs: impl IntoIterator<Item = &'a str>, lines: usize) {
    for f in logs {
        let text = std::fs::read_to_string(dir.join(f)).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(lines).collect();
        eprintln!("--- {f} (last lines) ---");
        for l in tail.iter().rev() {
            eprintln!("{l}");
        }
    }
}
