//! The arrivals of a `flows` workload, drawn from the run's seed alone, so that the simulator and
//! the real testbed start the very same flows (sizes, directions, start times) for a given seed.

use crate::scenario::{Direction, WorkloadSpec};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::time::Duration;

/// Salt of the workload's random stream (kept from the simulator's first version so that earlier
/// results stay reproducible).
const SALT: u64 = 0x3017_10ad;

/// One flow to start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlannedFlow {
    /// Start time from the beginning of the run.
    pub start: Duration,
    /// Bytes to transfer, >= 1.
    pub size: u64,
    /// Which way the bytes go (`Up` or `Down`, never `Both`).
    pub direction: Direction,
}

/// The flows of a `flows` workload that start in `[first, end)`, in start order. Yields nothing for
/// other workload kinds.
#[derive(Debug, Clone)]
pub struct FlowPlan {
    workload: WorkloadSpec,
    rng: ChaCha8Rng,
    next: Option<Duration>,
    end: Duration,
}

impl FlowPlan {
    /// The plan of `workload` for run seed `seed`: the first flow starts at `first`, the last one
    /// before `end`.
    pub fn new(workload: &WorkloadSpec, seed: u64, first: Duration, end: Duration) -> FlowPlan {
        let next = matches!(workload, WorkloadSpec::Flows { .. }).then_some(first);
        FlowPlan { workload: workload.clone(), rng: ChaCha8Rng::seed_from_u64(seed ^ SALT), next, end }
    }

    /// When the next flow starts, without drawing it.
    pub fn peek_start(&self) -> Option<Duration> {
        self.next.filter(|&t| t < self.end)
    }
}

impl Iterator for FlowPlan {
    type Item = PlannedFlow;

    fn next(&mut self) -> Option<PlannedFlow> {
        let WorkloadSpec::Flows { direction, size_bytes, interarrival_s, scale } = &self.workload else {
            return None;
        };
        let t = self.peek_start()?;
        let size = size_bytes.sample(&mut self.rng).round().max(1.0) as u64;
        let direction = match direction {
            Direction::Both if self.rng.random::<bool>() => Direction::Up,
            Direction::Both => Direction::Down,
            d => *d,
        };
        let gap = interarrival_s.sample(&mut self.rng).max(0.0) / scale;
        // Whole microseconds, braid's clock resolution, at every step, so that start times do not
        // depend on which clock adds them up.
        self.next = Some(t + Duration::from_micros(Duration::from_secs_f64(gap).as_micros() as u64));
        Some(PlannedFlow { start: t, size, direction })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Scenario;

    #[test]
    fn same_seed_same_flows_and_all_inside_the_window() {
        let sc = Scenario::default_bus();
        let (first, end) = (Duration::from_secs(1), Duration::from_secs(300));
        let a: Vec<_> = FlowPlan::new(&sc.workload, 7, first, end).collect();
        let b: Vec<_> = FlowPlan::new(&sc.workload, 7, first, end).collect();
        let c: Vec<_> = FlowPlan::new(&sc.workload, 8, first, end).collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(a[0].start, first);
        assert!(a.iter().all(|f| f.start < end && f.size >= 1 && f.direction == Direction::Down));
        assert!(a.windows(2).all(|w| w[0].start <= w[1].start));
        // About one flow per second on the bus.
        assert!((200..400).contains(&a.len()), "{}", a.len());
    }
}
