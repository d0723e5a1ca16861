//! Subcommands.

pub mod daemon;
pub mod sim;
