//! Real-time scheduling for the threads whose timing *is* the measurement: the emulator's link
//! threads and the accuracy probe's sender and receiver.
//!
//! netem runs in the kernel's softirq, ahead of every process; a user-space emulator on a shared,
//! busy machine instead waits its turn behind whatever else runs, and a link configured for 40 ms
//! then delays by 40 ms plus the host's scheduling latency (tens of milliseconds on a loaded
//! 2-core machine). A low SCHED_FIFO priority puts these threads ahead of ordinary processes while
//! they are runnable. They block on a TUN read or a timed wait between packets, so they use little
//! CPU, and the kernel's RT throttling (`sched_rt_runtime_us`, 95 % by default) keeps the rest of
//! the machine alive even if one spun.

use thread_priority::{
    RealtimeThreadSchedulePolicy, ThreadPriority, ThreadPriorityValue, ThreadSchedulePolicy,
    set_thread_priority_and_policy, thread_native_id,
};

/// The SCHED_FIFO priority used: low (1-99), so any real-time work the host has comes first.
const PRIORITY: u8 = 10;

/// Moves the calling thread to SCHED_FIFO at [`PRIORITY`]. Returns false, and leaves the thread as
/// it was, where that is not permitted (not root, no CAP_SYS_NICE, or RT bandwidth of 0 in a
/// container); the emulator still works then, only with the host's scheduling noise on top.
pub fn promote_current_thread() -> bool {
    let Ok(value) = ThreadPriorityValue::try_from(PRIORITY) else { return false };
    let policy = ThreadSchedulePolicy::Realtime(RealtimeThreadSchedulePolicy::Fifo);
    match set_thread_priority_and_policy(thread_native_id(), ThreadPriority::Crossplatform(value), policy) {
        Ok(()) => true,
        Err(e) => {
            tracing::debug!(error = ?e, "no real-time priority; link timing will include host scheduling noise");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use thread_priority::thread_schedule_policy;

    #[test]
    fn promotion_matches_the_policy_the_kernel_reports() {
        let (ok, policy) =
            std::thread::spawn(|| (promote_current_thread(), thread_schedule_policy())).join().expect("thread");
        let fifo = ThreadSchedulePolicy::Realtime(RealtimeThreadSchedulePolicy::Fifo);
        assert_eq!(ok, policy.expect("policy readable") == fifo);
    }
}
