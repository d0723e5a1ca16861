//! Embeds the git commit braid is built from (`BRAID_GIT_COMMIT`), for the provenance that
//! `braid sim --json` and `--out` record; "unknown" when not built from a git checkout (a
//! source tarball, a vendored copy) or without git.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string()).filter(|s| !s.is_empty())
}

fn main() {
    let commit = git(&["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=BRAID_GIT_COMMIT={commit}");
    // Rebuild when HEAD moves: HEAD itself (a checkout) and the branch it points to (a commit).
    for path in ["HEAD".to_string(), git(&["symbolic-ref", "-q", "HEAD"]).unwrap_or_default(), "packed-refs".into()] {
        if let Some(p) = (!path.is_empty()).then(|| git(&["rev-parse", "--git-path", &path])).flatten() {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    println!("cargo:rerun-if-env-changed=BRAID_GIT_COMMIT");
}
