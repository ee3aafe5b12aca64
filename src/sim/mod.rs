//! The embedded simulated homelab: what `hk-console demo` runs in-process and the tests
//! inject faults into. Everything listens on loopback only.
//!
//! - [`ssh`]: the simulated nodes' SSH servers (russh server side), one per inventory host.
//! - [`node`]: a node's simulated state and the utilities its commands run.
//! - [`shell`]: the POSIX `sh` subset those commands are written in.

pub mod node;
pub mod shell;
pub mod ssh;
