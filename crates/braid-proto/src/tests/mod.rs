//! Engine-level test suites, kept out of the modules they exercise (STYLE.md).

mod discovery;
mod lifecycle;
mod location;
mod metering;
mod pair;
mod session;
