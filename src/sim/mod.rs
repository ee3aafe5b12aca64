//! The embedded simulated homelab (issue 6): the demo repo on loopback, scenarios, the
//! simulated SSH nodes and (coming) the simulated kube API server. Everything listens on
//! loopback only.
//!
//! - [`demo_repo`]: the embedded sample moved onto loopback.
//! - [`scenario`]: the scenario files and their parser.
//! - [`ssh`]: the simulated nodes' SSH servers (russh server side), one per inventory host.
//! - [`node`]: a node's simulated state and the utilities its commands run.
//! - [`shell`]: the POSIX `sh` subset those commands are written in.
pub mod demo_repo;
pub mod node;
pub mod scenario;
pub mod shell;
pub mod ssh;
