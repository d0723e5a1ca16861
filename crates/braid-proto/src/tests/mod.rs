//! Engine-level test suites, kept out of the modules they exercise.

mod discovery;
mod lifecycle;
mod location;
mod metering;
mod pair;
mod session;
