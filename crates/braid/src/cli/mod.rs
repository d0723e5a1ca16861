//! Subcommands.

pub mod sim;
