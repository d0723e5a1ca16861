//! braid's real-kernel testbed (docs/design.md 7): network namespaces for riders, van, lan and web;
//! a user-space link emulator that runs the simulator's link model in real time between them;
//! the contenders (braid itself and the peers people use today: plain TCP on the best uplink,
//! kernel Multipath TCP, kcptun) and the real workload (curl against nginx, iperf3), measured
//! with the simulator's metrics and reported with its JSON. The end hosts run the scenario's
//! `[tcp]` (congestion control, initial window, RTO bounds), as the simulator's hosts do.

// Public items' docs cite the private constants and helpers that set their behaviour, for the
// contributor who tunes them: `cargo doc --document-private-items` resolves those links.
#![allow(rustdoc::private_intra_doc_links)]

pub mod accuracy;
pub mod association;
pub mod background;
pub mod capture;
pub mod contender;
pub mod emulator;
pub mod gps;
pub mod hosts;
pub mod netns;
pub mod realtime;
pub mod run;
pub mod topology;
pub mod workload;

pub use run::{TestbedOptions, run_testbed};
