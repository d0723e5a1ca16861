//! braid-sim: a deterministic discrete-event simulator that drives two real braid-proto sessions
//! over simulated links, with real TCP end hosts (smoltcp) on virtual time.

pub mod host;
pub mod link;
pub mod report;
pub mod results;
pub mod runner;
pub mod scenario;
pub mod workload;
pub mod world;
