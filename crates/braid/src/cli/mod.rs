//! Subcommands.

pub mod daemon;
pub mod provenance;
pub mod sim;
pub mod testbed;

#[cfg(test)]
mod tests;
