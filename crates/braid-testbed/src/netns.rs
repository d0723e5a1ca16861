//! Network namespaces: create, configure, run commands and threads inside, and remove, also the
//! leftovers of a run that crashed.
//!
//! Every namespace of a testbed run is named `braidtb<pid>-<role>`, so that a later run can tell
//! which namespaces belong to a process that no longer exists and sweep them (and the processes
//! still inside them) away before it starts ([`sweep_stale`]).

use anyhow::{Context, bail};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// Prefix of every namespace the testbed creates.
pub const PREFIX: &str = "braidtb";

/// Runs a command to completion; its stdout on success, an error with its stderr otherwise.
pub fn run(args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {}", args[0]))?;
    if !out.status.success() {
        bail!("`{}` failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// One network namespace, deleted (with every process still inside it killed) on drop.
#[derive(Debug)]
pub struct Netns {
    name: String,
}

impl Netns {
    /// Creates `braidtb<pid>-<role>` with loopback up, forwarding on and reverse-path filtering
    /// off (an uplink's replies legitimately come back on another interface than the one the
    /// route would pick, as on a vehicle with several modems).
    pub fn create(tag: &str, role: &str) -> anyhow::Result<Netns> {
        let name = format!("{PREFIX}{}-{tag}{role}", std::process::id());
        run(&["ip", "netns", "add", &name]).with_context(|| format!("creating network namespace {name}"))?;
        let ns = Netns { name };
        ns.sh("ip link set lo up && sysctl -qw net.ipv4.ip_forward=1 net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0")?;
        Ok(ns)
    }

    /// Its name, as `ip netns` knows it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs a shell command inside; its stdout.
    pub fn sh(&self, cmd: &str) -> anyhow::Result<String> {
        run(&["ip", "netns", "exec", &self.name, "sh", "-c", cmd])
            .with_context(|| format!("in namespace {}", self.name))
    }

    /// A command that will run inside (not started).
    pub fn command(&self, program: &str) -> Command {
        self.command_in(None, program)
    }

    /// A command that will run inside, and in the cgroup-v2 directory `cgroup` if one is given
    /// (so that its sockets get that cgroup's BPF programs: [`crate::hosts`]).
    pub fn command_in(&self, cgroup: Option<&Path>, program: &str) -> Command {
        let mut c = match cgroup {
            None => Command::new("ip"),
            Some(dir) => {
                // The process joins the cgroup before `ip netns exec`, which remounts /sys in a
                // mount namespace of its own and so hides the cgroup file system; membership
                // survives both execs, and every socket the program makes is the cgroup's.
                let mut c = Command::new("sh");
                c.args(["-c", "echo $$ > \"$0\" && exec \"$@\""]).arg(dir.join("cgroup.procs")).arg("ip");
                c
            }
        };
        c.args(["netns", "exec", &self.name, program]);
        c.stdin(Stdio::null());
        c
    }

    /// Starts `args` inside, stdout and stderr to `log`.
    pub fn spawn(&self, args: &[&str], log: &Path) -> anyhow::Result<Child> {
        self.spawn_in(None, args, log)
    }

    /// Starts `args` inside and in `cgroup` (see [`Netns::command_in`]), stdout and stderr to
    /// `log`.
    pub fn spawn_in(&self, cgroup: Option<&Path>, args: &[&str], log: &Path) -> anyhow::Result<Child> {
        let f = File::create(log).with_context(|| format!("creating {}", log.display()))?;
        let mut c = self.command_in(cgroup, args[0]);
        c.args(&args[1..]).stdout(f.try_clone()?).stderr(f);
        c.spawn().with_context(|| format!("starting {} in {}", args[0], self.name))
    }

    /// Runs `f` on a new thread that has entered this namespace, so that the sockets and TUN
    /// devices it creates live here (a file descriptor keeps its namespace wherever it is used).
    pub fn enter<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> anyhow::Result<T> + Send + 'static,
    ) -> anyhow::Result<T> {
        let path = PathBuf::from("/run/netns").join(&self.name);
        let name = self.name.clone();
        std::thread::spawn(move || {
            let fd = File::open(&path).with_context(|| format!("opening {}", path.display()))?;
            nix::sched::setns(&fd, nix::sched::CloneFlags::CLONE_NEWNET)
                .with_context(|| format!("entering namespace {name}"))?;
            f()
        })
        .join()
        .map_err(|_| anyhow::anyhow!("thread inside namespace {} panicked", self.name))?
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        kill_and_delete(&self.name);
    }
}

fn kill_and_delete(name: &str) {
    if let Ok(pids) = run(&["ip", "netns", "pids", name]) {
        for pid in pids.split_whitespace() {
            let _ = run(&["kill", "-9", pid]);
        }
    }
    let _ = run(&["ip", "netns", "del", name]);
}

/// Removes the namespaces (and kills the processes inside) left by testbed runs whose process is
/// gone, e.g. after a crash or `kill -9`. Returns how many it removed.
pub fn sweep_stale() -> usize {
    let Ok(list) = run(&["ip", "netns", "list"]) else { return 0 };
    let mut n = 0;
    for line in list.lines() {
        let name = line.split_whitespace().next().unwrap_or_default();
        if left_by_dead_run(name) {
            kill_and_delete(name);
            n += 1;
        }
    }
    n
}

/// Whether `name` (a namespace's, or a cgroup's: [`crate::hosts`]) is a testbed's,
/// `braidtb<pid>-...`, whose process no longer exists.
pub(crate) fn left_by_dead_run(name: &str) -> bool {
    let Some(rest) = name.strip_prefix(PREFIX) else { return false };
    let pid: String = rest.chars().take_while(char::is_ascii_digit).collect();
    pid.is_empty() || !Path::new("/proc").join(&pid).exists()
}

/// Whether this process can build namespaces: root, `ip` present, and `ip netns add` works.
pub fn available() -> Result<(), String> {
    if !run(&["id", "-u"]).map(|s| s.trim() == "0").unwrap_or(false) {
        return Err("the testbed needs root (network namespaces, TUN devices)".into());
    }
    if run(&["ip", "-V"]).is_err() {
        return Err("`ip` (iproute2) is missing: apt-get install iproute2".into());
    }
    let probe = format!("{PREFIX}{}-probe", std::process::id());
    run(&["ip", "netns", "add", &probe]).map_err(|e| format!("cannot create network namespaces: {e:#}"))?;
    let _ = run(&["ip", "netns", "del", &probe]);
    if !Path::new("/dev/net/tun").exists() {
        return Err("/dev/net/tun is missing (TUN support)".into());
    }
    Ok(())
}
