//! Engine-level test suites, kept out of the modules they exercise.

mod discovery;
mod lifecycle;
mod metering;
mod pair;
mod session;
