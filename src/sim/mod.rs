//! The embedded simulated homelab (issue 6): the demo repo on loopback, and (coming) the
//! simulated kube API server, SSH nodes and scenarios.
pub mod demo_repo;
pub mod kube;
pub mod scenario;
