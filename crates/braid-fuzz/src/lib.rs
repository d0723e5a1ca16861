//! braid-fuzz: a fuzz target for every braid decoder, and a runner for them that needs no nightly
//! compiler and no coverage instrumentation, so CI runs every target on stable for a few seconds
//! (`cargo test -p braid-fuzz`) and `scripts/fuzz-long.sh` runs millions of inputs on demand.
//!
//! Targets ([`targets::TARGETS`]) are plain `fn(&[u8]) -> Verdict` functions that must not panic
//! (quinn's `fuzz/` does the same with cargo-fuzz; these run under either). The runner
//! ([`runner::run`]) feeds each its seed corpus of valid inputs from the real emitters, then
//! structure-aware mutants of them ([`mutate`]), catches panics, minimises and saves the input.

pub mod mutate;
pub mod runner;
pub mod targets;

pub use runner::{Crash, Options, Report, run, run_one};
pub use targets::{TARGETS, Target, Verdict, target};
