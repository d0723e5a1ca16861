//! End hosts for the simulator. [`udp`] builds the constant-bit-rate probes of the `cbr`
//! workload.

pub mod udp;
