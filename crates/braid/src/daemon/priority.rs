//! Thread priorities: the server's handshakes below its data path.
//!
//! A handshake costs the server four X25519 operations (Noise IKpsk2), about a tenth of a
//! millisecond of CPU; a fleet joining at once is a second or more of them back to back. The
//! coordinator thread that does them ([`super::server`]) is off the data path already, but on a
//! host with few cores it shares a core with the workers, and Linux's EEVDF scheduler lets a
//! running thread of equal priority finish its time slice (a few milliseconds) before a woken
//! worker gets the core: an established vehicle's packet then waits behind other vehicles'
//! Diffie-Hellman work. Lowering the coordinator's nice value does not change that (a nice-19
//! thread's slice is protected just the same); `SCHED_IDLE` does: the kernel switches from a
//! `SCHED_IDLE` thread to any ordinary thread the moment that one wakes. WireGuard keeps its
//! handshakes on a queue of their own for the same reason, and answers with cookies when it is
//! loaded; braid does both (`handshake_load`).
//!
//! `SCHED_IDLE` threads are not starved: within the server's scheduling group (its autogroup or
//! cgroup) they run whenever the data path leaves a core free, and when it does not they still get
//! a small share (a weight of 3 against 1,024 for an ordinary thread).

use thread_priority::{
    NormalThreadSchedulePolicy, ThreadPriority, ThreadSchedulePolicy, set_thread_priority_and_policy, thread_native_id,
};

/// Moves the calling thread, and the threads it starts later, to `SCHED_IDLE`. Lowering a
/// priority needs no privilege; where the kernel refuses anyway (a seccomp filter, a system that
/// is not Linux) the reason is logged and the thread keeps its priority: handshakes then share the
/// cores with the data path as equals, which works, only with more latency on a busy host.
pub fn lower_current_thread(what: &str) -> bool {
    let policy = ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Idle);
    match set_thread_priority_and_policy(thread_native_id(), ThreadPriority::Min, policy) {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(error = ?e, thread = what, "cannot lower this thread below the data path (SCHED_IDLE)");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether the calling thread runs below every ordinary thread, as the kernel reports it.
    fn is_lowered() -> bool {
        thread_priority::thread_schedule_policy()
            .is_ok_and(|p| p == ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Idle))
    }

    #[test]
    fn a_lowered_thread_runs_at_sched_idle_and_others_do_not() {
        let (ok, lowered, child) = std::thread::spawn(|| {
            let ok = lower_current_thread("test");
            // A thread started by a lowered one inherits its policy (the coordinator starts none
            // on the data path: the workers exist before it lowers itself).
            let child = std::thread::spawn(is_lowered).join().expect("thread");
            (ok, is_lowered(), child)
        })
        .join()
        .expect("thread");
        assert!(ok, "lowering needs no privilege");
        assert!(lowered && child);
        assert!(!is_lowered(), "only the thread that asked is lowered");
    }
}
