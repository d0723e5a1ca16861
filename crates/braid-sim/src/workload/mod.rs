//! Workloads: what the simulated passengers do (short TCP flows, bulk transfers, constant-rate UDP).

pub mod dist;

pub use dist::{Dist, DistError};
pub mod plan;

pub use plan::{FlowPlan, PlannedFlow};
