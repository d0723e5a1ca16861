//! The link model: one direction of an emulated uplink (rate or trace, drop-tail queue, propagation
//! delay, loss process, schedule, outages), written once for virtual time (simulator) and real time
//! (testbed emulator).

pub mod driveby;
pub mod loss;
pub mod model;
pub mod spec;

pub use driveby::{DriveBy, DrivePass, Vehicle};
pub use loss::LossProcess;
pub use model::{Delivery, Enqueue, LinkModel, LinkModelStats, LossCause, TRACE_RATE_WINDOW};
pub use spec::{LinkDirSpec, LossSpec, Outage, RateSpec, Schedule, ScheduleRow, SpecFileError, Trace};
