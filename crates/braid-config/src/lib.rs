//! braid-config: the daemons' configuration files and key files.
//!
//! `braid client` and `braid server` read these types; the testbed writes the files it starts
//! the daemons with through the same types (serde), so that a key it sets cannot be misspelt or
//! silently dropped. Above braid-proto (whose scheme names the `[session]` table parses), below
//! the binary and the testbed.

pub mod allowed_ips;
pub mod config;
pub mod keys;
